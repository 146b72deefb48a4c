//! Streamable HTTP: rmcp's MCP endpoint at `/mcp`, the sessions API and
//! `/health`, behind a guard that checks the `Host` header, the bearer
//! token (throttling an address that keeps failing it), and that a session
//! is used only with the token that opened it; open sessions are capped.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use core_agent_host::UsageReport;
use core_agent_mcp_config::TrustLevel;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::auth::{Auth, Caller};
use crate::limits::{BoundedSessions, Caps, OPENING, Opening, Throttle};
use crate::oauth::{Rejection, ResourceServer, WELL_KNOWN, challenge, protected_resource_metadata};
use crate::registry::SessionInfo;
use crate::session::McpSession;
use crate::{Gateway, GatewayLimits, RateLimits};

/// The header that carries an MCP session's id.
const SESSION_HEADER: &str = "mcp-session-id";

/// How the HTTP listener behaves. [`HttpOptions::new`] takes who may
/// connect and sets the rest to the defaults; the `with_*` methods change
/// one setting each:
///
/// ```
/// use std::time::Duration;
/// use core_agent_gateway::{Auth, HttpOptions};
/// use core_agent_mcp_config::TrustLevel;
///
/// let options = HttpOptions::new(Auth::Open(TrustLevel::User))
///     .with_max_sessions(64)
///     .with_session_idle(Duration::from_secs(300));
/// assert_eq!(options.max_sessions_per_token, HttpOptions::MAX_SESSIONS_PER_TOKEN);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Who may connect with a static token (or anyone, [`Auth::Open`]).
    pub auth: Auth,
    /// Who may connect signed in with an identity provider (`gateway.oauth`):
    /// a bearer token that is none of [`HttpOptions::auth`]'s is checked
    /// by it, and the protected-resource metadata is served.
    pub oauth: Option<ResourceServer>,
    /// `Host` header names accepted (the DNS-rebinding guard); by default
    /// only loopback names. A port after the name is ignored.
    pub allowed_hosts: Vec<String>,
    /// Request bodies larger than this are refused with 413 (4 MiB).
    pub max_body_bytes: usize,
    /// A session idle this long is closed; later requests with its id get 404.
    pub session_idle: Duration,
    /// Open MCP sessions over every token, at most: a new one past it
    /// closes its caller's session idle the longest (503 when the caller
    /// has none idle: another caller's session is never closed for it).
    pub max_sessions: usize,
    /// Open MCP sessions of one token, at most: a new one past it closes
    /// that token's session idle the longest (503 when every one is busy).
    pub max_sessions_per_token: usize,
    /// Failed bearer checks one address may make within
    /// [`HttpOptions::auth_failure_window`] (a sliding window, at most
    /// 1000); at that, every request from it is answered 429 with
    /// `Retry-After`, its token unchecked, until its oldest failure has left
    /// the window. Other addresses are not held back. The address is the peer's, as
    /// [`Gateway::serve_http`] passes it (`ConnectInfo<SocketAddr>`); a
    /// router from [`Gateway::http_router`] served without it is not throttled.
    pub auth_failures_allowed: u32,
    /// The window of [`HttpOptions::auth_failures_allowed`].
    pub auth_failure_window: Duration,
    /// `Origin` headers accepted (403 for any other; a request without one,
    /// from a client that is not a browser, passes): `scheme://host[:port]`,
    /// an entry without a port matching any. By default the loopback names
    /// (a page served from the machine itself).
    pub allowed_origins: Vec<String>,
    /// A request head must arrive whole within this, counted from when the
    /// connection opens or its last answer was sent (so it is also how
    /// long an idle kept-alive connection is held): 120 s.
    pub header_timeout: Duration,
    /// A `POST /mcp` body must arrive whole within this (else 408): 30 s.
    pub body_timeout: Duration,
    /// Open connections, at most; one past it is answered 503 and closed.
    pub max_connections: usize,
    /// Open connections from one address, at most; one past it is
    /// answered 503 and closed.
    pub max_connections_per_address: usize,
    /// Tool calls per minute, result bytes per minute and calls in flight,
    /// per caller (by default: [`RateLimits::default_for`] each trust level).
    pub rate_limits: RateLimits,
}

impl HttpOptions {
    /// Sessions closed after this long idle, by default (30 minutes).
    pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
    /// Open sessions over every token, by default.
    pub const MAX_SESSIONS: usize = 512;
    /// Open sessions of one token, by default.
    pub const MAX_SESSIONS_PER_TOKEN: usize = 128;
    /// A request head's deadline, by default.
    pub const HEADER_TIMEOUT: Duration = Duration::from_secs(120);
    /// A request body's deadline, by default.
    pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
    /// Open connections, by default.
    pub const MAX_CONNECTIONS: usize = 2048;
    /// Open connections from one address, by default.
    pub const MAX_CONNECTIONS_PER_ADDRESS: usize = 128;

