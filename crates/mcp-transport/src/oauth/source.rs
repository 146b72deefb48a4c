//! The token source of a logged-in server.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, OAuthClientConfig, WWWAuthenticateParams,
};

use super::login::{
    Browser, Callback, LoginOptions, authorize, discover, exchange, login, new_manager,
};
use super::store::{FileStore, access_token};
use super::{CredentialFile, OAuthError, OAuthSettings};

/// Access tokens for one server from its credentials file, refreshed by
/// rmcp before they expire and when the server rejects one.
///
/// A refresh token the authorization server rejects drops the stored
/// tokens and yields [`OAuthError::LoginNeeded`] from then on: never a
/// loop of refreshes. When the server's authorization server changes
/// (its protected-resource metadata names another issuer), the old
/// client registration and tokens are not offered to the new one: with a
/// browser, the source logs in again there (registering anew); without
/// one, it needs a login.
pub struct OAuthSource {
    server: String,
    file: CredentialFile,
    settings: OAuthSettings,
    browser: Option<Arc<dyn Browser>>,
    /// The authorization server the stored credentials belong to; replaced
    /// by a new login.
    bound: tokio::sync::RwLock<Arc<Bound>>,
    /// Scopes a step-up already asked for: a server that demands one of
    /// them again gets no second authorization.
    stepped_up: tokio::sync::Mutex<Vec<String>>,
    timeout: Duration,
}

/// The credentials' authorization server: rmcp's manager for it, the
/// registered redirect URI, and its issuer.
struct Bound {
    manager: AuthorizationManager,
    redirect_uri: Option<String>,
    issuer: Option<String>,
}

impl std::fmt::Debug for OAuthSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSource")
            .field("server", &self.server)
            .field("file", &self.file.path())
            .finish_non_exhaustive()
    }
}

impl OAuthSource {
    /// Opens the credentials of `server` in `file`; [`OAuthError::LoginNeeded`]
    /// when there are none (the server is then left out with the login
    /// command). Rediscovers the authorization server, so tokens issued by
    /// another one are discarded. `browser`, when given, is used for a scope
    /// step-up the server asks for mid-session, and for a new login when the
    /// server's authorization server changes.
    pub async fn open(
        server: &str,
        file: CredentialFile,
        settings: &OAuthSettings,
        browser: Option<Arc<dyn Browser>>,
    ) -> Result<Self, OAuthError> {
        let bound = bind(server, &file, settings).await?;
        Ok(OAuthSource {
            server: server.to_owned(),
            file,
            settings: settings.clone(),
            browser,
            bound: tokio::sync::RwLock::new(Arc::new(bound)),
            stepped_up: tokio::sync::Mutex::new(Vec::new()),
            timeout: Duration::from_secs(300),
        })
    }

    /// The server.
    pub fn server(&self) -> &str {
        &self.server
    }

    async fn bound(&self) -> Arc<Bound> {
        self.bound.read().await.clone()
    }

    /// A current access token: the stored one, or a refreshed one when it
    /// is about to expire.
    pub async fn access_token(&self) -> Result<String, OAuthError> {
        self.bound()
            .await
            .manager
            .get_access_token()
            .await
            .map_err(|e| self.map(&e))
    }

    /// The server answered 401 to `token`: nothing, when the stored token
    /// already differs (another request or process refreshed first); a new
    /// login when the server's authorization server changed; else a refresh.
    pub async fn rejected(&self, token: &str) -> Result<(), OAuthError> {
        let current = self
            .file
            .read()?
            .and_then(|c| c.credentials)
            .and_then(|c| access_token(&c));
        match current {
            None => {
                return Err(OAuthError::LoginNeeded {
                    server: self.server.clone(),
                    reason: None,
                });
            }
            Some(current) if current != token => return Ok(()),
            Some(_) => {}
        }
        let bound = self.bound().await;
        if self.moved(&bound).await {
            return self.login_again().await;
        }
        bound
            .manager
            .refresh_token()
            .await
            .map(|_| ())
            .map_err(|e| self.map(&e))
    }

    /// Whether the server's protected-resource metadata now names another
    /// authorization server than the one `bound` is for (SEP-2352). A
    /// discovery that fails says nothing: the refresh goes ahead.
    async fn moved(&self, bound: &Bound) -> bool {
        let Ok(manager) = new_manager(&self.file, FileStore::new(self.file.clone())).await else {
            return false;
        };
        match discover(&manager, self.file.url(), None).await {
            Ok(metadata) => metadata.issuer.is_some() && metadata.issuer != bound.issuer,
            Err(e) => {
                tracing::debug!(server = %self.server, "oauth: rediscovery after a 401 failed: {e}");
                false
            }
        }
    }

    /// Logs in to the server's new authorization server through the
    /// browser (registering there anew), then uses those credentials.
    async fn login_again(&self) -> Result<(), OAuthError> {
        let Some(browser) = &self.browser else {
            return Err(OAuthError::LoginNeeded {
                server: self.server.clone(),
                reason: Some("the server's authorization server changed".to_owned()),
            });
        };
        tracing::info!(server = %self.server, "oauth: the authorization server changed; logging in to the new one");
        let options = LoginOptions {
            timeout: self.timeout,
            ..LoginOptions::default()
        };
        login(&self.file, &self.settings, browser.as_ref(), &options).await?;
        let bound = bind(&self.server, &self.file, &self.settings).await?;
        *self.bound.write().await = Arc::new(bound);
        self.stepped_up.lock().await.clear();
        Ok(())
    }

