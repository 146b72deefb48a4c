//! MCP OAuth 2.1 on rmcp's `auth` feature: the credentials file, the login
//! flow (`core-agent mcp login`) and the token source of a logged-in server.
//!
//! rmcp does the protocol (protected-resource and authorization-server
//! metadata discovery, client ID metadata documents, dynamic client
//! registration, PKCE S256, the `resource` parameter, scope selection and
//! step-up, refresh); this module stores what it produces, receives the
//! authorization redirect on a loopback listener, and keeps two processes
//! from losing a rotated refresh token.

mod login;
mod source;
mod store;
mod token;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use core_agent_mcp_config::{Env, OAuthSpec};

pub use login::{Browser, Headless, LoginOptions, LoginOutcome, login};
pub use source::OAuthSource;
pub use store::{CredentialFile, CredentialsDir};
pub(crate) use token::OAuthTokens;

/// `auth.oauth` with its placeholders expanded: what the login flow and the
/// token source need. Built by [`OAuthSettings::from_spec`], or from
/// [`OAuthSettings::default`] with the `with_*` methods.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// Scopes to request; empty lets the server's challenge and metadata decide.
    pub scopes: Vec<String>,
    /// A pre-registered client.
    pub client_id: Option<String>,
    /// Its secret.
    pub client_secret: Option<String>,
    /// The URL of a client ID metadata document.
    pub client_metadata_url: Option<String>,
    /// The loopback port of the redirect; `None` picks a free one.
    pub callback_port: Option<u16>,
}

impl fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("scopes", &self.scopes)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("callback_port", &self.callback_port)
            .finish()
    }
}

impl OAuthSettings {
    /// Expands `spec` (its `client_secret` placeholder) with `env`.
    pub fn from_spec(spec: &OAuthSpec, env: &dyn Env) -> Self {
        OAuthSettings {
            scopes: spec.scopes.clone(),
            client_id: spec.client_id.clone(),
            client_secret: spec
                .client_secret
                .as_ref()
                .map(|t| t.expand(env).value)
                .filter(|s| !s.is_empty()),
            client_metadata_url: spec.client_metadata_url.clone(),
            callback_port: spec.callback_port,
        }
    }

    /// Scopes to request; empty lets the server's challenge and metadata decide.
    pub fn with_scopes(mut self, scopes: Vec<String>) -> OAuthSettings {
        self.scopes = scopes;
        self
    }

    /// A pre-registered client.
    pub fn with_client_id(mut self, client_id: Option<String>) -> OAuthSettings {
        self.client_id = client_id;
        self
    }

    /// The pre-registered client's secret.
    pub fn with_client_secret(mut self, secret: Option<String>) -> OAuthSettings {
        self.client_secret = secret;
        self
    }

    /// The URL of a client ID metadata document.
    pub fn with_client_metadata_url(mut self, url: Option<String>) -> OAuthSettings {
        self.client_metadata_url = url;
        self
    }

    /// The loopback port of the redirect; `None` picks a free one.
    pub fn with_callback_port(mut self, port: Option<u16>) -> OAuthSettings {
        self.callback_port = port;
        self
    }
}

/// Whether a server's OAuth credentials are usable, read from its file
/// without touching the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthStatus {
    /// An access token is stored.
    LoggedIn {
        /// When the access token expires, if the server said.
        expires_at: Option<SystemTime>,
        /// Whether a refresh token is stored, so an expired access token is
        /// renewed without a new login.
        refreshable: bool,
    },
    /// No usable credentials: never logged in, logged out, the URL changed,
    /// or the server rejected the refresh token.
    LoginNeeded,
}

impl OAuthStatus {
    /// Whether a server with this status can start.
    pub fn is_logged_in(&self) -> bool {
        matches!(self, OAuthStatus::LoggedIn { .. })
    }

    /// Whether the server needs a (new) login before it can be used: no
    /// usable credentials, or an expired token that cannot be refreshed.
    pub fn needs_login(&self) -> bool {
        self.needs_login_at(SystemTime::now())
    }

    fn needs_login_at(&self, now: SystemTime) -> bool {
        match self {
            OAuthStatus::LoginNeeded => true,
            OAuthStatus::LoggedIn {
                expires_at: Some(at),
                refreshable: false,
            } => at.duration_since(now).is_err(),
            OAuthStatus::LoggedIn { .. } => false,
        }
    }