    /// Loopback hosts and origins only, 4 MiB bodies, sessions closed after
    /// 30 idle minutes, at most 512 open sessions (128 per token), 20 failed
    /// bearer checks per address per minute, request heads within 120 s and
    /// bodies within 30 s, at most 2,048 open connections (128 per address).
    pub fn new(auth: Auth) -> HttpOptions {
        HttpOptions {
            auth,
            oauth: None,
            allowed_hosts: ["localhost", "127.0.0.1", "::1", "[::1]"]
                .map(str::to_owned)
                .to_vec(),
            max_body_bytes: 4 * 1024 * 1024,
            session_idle: HttpOptions::SESSION_IDLE,
            max_sessions: HttpOptions::MAX_SESSIONS,
            max_sessions_per_token: HttpOptions::MAX_SESSIONS_PER_TOKEN,
            auth_failures_allowed: 20,
            auth_failure_window: Duration::from_secs(60),
            allowed_origins: crate::front::loopback_origins(),
            header_timeout: HttpOptions::HEADER_TIMEOUT,
            body_timeout: HttpOptions::BODY_TIMEOUT,
            max_connections: HttpOptions::MAX_CONNECTIONS,
            max_connections_per_address: HttpOptions::MAX_CONNECTIONS_PER_ADDRESS,
            rate_limits: RateLimits::default(),
        }
    }

    /// Whether the `Origin` header `origin` passes (see
    /// [`HttpOptions::allowed_origins`]).
    ///
    /// ```
    /// use core_agent_gateway::{Auth, HttpOptions};
    /// use core_agent_mcp_config::TrustLevel;
    ///
    /// let options = HttpOptions::new(Auth::Open(TrustLevel::User));
    /// assert!(options.origin_allowed("http://localhost:5173"));
    /// assert!(!options.origin_allowed("https://evil.example"));
    /// ```
    pub fn origin_allowed(&self, origin: &str) -> bool {
        crate::front::origin_allowed(origin, &self.allowed_origins)
    }

    /// Whether the `Host` header `host` passes (see [`HttpOptions::allowed_hosts`]).
    pub fn host_allowed(&self, host: &str) -> bool {
        host_allowed(host, &self.allowed_hosts)
    }

    /// `Origin` headers accepted, in place of the loopback origins.
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> HttpOptions {
        self.allowed_origins = origins;
        self
    }

    /// Rate limits per caller, in place of the defaults.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> HttpOptions {
        self.rate_limits = limits;
        self
    }

    /// Callers signed in with an identity provider, beside the static tokens.
    pub fn with_oauth(mut self, oauth: Option<ResourceServer>) -> HttpOptions {
        self.oauth = oauth;
        self
    }

    /// `Host` header names accepted, in place of the loopback names.
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> HttpOptions {
        self.allowed_hosts = hosts;
        self
    }

    /// Request bodies larger than this are refused with 413.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> HttpOptions {
        self.max_body_bytes = bytes;
        self
    }

    /// A session idle this long is closed.
    pub fn with_session_idle(mut self, idle: Duration) -> HttpOptions {
        self.session_idle = idle;
        self
    }

    /// Open MCP sessions over every token, at most.
    pub fn with_max_sessions(mut self, sessions: usize) -> HttpOptions {
        self.max_sessions = sessions;
        self
    }

    /// Open MCP sessions of one token, at most.
    pub fn with_max_sessions_per_token(mut self, sessions: usize) -> HttpOptions {
        self.max_sessions_per_token = sessions;
        self
    }

    /// Failed bearer checks one address may make within the window.
    pub fn with_auth_failures_allowed(mut self, failures: u32) -> HttpOptions {
        self.auth_failures_allowed = failures;
        self
    }

    /// The window of [`HttpOptions::auth_failures_allowed`].
    pub fn with_auth_failure_window(mut self, window: Duration) -> HttpOptions {
        self.auth_failure_window = window;
        self
    }

    /// Applies the session caps and the idle timeout that `limits` sets,
    /// keeping the defaults for what it leaves unset; a total cap below the
    /// default per-token cap lowers the per-token cap to it.
    ///
    /// ```
    /// use core_agent_gateway::{Auth, GatewayLimits, HttpOptions};
    /// use core_agent_mcp_config::TrustLevel;
    ///
    /// let limits = GatewayLimits::default().with_max_sessions(Some(8));
    /// let http = HttpOptions::new(Auth::Open(TrustLevel::User)).with_limits(&limits)?;
    /// assert_eq!((http.max_sessions, http.max_sessions_per_token), (8, 8));
    /// # Ok::<(), core_agent_gateway::LimitsError>(())
    /// ```
    ///
    /// # Errors
    /// [`LimitsError::PerTokenAboveTotal`] when both caps are set and the
    /// per-token one is larger than the total: it could never be reached.
    pub fn with_limits(mut self, limits: &GatewayLimits) -> Result<HttpOptions, LimitsError> {
        if let (Some(total), Some(per_token)) = (limits.max_sessions, limits.max_sessions_per_token)
            && per_token > total
        {
            return Err(LimitsError::PerTokenAboveTotal { per_token, total });
        }
        if let Some(total) = limits.max_sessions {
            self.max_sessions = total;
            self.max_sessions_per_token = self.max_sessions_per_token.min(total);
        }
        if let Some(per_token) = limits.max_sessions_per_token {
            self.max_sessions_per_token = per_token;
        }
        if let Some(secs) = limits.session_idle_timeout_secs {
            self.session_idle = Duration::from_secs(secs);
        }
        if let Some(secs) = limits.header_timeout_secs {
            self.header_timeout = Duration::from_secs(secs);
        }
        if let Some(secs) = limits.body_timeout_secs {
            self.body_timeout = Duration::from_secs(secs);
        }
        if let Some(total) = limits.max_connections {
            self.max_connections = total;
            self.max_connections_per_address = self.max_connections_per_address.min(total);
        }
        if let Some(per_address) = limits.max_connections_per_address {
            self.max_connections_per_address = per_address.min(self.max_connections);
        }
        Ok(self)
    }
}

