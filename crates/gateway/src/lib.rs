#![doc = include_str!("../README.md")]

mod audit;
mod auth;
mod config;
mod context;
mod elicit;
mod exchange;
mod fleet;
mod front;
mod http;
mod limits;
mod oauth;
mod prompt;
mod rate;
mod registry;
mod relay;
mod session;
mod telemetry;
mod tokens;

use std::sync::Arc;
use std::time::Duration;

use core_agent_digest::Pricing;
use core_agent_host::Host;
use core_agent_mcp_config::TrustLevel;
use core_agent_permissions::Mode;
use rmcp::ServiceExt;

pub use audit::{AUDIT_SCHEMA_VERSION, AuditLog, AuditSettings, AuditSink, AuditTarget};
pub use auth::{Auth, Caller, Token};
pub use config::{GatewayConfig, GatewayLimits};
pub use elicit::ElicitRouter;
pub use fleet::{Fleet, FleetError, SharedSession};
pub use front::{MessageError, check_message};
pub use http::{HttpOptions, LimitsError};
pub use oauth::{
    DEFAULT_ALGORITHMS, DefaultTrust, Identity, IntrospectionConfig, MAX_AUTHORIZATION_BYTES,
    OAuthConfig, OAuthError, Rejection, ResourceServer, TrustMatch, TrustRule,
};
pub use rate::{Budget, Limit, RateLimits};
pub use registry::SessionInfo;
pub use telemetry::{DownServer, Metrics, Readiness, TraceParent};
#[cfg(feature = "otel")]
pub use telemetry::{Otel, OtelError};
pub use tokens::{DefaultToken, GatewayToken, MIN_TOKEN_LEN, TokenError, resolve_tokens};

/// What every client session of the gateway gets, whatever its transport.
/// Start from [`GatewayOptions::default`] and change what you need with the
/// `with_*` methods:
///
/// ```
/// use std::time::Duration;
/// use core_agent_gateway::GatewayOptions;
///
/// let options = GatewayOptions::default()
///     .with_cost_ceiling(Some(0.50))
///     .with_ask_timeout(Duration::from_secs(30));
/// assert_eq!(options.list_wait, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Overrides the configured permission mode for every session.
    pub mode: Option<Mode>,
    /// Each session's spending ceiling for the LLM second chance, in US dollars.
    pub cost_ceiling: Option<f64>,
    /// How long the gate waits for a client to answer an approval.
    pub ask_timeout: Duration,
    /// How long a `tools/list` waits for servers still starting (5 s); the
    /// tools of one that starts later arrive with `tools/list_changed`.
    pub list_wait: Duration,
    /// Model prices, for the parent-side savings of `/sessions/{id}/context`.
    pub pricing: Pricing,
    /// The parent model those savings are priced at, unless the request names one.
    pub parent_model: Option<String>,
    /// Forwards backends' elicitations to the client whose call caused them;
    /// it must also be the host's elicitor (`StartOptions::elicitor`).
    pub elicitations: Option<Arc<ElicitRouter>>,
    /// The audit trail every decision is written to (none by default).
    pub audit: Option<Arc<AuditLog>>,
    /// Records what the gateway serves and asks its backends (`/metrics`).
    pub metrics: Option<Arc<Metrics>>,
    /// A `tracing` span per request served, child of the client's W3C
    /// trace context (`_meta.traceparent`), with the host's spans under it;
    /// with the `otel` feature, the context is passed on to the backends.
    pub tracing: bool,
    /// The servers `/health/ready` waits for (those marked `required`).
    pub required: Vec<String>,
    /// What this gateway shares with its other replicas (their sessions
    /// and the secret relayed states are sealed with); `None` for one
    /// process alone.
    pub fleet: Option<Arc<dyn Fleet>>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            mode: None,
            cost_ceiling: None,
            ask_timeout: Duration::from_secs(120),
            list_wait: Duration::from_secs(5),
            pricing: Pricing::default(),
            parent_model: None,
            elicitations: None,
            audit: None,
            metrics: None,
            tracing: false,
            required: Vec::new(),
            fleet: None,
        }
    }
}

impl GatewayOptions {
    /// Overrides the configured permission mode for every session.
    pub fn with_mode(mut self, mode: Option<Mode>) -> GatewayOptions {
        self.mode = mode;
        self
    }

    /// Each session's spending ceiling for the LLM second chance, in US dollars.
    pub fn with_cost_ceiling(mut self, ceiling: Option<f64>) -> GatewayOptions {
        self.cost_ceiling = ceiling;
        self
    }

    /// How long the gate waits for a client to answer an approval.
    pub fn with_ask_timeout(mut self, timeout: Duration) -> GatewayOptions {
        self.ask_timeout = timeout;
        self
    }

    /// How long a `tools/list` waits for servers still starting.
    pub fn with_list_wait(mut self, wait: Duration) -> GatewayOptions {
        self.list_wait = wait;
        self
    }

    /// Model prices, for the parent-side savings of `/sessions/{id}/context`.
    pub fn with_pricing(mut self, pricing: Pricing) -> GatewayOptions {
        self.pricing = pricing;
        self
    }

