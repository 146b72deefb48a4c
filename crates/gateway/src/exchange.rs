//! Per-user tokens for the backends whose entry says `auth.token_exchange`:
//! the signed-in caller's token is exchanged (OAuth 2.0 Token Exchange, RFC
//! 8693) at the backend's authorization server for a token of that user for
//! that backend, cached per user and backend until shortly before it
//! expires. The caller's own token goes only to that authorization server,
//! as the exchange's subject; a backend never receives it (no token
//! passthrough). Nothing here logs or shows a token.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use core_agent_mcp_config::ExchangeEndpoint;
use core_agent_mcp_transport::{AuthError, CallerTokens, Token, TokenExchange, TokenSource};
use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use serde_json::{Map, Value};

use crate::auth::Caller;
use crate::oauth::provider;

/// RFC 8693's grant type.
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693's type of the subject token and of the token asked for.
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// How long a token whose answer gave no `expires_in` is reused.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// A token is renewed this long before it expires (or a tenth of its
/// lifetime, when that is shorter).
const RENEW_BEFORE: Duration = Duration::from_secs(30);
/// The most (user, backend) pairs held; past it, idle expired ones go.
const MAX_HELD: usize = 10_000;
/// The largest answer read from an authorization server.
const MAX_BODY: usize = 64 * 1024;
/// The longest error description passed on from an authorization server.
const MAX_DESCRIPTION: usize = 200;

/// The token of one (user, backend) pair and when to renew it.
struct Held {
    token: Token,
    renew_at: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<Held>>>;

/// The exchanges of the whole gateway: its HTTP client, the tokens it holds
/// per (user, backend), and the token endpoints its issuers named.
pub(crate) struct Exchanger {
    http: Result<reqwest::Client, String>,
    /// One slot per (owner, server): a caller's concurrent calls wait for
    /// one exchange rather than each making its own.
    held: Mutex<HashMap<(String, String), Slot>>,
    /// Issuer → token endpoint, discovered once.
    endpoints: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.held.lock().map(|h| h.len()).unwrap_or_default();
        f.debug_struct("Exchanger")
            .field("held", &held)
            .finish_non_exhaustive()
    }
}

impl Exchanger {
    pub(crate) fn new() -> Exchanger {
        Exchanger {
            http: provider::client(),
            held: Mutex::new(HashMap::new()),
            endpoints: Mutex::new(HashMap::new()),
        }
    }

    /// `owner`'s token for the server of `exchange`: the one held while it
    /// is fresh, else a new exchange of `subject`.
    async fn token(&self, caller: &Subject, exchange: &TokenExchange) -> Result<Token, AuthError> {
        let slot = self.slot(&caller.owner, exchange.server());
        let mut held = slot.lock().await;
        if let Some(h) = held.as_ref()
            && Instant::now() < h.renew_at
        {
            return Ok(h.token.clone());
        }
        *held = None;
        let (token, lifetime) = self.exchange(&caller.token, exchange).await.inspect_err(|e| {
            tracing::warn!(server = exchange.server(), caller = %caller.name, "token exchange failed: {e}");
        })?;
        let lifetime = lifetime.unwrap_or(DEFAULT_LIFETIME);
        let renew_at = Instant::now() + lifetime.saturating_sub(RENEW_BEFORE.min(lifetime / 10));
        tracing::info!(
            server = exchange.server(),
            caller = %caller.name,
            "token exchange: a token for this caller, valid {} s",
            lifetime.as_secs()
        );
        let token = token.expiring_at(SystemTime::now() + lifetime);
        *held = Some(Held {
            token: token.clone(),
            renew_at,
        });
        Ok(token)
    }

    /// Drops `owner`'s token for `server` when it is `token` (the backend
    /// refused it), so the next call exchanges again.
    async fn forget(&self, owner: &str, server: &str, token: &Token) {
        let slot = self.slot(owner, server);
        let mut held = slot.lock().await;
        if held.as_ref().is_some_and(|h| h.token == *token) {
            *held = None;
        }
    }