/// Why [`HttpOptions::with_limits`] refused a [`GatewayLimits`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// The per-token session cap is larger than the total, so it could
    /// never be reached.
    #[error(
        "the per-token session cap ({per_token}, gateway.max_sessions_per_token) is larger than the total ({total}, gateway.max_sessions); lower it, or raise the total"
    )]
    PerTokenAboveTotal {
        /// The per-token cap asked for.
        per_token: usize,
        /// The total cap asked for.
        total: usize,
    },
}

/// State shared by the guard and the API handlers.
struct HttpState {
    gateway: Gateway,
    options: HttpOptions,
    /// The MCP sessions, their caps, and the token that opened each.
    sessions: Arc<BoundedSessions>,
    throttle: Throttle,
    /// The request ids in flight on each session.
    in_flight: Arc<crate::front::InFlight>,
    /// Rate limits per caller.
    rate: Arc<crate::rate::Limiter>,
    /// The sessions the replicas share, with a fleet.
    fleet: Option<Arc<crate::fleet::Sessions>>,
}

impl Gateway {
    /// The HTTP application: `/mcp` (MCP over streamable HTTP), the sessions
    /// API (`/sessions`, `/sessions/{id}/usage`, `/sessions/{id}/context`)
    /// and `/health`. Cancelling `stop` closes every MCP session.
    pub fn http_router(&self, options: HttpOptions, stop: CancellationToken) -> Router {
        let fixed = match &options.auth {
            Auth::Open(level) => Some(Caller::new("anonymous", *level)),
            Auth::Tokens(_) => None,
        };
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(options.allowed_hosts.clone())
            .with_max_request_body_bytes(options.max_body_bytes)
            .with_cancellation_token(stop);
        let fleet = self
            .inner
            .options
            .fleet
            .clone()
            .map(|fleet| Arc::new(crate::fleet::Sessions::new(fleet, options.session_idle)));
        if let Some(fleet) = &fleet {
            config.session_store = Some(fleet.clone());
        }
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(options.session_idle);
        let sessions = Arc::new(BoundedSessions::new(
            manager,
            Caps {
                total: options.max_sessions.max(1),
                per_token: options.max_sessions_per_token.max(1),
            },
        ));
        let gateway = self.clone();
        let mcp = StreamableHttpService::new(
            move || Ok(McpSession::new(gateway.clone(), fixed.clone())),
            sessions.clone(),
            config,
        );
        let state = Arc::new(HttpState {
            gateway: self.clone(),
            throttle: Throttle::new(options.auth_failures_allowed, options.auth_failure_window),
            in_flight: Arc::default(),
            rate: Arc::new(crate::rate::Limiter::new(options.rate_limits.clone())),
            options,
            sessions,
            fleet,
        });
        Router::new()
            .route("/sessions", get(list_sessions))
            .route("/sessions/{id}/usage", get(session_usage))
            .route("/sessions/{id}/context", get(session_context))
            .route("/metrics", get(metrics))
            .nest_service("/mcp", mcp)
            .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
            .route("/health", get(health))
            .route(WELL_KNOWN, get(resource_metadata))
            .route(
                &format!("{WELL_KNOWN}/{{*resource}}"),
                get(resource_metadata),
            )
            .route("/health/live", get(live))
            .route("/health/ready", get(ready))
            .layer(axum::middleware::from_fn_with_state(state.clone(), hosts))
            .with_state(state)
    }

    /// Serves HTTP on `listener` until `shutdown` resolves; then stops
    /// accepting, lets the calls in flight finish and their answers reach
    /// their clients (at most `drain`), closes the client sessions and
    /// returns. The backends keep running:
    /// stop them with [`core_agent_host::Host::shutdown`].
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
        drain: Duration,
    ) -> std::io::Result<()> {
        let stop = CancellationToken::new();
        let router = self.http_router(options.clone(), stop.clone());
        let gateway = self.clone();
        let closing = stop.clone();
        let done = CancellationToken::new();
        let finished = done.clone();
        let serve = crate::front::serve(listener, router, &options, async move {
            shutdown.await;
            // Stop accepting now; close the sessions once their calls ended.
            tokio::spawn(async move {
                gateway.drain(drain).await;
                closing.cancel();
                finished.cancel();
            });
        });
        tokio::select! {
            r = serve => r,
            // Streams a client keeps open do not hold the process past the drain.
            () = async {
                done.cancelled().await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            } => Ok(()),
        }
    }
}

