//! The authorization-code flow: discovery and client registration through
//! rmcp, the authorization page shown by a [`Browser`], and the redirect
//! received on a loopback listener.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    OAuthClientConfig, ScopeUpgradeConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::store::{ClientRecord, FileStore};
use super::{CredentialFile, OAuthError, OAuthSettings, OAuthStatus};

/// Shows the user an authorization page.
///
/// The page redirects to a loopback URL this crate listens on; `open`
/// returns once the page is on its way (a browser tab opened, the URL
/// printed), and the login waits for the redirect separately.
pub trait Browser: Send + Sync {
    /// Opens `url`; an error means the user cannot be sent there.
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// A browser without a person: it requests the authorization URL without
/// following redirects and delivers the `Location` it answers with to the
/// loopback listener, as an authorization server that approves at once
/// (the conformance suite's, a test's) expects.
#[derive(Debug, Clone, Default)]
pub struct Headless;

impl Browser for Headless {
    fn open<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| e.to_string())?;
            let response = client.get(url).send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned);
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                return Err(format!(
                    "the authorization endpoint answered {status} instead of redirecting"
                ));
            };
            let answer = client
                .get(&location)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if answer.status().is_success() {
                Ok(())
            } else {
                Err(format!(
                    "the redirect target answered {}; was it our listener?",
                    answer.status()
                ))
            }
        })
    }
}

/// How a login runs. Start from [`LoginOptions::default`] and change what
/// you need with the `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoginOptions {
    /// The name registered for the client (dynamic registration).
    pub client_name: String,
    /// How long to wait for the redirect.
    pub timeout: Duration,
    /// Static headers of the server (not `Authorization`), sent with the
    /// probe that asks for its challenge.
    pub headers: Vec<(String, String)>,
}

impl Default for LoginOptions {
    fn default() -> Self {
        LoginOptions {
            client_name: "core-agent".to_owned(),
            timeout: Duration::from_secs(300),
            headers: Vec::new(),
        }
    }
}

impl LoginOptions {
    /// The name registered for the client (dynamic registration).
    pub fn with_client_name(mut self, name: impl Into<String>) -> LoginOptions {
        self.client_name = name.into();
        self
    }

    /// How long to wait for the redirect.
    pub fn with_timeout(mut self, timeout: Duration) -> LoginOptions {
        self.timeout = timeout;
        self
    }

    /// Static headers of the server (not `Authorization`), sent with the
    /// probe that asks for its challenge.
    pub fn with_headers(mut self, headers: Vec<(String, String)>) -> LoginOptions {
        self.headers = headers;
        self
    }
}

/// What a login achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginOutcome {
    /// The stored credentials' status.
    pub status: OAuthStatus,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// How the client was identified: `pre-registered client`, `client ID
    /// metadata document` or `dynamic client registration`.
    pub client: &'static str,
    /// The authorization server's issuer, when its metadata names one.
    pub issuer: Option<String>,
}