    /// The slot of (owner, server), made when missing. Past [`MAX_HELD`],
    /// the slots nobody is using whose token is stale are dropped first.
    fn slot(&self, owner: &str, server: &str) -> Slot {
        let Ok(mut held) = self.held.lock() else {
            return Slot::default();
        };
        let key = (owner.to_owned(), server.to_owned());
        if let Some(slot) = held.get(&key) {
            return slot.clone();
        }
        if held.len() >= MAX_HELD {
            let now = Instant::now();
            held.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot
                        .try_lock()
                        .map(|h| h.as_ref().is_some_and(|h| now < h.renew_at))
                        .unwrap_or(true)
            });
            if held.len() >= MAX_HELD {
                held.retain(|_, slot| Arc::strong_count(slot) > 1);
            }
        }
        held.entry(key).or_default().clone()
    }

    /// One exchange of `subject` for a token of the server of `exchange`,
    /// and its lifetime when the answer says.
    async fn exchange(
        &self,
        subject: &str,
        exchange: &TokenExchange,
    ) -> Result<(Token, Option<Duration>), AuthError> {
        let http = self.http.as_ref().map_err(|e| {
            AuthError::Other(format!(
                "cannot build the HTTP client of the token exchange: {e}"
            ))
        })?;
        let endpoint = self.endpoint(http, exchange).await?;
        let used = format!("the token exchange for server `{}`", exchange.server());
        let scope = exchange.scopes().join(" ");
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(audience) = exchange.audience() {
            form.push(("audience", audience));
        }
        if let Some(resource) = exchange.resource() {
            form.push(("resource", resource));
        }
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        let mut request = http
            .post(&endpoint)
            .header(http::header::ACCEPT, "application/json");
        match exchange.client_secret() {
            // RFC 6749 §2.3.1: both form-encoded, then HTTP Basic.
            Some(secret) => {
                request = request.basic_auth(
                    form_encoded(exchange.client_id()),
                    Some(form_encoded(secret)),
                );
            }
            None => form.push(("client_id", exchange.client_id())),
        }
        let response = request
            .form(&form)
            .send()
            .await
            .map_err(|e| AuthError::Unreachable {
                source_used: used.clone(),
                endpoint: endpoint.clone(),
                reason: provider::describe(&e),
            })?;
        let status = response.status();
        let body = read_body(response)
            .await
            .map_err(|reason| AuthError::Unreachable {
                source_used: used.clone(),
                endpoint: endpoint.clone(),
                reason,
            })?;
        let answer = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| match v {
                Value::Object(map) => Some(map),
                _ => None,
            })
            .unwrap_or_default();
        if !status.is_success() {
            return Err(refused(&used, &endpoint, status, &answer, subject));
        }
        let token = answer
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty());
        let token_type = answer
            .get("token_type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(token) = token else {
            return Err(AuthError::Refused {
                source_used: used,
                reason: format!("{endpoint} answered HTTP {status} without an `access_token`"),
                fix: "check that `token_endpoint` (or `issuer`) is the backend's authorization server".to_owned(),
            });
        };
        if !token_type.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Refused {
                source_used: used,
                reason: format!(
                    "{endpoint} issued a token of type `{}`, not a bearer token",
                    clean(token_type, subject)
                ),
                fix: "ask the authorization server for bearer access tokens for this client"
                    .to_owned(),
            });
        }
        let lifetime = answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(Duration::from_secs);
        Ok((Token::bearer(token), lifetime))
    }

    /// The token endpoint of `exchange`: as written, or its issuer's (its
    /// metadata read once).
    async fn endpoint(
        &self,
        http: &reqwest::Client,
        exchange: &TokenExchange,
    ) -> Result<String, AuthError> {
        let issuer = match exchange.endpoint() {
            ExchangeEndpoint::TokenEndpoint(url) => return Ok(url.clone()),
            ExchangeEndpoint::Issuer(issuer) => issuer,
            _ => {
                return Err(AuthError::Other(
                    "this token exchange endpoint is not supported".to_owned(),
                ));
            }
        };
        if let Some(known) = self
            .endpoints
            .lock()
            .ok()
            .and_then(|e| e.get(issuer).cloned())
        {
            return Ok(known);
        }
        let mut last = String::new();
        for url in provider::metadata_urls(issuer) {
            match provider::get_json(http, &url).await {
                Ok(meta) => {
                    if let Some(endpoint) = meta.get("token_endpoint").and_then(Value::as_str) {
                        if let Ok(mut known) = self.endpoints.lock() {
                            known.insert(issuer.clone(), endpoint.to_owned());
                        }
                        return Ok(endpoint.to_owned());
                    }
                    last = format!("{url} names no `token_endpoint`");
                }
                Err(e) => last = e.0,
            }
        }
        Err(AuthError::Unreachable {
            source_used: format!("the token exchange for server `{}`", exchange.server()),
            endpoint: issuer.clone(),
            reason: format!("no token endpoint in its metadata ({last})"),
        })
    }
}

