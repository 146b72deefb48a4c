//! `core-agent mcp login` and `mcp logout`: the CLI side of MCP OAuth (the
//! flow itself is `core_agent_mcp_transport::oauth::login`).

use std::io::IsTerminal;
use std::time::Duration;

use core_agent_mcp_config::{AuthSpec, Config, Transport};
use core_agent_mcp_transport::BoxFuture;
use core_agent_mcp_transport::oauth::{self, Browser, CredentialsDir, LoginOptions, OAuthSettings};

use crate::cli::Global;
use crate::setup::{Setup, load_config, seconds};
use crate::{FAILED, USAGE};

/// Shows the authorization URL on stderr and, unless told not to (or
/// without a terminal), opens it in the default browser.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SystemBrowser {
    pub(crate) open: bool,
}

impl SystemBrowser {
    /// Opens a browser only when a person is at a terminal.
    pub(crate) fn interactive() -> Self {
        SystemBrowser {
            open: std::io::stderr().is_terminal() && std::io::stdin().is_terminal(),
        }
    }
}

impl Browser for SystemBrowser {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            errln!("core-agent: to authorize, open this URL in a browser:\n\n    {url}\n");
            if self.open {
                match webbrowser::open(url) {
                    Ok(()) => errln!(
                        "core-agent: opened it in your browser; waiting for the authorization…"
                    ),
                    Err(e) => errln!(
                        "core-agent: could not open a browser ({e}); open the URL yourself; waiting…"
                    ),
                }
            } else {
                errln!("core-agent: waiting for the authorization…");
            }
            Ok(())
        })
    }
}

/// `core-agent mcp login <server>`.
pub(crate) async fn run(global: &Global, name: &str, no_browser: bool, timeout: f64) -> u8 {
    let Some(Setup { paths, .. }) = Setup::new(global) else {
        return USAGE;
    };
    let Some(timeout) = seconds(timeout) else {
        errln!("core-agent: --timeout takes a positive number of seconds");
        return USAGE;
    };
    let Some(config) = load_config(&paths) else {
        return USAGE;
    };
    login(&config, name, no_browser, timeout).await
}

/// Runs the flow for `name` and says what it stored.
async fn login(config: &Config, name: &str, no_browser: bool, timeout: Duration) -> u8 {
    let Some(entry) = config.servers.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        let hint = core_agent_mcp_config::closest(name, &names)
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        errln!("core-agent: no server named `{name}` is configured{hint}");
        return USAGE;
    };
    let Transport::Http(http) = &entry.spec.transport else {
        errln!("core-agent: `{name}` is a stdio server; only HTTP servers log in");
        return USAGE;
    };
    let env = config.dotenv.over_process();
    let settings = match &http.auth {
        Some(AuthSpec::OAuth(spec)) => OAuthSettings::from_spec(spec, &env),
        None => OAuthSettings::default(),
        Some(_) => {
            errln!(
                "core-agent: `{name}` uses another `auth` strategy (google_oauth), which needs no login"
            );
            return USAGE;
        }
    };
    let Some(dir) = CredentialsDir::user() else {
        errln!("core-agent: HOME is not set, so there is nowhere to keep credentials");
        return FAILED;
    };
    let file = dir.file(name, &http.url);
    let options = LoginOptions::default().with_timeout(timeout).with_headers(
        http.headers
            .iter()
            .map(|(k, t)| (k.clone(), t.expand(&env).value))
            .collect(),
    );
    let browser = SystemBrowser {
        open: !no_browser && SystemBrowser::interactive().open,
    };
    match oauth::login(&file, &settings, &browser, &options).await {
        Ok(outcome) => {
            let scopes = if outcome.scopes.is_empty() {
                "none named".to_owned()
            } else {
                outcome.scopes.join(" ")
            };
            let issuer = outcome
                .issuer
                .map(|i| format!(" at {i}"))
                .unwrap_or_default();
            outln!(
                "logged in to `{name}` ({}{issuer}; scopes: {scopes}); {}",
                outcome.client,
                outcome.status.describe()
            );
            outln!("credentials: {}", file.path().display());
            0
        }
        Err(e) => {
            errln!("core-agent: login to `{name}` failed: {e}");
            FAILED
        }
    }
}

/// `core-agent mcp logout <server>`: removes its credentials, whatever URL
/// they were for.
pub(crate) fn logout(global: &Global, name: &str) -> u8 {
    // Bad --start-timeout or --call-timeout values are refused here too.
    if Setup::new(global).is_none() {
        return USAGE;
    }
    let Some(dir) = CredentialsDir::user() else {
        errln!("core-agent: HOME is not set, so there are no credentials");
        return FAILED;
    };
    match dir.remove_server(name) {
        Ok(removed) if removed.is_empty() => {
            outln!("no credentials stored for `{name}`");
            0
        }
        Ok(removed) => {
            for path in removed {
                outln!("removed {}", path.display());
            }
            outln!("logged out of `{name}`");
            0
        }
        Err(e) => {
            errln!("core-agent: {e}");
            FAILED
        }
    }
}
