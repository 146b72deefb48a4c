use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use core_agent_mcp_config::{Env, HttpSpec, Limits, Scope, ServerEntry, StdioSpec, Transport};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, Implementation,
    JsonObject, ServerResult, Tool,
};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{RoleClient, ServiceExt};

use crate::auth::{self, Auth, AuthClient, TokenSource};
use crate::child::ChildProcess;
use crate::handler::{Handler, ToolState};
use crate::{Decline, Elicitor, Error, Result, StartError};

/// How servers are started.
#[derive(Clone)]
pub struct StartOptions {
    /// Limit on one server's start: spawn or connect, initialize, list every page of tools.
    pub timeout: Duration,
    /// How long a stdio child gets between SIGTERM and SIGKILL at shutdown.
    pub kill_grace: Duration,
    /// Answers servers' elicitation requests.
    pub elicitor: Arc<dyn Elicitor>,
    /// The `clientInfo` sent in `initialize`.
    pub client_name: String,
    /// The `clientInfo` version.
    pub client_version: String,
    /// Where `core-agent mcp login` keeps OAuth credentials
    /// ([`CredentialsDir::user`](crate::oauth::CredentialsDir::user) for the
    /// CLI); `None`: every `auth.oauth` server needs a login.
    pub credentials: Option<crate::oauth::CredentialsDir>,
    /// Shows the authorization page of an OAuth scope step-up (a server's 403
    /// `insufficient_scope` mid-session); `None`: the call fails with the
    /// login command instead.
    pub browser: Option<Arc<dyn crate::oauth::Browser>>,
}

impl fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The elicitor is a trait object with no `Debug`.
        f.debug_struct("StartOptions")
            .field("timeout", &self.timeout)
            .field("kill_grace", &self.kill_grace)
            .field("client_name", &self.client_name)
            .field("client_version", &self.client_version)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_secs(3),
            elicitor: Arc::new(Decline),
            client_name: "core-agent".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            credentials: None,
            browser: None,
        }
    }
}

/// Whether a server came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Initialized and its tools listed.
    Connected,
    /// It failed to start; see [`Server::error`].
    Error,
    /// It was connected and has been shut down.
    Closed,
}

impl Status {
    /// `"connected"` or `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Connected => "connected",
            Status::Error => "error",
            Status::Closed => "closed",
        }
    }
}

/// A connection to one configured server, or the reason there is none.
pub struct Server {
    name: String,
    scope: Scope,
    limits: Limits,
    transport: &'static str,
    auth: Auth,
    elapsed: Duration,
    state: State,
    /// `shutdown` has begun: no new call starts.
    closed: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The live connection (rmcp service, child process) is shown as its status.
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("transport", &self.transport)
            .field("auth", &self.auth)
            .field("elapsed", &self.elapsed)
            .field("status", &self.status())
            .field("error", &self.error())
            .finish_non_exhaustive()
    }
}

enum State {
    Connected(Box<Connection>),
    Failed(StartError),
}

/// A live connection. Calls go through a clone of the peer, so the
/// connection can be shut down through a shared reference.
struct Connection {
    peer: rmcp::Peer<RoleClient>,
    /// Taken by `shutdown`.
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    tools: Arc<ToolState>,
    /// Taken by `shutdown`.
    child: tokio::sync::Mutex<Option<ChildProcess>>,
    /// The child's first non-protocol stdout line, readable without the child.
    noise: Option<Arc<std::sync::Mutex<Option<String>>>>,
    server_info: Option<Implementation>,
    kill_grace: Duration,
    /// At most `max_concurrent_calls` calls in flight.
    slots: Arc<tokio::sync::Semaphore>,
    /// Where each call's progress updates go.
    progress: crate::handler::ProgressSinks,
}