    /// `logged in, expires in 52 min`, `logged in, token expired; it is
    /// refreshed on next use`, `login needed`. A front end names its login
    /// command beside it when [`OAuthStatus::needs_login`].
    pub fn describe(&self) -> String {
        self.describe_at(SystemTime::now())
    }

    fn describe_at(&self, now: SystemTime) -> String {
        match self {
            OAuthStatus::LoginNeeded => "login needed".to_owned(),
            OAuthStatus::LoggedIn {
                expires_at: None, ..
            } => "logged in".to_owned(),
            OAuthStatus::LoggedIn {
                expires_at: Some(at),
                refreshable,
            } => match at.duration_since(now) {
                Ok(left) => format!("logged in, expires in {}", approx(left)),
                Err(_) if *refreshable => {
                    "logged in, token expired; it is refreshed on next use".to_owned()
                }
                Err(_) => "login needed (the token expired and cannot be refreshed)".to_owned(),
            },
        }
    }
}

/// `45 s`, `52 min`, `3 h`, `2 days`.
fn approx(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..7200 => format!("{} min", s / 60),
        7200..172_800 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

/// Why an OAuth step failed. No message ever contains a token or a secret.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// There are no usable credentials for the server.
    #[error("server `{server}` needs a login{}", reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    LoginNeeded {
        /// The server.
        server: String,
        /// Why, when there is more to say than "no credentials".
        reason: Option<String>,
    },
    /// The credentials file could not be read or written.
    #[error("credentials file {}: {message}", path.display())]
    Store {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Discovery, registration or a token request failed.
    #[error("{0}")]
    Flow(String),
    /// The authorization server redirected back with an error.
    #[error("the authorization server refused: {error}{}", description.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Denied {
        /// The `error` parameter (`access_denied`, …).
        error: String,
        /// Its `error_description`.
        description: Option<String>,
    },
    /// The redirect did not come back in time.
    #[error("no authorization came back within {} s; run the login again and finish it in the browser", after.as_secs())]
    CallbackTimeout {
        /// The limit.
        after: Duration,
    },
    /// The loopback listener could not be opened.
    #[error(
        "cannot listen for the login redirect on 127.0.0.1:{port}: {message}; free the port or change `callback_port`"
    )]
    Listen {
        /// The port (0 for any).
        port: u16,
        /// The operating system's reason.
        message: String,
    },
    /// The authorization URL could not be opened or followed.
    #[error("cannot open the authorization URL: {0}")]
    Browser(String),
    /// The server demands a scope after a step-up already asked for it.
    #[error(
        "the server still refuses with insufficient_scope for `{scope}` after a new authorization asked for it; check the account's permissions"
    )]
    ScopeRefused {
        /// The scope the server asked for.
        scope: String,
    },
}

impl OAuthError {
    fn flow(e: &rmcp::transport::AuthError) -> Self {
        OAuthError::Flow(e.to_string())
    }

    fn store(path: &Path, message: impl fmt::Display) -> Self {
        OAuthError::Store {
            path: path.to_owned(),
            message: message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_the_cli_shows_them() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |s: i64| {
            Some(if s >= 0 {
                now + Duration::from_secs(s as u64)
            } else {
                now - Duration::from_secs((-s) as u64)
            })
        };
        let cases = [
            (OAuthStatus::LoginNeeded, "login needed"),
            (
                OAuthStatus::LoggedIn {
                    expires_at: None,
                    refreshable: false,
                },
                "logged in",
            ),
            (
                OAuthStatus::LoggedIn {
                    expires_at: at(3599),
                    refreshable: true,
                },
                "logged in, expires in 59 min",
            ),
            (
                OAuthStatus::LoggedIn {
                    expires_at: at(-5),
                    refreshable: true,
                },
                "logged in, token expired; it is refreshed on next use",
            ),
            (
                OAuthStatus::LoggedIn {
                    expires_at: at(-5),
                    refreshable: false,
                },
                "login needed (the token expired and cannot be refreshed)",
            ),
        ];
        for (status, text) in cases {
            assert_eq!(status.describe_at(now), text);
            assert_eq!(status.needs_login_at(now), text.starts_with("login needed"));
        }
    }

    #[test]
    fn settings_never_show_the_secret() {
        let s = OAuthSettings {
            client_secret: Some("hunter2".into()),
            ..OAuthSettings::default()
        };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