/// An exchange the authorization server refused, worded with its error
/// code and what to do about it.
fn refused(
    used: &str,
    endpoint: &str,
    status: reqwest::StatusCode,
    answer: &Map<String, Value>,
    subject: &str,
) -> AuthError {
    let code = answer
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let description = answer
        .get("error_description")
        .and_then(Value::as_str)
        .map(|d| format!(" ({})", clean(d, subject)))
        .unwrap_or_default();
    let fix = match code {
        "invalid_client" => {
            "check `client_id` and `client_secret` in the server's auth.token_exchange: the authorization server does not accept them"
        }
        "invalid_grant" => {
            "the authorization server would not exchange this user's token (expired, for another audience, or not allowed for this backend): sign in again, or ask its administrator to allow the exchange"
        }
        "invalid_target" => {
            "check `audience` and `resource` in the server's auth.token_exchange: the authorization server does not know them"
        }
        "invalid_scope" => "check `scopes` in the server's auth.token_exchange",
        "unauthorized_client" | "unsupported_grant_type" => {
            "ask the authorization server's administrator to allow this client the token-exchange grant (urn:ietf:params:oauth:grant-type:token-exchange)"
        }
        _ => "see the authorization server's log",
    };
    let code = if code.is_empty() {
        "no error code".to_owned()
    } else {
        clean(code, subject)
    };
    AuthError::Refused {
        source_used: format!("{used} at {endpoint}"),
        reason: format!("HTTP {} {code}{description}", status.as_u16()),
        fix: fix.to_owned(),
    }
}

/// Text from an authorization server fit for a message: one line, bounded,
/// never holding the subject token.
fn clean(text: &str, subject: &str) -> String {
    let text = if subject.is_empty() {
        text.to_owned()
    } else {
        text.replace(subject, "***")
    };
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_DESCRIPTION)
        .collect();
    if text.chars().count() > MAX_DESCRIPTION {
        out.push('…');
    }
    out
}

fn form_encoded(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The body of `response`, at most [`MAX_BODY`] bytes.
async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| provider::describe(&e))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("answer larger than {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A signed-in caller whose token may be exchanged.
struct Subject {
    owner: String,
    name: String,
    /// The caller's access token: a secret, sent only to an exchange.
    token: String,
}

/// The tokens of one request's caller ([`CallerTokens`]).
struct CallerExchange {
    exchanger: Arc<Exchanger>,
    /// The signed-in caller, or the name of one who has no token to exchange.
    caller: Result<Arc<Subject>, String>,
}

impl CallerTokens for CallerExchange {
    fn source(&self, exchange: &Arc<TokenExchange>) -> Result<Arc<dyn TokenSource>, AuthError> {
        match &self.caller {
            Ok(subject) => Ok(Arc::new(UserSource {
                exchanger: self.exchanger.clone(),
                subject: subject.clone(),
                exchange: exchange.clone(),
            })),
            Err(name) => Err(AuthError::NotConfigured {
                source_tried: format!(
                    "server `{}` acts for each user (auth.token_exchange), and `{name}` did not sign in with the identity provider, so there is no user token to exchange",
                    exchange.server()
                ),
                fix: "call it as a user signed in through gateway.oauth".to_owned(),
            }),
        }
    }
}

/// One caller's tokens for one backend.
struct UserSource {
    exchanger: Arc<Exchanger>,
    subject: Arc<Subject>,
    exchange: Arc<TokenExchange>,
}

impl TokenSource for UserSource {
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
        Box::pin(self.exchanger.token(&self.subject, &self.exchange))
    }

    fn rejected<'a>(&'a self, token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            self.exchanger
                .forget(&self.subject.owner, self.exchange.server(), token)
                .await;
            Ok(())
        })
    }

    fn strategy(&self) -> String {
        "token-exchange".to_owned()
    }

    fn detail(&self) -> Option<String> {
        Some(format!("for {}", self.subject.name))
    }
}

/// Runs `work` (a call into the host) as `caller`'s: a backend that acts
/// for each user gets `caller`'s exchanged token. The token exchanged is
/// the one this request carries (a signed-in caller's current token).
pub(crate) fn as_caller<F: Future>(
    exchanger: &Arc<Exchanger>,
    cx: &RequestContext<RoleServer>,
    caller: &Caller,
    work: F,
) -> impl Future<Output = F::Output> {
    let token = caller
        .identity
        .as_ref()
        .and_then(|_| cx.extensions.get::<http::request::Parts>())
        .and_then(|parts| parts.headers.get(http::header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned())
        .filter(|token| !token.is_empty());
    let caller = match token {
        Some(token) => Ok(Arc::new(Subject {
            owner: caller.owner(),
            name: caller.name.clone(),
            token,
        })),
        None => Err(caller.name.clone()),
    };
    let tokens = Arc::new(CallerExchange {
        exchanger: exchanger.clone(),
        caller,
    });
    core_agent_mcp_transport::with_caller_tokens(tokens, work)
}

#[cfg(test)]
#[path = "exchange_tests.rs"]
mod tests;