impl Server {
    /// The server's key in `mcp.json`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it was configured.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// `"stdio"` or `"http"`.
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// How its requests are authenticated (`none`, `static`, or the token
    /// source's description); never a secret.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// How long the start took (until connected or failed).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Connected or error.
    pub fn status(&self) -> Status {
        match self.state {
            State::Failed(_) => Status::Error,
            State::Connected(_) if self.is_closed() => Status::Closed,
            State::Connected(_) => Status::Connected,
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The live connection, unless the server failed or was shut down.
    fn connection(&self) -> Option<&Connection> {
        match &self.state {
            State::Connected(c) if !self.is_closed() => Some(c),
            _ => None,
        }
    }

    /// Why the server is not connected.
    pub fn error(&self) -> Option<&StartError> {
        match &self.state {
            State::Failed(e) => Some(e),
            State::Connected(_) => None,
        }
    }

    /// The tools the server lists now (kept current on `tools/list_changed`).
    pub fn tools(&self) -> Vec<Tool> {
        self.connection()
            .map(|c| c.tools.tools())
            .unwrap_or_default()
    }

    /// The first line a stdio server wrote to stdout that was not a protocol
    /// message (such lines are dropped; a well-behaved server writes none).
    pub fn stdout_noise(&self) -> Option<String> {
        self.connection()
            .and_then(|c| c.noise.as_ref())
            .and_then(|n| n.lock().ok().and_then(|n| n.clone()))
    }

    /// Things about the server the operator should hear (for example that
    /// its tool list was cut at `max_pages`).
    pub fn warnings(&self) -> Vec<String> {
        match self.connection() {
            Some(c) if c.tools.truncated() => vec![format!(
                "{}: stopped listing tools after {} pages (max_pages); tools on later pages are not published",
                self.name, self.limits.max_pages
            )],
            _ => Vec::new(),
        }
    }

    /// The server's limits, from its config.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// What the server said about itself in `initialize`.
    pub fn server_info(&self) -> Option<Implementation> {
        self.connection().and_then(|c| c.server_info.clone())
    }

    /// Calls `tool` (the server's own name) with `arguments`. When `timeout`
    /// passes first, the request is cancelled on the server.
    ///
    /// A tool that reports failure comes back as `Ok` with `is_error: Some(true)`;
    /// `Err` means the call itself failed (JSON-RPC error, transport, timeout).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<CallToolResult> {
        self.call_tool_with_progress(tool, arguments, timeout, None)
            .await
    }

    /// [`Server::call_tool`], passing each progress update the server sends
    /// about this call to `progress`.
    pub async fn call_tool_with_progress(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
        progress: Option<&crate::ProgressSink>,
    ) -> Result<CallToolResult> {
        let Some(conn) = self.connection() else {
            return Err(Error::NotConnected {
                server: self.name.clone(),
            });
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Wait for a slot first: the timeout covers the call itself.
        let Ok(_slot) = conn.slots.clone().acquire_owned().await else {
            return Err(Error::NotConnected {
                server: self.name.clone(),
            });
        };
        let failed = |e: rmcp::ServiceError| Error::Call {
            server: self.name.clone(),
            tool: tool.to_owned(),
            message: e.to_string(),
        };
        let timed_out = || Error::Timeout {
            server: self.name.clone(),
            tool: tool.to_owned(),
            after: timeout,
        };
        let Some(sink) = progress else {
            return match tokio::time::timeout(timeout, conn.peer.call_tool(params)).await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(e)) => Err(failed(e)),
                Err(_) => Err(timed_out()),
            };
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = conn
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(failed)?;
        let token = handle.progress_token.clone();
        if let Ok(mut sinks) = conn.progress.lock() {
            sinks.insert(token.clone(), sink.clone());
        }
        // Unregistered however the call ends, dropped mid-way included.
        let _registered = Unregister(&conn.progress, token);
        let outcome = tokio::time::timeout(timeout, handle.await_response()).await;
        // Notifications are handled on their own tasks: let the last ones land.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        match outcome {
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => Err(failed(rmcp::ServiceError::UnexpectedResponse)),
            Ok(Err(e)) => Err(failed(e)),
            Err(_) => Err(timed_out()),
        }
    }

    /// Closes the connection; a stdio child gets EOF, then SIGTERM, then
    /// SIGKILL after the kill grace, with its whole process group.
    /// Calls in flight fail; later calls are refused as not connected.
    pub async fn shutdown(&self) {
        let State::Connected(conn) = &self.state else {
            return;
        };
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(mut service) = conn.service.lock().await.take() {
            let _ = service.close_with_timeout(Duration::from_secs(1)).await;
        }
        if let Some(mut child) = conn.child.lock().await.take() {
            child.terminate(conn.kill_grace).await;
        }
    }
}

/// Hears about a server as its start ends (connected or failed).
pub type OnReady = Arc<dyn Fn(&Server) + Send + Sync>;

