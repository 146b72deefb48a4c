//! `core-agent serve`: the gateway on stdio or HTTP, with the tokens,
//! the notices the operator must see, and the signals.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use core_agent_gateway::{
    AuditLog, AuditSettings, AuditTarget, Auth, DefaultToken, Gateway, GatewayLimits,
    GatewayOptions, GatewayToken, HttpOptions, LimitsError, OAuthConfig, ResourceServer,
    resolve_tokens,
};
use core_agent_host::Host;
use core_agent_mcp_config::{Env, TrustLevel};
use core_agent_mcp_policy::Naming;

use crate::cli::{Global, ModeArg, ServeCommand};
use crate::render::report_ready;
use crate::setup::{Launch, Setup, restart_policy};
use crate::signals::StopSignals;
use crate::term::Screen;
use crate::{FAILED, USAGE};

/// The environment variable that supplies the default HTTP token.
const TOKEN_ENV: &str = "CORE_AGENT_GATEWAY_TOKEN";

/// What `serve` was asked for.
#[derive(Debug)]
struct ServeArgs {
    pub(crate) http: Option<SocketAddr>,
    pub(crate) no_auth: bool,
    pub(crate) allow_hosts: Vec<String>,
    /// `--allow-origin`, then `gateway.allowed_origins`.
    pub(crate) allow_origins: Vec<String>,
    /// The session caps and idle timeout (flags over `config.json`).
    pub(crate) limits: GatewayLimits,
    /// Rate limits per caller (`gateway.rate_limits`).
    pub(crate) rate_limits: core_agent_gateway::RateLimits,
    pub(crate) level: TrustLevel,
    /// `gateway.oauth`: callers signed in with an identity provider.
    pub(crate) oauth: Option<OAuthConfig>,
    pub(crate) drain: Duration,
    /// The audit trail's settings (`--audit-log` over `gateway.audit`).
    pub(crate) audit: Option<AuditSettings>,
    /// Where the catalog's warnings are printed, once each, as they come.
    pub(crate) warned: Arc<crate::warnings::WarningLog>,
    /// `/metrics` on a listener of its own.
    pub(crate) metrics_addr: Option<SocketAddr>,
}