/// Refuses a `Host` that is not allowed (a DNS-rebinding page in a browser
/// would send its own name), and an `Origin` that is not (a page elsewhere
/// that a browser lets post to loopback), with 403.
async fn hosts(State(state): State<Arc<HttpState>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(host, &state.options.allowed_hosts) {
        return problem(
            StatusCode::FORBIDDEN,
            &format!(
                "Host `{host}` is not allowed (only loopback names are, unless the gateway's allowed hosts name it)"
            ),
        );
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !state.options.origin_allowed(origin) {
            let shown: String = origin.chars().take(200).collect();
            let message = format!(
                "Origin `{shown}` is not allowed (only loopback origins are, unless the gateway's allowed origins name it)"
            );
            let body = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": message}});
            return (StatusCode::FORBIDDEN, Json(body)).into_response();
        }
    }
    next.run(request).await
}

/// Whether `host` (a `Host` header: name, optional port) is one of `allowed`.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = if host.starts_with('[') {
        host.split_once(']')
            .map_or(host, |(v6, _)| v6)
            .trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or_default()
    };
    allowed.iter().any(|a| {
        a.trim_start_matches('[')
            .trim_end_matches(']')
            .eq_ignore_ascii_case(name)
    })
}

/// Checks the bearer token (401 without a valid one; 429, with no token
/// checked, from an address that failed too often): a static token, else
/// one the identity provider issued (`gateway.oauth`: 403 when its claims
/// are not enough, 503 when the provider cannot be reached); then the
/// session's owner (403 when another caller opened it); a new session past
/// the caps that cannot make room gets 503; a `POST /mcp` body is screened
/// before rmcp reads it.
async fn guard(State(state): State<Arc<HttpState>>, mut request: Request, next: Next) -> Response {
    if let Some(throttled) = throttled(&state, &request) {
        return throttled;
    }
    let header = request.headers().get(header::AUTHORIZATION);
    // A header that is not visible ASCII is a malformed token, not none.
    let authorization = header.map(|v| v.to_str().unwrap_or_default());
    let static_caller = state.options.auth.caller(authorization);
    let caller = match (static_caller, &state.options.oauth) {
        (Some(caller), _) => caller,
        (None, Some(oauth)) => match oauth.authenticate(authorization).await {
            Ok(caller) => caller,
            Err(rejection) => return refuse(&state, &request, oauth, &rejection),
        },
        (None, None) => {
            failed_sign_in(&state, &request);
            audit_refusal(
                &state,
                peer(&request),
                StatusCode::UNAUTHORIZED,
                if authorization.is_some() {
                    "the bearer token was not accepted"
                } else {
                    "no bearer token"
                },
            );
            let mut response = problem(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: send `Authorization: Bearer <token>` (the token the gateway was started with: CORE_AGENT_GATEWAY_TOKEN, the one generated and shown at start, or one of config.json's gateway.tokens)",
            );
            // RFC 6750: a token was presented and refused.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(if authorization.is_some() {
                    "Bearer realm=\"core-agent\", error=\"invalid_token\""
                } else {
                    "Bearer realm=\"core-agent\""
                }),
            );
            return response;
        }
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let posting = request.method() == http::Method::POST;
    // Who opened the session: this replica knows the ones it holds; with a
    // fleet, the store knows those another replica opened, which are
    // continued here (restored) for their owner only.
    let mut restoring = false;
    let opened_by = match &session {
        None => None,
        Some(id) => match (state.sessions.owner(id), &state.fleet) {
            (Some(owner), _) => Some(owner),
            (None, None) => None,
            (None, Some(fleet)) => match fleet.live(id).await {
                Ok(found) => {
                    restoring = found.is_some();
                    found.map(|shared| shared.owner)
                }
                Err(e) => {
                    tracing::warn!("cannot look session {id} up in the shared store: {e}");
                    return store_away(
                        "this MCP session is held by another replica and the shared store cannot be reached; retry shortly",
                    );
                }
            },
        },
    };
    if opened_by
        .as_ref()
        .is_some_and(|owner| *owner != caller.owner())
    {
        audit_refusal(
            &state,
            peer(&request),
            StatusCode::FORBIDDEN,
            &format!("`{}` used a session another caller opened", caller.name),
        );
        return problem(
            StatusCode::FORBIDDEN,
            "this MCP session was opened with another token; open your own session",
        );
    }
    // Only a session that exists is marked used: an id a client made up
    // leaves nothing behind here.
    if let (Some(id), Some(fleet), Some(_)) = (&session, &state.fleet, &opened_by) {
        let registry = &state.gateway.inner.registry;
        fleet.touch(id, || registry.get(id).map_or(0, |s| s.calls));
    }
    request.extensions_mut().insert(caller.clone());
    // The body is screened first (read within `body_timeout`, refused with
    // its JSON-RPC code), then counted against the caller's rate limits.
    let deleting = request.method() == http::Method::DELETE;
    let mut held = None;
    if posting && request.uri().path().starts_with("/mcp") {
        match crate::front::screen(
            request,
            &state.options,
            session.as_deref(),
            &state.in_flight,
        )
        .await
        {
            Ok((screened, id)) => {
                request = screened;
                held = id;
            }
            Err(answer) => return answer,
        }
    }
    let remote = peer(&request);
    let max_body = state.options.max_body_bytes;
    let (request, permit) = match crate::rate::admit(
        &state.rate,
        &state.gateway,
        &caller,
        remote,
        max_body,
        request,
    )
    .await
    {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    // Only a POST without a session id can open one (`initialize`); a
    // session continued from another replica is admitted like one.
    let opening = ((posting && session.is_none()) || restoring).then(|| Opening::new(&caller));
    let refused = opening.as_ref().map(|o| o.refused.clone());
    let mut response = match opening {
        Some(opening) => OPENING.scope(opening, next.run(request)).await,
        None => next.run(request).await,
    };
    if let Some(refusal) = refused.as_ref().and_then(|r| r.get()) {
        let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, &refusal.to_string());
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    if posting && is_event_stream(&response) {
        response = draining_waits_for(response, &state.gateway);
    }
    if let Some(held) = held {
        response = crate::front::hold_until_sent(response, held);
    }
    // rmcp answers 202; clients expect 200 or 204 (the Python SDK logs a failure).
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    crate::rate::metered(response, permit)
}