/// Every configured server, in config order.
#[derive(Debug)]
pub struct Servers {
    /// One slot per configured server, in config order, filled when its
    /// start ends (connected or failed).
    slots: Vec<Slot>,
    /// Bumped whenever a server's start ends, its tool list changes, or the
    /// servers stop.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

#[derive(Debug)]
struct Slot {
    name: String,
    server: Arc<std::sync::OnceLock<Server>>,
    /// The start in flight; aborting it drops the start, which kills a
    /// stdio child's process group.
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Slot {
    /// Aborts the start if it is still in flight, and hands back its task.
    fn abort(&self) -> Option<tokio::task::JoinHandle<()>> {
        let task = self.task.lock().ok()?.take()?;
        task.abort();
        Some(task)
    }
}

impl Drop for Servers {
    /// Starts still in flight are dropped, and their children with them.
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.abort();
        }
    }
}

impl Servers {
    /// Starts every server concurrently and waits until each has connected
    /// or failed. Each start has its own timeout, and a server that fails
    /// ends up with [`Status::Error`] without affecting the others.
    /// `on_ready` is called as each one finishes starting, in the order they
    /// finish.
    ///
    /// `${env:NAME}` placeholders are expanded from `env` here, at start.
    pub async fn start(
        entries: &[ServerEntry],
        env: &dyn Env,
        options: &StartOptions,
        on_ready: &(dyn Fn(&Server) + Sync),
    ) -> Servers {
        let servers = Servers::launch(entries, env, options, None);
        let mut heard = vec![false; servers.slots.len()];
        let mut changes = servers.subscribe();
        loop {
            for (i, slot) in servers.slots.iter().enumerate() {
                if let (false, Some(server)) = (heard[i], slot.server.get()) {
                    heard[i] = true;
                    on_ready(server);
                }
            }
            if heard.iter().all(|h| *h) || changes.changed().await.is_err() {
                break;
            }
        }
        servers
    }

    /// Starts every server concurrently, each on a task of its own, and
    /// returns at once: a server appears in [`Servers::iter`] when its start
    /// ends. [`Servers::wait`] and [`Servers::wait_all`] wait for starts to
    /// end; [`Servers::subscribe`] wakes as each one does; `on_ready`, when
    /// given, hears about each server as its start ends, on the start's task.
    /// Must be called within a Tokio runtime.
    pub fn launch(
        entries: &[ServerEntry],
        env: &dyn Env,
        options: &StartOptions,
        on_ready: Option<OnReady>,
    ) -> Servers {
        let changed = Arc::new(tokio::sync::watch::channel(0).0);
        let slots = entries
            .iter()
            .map(|entry| {
                let (launch, auth) = Launch::prepare(entry, env, options);
                let cell = Arc::new(std::sync::OnceLock::new());
                let name = entry.name.clone();
                let (entry, options) = (entry.clone(), options.clone());
                let (filled, changed) = (cell.clone(), changed.clone());
                let on_ready = on_ready.clone();
                let task = tokio::spawn(async move {
                    let server = start_one(&entry, launch, auth, &options, changed.clone()).await;
                    if filled.set(server).is_ok()
                        && let (Some(on_ready), Some(server)) = (on_ready, filled.get())
                    {
                        on_ready(server);
                    }
                    changed.send_modify(|v| *v += 1);
                });
                Slot {
                    name,
                    server: cell,
                    task: std::sync::Mutex::new(Some(task)),
                }
            })
            .collect();
        Servers { slots, changed }
    }

    /// Waits until the start of each server in `names` has ended (names
    /// that are not configured are skipped).
    pub async fn wait(&self, names: &[&str]) {
        let mut changes = self.subscribe();
        loop {
            let pending = self
                .slots
                .iter()
                .any(|s| names.contains(&s.name.as_str()) && s.server.get().is_none());
            if !pending || changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits until every server's start has ended.
    pub async fn wait_all(&self) {
        let names: Vec<&str> = self.slots.iter().map(|s| s.name.as_str()).collect();
        self.wait(&names).await;
    }

    /// The servers whose start has ended, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Server> {
        self.slots.iter().filter_map(|s| s.server.get())
    }

    /// The server at `index` in config order, once its start has ended.
    pub fn at(&self, index: usize) -> Option<&Server> {
        self.slots.get(index).and_then(|s| s.server.get())
    }

    /// The index in config order of the server called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.slots.iter().position(|s| s.name == name)
    }