pub(crate) async fn run(global: &Global, command: ServeCommand) -> u8 {
    let Some(mut setup) = Setup::new(global) else {
        return USAGE;
    };
    setup.only_server = command.server.clone();
    // stdout may be the MCP channel: never live lines.
    let screen = Screen::new(false);
    let Launch {
        mut config,
        mut options,
        pricing,
        gateway_tokens,
        gateway_limits,
        gateway_audit,
        gateway_oauth,
        gateway_store,
        gateway_origins,
        gateway_rate_limits,
        warned,
        mut stop,
    } = match Launch::new(global, &setup, &screen) {
        Ok(launch) => launch,
        Err(code) => return code,
    };
    // Long-lived runs bring a crashed server back; a one-shot call does not.
    options.start.restart = Some(restart_policy());
    // A gateway's callers are not the operator: a stdio server that does
    // not say otherwise gets the minimal environment, not the shell's.
    options.start.env_inherit = core_agent_mcp_config::EnvInherit::Minimal;
    let ServeCommand {
        http,
        no_auth,
        allow_host,
        allow_origin,
        max_sessions,
        max_sessions_per_token,
        session_idle_timeout,
        mode,
        parent_model,
        server,
        audit_log,
        audit_store,
        metrics_addr,
        store,
    } = command;
    // `--audit-log` or `--audit-store` names where; gateway.audit keeps its
    // other settings.
    let target = match audit_log {
        Some(path) if path.as_os_str() == "-" => Some(AuditTarget::Stdout),
        Some(path) => Some(AuditTarget::File(path)),
        None => audit_store.then_some(AuditTarget::Store),
    };
    let mut audit = match (target, gateway_audit) {
        (Some(target), settings) => {
            let mut settings = settings.unwrap_or_else(|| AuditSettings::new(target.clone()));
            settings.target = target;
            Some(settings)
        }
        (None, settings) => settings,
    };
    // The audit trail holds callers' calls: below the creator, the survey
    // tools never show it, wherever it is.
    if let Some(AuditSettings {
        target: AuditTarget::File(path),
        ..
    }) = &audit
        && let Some(survey) = options.survey.take()
    {
        options.survey = Some(survey.with_hidden_file(path.clone()));
    }
    if http.is_none()
        && audit
            .as_ref()
            .is_some_and(|a| a.target == AuditTarget::Stdout)
    {
        errln!(
            "core-agent: serve: the audit trail cannot go to stdout when MCP is served on stdin/stdout; give --audit-log a file, or serve with --http"
        );
        return USAGE;
    }
    // One server, transparently: only it starts, under its own tool names.
    if let Some(name) = &server {
        config = match config.only(name) {
            Ok(only) => only,
            Err(e) => {
                errln!("core-agent: serve --server: {e}");
                return USAGE;
            }
        };
        options.naming = Naming::Bare;
    }
    let env = config.dotenv.over_process();
    let to_store = audit
        .as_ref()
        .is_some_and(|a| a.target == AuditTarget::Store);
    if to_store && store.is_none() && gateway_store.is_none() {
        errln!(
            "core-agent: serve: the audit trail is to go into the shared store (--audit-store or gateway.audit.store), and there is none; give --store postgres://… (or CORE_AGENT_STORE, or gateway.store), or write the trail to a file with --audit-log FILE"
        );
        return USAGE;
    }
    // Replicas share their state in PostgreSQL: the digest's payloads and
    // ledgers, the sessions' answers and plans, the MCP sessions, the pins,
    // and the audit trail when it goes there.
    if global.session_db.is_some() && (store.is_some() || gateway_store.is_some()) {
        errln!(
            "core-agent: serve: --session-db and a shared store (--store, CORE_AGENT_STORE or gateway.store) both keep the session state; give one"
        );
        return USAGE;
    }
    let fleet = match super::store::shared_store(store, gateway_store, &env).await {
        Ok(fleet) => fleet,
        Err(code) => return code,
    };
    // The trail into the store: its lines go to the database in batches,
    // from the trail's writer thread.
    if let (Some(settings), Some(db)) = (&mut audit, &fleet)
        && settings.target == AuditTarget::Store
    {
        settings.target = AuditTarget::Sink(Arc::new(db.clone()));
        errln!(
            "core-agent: audit trail: the shared store, table audit_lines, as replica {}",
            db.replica()
        );
    }
    if let Some(db) = &fleet {
        if let Some(digest) = &mut options.digest {
            digest.store = Arc::new(db.clone());
        }
        options.memory = Some(Arc::new(db.clone()));
        options.pins = Some(Arc::new(db.clone()));
    }
    // Backends' elicitations and sampling go to the client whose call
    // caused them, and they see the clients' roots.
    let elicitations = core_agent_gateway::ElicitRouter::new(Duration::from_secs(120));
    options.start.elicitor = elicitations.clone();
    options.start.sampler = Some(elicitations.clone());
    options.start.roots = Some(elicitations.clone());
    // Clients connect at once; a slow server's tools appear when it is ready.
    let host = Arc::new(Host::launch(&config, &env, options, Arc::new(report_ready)));
    // The other replicas' pins and tool changes reach this one's clients,
    // and this one's tool changes reach theirs.
    let _fleet_notices = fleet.as_ref().map(|db| super::store::follow(db, &host));
    let gateway = GatewayOptions::default()
        .with_mode(mode.map(ModeArg::mode))
        .with_cost_ceiling(global.cost_ceiling)
        .with_pricing(pricing)
        .with_parent_model(parent_model)
        .with_elicitations(Some(elicitations))
        .with_fleet(fleet.map(|db| Arc::new(db) as Arc<dyn core_agent_gateway::Fleet>));
    let gateway = telemetry(gateway, &config, http.is_some() || metrics_addr.is_some());
    let args = ServeArgs {
        http,
        no_auth,
        allow_hosts: allow_host,
        allow_origins: allow_origin
            .into_iter()
            .chain(gateway_origins.unwrap_or_default())
            .collect(),
        // A flag wins over config.json.
        limits: gateway_limits
            .with_max_sessions(
                max_sessions
                    .map(|n| n as usize)
                    .or(gateway_limits.max_sessions),
            )
            .with_max_sessions_per_token(
                max_sessions_per_token
                    .map(|n| n as usize)
                    .or(gateway_limits.max_sessions_per_token),
            )
            .with_session_idle_timeout_secs(
                session_idle_timeout
                    .map(u64::from)
                    .or(gateway_limits.session_idle_timeout_secs),
            ),
        rate_limits: gateway_rate_limits,
        level: global.trust_level.level(),
        oauth: gateway_oauth,
        drain: setup.call_timeout.unwrap_or(Duration::from_secs(30)),
        audit,
        warned: warned.clone(),
        metrics_addr,
    };
    let code = serve(host.clone(), gateway, args, &gateway_tokens, &mut stop).await;
    host.shutdown().await;
    code
}