/// 503 with `Retry-After: 2`: the shared store is away for now.
fn store_away(message: &str) -> Response {
    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
    response
}

/// The peer's address, when the listener passed it.
fn peer(request: &Request) -> Option<std::net::IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip())
}

/// Writes a refused request to the audit trail, if there is one.
fn audit_refusal(
    state: &HttpState,
    address: Option<std::net::IpAddr>,
    status: StatusCode,
    reason: &str,
) {
    if let Some(audit) = &state.gateway.inner.options.audit {
        audit.sign_in_refused(address, status.as_u16(), reason);
    }
}

/// 429 with `Retry-After` when the request's address is throttled (it
/// failed the bearer check too often); its token is not checked.
fn throttled(state: &HttpState, request: &Request) -> Option<Response> {
    let wait = peer(request).and_then(|ip| state.throttle.wait(ip, Instant::now()))?;
    let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
    let mut response = problem(
        StatusCode::TOO_MANY_REQUESTS,
        &format!(
            "too many failed sign-ins from this address: no token from it is checked for {seconds} s; retry then with the right token"
        ),
    );
    if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    Some(response)
}

/// Counts a failed bearer check against the request's address; writes
/// the audit line when that throttles it.
fn failed_sign_in(state: &HttpState, request: &Request) {
    let address = peer(request);
    if address.is_some_and(|ip| state.throttle.failed(ip, Instant::now())) {
        audit_refusal(
            state,
            address,
            StatusCode::TOO_MANY_REQUESTS,
            "throttled after too many failed sign-ins",
        );
    }
}

