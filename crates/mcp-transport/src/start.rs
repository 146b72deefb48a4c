//! Starting a server, and starting it again: what to start, with
//! placeholders expanded; the first start; the task that restarts a
//! server whose connection ended; the retries of a first start that failed.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Instant;

use core_agent_mcp_config::{AuthSpec, Env, HttpSpec, ServerEntry, StdioSpec, Transport};
use rmcp::model::Implementation;

use crate::auth::{self, Auth, AuthError, TokenSource};
use crate::behalf::TokenExchange;
use crate::connect::{Started, start_http, start_stdio};
use crate::environ;
use crate::error::StartError;
use crate::error::humanize;
use crate::handler::Handler;
use crate::live::{Connection, Live};
use crate::options::StartOptions;
use crate::restart::{Health, RestartPolicy, window};
use crate::server::{OnReady, Server};
use crate::tools::ToolState;

/// What a server needs to start, with placeholders expanded.
#[derive(Clone)]
enum Launch {
    Stdio {
        command: String,
        args: Vec<String>,
        /// The whole environment (see [`crate::environ`]).
        env: BTreeMap<OsString, OsString>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// Where the `Authorization` comes from, when `auth` is set.
        source: Option<Arc<dyn TokenSource>>,
        /// `auth.token_exchange`: each call carries its caller's token.
        exchange: Option<Arc<TokenExchange>>,
    },
    Unsupported(StartError),
}

impl Launch {
    /// What to start, and how its requests are authenticated.
    fn prepare(entry: &ServerEntry, env: &dyn Env, options: &StartOptions) -> (Launch, Auth) {
        match &entry.spec.transport {
            Transport::Stdio(StdioSpec { env: vars, .. }) => {
                let (command, args) = entry.launch_command(env).unwrap_or_default();
                let own: BTreeMap<String, String> = vars
                    .iter()
                    .map(|(k, t)| (k.clone(), t.expand(env).value))
                    .collect();
                let mut env = environ::environment(
                    entry,
                    std::env::vars_os(),
                    &own,
                    &options.env_inherit,
                    &options.withheld,
                );
                env.extend(options.set_env.iter().map(|(k, v)| (k.into(), v.into())));
                let command = environ::program(&command, &env, std::env::var_os("PATH").as_deref());
                (Launch::Stdio { command, args, env }, Auth::None)
            }
            Transport::Http(HttpSpec { headers, auth, .. }) => {
                let url = entry.launch_url(env).unwrap_or_default();
                let exchange = match auth {
                    Some(AuthSpec::TokenExchange(spec)) => {
                        Some(Arc::new(TokenExchange::new(&entry.name, &url, spec, env)))
                    }
                    _ => None,
                };
                let mut headers: Vec<(String, String)> = headers
                    .iter()
                    .map(|(k, t)| (k.clone(), t.expand(env).value))
                    .collect();
                let is_authorization = |name: &str| name.eq_ignore_ascii_case("authorization");
                let source = match auth::source_for(entry, env, options) {
                    Ok(source) => source,
                    #[cfg(feature = "oauth")]
                    Err(e @ StartError::Auth(AuthError::LoginNeeded { .. })) => {
                        let status = crate::oauth::OAuthStatus::LoginNeeded.describe();
                        return (
                            Launch::Unsupported(e),
                            Auth::Source {
                                kind: "oauth".to_owned(),
                                detail: Some(status),
                            },
                        );
                    }
                    Err(e) => return (Launch::Unsupported(e), Auth::None),
                };
                let auth = match (&source, &exchange) {
                    // Calls carry their callers' tokens; the connection, `headers`.
                    (None, Some(exchange)) => Auth::Source {
                        kind: "token-exchange".to_owned(),
                        detail: Some(exchange.describe()),
                    },
                    // The source's Authorization wins (spec: "Header precedence").
                    (Some(source), _) => {
                        headers.retain(|(name, _)| !is_authorization(name));
                        Auth::of(source.as_ref())
                    }
                    (None, None) if headers.iter().any(|(name, _)| is_authorization(name)) => {
                        Auth::Static
                    }
                    (None, None) => Auth::None,
                };
                let launch = Launch::Http {
                    url,
                    headers,
                    source,
                    exchange,
                };
                (launch, auth)
            }
        }
    }
}

/// Everything needed to start a server, again after a crash.
pub(crate) struct Relaunch {
    entry: ServerEntry,
    launch: Launch,
    /// How its requests are authenticated, for reports.
    auth: Auth,
    options: StartOptions,
}