/// Logs in to the server of `file`: asks the server for its challenge,
/// discovers its authorization server, identifies the client (the
/// configured `client_id`, a client ID metadata document when supported,
/// else dynamic registration), shows the authorization URL through
/// `browser`, receives the redirect on 127.0.0.1 and stores the tokens.
pub async fn login(
    file: &CredentialFile,
    settings: &OAuthSettings,
    browser: &dyn Browser,
    options: &LoginOptions,
) -> Result<LoginOutcome, OAuthError> {
    let callback = Callback::bind(settings.callback_port).await?;
    let redirect_uri = callback.redirect_uri();
    let challenge = probe(file.url(), &options.headers).await;

    let store = FileStore::new(file.clone());
    let mut manager = new_manager(file, store.clone()).await?;
    let metadata = discover(&manager, file.url(), challenge.as_deref()).await?;
    let supports_cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let issuer = metadata.issuer.clone();
    manager.set_metadata(metadata);

    let scopes = if settings.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        settings.scopes.clone()
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    // The registration priority of the MCP spec: pre-registered, then a
    // client ID metadata document, then dynamic registration.
    let (record, client) = match (&settings.client_id, &settings.client_metadata_url) {
        (Some(id), _) => {
            let mut config = OAuthClientConfig::new(id.clone(), redirect_uri.clone());
            if let Some(secret) = &settings.client_secret {
                config = config.with_client_secret(secret.clone());
            }
            manager
                .configure_client(config)
                .map_err(|e| OAuthError::flow(&e))?;
            (
                ClientRecord {
                    client_id: id.clone(),
                    client_secret: None,
                    redirect_uri: Some(redirect_uri.clone()),
                },
                "pre-registered client",
            )
        }
        (None, Some(url)) if supports_cimd => {
            manager
                .configure_client(OAuthClientConfig::new(url.clone(), redirect_uri.clone()))
                .map_err(|e| OAuthError::flow(&e))?;
            (
                ClientRecord {
                    client_id: url.clone(),
                    client_secret: None,
                    redirect_uri: Some(redirect_uri.clone()),
                },
                "client ID metadata document",
            )
        }
        _ => {
            let config = manager
                .register_client(&options.client_name, &redirect_uri, &scope_refs)
                .await
                .map_err(|e| OAuthError::flow(&e))?;
            (
                ClientRecord {
                    client_id: config.client_id,
                    client_secret: config.client_secret,
                    redirect_uri: Some(redirect_uri.clone()),
                },
                "dynamic client registration",
            )
        }
    };
    if let Ok(mut pending) = store.pending_client.lock() {
        *pending = Some(record);
    }

    let url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| OAuthError::flow(&e))?;
    let redirected = authorize(&callback, browser, &url, options.timeout).await?;
    exchange(&manager, file, &redirected).await?;
    Ok(LoginOutcome {
        status: file.status(),
        scopes: manager.get_current_scopes().await,
        client,
        issuer,
    })
}

/// A manager for `file`'s URL that stores into `store` and steps up scopes
/// at most once per demand.
pub(crate) async fn new_manager(
    file: &CredentialFile,
    store: FileStore,
) -> Result<AuthorizationManager, OAuthError> {
    let mut manager = AuthorizationManager::new(file.url())
        .await
        .map_err(|e| OAuthError::flow(&e))?;
    manager.set_credential_store(store);
    let mut upgrades = ScopeUpgradeConfig::default();
    upgrades.max_upgrade_attempts = 1;
    manager.set_scope_upgrade_config(upgrades);
    Ok(manager)
}

/// rmcp's discovery (protected-resource metadata, then authorization-server
/// metadata, then the 2025-03-26 default endpoints), with one allowance of
/// the 2025-03-26 spec: authorization-server metadata published at the MCP
/// server's own origin whose `issuer` names a path there (RFC 8414 would
/// want it at the path-inserted location). It is accepted only when it and
/// every endpoint it names are on the MCP server's origin, so the server
/// vouches for it.
pub(crate) async fn discover(
    manager: &AuthorizationManager,
    url: &str,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, OAuthError> {
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => Ok(resolution.metadata),
        Err(AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        }) => match same_origin_metadata(url, &received_issuer).await {
            Some(metadata) => {
                tracing::info!(
                    expected_issuer,
                    received_issuer,
                    "oauth: accepting the MCP server's own 2025-03-26 authorization-server metadata"
                );
                Ok(metadata)
            }
            None => Err(OAuthError::flow(&AuthError::AuthorizationServerMismatch {
                expected_issuer,
                received_issuer,
            })),
        },
        Err(e) => Err(OAuthError::flow(&e)),
    }
}