/// The answer to a token the identity provider's rules refused: 401 with
/// where to sign in (and `invalid_token` when one was presented), 403
/// `insufficient_scope`, or 503 with `Retry-After`; logged without the token.
fn refuse(
    state: &HttpState,
    request: &Request,
    oauth: &ResourceServer,
    rejection: &Rejection,
) -> Response {
    let (status, message) = match rejection {
        Rejection::Missing => (
            StatusCode::UNAUTHORIZED,
            format!(
                "sign in: send `Authorization: Bearer <access token>` from {} (where: {})",
                oauth.config().issuer,
                oauth.metadata_url()
            ),
        ),
        Rejection::Invalid(reason) => {
            tracing::info!(reason = %reason, "refused an access token");
            (
                StatusCode::UNAUTHORIZED,
                "the access token is not valid for this gateway; sign in again".to_owned(),
            )
        }
        Rejection::InsufficientScope { scope } => {
            tracing::info!(scope = %scope, "refused a signed-in caller: its claims grant no trust level");
            (
                StatusCode::FORBIDDEN,
                format!(
                    "the access token does not grant what this gateway needs: ask for scope `{scope}`"
                ),
            )
        }
        Rejection::Unavailable {
            reason,
            retry_after,
        } => {
            tracing::warn!(reason = %reason, "cannot check an access token: the identity provider cannot be reached");
            audit_refusal(
                state,
                peer(request),
                StatusCode::SERVICE_UNAVAILABLE,
                &rejection_reason(rejection),
            );
            let seconds = retry_after.as_secs().max(1);
            let mut response = problem(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "the identity provider cannot be reached to check the token; retry in {seconds} s"
                ),
            );
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return response;
        }
    };
    if status == StatusCode::UNAUTHORIZED {
        failed_sign_in(state, request);
    }
    audit_refusal(state, peer(request), status, &rejection_reason(rejection));
    let mut response = problem(status, &message);
    if let Ok(value) = HeaderValue::from_str(&challenge(oauth.config(), rejection)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// What the audit trail says of a refused access token (never the token).
fn rejection_reason(rejection: &Rejection) -> String {
    match rejection {
        Rejection::Missing => "no bearer token".to_owned(),
        Rejection::Invalid(reason) => format!("the access token is not valid: {reason}"),
        Rejection::InsufficientScope { scope } => {
            format!("the access token's claims grant no trust level (scope `{scope}` needed)")
        }
        Rejection::Unavailable { reason, .. } => {
            format!("the identity provider cannot be reached: {reason}")
        }
    }
}

/// `GET /.well-known/oauth-protected-resource[/…]`: open to all; where to
/// sign in (RFC 9728); 404 when the gateway takes no identity provider's tokens.
async fn resource_metadata(State(state): State<Arc<HttpState>>) -> Response {
    match &state.options.oauth {
        Some(oauth) => Json(protected_resource_metadata(oauth.config())).into_response(),
        None => problem(
            StatusCode::NOT_FOUND,
            "this gateway takes no identity provider's tokens (gateway.oauth is not set)",
        ),
    }
}

/// Whether `response` streams server-sent events (a request's answer,
/// when it is a POST).
fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// `response`, counted by the drain until its body has been sent (or its
/// client went away): a call's handler returns before its answer is
/// written, and closing the sessions then would lose the answer.
fn draining_waits_for(response: Response, gateway: &Gateway) -> Response {
    let answering = gateway.inner.registry.answer_started();
    response.map(|body| {
        axum::body::Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _sending = &answering;
            chunk
        }))
    })
}