impl Relaunch {
    /// What it takes to start `entry` under `options`, with its
    /// placeholders expanded from `env` (once, now).
    pub(crate) fn new(entry: &ServerEntry, env: &dyn Env, options: &StartOptions) -> Relaunch {
        let (launch, auth) = Launch::prepare(entry, env, options);
        Relaunch {
            entry: entry.clone(),
            launch,
            auth,
            options: options.clone(),
        }
    }

    fn name(&self) -> &str {
        &self.entry.name
    }

    /// `auth.token_exchange`, when the server's calls carry their callers' tokens.
    fn exchange(&self) -> Option<Arc<TokenExchange>> {
        match &self.launch {
            Launch::Http { exchange, .. } => exchange.clone(),
            _ => None,
        }
    }

    fn policy(&self) -> Option<RestartPolicy> {
        self.options.restart
    }

    /// A client handler that keeps its tools and progress sinks in `tools`
    /// and `progress` (the same ones across restarts).
    fn handler(&self, tools: Arc<ToolState>, progress: crate::handler::ProgressSinks) -> Handler {
        let asking = Arc::new(crate::elicit::AskClock::default());
        Handler {
            server: self.entry.name.clone(),
            progress,
            elicitor: Arc::new(crate::elicit::Clocked {
                inner: self.options.elicitor.clone(),
                clock: asking.clone(),
            }),
            asking,
            client_info: Implementation::new(
                self.options.client_name.clone(),
                self.options.client_version.clone(),
            ),
            tools,
            max_pages: self.entry.spec.limits.max_pages,
            relisting: Arc::default(),
            relist_timeout: self.options.timeout,
            notices: self.options.notices.clone(),
            sampler: self.options.sampler.clone(),
            roots: self.options.roots.clone(),
            changes: Arc::default(),
        }
    }

    /// Spawns or connects, initializes and lists tools, into `handler`.
    async fn start(&self, handler: Handler) -> Started {
        match self.launch.clone() {
            Launch::Unsupported(e) => Err(e),
            Launch::Stdio { command, args, env } => {
                start_stdio(&self.entry, handler, &command, &args, &env, &self.options).await
            }
            Launch::Http {
                url,
                headers,
                source,
                exchange,
            } => {
                let max_message = self.entry.spec.limits.max_message_bytes;
                let per_call = exchange.is_some();
                start_http(
                    handler,
                    &url,
                    &headers,
                    (source, per_call),
                    max_message,
                    &self.options,
                )
                .await
            }
        }
    }

    /// Starts the server again for `live`: same tools state, same sinks.
    async fn connect(&self, live: &Live) -> std::result::Result<Connection, StartError> {
        let handler = self.handler(live.tools.clone(), live.progress.clone());
        let (service, child) = self.start(handler).await?;
        Ok(Connection::new(service, child, self.options.kill_grace))
    }
}

/// One server's start, on a task of its own: the server goes into `filled`
/// and `on_ready` hears about it as the start ends, and `changed` moves;
/// then a connected server is watched, and a failed one is started again
/// when a restart policy is set.
pub(crate) async fn run(
    relaunch: Relaunch,
    filled: Arc<std::sync::OnceLock<Server>>,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    on_ready: Option<OnReady>,
) {
    let began = Instant::now();
    let started = start_one(&relaunch, changed.clone()).await;
    let elapsed = began.elapsed();
    let retry = match &started {
        Err(e) if retryable(e) => relaunch.policy(),
        _ => None,
    };
    let connected = started.as_ref().ok().cloned();
    let late = Arc::default();
    let server = Server::new(
        &relaunch.entry,
        relaunch.auth.clone(),
        elapsed,
        started,
        Arc::clone(&late),
    );
    let relaunch = match connected {
        Some(live) => {
            watch_live(&live, relaunch);
            None
        }
        None => Some(relaunch),
    };
    if filled.set(server).is_ok()
        && let (Some(on_ready), Some(server)) = (on_ready, filled.get())
    {
        on_ready(server);
    }
    changed.send_modify(|v| *v += 1);
    // A long-lived run tries a failed first start again, as it restarts a
    // server that died (the task is aborted at shutdown, with any start in
    // flight).
    if let (Some(policy), Some(relaunch)) = (retry, relaunch) {
        retry_first_start(relaunch, policy, &late, &changed).await;
    }
}

/// Starts the task that watches `live`'s connection and restarts it.
fn watch_live(live: &Arc<Live>, relaunch: Relaunch) {
    if let Ok(mut monitor) = live.monitor.lock() {
        *monitor = Some(tokio::spawn(watch(live.clone(), relaunch)));
    }
}