    /// Whether every server's start has ended.
    pub fn all_started(&self) -> bool {
        self.slots.iter().all(|s| s.server.get().is_some())
    }

    /// The names of the servers whose start has not ended yet.
    pub fn starting(&self) -> Vec<&str> {
        self.slots
            .iter()
            .filter(|s| s.server.get().is_none())
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The server called `name`, once its start has ended.
    pub fn get(&self, name: &str) -> Option<&Server> {
        self.iter().find(|s| s.name == name)
    }

    /// Shuts every server down concurrently; starts still in flight are
    /// dropped (a stdio child's process group is killed).
    pub async fn shutdown(&self) {
        // A start that ended has nothing left to abort; one still in flight
        // has dropped its child (and killed its group) once it is joined.
        let aborted: Vec<_> = self.slots.iter().filter_map(Slot::abort).collect();
        for task in aborted {
            let _ = task.await;
        }
        futures::future::join_all(self.iter().map(Server::shutdown)).await;
        self.changed.send_modify(|v| *v += 1);
    }

    /// How many times the servers' tools have changed (a start ended, a
    /// tool list kept after `tools/list_changed`, or a shutdown). Equal
    /// versions mean equal tools.
    pub fn tools_version(&self) -> u64 {
        *self.changed.borrow()
    }

    /// A receiver that wakes whenever [`Servers::tools_version`] changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// What a server needs to start, with placeholders expanded.
enum Launch {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// Where the `Authorization` comes from, when `auth` is set.
        source: Option<Arc<dyn TokenSource>>,
    },
    Unsupported(StartError),
}

impl Launch {
    /// What to start, and how its requests are authenticated.
    fn prepare(entry: &ServerEntry, env: &dyn Env, options: &StartOptions) -> (Launch, Auth) {
        match &entry.spec.transport {
            Transport::Stdio(StdioSpec {
                command,
                args,
                env: vars,
            }) => (
                Launch::Stdio {
                    command: command.clone(),
                    args: args.clone(),
                    env: vars
                        .iter()
                        .map(|(k, t)| (k.clone(), t.expand(env).value))
                        .collect(),
                },
                Auth::None,
            ),
            Transport::Http(HttpSpec { url, headers, .. }) => {
                let mut headers: Vec<(String, String)> = headers
                    .iter()
                    .map(|(k, t)| (k.clone(), t.expand(env).value))
                    .collect();
                let is_authorization = |name: &str| name.eq_ignore_ascii_case("authorization");
                let source = match auth::source_for(entry, env, options) {
                    Ok(source) => source,
                    Err(e @ StartError::Auth(crate::AuthError::LoginNeeded { .. })) => {
                        let status = crate::oauth::OAuthStatus::LoginNeeded.describe(&entry.name);
                        return (
                            Launch::Unsupported(e),
                            Auth::Source(format!("oauth ({status})")),
                        );
                    }
                    Err(e) => return (Launch::Unsupported(e), Auth::None),
                };
                let auth = match &source {
                    // The source's Authorization wins (spec: "Header precedence").
                    Some(source) => {
                        headers.retain(|(name, _)| !is_authorization(name));
                        Auth::Source(source.describe())
                    }
                    None if headers.iter().any(|(name, _)| is_authorization(name)) => Auth::Static,
                    None => Auth::None,
                };
                let launch = Launch::Http {
                    url: url.clone(),
                    headers,
                    source,
                };
                (launch, auth)
            }
        }
    }
}

async fn start_one(
    entry: &ServerEntry,
    launch: Launch,
    auth: Auth,
    options: &StartOptions,
    changed: Arc<tokio::sync::watch::Sender<u64>>,
) -> Server {
    let started = Instant::now();
    let tools = Arc::new(ToolState::new(changed));
    let progress = crate::handler::ProgressSinks::default();
    let handler = Handler {
        server: entry.name.clone(),
        progress: progress.clone(),
        elicitor: options.elicitor.clone(),
        client_info: Implementation::new(
            options.client_name.clone(),
            options.client_version.clone(),
        ),
        tools: tools.clone(),
        max_pages: entry.spec.limits.max_pages,
    };
    let state = match launch {
        Launch::Unsupported(e) => Err(e),
        Launch::Stdio { command, args, env } => {
            start_stdio(entry, handler, &command, &args, &env, options).await
        }
        Launch::Http {
            url,
            headers,
            source,
        } => start_http(handler, &url, &headers, source, options).await,
    };
    let state = match state {
        Ok((service, child)) => State::Connected(Box::new(Connection {
            peer: service.peer().clone(),
            server_info: service.peer_info().and_then(|p| p.server_info.clone()),
            service: tokio::sync::Mutex::new(Some(service)),
            tools,
            noise: child.as_ref().map(ChildProcess::noise_handle),
            child: tokio::sync::Mutex::new(child),
            kill_grace: options.kill_grace,
            slots: Arc::new(tokio::sync::Semaphore::new(
                entry.spec.limits.max_concurrent_calls.max(1),
            )),
            progress,
        })),
        Err(e) => State::Failed(e),
    };
    Server {
        name: entry.name.clone(),
        scope: entry.scope,
        limits: entry.spec.limits,
        transport: entry.spec.transport.kind(),
        auth,
        elapsed: started.elapsed(),
        state,
        closed: std::sync::atomic::AtomicBool::new(false),
    }
}

/// Removes a call's progress sink when the call ends.
struct Unregister<'a>(
    &'a crate::handler::ProgressSinks,
    rmcp::model::ProgressToken,
);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        if let Ok(mut sinks) = self.0.lock() {
            sinks.remove(&self.1);
        }
    }
}