/// `<origin>/.well-known/oauth-authorization-server` of `url`, when its
/// issuer is `issuer` and all of it lives on that origin.
async fn same_origin_metadata(url: &str, issuer: &str) -> Option<AuthorizationMetadata> {
    let base = url::Url::parse(url).ok()?;
    let mut well_known = base.clone();
    well_known.set_path("/.well-known/oauth-authorization-server");
    well_known.set_query(None);
    well_known.set_fragment(None);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(15))
        .build()
        .ok()?;
    let response = client.get(well_known).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let metadata: AuthorizationMetadata = response.json().await.ok()?;
    let same_origin = |u: &str| {
        url::Url::parse(u)
            .map(|u| u.origin() == base.origin())
            .unwrap_or(false)
    };
    let endpoints = [
        Some(metadata.authorization_endpoint.as_str()),
        Some(metadata.token_endpoint.as_str()),
        metadata.registration_endpoint.as_deref(),
        Some(issuer),
    ];
    (metadata.issuer.as_deref() == Some(issuer) && endpoints.into_iter().flatten().all(same_origin))
        .then_some(metadata)
}

/// Shows `url` and waits for the redirect back to `callback`.
pub(crate) async fn authorize(
    callback: &Callback,
    browser: &dyn Browser,
    url: &str,
    timeout: Duration,
) -> Result<String, OAuthError> {
    let wait = callback.wait(timeout);
    tokio::pin!(wait);
    tokio::select! {
        redirected = &mut wait => redirected,
        opened = browser.open(url) => {
            opened.map_err(OAuthError::Browser)?;
            wait.await
        }
    }
}

/// Trades the code of `redirected` for tokens, saved under the file's lock
/// so a refresh in another process cannot interleave.
pub(crate) async fn exchange(
    manager: &AuthorizationManager,
    file: &CredentialFile,
    redirected: &str,
) -> Result<(), OAuthError> {
    let callback =
        AuthorizationCallback::from_redirect_url(redirected).map_err(|e| OAuthError::flow(&e))?;
    let _lock = file.lock().await?;
    manager
        .exchange_code_for_token_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(|e| OAuthError::flow(&e))?;
    Ok(())
}