pub(crate) fn problem(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

/// Whether a probe's request carries a valid bearer token (any request of
/// an open gateway does): only then does the probe show details. A token
/// presented and refused counts as a failed sign-in (429 once throttled),
/// so a probe is no cheaper a way to guess tokens than `/mcp`.
async fn probe_caller(state: &HttpState, request: Request) -> Result<bool, Response> {
    let authorization: Option<String> = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    if authorization.is_none() {
        // An open gateway shows everyone the details; otherwise no token, no details.
        return Ok(state.options.auth.caller(None).is_some());
    }
    // A throttled address has no token checked, the right one included.
    if let Some(throttled) = throttled(state, &request) {
        return Err(throttled);
    }
    if state
        .options
        .auth
        .caller(authorization.as_deref())
        .is_some()
    {
        return Ok(true);
    }
    if let Some(oauth) = &state.options.oauth
        && oauth.authenticate(authorization.as_deref()).await.is_ok()
    {
        return Ok(true);
    }
    failed_sign_in(state, &request);
    Ok(false)
}

/// `GET /health`: open to all, and then only `{"status": "ok"}`, or
/// `"degraded"` with 503 while a `required` server is down (not merely
/// starting); with a valid bearer token, also each server's state, the
/// sessions and the config's and catalog's warnings (at most
/// [`HEALTH_WARNINGS`]).
async fn health(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let detailed = match probe_caller(&state, request).await {
        Ok(detailed) => detailed,
        Err(refused) => return refused,
    };
    let degraded = state
        .gateway
        .readiness()
        .down
        .iter()
        .any(|d| d.status != "starting");
    let (code, status) = if degraded {
        (StatusCode::SERVICE_UNAVAILABLE, "degraded")
    } else {
        (StatusCode::OK, "ok")
    };
    if !detailed {
        return (code, Json(json!({"status": status}))).into_response();
    }
    let host = &state.gateway.inner.host;
    let servers: Vec<_> = host
        .server_reports(TrustLevel::Creator)
        .into_iter()
        .map(|s| json!({"name": s.name, "status": s.status, "tools": s.tools}))
        .collect();
    let starting: Vec<&str> = host.starting();
    let body = Json(json!({
        "status": status,
        "servers": servers,
        "starting": starting,
        "calls_in_flight": state.gateway.inner.registry.in_flight(),
        "sessions": {
            "open": state.sessions.open(),
            "max": state.sessions.caps().total,
            "max_per_token": state.sessions.caps().per_token,
        },
        "warnings": bounded_warnings(host.warnings()),
    }));
    (code, body).into_response()
}

/// At most this many warnings in `/health`, each at most [`WARNING_BYTES`]:
/// a backend's names cannot make the answer large.
const HEALTH_WARNINGS: usize = 100;

/// The longest warning `/health` shows whole.
const WARNING_BYTES: usize = 1024;

/// `warnings`, at most [`HEALTH_WARNINGS`] of them cut to [`WARNING_BYTES`],
/// and a last one counting those left out.
fn bounded_warnings(warnings: Vec<String>) -> Vec<String> {
    let total = warnings.len();
    let mut out: Vec<String> = warnings
        .into_iter()
        .take(HEALTH_WARNINGS)
        .map(|w| core_agent_mcp_policy::elide(&w, WARNING_BYTES).into_owned())
        .collect();
    if total > HEALTH_WARNINGS {
        out.push(format!(
            "{} more warnings are left out here",
            total - HEALTH_WARNINGS
        ));
    }
    out
}

/// The caller the guard let through.
fn caller_of(request_caller: Option<axum::Extension<Caller>>) -> Option<Caller> {
    request_caller.map(|axum::Extension(c)| c)
}

/// Whether `caller` may read the session `info` (a creator reads every
/// session; others only the ones their token opened).
fn may_read(caller: &Caller, info: Option<&SessionInfo>) -> bool {
    caller.trust_level == TrustLevel::Creator || info.is_some_and(|i| i.owner == caller.owner())
}

/// `GET /sessions`.
#[derive(Debug, Serialize)]
struct SessionList {
    sessions: Vec<SessionInfo>,
    /// Sessions known only from `--session-db` (earlier runs), creator only.
    stored: Vec<String>,
    /// With a fleet: the sessions every replica shares, most recently used
    /// first (at most [`FLEET_LISTED`]); the caller's own, or all for a creator.
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<Vec<FleetSession>>,
}

/// Sessions of the fleet `GET /sessions` lists, at most.
const FLEET_LISTED: usize = 1000;

/// A session as the fleet shares it, in `GET /sessions`.
#[derive(Debug, Serialize)]
struct FleetSession {
    id: String,
    caller: String,
    owner: String,
    trust_level: &'static str,
    started_ms: u64,
    used_ms: u64,
    calls: u64,
    /// Whether this replica holds it now.
    here: bool,
}

async fn list_sessions(
    State(state): State<Arc<HttpState>>,
    caller: Option<axum::Extension<Caller>>,
) -> Response {
    let Some(caller) = caller_of(caller) else {
        return problem(StatusCode::UNAUTHORIZED, "no caller");
    };
    let sessions: Vec<SessionInfo> = state
        .gateway
        .inner
        .registry
        .list()
        .into_iter()
        .filter(|s| may_read(&caller, Some(s)))
        .collect();
    let stored = if caller.trust_level == TrustLevel::Creator {
        let live: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        state
            .gateway
            .inner
            .host
            .digest_store()
            .and_then(|s| s.sessions().ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|id| !live.contains(&id.as_str()))
            .collect()
    } else {
        Vec::new()
    };
    let fleet = match &state.fleet {
        Some(fleet) => match fleet.list(FLEET_LISTED).await {
            Ok(shared) => Some(
                shared
                    .into_iter()
                    .filter(|(_, s)| {
                        caller.trust_level == TrustLevel::Creator || s.owner == caller.owner()
                    })
                    .map(|(id, s)| FleetSession {
                        here: state.sessions.owner(&id).is_some(),
                        id,
                        caller: s.caller,
                        owner: s.owner,
                        trust_level: s.trust_level.as_str(),
                        started_ms: s.started_ms,
                        used_ms: s.used_ms,
                        calls: s.calls,
                    })
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!("cannot list the fleet's sessions: {e}");
                return store_away(
                    "the shared store cannot be reached to list the fleet's sessions; retry shortly",
                );
            }
        },
        None => None,
    };
    Json(SessionList {
        sessions,
        stored,
        fleet,
    })
    .into_response()
}

/// The usage of session `id`, when `caller` may read it.
fn usage_of(
    state: &HttpState,
    caller: Option<axum::Extension<Caller>>,
    id: &str,
) -> Result<core_agent_digest::Usage, Box<Response>> {
    let caller = caller_of(caller)
        .ok_or_else(|| Box::new(problem(StatusCode::UNAUTHORIZED, "no caller")))?;
    let info = state.gateway.inner.registry.get(id);
    let store = state.gateway.inner.host.digest_store().ok_or_else(|| {
        Box::new(problem(
            StatusCode::NOT_FOUND,
            "the digest is off (agentic_wrap: false, or turned off when the gateway was started), so no usage is kept",
        ))
    })?;
    let known = info.is_some() || store.sessions().is_ok_and(|s| s.iter().any(|s| s == id));
    if !known || !may_read(&caller, info.as_ref()) {
        return Err(Box::new(problem(
            StatusCode::NOT_FOUND,
            &format!("no session `{id}` that this token may read"),
        )));
    }
    store
        .usage(id)
        .map_err(|e| Box::new(problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())))
}

/// `GET /sessions/{id}/usage`: the spec's `digest_methods` block.
async fn session_usage(
    State(state): State<Arc<HttpState>>,
    caller: Option<axum::Extension<Caller>>,
    Path(id): Path<String>,
) -> Response {
    match usage_of(&state, caller, &id) {
        Ok(usage) => {
            let report = UsageReport::new(id, usage);
            Json(json!({"session": report.session, "digest_methods": report.digest_methods}))
                .into_response()
        }
        Err(response) => *response,
    }
}