/// The tools a server listed, and whether the list was cut at `max_pages`.
pub(crate) type Listed = (Vec<Tool>, bool);

type Started =
    std::result::Result<(RunningService<RoleClient, Handler>, Option<ChildProcess>), StartError>;

/// Lists the server's tools, following at most `max_pages` pages.
pub(crate) async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
    max_pages: usize,
) -> std::result::Result<Listed, rmcp::ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..max_pages.max(1) {
        let page = peer
            .list_tools(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
            ))
            .await?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((tools, false)),
        }
    }
    Ok((tools, true))
}

/// Runs the handshake (initialize, then up to `max_pages` pages of
/// tools/list, kept in the handler's tool state) under `timeout`.
async fn handshake<T, E, A>(
    handler: Handler,
    transport: T,
    timeout: Duration,
) -> Option<std::result::Result<RunningService<RoleClient, Handler>, HandshakeError>>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let run = async {
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| HandshakeError::Init(Box::new(e)))?;
        let max_pages = service.service().max_pages;
        // A list_changed that arrives while this listing is in flight starts
        // a newer one, which this one must not overwrite.
        let since = service.service().tools.begin();
        let listed = list_tools(service.peer(), max_pages)
            .await
            .map_err(HandshakeError::List)?;
        service.service().tools.store(since, listed);
        Ok(service)
    };
    tokio::time::timeout(timeout, run).await.ok()
}

async fn start_stdio(
    entry: &ServerEntry,
    handler: Handler,
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    options: &StartOptions,
) -> Started {
    let (mut child, stdout, stdin) = ChildProcess::spawn(&entry.name, command, args, env)?;
    let error = match handshake(handler, (stdout, stdin), options.timeout).await {
        Some(Ok(service)) => return Ok((service, Some(child))),
        Some(Err(e)) => {
            // A child that died explains the failure better than the broken pipe did.
            let exited = match child.exited() {
                Some(status) => Some(status),
                None => child.wait_exit(Duration::from_millis(200)).await,
            };
            let stderr = child.stderr_lines().await;
            let stdout = child.stdout_noise();
            match (exited, e) {
                (Some(status), _) => StartError::Exited {
                    status,
                    stdout,
                    stderr,
                },
                (None, HandshakeError::Init(e)) => StartError::Initialize {
                    message: init_message(&e, None, &entry.name),
                    stdout,
                    stderr,
                },
                (None, HandshakeError::List(e)) => StartError::ListTools {
                    message: e.to_string(),
                },
            }
        }
        None => StartError::Timeout {
            after: options.timeout,
            stdout: child.stdout_noise(),
            stderr: child.stderr_lines().await,
        },
    };
    child.terminate(options.kill_grace).await;
    Err(error)
}