/// Asks the server for its `WWW-Authenticate` challenge the way a session
/// would meet it: unauthenticated `server/discover` (2026-07-28), else
/// `initialize`, and when a server lets that through, the `tools/list` of
/// that session (many challenge only once the session does something).
/// `None` when nothing answers 401 (rmcp then probes with a GET and the
/// well-known locations).
async fn probe(url: &str, headers: &[(String, String)]) -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let client_info =
        serde_json::json!({"name": "core-agent", "version": env!("CARGO_PKG_VERSION")});
    let post = |body: serde_json::Value, version: &str, session: Option<&str>| {
        let method = body
            .get("method")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut request = client
            .post(url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("mcp-protocol-version", version)
            .header("mcp-method", method)
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        for (name, value) in headers {
            if !name.eq_ignore_ascii_case("authorization") {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        request.send()
    };
    let discover = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": client_info,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    });
    let response = post(discover, "2026-07-28", None).await.ok()?;
    if let Some(challenge) = challenge_of(&response) {
        return Some(challenge);
    }
    drop(response);
    let legacy = "2025-11-25";
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": legacy, "capabilities": {}, "clientInfo": client_info}
    });
    let response = post(initialize, legacy, None).await.ok()?;
    if let Some(challenge) = challenge_of(&response) {
        return Some(challenge);
    }
    if !response.status().is_success() {
        return None;
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    drop(response);
    let session = session.as_deref();
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(initialized, legacy, session).await.ok()?;
    let mut challenge = challenge_of(&response);
    drop(response);
    if challenge.is_none() {
        let list =
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        let response = post(list, legacy, session).await.ok()?;
        challenge = challenge_of(&response);
    }
    // The probe's session ends here; a server without sessions ignores it.
    if let Some(session) = session {
        let _ = client
            .delete(url)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", legacy)
            .send()
            .await;
    }
    challenge
}

/// The `WWW-Authenticate` value of a 401.
fn challenge_of(response: &reqwest::Response) -> Option<String> {
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A number for temporary file names, unique within the process.
pub(crate) fn nonce() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The loopback listener the authorization server redirects to:
/// `http://127.0.0.1:<port>/callback`.
pub(crate) struct Callback {
    listener: TcpListener,
    port: u16,
}

impl Callback {
    /// Listens on 127.0.0.1:`port` (any free port when `None`).
    pub(crate) async fn bind(port: Option<u16>) -> Result<Self, OAuthError> {
        let want = port.unwrap_or(0);
        let listener =
            TcpListener::bind(("127.0.0.1", want))
                .await
                .map_err(|e| OAuthError::Listen {
                    port: want,
                    message: e.to_string(),
                })?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Listen {
                port: want,
                message: e.to_string(),
            })?
            .port();
        Ok(Callback { listener, port })
    }

    pub(crate) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for `GET /callback?…`, answers it with a page the user can
    /// close, and returns the full redirect URL. Other requests (a
    /// favicon) get 404 and the wait goes on.
    pub(crate) async fn wait(&self, timeout: Duration) -> Result<String, OAuthError> {
        let accept = async {
            loop {
                let Ok((mut stream, _)) = self.listener.accept().await else {
                    continue;
                };
                let Ok(Some(target)) =
                    tokio::time::timeout(Duration::from_secs(10), request_target(&mut stream))
                        .await
                else {
                    continue;
                };
                let Some(query) = target.strip_prefix("/callback") else {
                    let _ = respond(&mut stream, "404 Not Found", "Not found.").await;
                    continue;
                };
                let url = format!("http://127.0.0.1:{}/callback{query}", self.port);
                let parsed = url::Url::parse(&url).ok();
                let param = |name: &str| {
                    parsed.as_ref().and_then(|u| {
                        u.query_pairs()
                            .find(|(k, _)| k == name)
                            .map(|(_, v)| v.into_owned())
                    })
                };
                if let Some(error) = param("error") {
                    let _ = respond(
                        &mut stream,
                        "200 OK",
                        "The authorization failed; see the terminal.",
                    )
                    .await;
                    return Err(OAuthError::Denied {
                        error,
                        description: param("error_description"),
                    });
                }
                if param("code").is_none() {
                    let _ =
                        respond(&mut stream, "400 Bad Request", "No code in this redirect.").await;
                    continue;
                }
                let _ = respond(
                    &mut stream,
                    "200 OK",
                    "core-agent is authorized. You can close this tab.",
                )
                .await;
                return Ok(url);
            }
        };
        tokio::time::timeout(timeout, accept)
            .await
            .unwrap_or(Err(OAuthError::CallbackTimeout { after: timeout }))
    }
}

/// The request target of an HTTP/1 request (`/callback?code=…`), read from
/// its head.
async fn request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_owned)
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    text: &str,
) -> std::io::Result<()> {
    let body =
        format!("<!doctype html><meta charset=utf-8><title>core-agent</title><p>{text}</p>\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_listener_returns_the_redirect_and_skips_other_requests() {
        let callback = Callback::bind(None).await.unwrap();
        let base = callback.redirect_uri();
        let favicon = base.replace("/callback", "/favicon.ico");
        let redirect = format!("{base}?code=c1&state=s1");
        let client = reqwest::Client::new();
        let send = async {
            let miss = client.get(&favicon).send().await.unwrap().status();
            let hit = client.get(&redirect).send().await.unwrap().status();
            (miss, hit)
        };
        let (got, (miss, hit)) = tokio::join!(callback.wait(Duration::from_secs(10)), send);
        assert_eq!(got.unwrap(), redirect);
        assert_eq!((miss.as_u16(), hit.as_u16()), (404, 200));
    }

    #[tokio::test]
    async fn an_error_redirect_is_reported() {
        let callback = Callback::bind(None).await.unwrap();
        let redirect = format!(
            "{}?error=access_denied&error_description=no+thanks",
            callback.redirect_uri()
        );
        let (got, _) = tokio::join!(
            callback.wait(Duration::from_secs(10)),
            reqwest::get(&redirect)
        );
        assert_eq!(
            got.unwrap_err().to_string(),
            "the authorization server refused: access_denied (no thanks)"
        );
    }

    #[tokio::test]
    async fn the_wait_ends_at_the_timeout() {
        let callback = Callback::bind(None).await.unwrap();
        let got = callback.wait(Duration::from_millis(50)).await;
        assert!(matches!(got, Err(OAuthError::CallbackTimeout { .. })));
    }
}