    /// The parent model the savings are priced at, unless the request names one.
    pub fn with_parent_model(mut self, model: Option<String>) -> GatewayOptions {
        self.parent_model = model;
        self
    }

    /// Forwards backends' elicitations to the client whose call caused
    /// them; the same router must be the host's elicitor
    /// (`StartOptions::elicitor`).
    pub fn with_elicitations(mut self, router: Option<Arc<ElicitRouter>>) -> GatewayOptions {
        self.elicitations = router;
        self
    }

    /// Writes every decision (calls allowed, denied, asked, refused by
    /// trust level or a pin; refused sign-ins) to `audit`.
    pub fn with_audit(mut self, audit: Option<Arc<AuditLog>>) -> GatewayOptions {
        self.audit = audit;
        self
    }

    /// Records what the gateway serves and asks its backends in `metrics`.
    pub fn with_metrics(mut self, metrics: Option<Arc<Metrics>>) -> GatewayOptions {
        self.metrics = metrics;
        self
    }

    /// A span per request served, child of the client's trace context.
    pub fn with_tracing(mut self, tracing: bool) -> GatewayOptions {
        self.tracing = tracing;
        self
    }

    /// The servers `/health/ready` waits for.
    pub fn with_required_servers(mut self, servers: Vec<String>) -> GatewayOptions {
        self.required = servers;
        self
    }

    /// Shares sessions and the relayed states' secret with the other
    /// replicas behind the same load balancer.
    pub fn with_fleet(mut self, fleet: Option<Arc<dyn Fleet>>) -> GatewayOptions {
        self.fleet = fleet;
        self
    }
}

/// core-agent's catalog served as one MCP server: every client session is a
/// host [`core_agent_host::Session`] (its own trust level, gate answers,
/// plan, digest ledger), all sharing one [`Host`] and so one process per
/// backend server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    host: Arc<Host>,
    options: GatewayOptions,
    registry: Arc<registry::Registry>,
    /// The log level each session asked for.
    log_levels: context::LogLevels,
    /// Numbers the sessions, for `log_levels`.
    next_session: std::sync::atomic::AtomicU64,
    /// Seals the states of backends' questions relayed to 2026-07-28
    /// clients (`None`: no randomness, so they are not relayed).
    relay_key: Option<relay::StateKey>,
    /// Told about every call of every session (the metrics, an audit trail).
    observer: Option<Arc<dyn core_agent_host::Observer>>,
    /// The token exchanges of the backends that act for each user.
    exchanger: Arc<exchange::Exchanger>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("host", &self.host)
            .field("options", &self.options)
            .field("registry", &self.registry)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `host`.
    pub fn new(host: Arc<Host>, options: GatewayOptions) -> Gateway {
        let mut observers: Vec<Arc<dyn core_agent_host::Observer>> = Vec::new();
        if let Some(metrics) = &options.metrics {
            observers.push(metrics.clone());
        }
        let observer: Option<Arc<dyn core_agent_host::Observer>> =
            (!observers.is_empty()).then(|| Arc::new(telemetry::Observers(observers)) as _);
        let relay_key = match &options.fleet {
            Some(fleet) => Some(relay::StateKey::from_secret(fleet.secret())),
            None => relay::StateKey::random(),
        };
        let gateway = Gateway {
            inner: Arc::new(Inner {
                host,
                options,
                registry: Arc::default(),
                log_levels: context::LogLevels::new(),
                next_session: std::sync::atomic::AtomicU64::new(0),
                relay_key,
                observer,
                exchanger: Arc::new(exchange::Exchanger::new()),
            }),
        };
        if let Some(metrics) = &gateway.inner.options.metrics {
            let inner = Arc::downgrade(&gateway.inner);
            metrics.read_gauges_from(Box::new(move || {
                inner.upgrade().map(|inner| Gateway { inner }.gauges())
            }));
        }
        gateway
    }

    /// The host it serves.
    pub fn host(&self) -> &Arc<Host> {
        &self.inner.host
    }

    /// Speaks MCP on this process's stdin and stdout to one client, as a
    /// caller of `level`, until the client closes stdin.
    pub async fn serve_stdio(&self, level: TrustLevel) -> std::io::Result<()> {
        let caller = Caller::new("stdio", level);
        self.serve_io(rmcp::transport::stdio_pipes(), caller).await
    }

    /// Speaks MCP over any rmcp transport (a pipe, a socket) to one client.
    pub async fn serve_io<T, E, A>(&self, transport: T, caller: Caller) -> std::io::Result<()>
    where
        T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let handler = session::McpSession::new(self.clone(), Some(caller));
        let running = handler.serve(transport).await.map_err(|e| {
            std::io::Error::other(format!("the MCP client did not initialize: {e}"))
        })?;
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Every session served so far (the most recent ended ones, and the live ones), oldest first.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.inner.registry.list()
    }

    /// Calls in flight now, over every session.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.registry.in_flight()
    }

    /// Waits until no call is in flight, at most `limit`; returns how many
    /// were still running then.
    pub async fn drain(&self, limit: Duration) -> usize {
        self.inner.registry.drain(limit).await
    }
}