/// Runs the gateway until the client closes stdin (stdio) or a signal
/// (both); drains the calls in flight; the caller then stops the backends.
async fn serve(
    host: Arc<Host>,
    options: GatewayOptions,
    args: ServeArgs,
    tokens: &[GatewayToken],
    stop: &mut StopSignals,
) -> u8 {
    // The warnings once every server has started, and the new ones after
    // each rebuild of the catalog (clients hear them from the gateway).
    let following = args.warned.clone().follow(host.clone());
    let _stop_following = AbortOnDrop(following);
    let host_redactor = host.redactor().clone();
    // Over HTTP: the identity provider's tokens (gateway.oauth), then the static ones.
    let oauth = match args.http {
        Some(_) => match resource_server(&args, &ProcessVars).await {
            Ok(oauth) => oauth,
            Err(message) => {
                errln!("core-agent: serve: {message}");
                return USAGE;
            }
        },
        None => None,
    };
    let auth = match args
        .http
        .map(|addr| auth(&args, addr, tokens, oauth.is_some()))
        .transpose()
    {
        Ok(auth) => auth,
        Err(message) => {
            errln!("core-agent: serve: {message}");
            return USAGE;
        }
    };
    let audit = match &args.audit {
        Some(settings) => match AuditLog::open(settings, secrets_of(auth.as_ref())) {
            Ok(log) => {
                let log = log.with_redactor(host_redactor.clone());
                if let AuditTarget::File(path) = &settings.target {
                    errln!("core-agent: audit trail: {}", path.display());
                }
                Some(Arc::new(log))
            }
            Err(e) => {
                errln!(
                    "core-agent: serve: {e}; create the directory, or give --audit-log (or gateway.audit in config.json) another file"
                );
                return FAILED;
            }
        },
        None => None,
    };
    let gateway = Gateway::new(host, options.with_audit(audit.clone()));
    let _metrics = match args.metrics_addr {
        Some(addr) => match serve_metrics(&gateway, addr).await {
            Ok(task) => Some(AbortOnDrop(task)),
            Err(code) => return code,
        },
        None => None,
    };
    let code = serve_on(&gateway, &args, auth, oauth, stop).await;
    // Every line of the trail is on disk before the process ends.
    if let Some(audit) = audit
        && !audit.flush(Duration::from_secs(5))
    {
        errln!("core-agent: serve: the audit trail could not be flushed within 5 s");
    }
    code
}

/// The static tokens' secrets, which the audit trail never writes.
fn secrets_of(auth: Option<&Auth>) -> Vec<String> {
    match auth {
        Some(Auth::Tokens(tokens)) => tokens.iter().map(|t| t.secret.clone()).collect(),
        _ => Vec::new(),
    }
}