/// Whether a failed first start may succeed later by itself: not when the
/// command does not exist, a header is invalid or a person must log in.
fn retryable(e: &StartError) -> bool {
    !matches!(
        e,
        StartError::NotFound { .. }
            | StartError::InvalidHeader { .. }
            | StartError::Unsupported { .. }
            | StartError::Auth(AuthError::LoginNeeded { .. })
    )
}

/// Starts a server whose first start failed again, paced like restarts
/// (`policy`: 1 s, 2 s, 4 s …, at most `max_restarts` tries within the
/// window); once one succeeds the server is `late`, watched and restarted
/// like any other, and the tools version moves so catalogs are rebuilt.
async fn retry_first_start(
    relaunch: Relaunch,
    policy: RestartPolicy,
    late: &std::sync::OnceLock<Arc<Live>>,
    changed: &Arc<tokio::sync::watch::Sender<u64>>,
) {
    let began = Instant::now();
    let mut failed = 1;
    for tried in 0..policy.max_restarts {
        let delay = policy.delay(tried);
        if began.elapsed().saturating_add(delay) > policy.window {
            break;
        }
        tokio::time::sleep(delay).await;
        match start_one(&relaunch, changed.clone()).await {
            Ok(live) => {
                tracing::info!(server = %relaunch.name(), "started after {failed} failed starts");
                watch_live(&live, relaunch);
                let _ = late.set(live);
                changed.send_modify(|v| *v += 1);
                return;
            }
            Err(e) => {
                failed += 1;
                tracing::warn!(server = %relaunch.name(), "starting it again failed: {e}");
            }
        }
    }
    tracing::warn!(
        server = %relaunch.name(),
        "it failed to start {failed} times, so it stays in error"
    );
}

/// Starts the server once, its tools kept in a new state that reports
/// changes on `changed`: connected, or why not.
async fn start_one(
    relaunch: &Relaunch,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
) -> std::result::Result<Arc<Live>, StartError> {
    let tools = Arc::new(ToolState::new(changed));
    let progress = crate::handler::ProgressSinks::default();
    let handler = relaunch.handler(tools.clone(), progress.clone());
    let (service, child) = relaunch.start(handler).await?;
    let conn = Connection::new(service, child, relaunch.options.kill_grace);
    let max_calls = relaunch.entry.spec.limits.max_concurrent_calls;
    Ok(Arc::new(
        Live::new(conn, tools, progress, max_calls).with_exchange(relaunch.exchange()),
    ))
}

/// Watches a connected server: when its connection ends and it was not
/// shut down, says why (to calls in flight and in its status), then
/// restarts it under `policy`, or leaves it down when there is none or the
/// limit is reached. Runs until the server is shut down or stays down.
async fn watch(live: Arc<Live>, relaunch: Relaunch) {
    let mut restarts: VecDeque<Instant> = VecDeque::new();
    loop {
        let conn = live.connection();
        let ending = conn.ended().await;
        if live.is_closed() {
            return;
        }
        tracing::warn!(server = %relaunch.name(), "the server {ending}");
        let Some(policy) = relaunch.policy() else {
            live.set_health(Health::Down(ending.to_string()));
            conn.report(ending, "");
            return;
        };
        // What the status says: how it ended, what happened since, then its stderr.
        let stderr = crate::error::stderr_suffix(&ending.stderr);
        let how = ending.how.clone();
        let mut since = String::new();
        let mut first = Some((conn, ending));
        loop {
            let now = Instant::now();
            while restarts
                .front()
                .is_some_and(|t| now.duration_since(*t) > policy.window)
            {
                restarts.pop_front();
            }
            if restarts.len() >= policy.max_restarts {
                let gave_up = format!(
                    "it was restarted {} times within {}, so it stays down",
                    restarts.len(),
                    window(policy.window)
                );
                live.set_health(Health::Down(format!("{how}{since}; {gave_up}{stderr}")));
                if let Some((conn, ending)) = first.take() {
                    conn.report(ending, &format!(" ({gave_up})"));
                }
                return;
            }
            let delay = policy.delay(restarts.len());
            live.set_health(Health::Restarting(format!("{how}{since}{stderr}")));
            if let Some((conn, ending)) = first.take() {
                conn.report(ending, &format!(" (restarting it in {})", humanize(delay)));
            }
            tokio::time::sleep(delay).await;
            restarts.push_back(Instant::now());
            match relaunch.connect(&live).await {
                Ok(conn) => {
                    tracing::info!(server = %relaunch.name(), "restarted");
                    live.replace(conn);
                    live.set_health(Health::Up);
                    break;
                }
                Err(e) => since = format!("; restarting it failed: {e}"),
            }
            if live.is_closed() {
                return;
            }
        }
    }
}