    /// The server answered 403 `insufficient_scope` with `challenge`: one
    /// new authorization for the union of the granted and the demanded
    /// scopes, through the browser. A scope demanded again after that is
    /// [`OAuthError::ScopeRefused`].
    pub async fn step_up(&self, challenge: &str) -> Result<(), OAuthError> {
        let base = url::Url::parse(self.file.url()).map_err(|e| OAuthError::Flow(e.to_string()))?;
        let params = WWWAuthenticateParams::parse(challenge, &base);
        let scope = params.scope.unwrap_or_default();
        let mut asked = self.stepped_up.lock().await;
        let demanded: Vec<&str> = scope.split_whitespace().collect();
        if demanded.iter().all(|s| asked.iter().any(|a| a == s)) {
            return Err(OAuthError::ScopeRefused { scope });
        }
        let Some(browser) = &self.browser else {
            return Err(OAuthError::LoginNeeded {
                server: self.server.clone(),
                reason: Some(format!("the server needs scope `{scope}`")),
            });
        };
        let bound = self.bound().await;
        let port = bound
            .redirect_uri
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.port());
        let callback = Callback::bind(port).await?;
        // The union of what was granted and what is demanded (SEP-2350): a
        // step-up never trades a scope held for the one asked for. rmcp
        // keeps the granted scopes only for tokens it obtained itself, not
        // for those restored from the file.
        let granted = self
            .file
            .read()?
            .and_then(|c| c.credentials)
            .map(|c| c.granted_scopes)
            .unwrap_or_default();
        let wanted = scope_union(&granted, &demanded);
        bound.manager.reset_scope_upgrade_attempts().await;
        let url = bound
            .manager
            .request_scope_upgrade(&wanted.join(" "))
            .await
            .map_err(|e| OAuthError::flow(&e))?;
        asked.extend(demanded.iter().map(|s| (*s).to_owned()));
        let redirected = authorize(&callback, browser.as_ref(), &url, self.timeout).await?;
        exchange(&bound.manager, &self.file, &redirected).await
    }

    fn map(&self, e: &AuthError) -> OAuthError {
        match e {
            AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
                OAuthError::LoginNeeded {
                    server: self.server.clone(),
                    reason: Some("the stored authorization expired or was revoked".to_owned()),
                }
            }
            other => OAuthError::flow(other),
        }
    }
}

/// The credentials of `server` in `file`, bound to the authorization server
/// its metadata names now; [`OAuthError::LoginNeeded`] when there are none
/// or they belong to another one.
async fn bind(
    server: &str,
    file: &CredentialFile,
    settings: &OAuthSettings,
) -> Result<Bound, OAuthError> {
    let login_needed = |reason: Option<String>| OAuthError::LoginNeeded {
        server: server.to_owned(),
        reason,
    };
    if !file.status().is_logged_in() {
        return Err(login_needed(None));
    }
    let contents = file.read()?.ok_or_else(|| login_needed(None))?;
    let mut manager = new_manager(file, FileStore::new(file.clone())).await?;
    let metadata = discover(&manager, file.url(), None).await?;
    let issuer = metadata.issuer.clone();
    manager.set_metadata(metadata);
    let found = manager
        .initialize_from_store()
        .await
        .map_err(|e| OAuthError::flow(&e))?;
    if !found {
        return Err(login_needed(Some(
            "the server's authorization server changed".to_owned(),
        )));
    }
    let client = contents.client.clone();
    let redirect_uri = client.as_ref().and_then(|c| c.redirect_uri.clone());
    let secret = settings
        .client_secret
        .clone()
        .or_else(|| client.as_ref().and_then(|c| c.client_secret.clone()));
    if let Some(client) = &client {
        // rmcp restores only the client ID; a confidential client needs
        // its secret to refresh, and a step-up its redirect URI.
        let mut config = OAuthClientConfig::new(
            client.client_id.clone(),
            redirect_uri
                .clone()
                .unwrap_or_else(|| file.url().to_owned()),
        );
        if let Some(secret) = secret {
            config = config.with_client_secret(secret);
        }
        manager
            .configure_client(config)
            .map_err(|e| OAuthError::flow(&e))?;
    }
    Ok(Bound {
        manager,
        redirect_uri,
        issuer,
    })
}

/// `granted`, then each scope of `demanded` not among them, in order.
fn scope_union(granted: &[String], demanded: &[&str]) -> Vec<String> {
    let mut union: Vec<String> = Vec::with_capacity(granted.len() + demanded.len());
    for scope in granted
        .iter()
        .map(String::as_str)
        .chain(demanded.iter().copied())
    {
        if !union.iter().any(|s| s == scope) {
            union.push(scope.to_owned());
        }
    }
    union
}

#[cfg(test)]
mod tests {
    use super::scope_union;

    #[test]
    fn a_step_up_keeps_the_granted_scopes() {
        let granted = vec!["mcp:basic".to_owned(), "mcp:read".to_owned()];
        assert_eq!(
            scope_union(&granted, &["mcp:write", "mcp:basic"]),
            ["mcp:basic", "mcp:read", "mcp:write"]
        );
        assert_eq!(scope_union(&[], &["mcp:write"]), ["mcp:write"]);
        assert_eq!(scope_union(&granted, &[]), ["mcp:basic", "mcp:read"]);
    }
}