/// Serves on stdio, or on HTTP with `auth` (and the identity provider's
/// tokens, with `oauth`), until the client leaves or a signal.
async fn serve_on(
    gateway: &Gateway,
    args: &ServeArgs,
    auth: Option<Auth>,
    oauth: Option<ResourceServer>,
    stop: &mut StopSignals,
) -> u8 {
    let (Some(addr), Some(auth)) = (args.http, auth) else {
        errln!(
            "core-agent: serving MCP on stdin/stdout as trust level {}",
            args.level.as_str()
        );
        return tokio::select! {
            r = gateway.serve_stdio(args.level) => match r {
                Ok(()) => 0,
                Err(e) => {
                    errln!("core-agent: serve: {e}");
                    FAILED
                }
            },
            signal = stop.next() => {
                let left = gateway.drain(args.drain).await;
                errln!(
                    "core-agent: {signal}: stopping ({} still in flight)",
                    crate::count(left, "call")
                );
                130
            }
        };
    };
    let mut http = match HttpOptions::new(auth)
        .with_oauth(oauth)
        .with_rate_limits(args.rate_limits.clone())
        .with_limits(&args.limits)
    {
        Ok(http) => http,
        Err(e) => {
            errln!("core-agent: serve: {}", limits_error(&e));
            return USAGE;
        }
    };
    http.allowed_hosts.extend(args.allow_hosts.iter().cloned());
    // A page on the machine itself may call a gateway bound to loopback;
    // one bound elsewhere takes only the origins it was given.
    if !addr.ip().is_loopback() {
        http.allowed_origins.clear();
    } else if args.limits.max_connections_per_address.is_none() {
        // Bound to loopback, every peer is the machine itself (its agents,
        // or a proxy in front): a cap per address would only cap them all.
        http.max_connections_per_address = http.max_connections;
    }
    http.allowed_origins
        .extend(args.allow_origins.iter().cloned());
    if let Some(host) = audience_host_refused(&http) {
        errln!(
            "core-agent: WARNING: gateway.oauth.audience names host `{host}`, which is not an allowed Host: clients that connect there get 403; add --allow-host {host}"
        );
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            errln!("core-agent: serve: cannot listen on {addr}: {e}");
            return FAILED;
        }
    };
    let local = listener.local_addr().map_or(addr, |a| a);
    errln!(
        "core-agent: serving MCP at http://{local}/mcp (sessions API at /sessions, health at /health)"
    );
    let (signalled, heard) = tokio::sync::oneshot::channel::<&'static str>();
    let shutdown = async move {
        let _ = heard.await;
    };
    let serving = gateway.serve_http(listener, http, shutdown, args.drain);
    tokio::pin!(serving);
    let code = tokio::select! {
        r = &mut serving => return match r {
            Ok(()) => 0,
            Err(e) => {
                errln!("core-agent: serve: {e}");
                FAILED
            }
        },
        signal = stop.next() => {
            errln!("core-agent: {signal}: draining the calls in flight, then stopping");
            let _ = signalled.send(signal);
            130
        }
    };
    if let Err(e) = serving.await {
        errln!("core-agent: serve: {e}");
    }
    code
}

/// The gateway's metrics, tracing and readiness: metrics when they are
/// served (`--http`, `--metrics-addr`) or exported, spans when exported,
/// and the servers marked `required`.
fn telemetry(
    options: GatewayOptions,
    config: &core_agent_mcp_config::Config,
    served: bool,
) -> GatewayOptions {
    let otel = crate::OTEL.get();
    let metrics = (served || otel.is_some()).then(|| Arc::new(core_agent_gateway::Metrics::new()));
    if let (Some(otel), Some(metrics)) = (otel, &metrics) {
        otel.export_metrics(metrics);
    }
    let required = config
        .servers
        .iter()
        .filter(|s| s.spec.required)
        .map(|s| s.name.clone())
        .collect();
    options
        .with_metrics(metrics)
        .with_tracing(otel.is_some_and(core_agent_gateway::Otel::traces))
        .with_required_servers(required)
}

/// Serves `GET /metrics` at `addr` on a task of its own.
async fn serve_metrics(
    gateway: &Gateway,
    addr: SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, u8> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            errln!("core-agent: serve: cannot listen on {addr} for metrics: {e}");
            return Err(FAILED);
        }
    };
    let local = listener.local_addr().map_or(addr, |a| a);
    errln!("core-agent: metrics at http://{local}/metrics");
    let gateway = gateway.clone();
    Ok(tokio::spawn(async move {
        if let Err(e) = gateway.serve_metrics(listener).await {
            errln!("core-agent: metrics listener: {e}");
        }
    }))
}