async fn start_http(
    handler: Handler,
    url: &str,
    headers: &[(String, String)],
    source: Option<Arc<dyn TokenSource>>,
    options: &StartOptions,
) -> Started {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header_name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            StartError::InvalidHeader {
                name: name.clone(),
                part: "name",
            }
        })?;
        let header_value =
            http::HeaderValue::from_str(value).map_err(|_| StartError::InvalidHeader {
                name: name.clone(),
                part: "value",
            })?;
        custom.insert(header_name, header_value);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    let described = source.as_ref().map(|s| s.describe());
    let name = handler.server.clone();
    let outcome = match source {
        None => {
            let transport = StreamableHttpClientTransport::from_config(config);
            handshake(handler, transport, options.timeout).await
        }
        Some(source) => {
            // One token before anything else, so a misconfiguration fails
            // this server's start with the source's own words.
            let first = tokio::time::timeout(options.timeout, source.token()).await;
            match first {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(StartError::Auth(e)),
                Err(_) => {
                    return Err(StartError::Timeout {
                        after: options.timeout,
                        stdout: None,
                        stderr: Vec::new(),
                    });
                }
            }
            // No idle pooling, as rmcp's own client; and no redirects at all,
            // so a token never follows one to another origin.
            let inner = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| StartError::Initialize {
                    message: format!("cannot build the HTTP client: {e}"),
                    stdout: None,
                    stderr: Vec::new(),
                })?;
            let client = AuthClient::new(inner, source);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            handshake(handler, transport, options.timeout).await
        }
    };
    match outcome {
        Some(Ok(service)) => Ok((service, None)),
        Some(Err(HandshakeError::Init(e))) => match auth::auth_error_in(&e) {
            Some(auth) => Err(StartError::Auth(auth)),
            None => Err(StartError::Initialize {
                message: init_message(&e, described.as_deref(), &name),
                stdout: None,
                stderr: Vec::new(),
            }),
        },
        Some(Err(HandshakeError::List(e))) => Err(StartError::ListTools {
            message: e.to_string(),
        }),
        None => Err(StartError::Timeout {
            after: options.timeout,
            stdout: None,
            stderr: Vec::new(),
        }),
    }
}

enum HandshakeError {
    Init(Box<ClientInitializeError>),
    List(rmcp::ServiceError),
}

/// The initialize error in words a person can act on: the HTTP status and
/// `WWW-Authenticate` challenge, or the innermost cause of a connection
/// failure, rather than rmcp's type names.
fn init_message(e: &ClientInitializeError, source: Option<&str>, server: &str) -> String {
    if let (Some(challenge), Some(source)) = (e.auth_challenge(), source) {
        return format!(
            "the server refused the token from {source} (HTTP 401, WWW-Authenticate: {challenge}), also after a fresh one; check that these credentials may use this server (scopes, roles)"
        );
    }
    if let Some(challenge) = e.auth_challenge() {
        return format!(
            "the server requires authorization (HTTP 401, WWW-Authenticate: {challenge}); if it supports OAuth, log in with `core-agent mcp login {server}`, else add a token to `headers`, e.g. \"Authorization\": \"Bearer ${{TOKEN}}\""
        );
    }
    let text = e.to_string();
    if let Some(i) = text.find("unexpected server response: ") {
        let rest = &text[i + "unexpected server response: ".len()..];
        let status = rest
            .split(", when")
            .next()
            .unwrap_or(rest)
            .trim_end_matches([':', ' ']);
        let hint = if status.contains(" 401") || status.contains(" 403") {
            "; the server wants credentials: add them to `headers`"
        } else if status.contains(" 404") {
            "; check the path of `url` (streamable HTTP endpoints usually end in /mcp)"
        } else {
            ""
        };
        return format!("the server answered {status}{hint}");
    }
    // A connection failure: the innermost cause says the most
    // ("Connection refused (os error 111)", "dns error: …").
    if let ClientInitializeError::TransportError { error, .. } = e
        && let Some(StreamableHttpError::Client(client)) = error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        let mut cause: &dyn std::error::Error = client;
        while let Some(next) = cause.source() {
            cause = next;
        }
        return format!("cannot reach the server: {cause}");
    }
    let text = match text.find("] error: ") {
        Some(i) => text[i + "] error: ".len()..].to_owned(),
        None => text,
    };
    text.split(", when send")
        .next()
        .unwrap_or_default()
        .to_owned()
}