/// `?model=` of `/sessions/{id}/context`.
#[derive(Debug, Deserialize)]
struct ContextQuery {
    model: Option<String>,
}

/// `GET /sessions/{id}/context`: the spec's `digest_savings` block, and
/// what the parent model did not have to read, in US dollars at its input
/// price (`?model=`, else `--parent-model`).
async fn session_context(
    State(state): State<Arc<HttpState>>,
    caller: Option<axum::Extension<Caller>>,
    Path(id): Path<String>,
    Query(query): Query<ContextQuery>,
) -> Response {
    match usage_of(&state, caller, &id) {
        Ok(usage) => {
            let options = &state.gateway.inner.options;
            let model = query.model.or_else(|| options.parent_model.clone());
            let saved_usd = model.as_deref().map(|m| {
                options
                    .pricing
                    .cost(m, usage.digest_savings.parent_tokens_saved, 0)
            });
            Json(json!({
                "session": id,
                "digest_savings": usage.digest_savings,
                "parent_model": model,
                "parent_savings_usd": saved_usd,
            }))
            .into_response()
        }
        Err(response) => *response,
    }
}

/// `GET /metrics`: the Prometheus text exposition (404 when the gateway
/// keeps no metrics).
async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    metrics_response(&state.gateway)
}

fn metrics_response(gateway: &Gateway) -> Response {
    match gateway.metrics_text() {
        Some(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            text,
        )
            .into_response(),
        None => problem(
            StatusCode::NOT_FOUND,
            "this gateway keeps no metrics; start it with metrics on",
        ),
    }
}

/// `GET /health/live`: open to all; the process answers.
async fn live() -> Response {
    Json(json!({"status": "live"})).into_response()
}

/// `GET /health/ready`: open to all; 200 when every required server is up,
/// else 503; with a valid bearer token, naming the servers that are not.
async fn ready(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let detailed = match probe_caller(&state, request).await {
        Ok(detailed) => detailed,
        Err(refused) => return refused,
    };
    let readiness = state.gateway.readiness();
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    if detailed {
        (status, Json(readiness)).into_response()
    } else {
        (status, Json(json!({"ready": readiness.ready}))).into_response()
    }
}

impl Gateway {
    /// Serves [`Gateway::metrics_router`] on `listener` until the task is
    /// dropped.
    pub async fn serve_metrics(&self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.metrics_router()).await
    }

    /// `/metrics` alone, for a listener of its own (`GET /metrics`, no
    /// token: bind it where only the scraper reaches it).
    pub fn metrics_router(&self) -> Router {
        let gateway = self.clone();
        Router::new().route(
            "/metrics",
            get(move || {
                let gateway = gateway.clone();
                async move { metrics_response(&gateway) }
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_host_names_pass_whatever_the_port() {
        let allowed = HttpOptions::new(Auth::Open(TrustLevel::User)).allowed_hosts;
        for ok in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:99",
            "[::1]",
            "LOCALHOST",
        ] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "evil.example:80",
            "127.0.0.2",
            "localhost.evil",
            "[::2]:1",
        ] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn limits_apply_what_they_set_and_refuse_an_unreachable_per_token_cap() {
        let open = || HttpOptions::new(Auth::Open(TrustLevel::User));
        let caps = |limits: GatewayLimits| {
            open()
                .with_limits(&limits)
                .map(|h| (h.max_sessions, h.max_sessions_per_token, h.session_idle))
        };
        let idle = HttpOptions::SESSION_IDLE;
        let table = [
            (
                GatewayLimits::default(),
                Ok((
                    HttpOptions::MAX_SESSIONS,
                    HttpOptions::MAX_SESSIONS_PER_TOKEN,
                    idle,
                )),
            ),
            // A small total lowers the default per-token cap with it.
            (
                GatewayLimits::default().with_max_sessions(Some(4)),
                Ok((4, 4, idle)),
            ),
            (
                GatewayLimits::default()
                    .with_max_sessions(Some(10))
                    .with_max_sessions_per_token(Some(3))
                    .with_session_idle_timeout_secs(Some(9)),
                Ok((10, 3, Duration::from_secs(9))),
            ),
            (
                GatewayLimits::default().with_max_sessions_per_token(Some(1000)),
                Ok((HttpOptions::MAX_SESSIONS, 1000, idle)),
            ),
            (
                GatewayLimits::default()
                    .with_max_sessions(Some(1))
                    .with_max_sessions_per_token(Some(3)),
                Err(LimitsError::PerTokenAboveTotal {
                    per_token: 3,
                    total: 1,
                }),
            ),
        ];
        for (limits, want) in table {
            assert_eq!(caps(limits), want, "{limits:?}");
        }
        let refused = open()
            .with_limits(
                &GatewayLimits::default()
                    .with_max_sessions(Some(1))
                    .with_max_sessions_per_token(Some(3)),
            )
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the per-token session cap (3, gateway.max_sessions_per_token) is larger than the total (1, gateway.max_sessions); lower it, or raise the total"
        );
    }
}