/// Aborts a task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The gateway's refusal of the session caps, worded with the flags that
/// set them beside the `config.json` keys.
fn limits_error(e: &LimitsError) -> String {
    match e {
        LimitsError::PerTokenAboveTotal { per_token, total } => format!(
            "the per-token session cap ({per_token}, gateway.max_sessions_per_token or --max-sessions-per-token) is larger than the total ({total}, gateway.max_sessions or --max-sessions); lower it, or raise the total"
        ),
        other => other.to_string(),
    }
}

/// Who may connect: nobody checked (`--no-auth`, loopback only), else the
/// tokens of `config.json` and the default one (`CORE_AGENT_GATEWAY_TOKEN`,
/// or generated and printed once when no other token is configured).
fn auth(
    args: &ServeArgs,
    addr: SocketAddr,
    tokens: &[GatewayToken],
    signed_in: bool,
) -> Result<Auth, String> {
    if args.no_auth {
        if !addr.ip().is_loopback() {
            return Err(format!(
                "--no-auth is only allowed on a loopback address, not {addr}"
            ));
        }
        errln!(
            "core-agent: WARNING: --no-auth: any local process can call every tool as trust level {} — for experiments only",
            args.level.as_str()
        );
        return Ok(Auth::Open(args.level));
    }
    let default = DefaultToken {
        env: TOKEN_ENV.to_owned(),
        trust_level: args.level,
    };
    match resolve_tokens(tokens, &default, &ProcessVars).map_err(|e| e.to_string())? {
        Some(auth) => Ok(auth),
        // Callers sign in with the identity provider: no token is needed.
        None if signed_in => Ok(Auth::Tokens(Vec::new())),
        None => {
            let (generated, secret) =
                Auth::generate(args.level).map_err(|e| format!("cannot make a token: {e}"))?;
            errln!(
                "core-agent: bearer token (trust level {}; shown once; set {TOKEN_ENV} to choose it): {secret}",
                args.level.as_str()
            );
            Ok(generated)
        }
    }
}

/// The identity provider's resource server, when `gateway.oauth` is set
/// and `--no-auth` is not; its keys fetched now, and where clients sign in
/// printed. A provider that cannot be reached is a warning: the keys are
/// fetched again when a token needs them.
async fn resource_server(
    args: &ServeArgs,
    env: &dyn Env,
) -> Result<Option<ResourceServer>, String> {
    let Some(config) = args.oauth.clone().filter(|_| !args.no_auth) else {
        return Ok(None);
    };
    let server = ResourceServer::new(config, env).map_err(|e| e.to_string())?;
    let issuer = server.config().issuer.clone();
    match server.warm_up().await {
        Ok(keys) => errln!(
            "core-agent: clients sign in at {issuer} ({keys} signing keys; resource {}, metadata {})",
            server.config().audience,
            server.metadata_url()
        ),
        Err(e) => errln!(
            "core-agent: WARNING: clients sign in at {issuer}, which cannot be reached now ({e}); its tokens are refused with 503 until it answers"
        ),
    }
    Ok(Some(server))
}

/// The host of `gateway.oauth.audience` (where clients connect), when the
/// listener's Host check would refuse it.
fn audience_host_refused(http: &HttpOptions) -> Option<String> {
    let audience = url::Url::parse(&http.oauth.as_ref()?.config().audience).ok()?;
    let host = audience
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let allowed = http.allowed_hosts.iter().any(|a| {
        a.trim_start_matches('[')
            .trim_end_matches(']')
            .eq_ignore_ascii_case(host)
    });
    (!allowed).then(|| host.to_owned())
}

/// The process environment, where a value that is not UTF-8 counts as
/// unset (so such a token is refused as not set, not read lossily).
struct ProcessVars;

impl Env for ProcessVars {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}
