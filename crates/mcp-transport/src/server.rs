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
use crate::restart::{Ending, Health, RestartPolicy};
use crate::supervise::{Ended, Supervisor};
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
    /// Start each stdio server under this supervisor (see
    /// [`crate::supervise`]), so that nothing it starts outlives the host,
    /// even a host killed with `kill -9`. `None` (the default): spawn the
    /// server directly, in a process group of its own.
    pub supervisor: Option<Supervisor>,
    /// Start a server again when its connection ends (a crash), with
    /// backoff. `None` (the default): it stays down, for one-shot use.
    pub restart: Option<RestartPolicy>,
    /// Where `core-agent mcp login` keeps OAuth credentials
    /// ([`CredentialsDir::user`](crate::oauth::CredentialsDir::user) for the
    /// CLI); `None`: every `auth.oauth` server needs a login.
    #[cfg(feature = "oauth")]
    pub credentials: Option<crate::oauth::CredentialsDir>,
    /// Shows the authorization page of an OAuth scope step-up (a server's 403
    /// `insufficient_scope` mid-session); `None`: the call fails with the
    /// login command instead.
    #[cfg(feature = "oauth")]
    pub browser: Option<Arc<dyn crate::oauth::Browser>>,
}

impl fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The elicitor is a trait object with no `Debug`.
        let mut out = f.debug_struct("StartOptions");
        out.field("timeout", &self.timeout)
            .field("kill_grace", &self.kill_grace)
            .field("client_name", &self.client_name)
            .field("client_version", &self.client_version)
            .field("supervisor", &self.supervisor)
            .field("restart", &self.restart);
        #[cfg(feature = "oauth")]
        out.field("credentials", &self.credentials);
        out.finish_non_exhaustive()
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
            supervisor: None,
            restart: None,
            #[cfg(feature = "oauth")]
            credentials: None,
            #[cfg(feature = "oauth")]
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
    /// Its connection ended unexpectedly and it is being started again;
    /// see [`Server::problem`]. Its tools stay listed.
    Restarting,
    /// Its connection ended unexpectedly and it is not started again (no
    /// restart policy, or it was restarted too often); see
    /// [`Server::problem`]. Its tools stay listed, and calls to them fail
    /// saying so.
    Down,
}

impl Status {
    /// `"connected"`, `"error"`, `"closed"`, `"restarting"` or `"down"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Connected => "connected",
            Status::Error => "error",
            Status::Closed => "closed",
            Status::Restarting => "restarting",
            Status::Down => "down",
        }
    }

    /// Whether its tools are published: connected, or connected once and
    /// restarting or down (so names stay stable and calls say why they fail).
    pub fn publishes(self) -> bool {
        matches!(self, Status::Connected | Status::Restarting | Status::Down)
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
    /// A server whose first start failed, started later by the retries of
    /// a long-lived run (a restart policy is set).
    late: Arc<std::sync::OnceLock<Arc<Live>>>,
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
    Connected(Arc<Live>),
    Failed(StartError),
}

/// A server that connected: its current connection (replaced when it is
/// restarted) and what outlives each connection (its tools, call slots,
/// progress sinks, health).
pub(crate) struct Live {
    current: std::sync::RwLock<Arc<Connection>>,
    health: tokio::sync::watch::Sender<Health>,
    tools: Arc<ToolState>,
    /// Where each call's progress updates go.
    progress: crate::handler::ProgressSinks,
    /// At most `max_concurrent_calls` calls in flight.
    slots: Arc<tokio::sync::Semaphore>,
    /// `shutdown` has begun: no new call starts, no restart either.
    closed: std::sync::atomic::AtomicBool,
    /// The task that watches the connection and restarts it.
    monitor: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Cancellations of abandoned calls, still being sent.
    cancels: Cancels,
}

impl Live {
    /// The current connection.
    pub(crate) fn connection(&self) -> Arc<Connection> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Puts a new connection in place of the one that ended.
    pub(crate) fn replace(&self, conn: Connection) {
        let conn = Arc::new(conn);
        match self.current.write() {
            Ok(mut c) => *c = conn,
            Err(poisoned) => *poisoned.into_inner() = conn,
        }
    }

    pub(crate) fn set_health(&self, health: Health) {
        self.health.send_replace(health);
    }

    fn health(&self) -> Health {
        self.health.borrow().clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits, at most `timeout`, while the server is being restarted;
    /// refuses when it is down.
    async fn ready(&self, server: &str, timeout: Duration) -> Result<()> {
        let mut health = self.health.subscribe();
        let settled = tokio::time::timeout(
            timeout,
            health.wait_for(|h| !matches!(h, Health::Restarting(_))),
        )
        .await
        .map(|h| h.map(|h| h.clone()));
        match settled {
            Ok(Ok(Health::Down(reason))) => Err(Error::Down {
                server: server.to_owned(),
                reason,
            }),
            Ok(_) => Ok(()),
            Err(_) => Err(Error::Restarting {
                server: server.to_owned(),
                reason: match self.health() {
                    Health::Restarting(reason) | Health::Down(reason) => reason,
                    Health::Up => String::new(),
                },
                after: timeout,
            }),
        }
    }
}

/// One live connection. Calls go through a clone of the peer, so the
/// connection can be shut down through a shared reference.
pub(crate) struct Connection {
    peer: rmcp::Peer<RoleClient>,
    /// Cancels the rmcp service; taken by `stop`.
    cancel: std::sync::Mutex<Option<rmcp::service::RunningServiceCancellationToken>>,
    /// True once the rmcp service has ended (cancelled, or the transport closed).
    done: tokio::sync::watch::Receiver<bool>,
    /// Taken by `stop` and by `ended`.
    child: tokio::sync::Mutex<Option<ChildProcess>>,
    /// How the child ended, once it has.
    exit: Option<tokio::sync::watch::Receiver<Option<Ended>>>,
    /// The child's first non-protocol stdout line, readable without the child.
    noise: Option<Arc<crate::child::StdoutNotes>>,
    server_info: Option<Implementation>,
    kill_grace: Duration,
    /// Why the connection ended and what happens next, once known (for
    /// the calls that were in flight).
    ending: tokio::sync::watch::Sender<Option<(Ending, String)>>,
}

impl Connection {
    fn new(
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildProcess>,
        kill_grace: Duration,
    ) -> Connection {
        let (ended, done) = tokio::sync::watch::channel(false);
        let peer = service.peer().clone();
        let server_info = service.peer_info().and_then(|p| p.server_info.clone());
        let cancel = service.cancellation_token();
        tokio::spawn(async move {
            let _ = service.waiting().await;
            let _ = ended.send(true);
        });
        Connection {
            peer,
            cancel: std::sync::Mutex::new(Some(cancel)),
            done,
            exit: child.as_ref().map(ChildProcess::exit_watch),
            noise: child.as_ref().map(ChildProcess::noise_handle),
            child: tokio::sync::Mutex::new(child),
            server_info,
            kill_grace,
            ending: tokio::sync::watch::channel(None).0,
        }
    }

    /// Waits until the connection ends (the rmcp service ends, or the child
    /// exits), stops what is left of the child, and says what happened.
    pub(crate) async fn ended(&self) -> Ending {
        let mut done = self.done.clone();
        match self.exit.clone() {
            Some(mut exit) => {
                tokio::select! {
                    _ = done.wait_for(|d| *d) => {}
                    _ = exit.wait_for(Option::is_some) => {}
                }
            }
            None => {
                let _ = done.wait_for(|d| *d).await;
            }
        }
        self.cancel_service();
        let Some(mut child) = self.child.lock().await.take() else {
            return Ending {
                how: "closed the connection".to_owned(),
                stderr: Vec::new(),
            };
        };
        // A server that closed stdout is given a moment to exit; one whose
        // stdout is no longer read (a message past the limit) is not.
        let overflow = child.stdout_overflow();
        let by_itself = match overflow {
            Some(_) => None,
            None => child.wait_exit(Duration::from_millis(500)).await,
        };
        child.terminate(self.kill_grace).await;
        Ending {
            how: match (by_itself, overflow) {
                (Some(ended), _) => ended.sentence(),
                (None, Some(overflow)) => overflow,
                (None, None) => "closed its stdout (it was stopped)".to_owned(),
            },
            stderr: child.stderr_lines().await,
        }
    }

    /// Tells the calls that were in flight why the connection ended, and
    /// what happens next (`next`, such as `; restarting it`).
    pub(crate) fn report(&self, ending: Ending, next: &str) {
        self.ending.send_replace(Some((ending, next.to_owned())));
    }

    /// Why the connection ended, waiting at most `within` to hear it.
    async fn ending(&self, within: Duration) -> Option<(Ending, String)> {
        let mut ending = self.ending.subscribe();
        tokio::time::timeout(within, ending.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|e| e.ok().and_then(|e| e.clone()))
    }

    fn cancel_service(&self) {
        if let Some(cancel) = self.cancel.lock().ok().and_then(|mut c| c.take()) {
            cancel.cancel();
        }
    }

    /// Closes the connection: the service is cancelled (closing a child's
    /// stdin), then the child is stopped with its group.
    async fn stop(&self) {
        self.cancel_service();
        let mut done = self.done.clone();
        let _ = tokio::time::timeout(Duration::from_secs(1), done.wait_for(|d| *d)).await;
        if let Some(mut child) = self.child.lock().await.take() {
            child.terminate(self.kill_grace).await;
        }
    }
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

    /// Connected, failed to start, shut down, restarting or down.
    pub fn status(&self) -> Status {
        match self.started() {
            None => Status::Error,
            Some(live) if live.is_closed() => Status::Closed,
            Some(live) => match live.health() {
                Health::Up => Status::Connected,
                Health::Restarting(_) => Status::Restarting,
                Health::Down(_) => Status::Down,
            },
        }
    }

    /// The server once it started (at first, or later after a failed first
    /// start), shut down or not.
    fn started(&self) -> Option<&Arc<Live>> {
        match &self.state {
            State::Connected(live) => Some(live),
            State::Failed(_) => self.late.get(),
        }
    }

    /// The server, unless it failed to start or was shut down.
    fn live(&self) -> Option<&Arc<Live>> {
        self.started().filter(|live| !live.is_closed())
    }

    /// The current connection, unless the server failed or was shut down.
    fn connection(&self) -> Option<Arc<Connection>> {
        self.live().map(|l| l.connection())
    }

    /// Why the server failed to start.
    pub fn error(&self) -> Option<&StartError> {
        match &self.state {
            State::Failed(e) if self.late.get().is_none() => Some(e),
            _ => None,
        }
    }

    /// Why the server is not answering, in words: why it failed to start,
    /// or why its connection ended (when it is restarting or down).
    pub fn problem(&self) -> Option<String> {
        match (self.started(), &self.state) {
            (None, State::Failed(e)) => Some(e.to_string()),
            (None, State::Connected(_)) => None,
            (Some(live), _) => match live.health() {
                Health::Up => None,
                Health::Restarting(reason) => Some(format!("restarting: it {reason}")),
                Health::Down(reason) => Some(format!("down: it {reason}")),
            },
        }
    }

    /// The tools the server lists now (kept current on `tools/list_changed`).
    pub fn tools(&self) -> Vec<Tool> {
        self.live().map(|l| l.tools.tools()).unwrap_or_default()
    }

    /// The first line a stdio server wrote to stdout that was not a protocol
    /// message (such lines are dropped; a well-behaved server writes none).
    pub fn stdout_noise(&self) -> Option<String> {
        let conn = self.connection()?;
        let noise = conn.noise.as_ref()?;
        noise.noise()
    }

    /// Things about the server the operator should hear (for example that
    /// its tool list was cut at `max_pages`).
    pub fn warnings(&self) -> Vec<String> {
        match self.live() {
            Some(l) if l.tools.truncated() => {
                let pages = self.limits.max_pages;
                let noun = if pages == 1 { "page" } else { "pages" };
                vec![format!(
                    "{}: stopped listing tools after {pages} {noun} (max_pages); tools on later pages are not published",
                    self.name
                )]
            }
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
        let Some(live) = self.live() else {
            return Err(Error::NotConnected {
                server: self.name.clone(),
            });
        };
        // A call that comes in while the server is being restarted waits
        // for it (within its timeout); one to a server that is down fails.
        live.ready(&self.name, timeout).await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Wait for a slot first: the timeout covers the call itself.
        let Ok(_slot) = live.slots.clone().acquire_owned().await else {
            return Err(Error::NotConnected {
                server: self.name.clone(),
            });
        };
        let conn = live.connection();
        let timed_out = || Error::Timeout {
            server: self.name.clone(),
            tool: tool.to_owned(),
            after: timeout,
        };
        let Some(sink) = progress else {
            return match tokio::time::timeout(timeout, conn.peer.call_tool(params)).await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(e)) => Err(self.failed(&conn, tool, e).await),
                Err(_) => Err(timed_out()),
            };
        };
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match conn
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => return Err(self.failed(&conn, tool, e).await),
        };
        let token = handle.progress_token.clone();
        if let Ok(mut sinks) = live.progress.lock() {
            sinks.insert(token.clone(), sink.clone());
        }
        // Unregistered however the call ends, dropped mid-way included.
        let _registered = Unregister(&live.progress, token);
        // A request handle sends nothing when dropped: this guard tells the
        // server when the call's future is dropped (Ctrl-C) or times out.
        let mut abandoned = CancelOnDrop(Some((
            conn.peer.clone(),
            handle.id.clone(),
            live.cancels.clone(),
        )));
        let outcome = tokio::time::timeout(timeout, handle.await_response()).await;
        if outcome.is_ok() {
            abandoned.0 = None;
        }
        drop(abandoned);
        // Notifications are handled on their own tasks: let the last ones land.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        match outcome {
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => Err(self
                .failed(&conn, tool, rmcp::ServiceError::UnexpectedResponse)
                .await),
            Ok(Err(e)) => Err(self.failed(&conn, tool, e).await),
            Err(_) => Err(timed_out()),
        }
    }

    /// The error for a call that failed with `e`: when the connection ended
    /// under it (a crash), what happened to the server, else `e` itself.
    async fn failed(&self, conn: &Connection, tool: &str, e: rmcp::ServiceError) -> Error {
        // A stdio server that cannot be written to is gone; over HTTP a
        // send error is one request's (a 500, a body past the limit) and
        // the connection goes on.
        let stdio = conn.exit.is_some();
        let lost = match &e {
            rmcp::ServiceError::TransportClosed => true,
            rmcp::ServiceError::TransportSend(_) => stdio,
            _ => false,
        };
        if !stdio && let rmcp::ServiceError::TransportSend(send) = &e {
            return Error::Call {
                server: self.name.clone(),
                tool: tool.to_owned(),
                message: transport_words(send),
            };
        }
        // Stopping a crashed child and reading its stderr takes a moment.
        if lost && let Some((ending, next)) = conn.ending(Duration::from_secs(5)).await {
            return Error::Crashed {
                server: self.name.clone(),
                tool: tool.to_owned(),
                how: ending.how,
                next,
                stderr: ending.stderr,
            };
        }
        Error::Call {
            server: self.name.clone(),
            tool: tool.to_owned(),
            message: e.to_string(),
        }
    }

    /// Closes the connection; a stdio child gets EOF, then SIGTERM, then
    /// SIGKILL after the kill grace, with its whole process group.
    /// Calls in flight fail; later calls are refused as not connected.
    pub async fn shutdown(&self) {
        let Some(live) = self.started() else {
            return;
        };
        live.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        // A restart in flight is dropped, and its child with it.
        let monitor = live.monitor.lock().ok().and_then(|mut m| m.take());
        if let Some(monitor) = monitor {
            monitor.abort();
            let _ = monitor.await;
        }
        // A call abandoned just before (Ctrl-C) is cancelled on the server
        // before the connection closes.
        let mut cancels = live
            .cancels
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while cancels.join_next().await.is_some() {}
        })
        .await;
        live.connection().stop().await;
    }

    /// Stops the task that watches the connection, without waiting.
    fn forget(&self) {
        if let Some(live) = self.started()
            && let Some(monitor) = live.monitor.lock().ok().and_then(|mut m| m.take())
        {
            monitor.abort();
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
    /// Starts still in flight are dropped, and their children with them;
    /// so are the tasks that watch connected servers.
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.abort();
            if let Some(server) = slot.server.get() {
                server.forget();
            }
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
                    let relaunch = Relaunch {
                        entry,
                        launch,
                        auth,
                        options,
                    };
                    let server = start_one(&relaunch, changed.clone()).await;
                    let late = server.late.clone();
                    let retry = match &server.state {
                        State::Failed(e) if retryable(e) => relaunch.policy(),
                        _ => None,
                    };
                    let relaunch = match &server.state {
                        State::Connected(live) => {
                            watch_live(live, relaunch);
                            None
                        }
                        State::Failed(_) => Some(relaunch),
                    };
                    if filled.set(server).is_ok()
                        && let (Some(on_ready), Some(server)) = (on_ready, filled.get())
                    {
                        on_ready(server);
                    }
                    changed.send_modify(|v| *v += 1);
                    // A long-lived run tries a failed first start again, as
                    // it restarts a server that died (the task is aborted
                    // at shutdown, with any start in flight).
                    if let (Some(policy), Some(relaunch)) = (retry, relaunch) {
                        retry_first_start(relaunch, policy, &late, &changed).await;
                    }
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
        // Supervisors of starts dropped part-way stop their servers themselves.
        crate::child::settle().await;
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
#[derive(Clone)]
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
                    #[cfg(feature = "oauth")]
                    Err(e @ StartError::Auth(crate::AuthError::LoginNeeded { .. })) => {
                        let status = crate::oauth::OAuthStatus::LoginNeeded.describe();
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

/// Everything needed to start a server, again after a crash.
pub(crate) struct Relaunch {
    entry: ServerEntry,
    launch: Launch,
    /// How its requests are authenticated, for reports.
    auth: Auth,
    options: StartOptions,
}

impl Relaunch {
    pub(crate) fn name(&self) -> &str {
        &self.entry.name
    }

    pub(crate) fn policy(&self) -> Option<RestartPolicy> {
        self.options.restart
    }

    /// A client handler that keeps its tools and progress sinks in `tools`
    /// and `progress` (the same ones across restarts).
    fn handler(&self, tools: Arc<ToolState>, progress: crate::handler::ProgressSinks) -> Handler {
        Handler {
            server: self.entry.name.clone(),
            progress,
            elicitor: self.options.elicitor.clone(),
            client_info: Implementation::new(
                self.options.client_name.clone(),
                self.options.client_version.clone(),
            ),
            tools,
            max_pages: self.entry.spec.limits.max_pages,
            relisting: Arc::default(),
            relist_timeout: self.options.timeout,
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
            } => {
                let max_message = self.entry.spec.limits.max_message_bytes;
                start_http(handler, &url, &headers, source, max_message, &self.options).await
            }
        }
    }

    /// Starts the server again for `live`: same tools state, same sinks.
    pub(crate) async fn connect(&self, live: &Live) -> std::result::Result<Connection, StartError> {
        let handler = self.handler(live.tools.clone(), live.progress.clone());
        let (service, child) = self.start(handler).await?;
        Ok(Connection::new(service, child, self.options.kill_grace))
    }
}

/// Starts the task that watches `live`'s connection and restarts it.
fn watch_live(live: &Arc<Live>, relaunch: Relaunch) {
    if let Ok(mut monitor) = live.monitor.lock() {
        *monitor = Some(tokio::spawn(crate::restart::watch(live.clone(), relaunch)));
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
            | StartError::Auth(crate::AuthError::LoginNeeded { .. })
    )
}

/// Starts a server whose first start failed again, paced like restarts
/// (`policy`: 1 s, 2 s, 4 s …, at most `max_restarts` tries within the
/// window); once one succeeds the server is `late`, watched and restarted
/// like any other, and the tools version moves so catalogs are rebuilt.
async fn retry_first_start(
    relaunch: Relaunch,
    policy: crate::RestartPolicy,
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
        let server = start_one(&relaunch, changed.clone()).await;
        match server.state {
            State::Connected(live) => {
                tracing::info!(server = %relaunch.name(), "started after {failed} failed starts");
                watch_live(&live, relaunch);
                let _ = late.set(live);
                changed.send_modify(|v| *v += 1);
                return;
            }
            State::Failed(e) => {
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

async fn start_one(relaunch: &Relaunch, changed: Arc<tokio::sync::watch::Sender<u64>>) -> Server {
    let started = Instant::now();
    let entry = &relaunch.entry;
    let tools = Arc::new(ToolState::new(changed));
    let progress = crate::handler::ProgressSinks::default();
    let handler = relaunch.handler(tools.clone(), progress.clone());
    let state = match relaunch.start(handler).await {
        Ok((service, child)) => State::Connected(Arc::new(Live {
            current: std::sync::RwLock::new(Arc::new(Connection::new(
                service,
                child,
                relaunch.options.kill_grace,
            ))),
            health: tokio::sync::watch::channel(Health::Up).0,
            tools,
            progress,
            slots: Arc::new(tokio::sync::Semaphore::new(
                entry.spec.limits.max_concurrent_calls.max(1),
            )),
            closed: std::sync::atomic::AtomicBool::new(false),
            monitor: std::sync::Mutex::new(None),
            cancels: Cancels::default(),
        })),
        Err(e) => State::Failed(e),
    };
    Server {
        name: entry.name.clone(),
        scope: entry.scope,
        limits: entry.spec.limits,
        transport: entry.spec.transport.kind(),
        auth: relaunch.auth.clone(),
        elapsed: started.elapsed(),
        state,
        late: Arc::default(),
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

/// The `notifications/cancelled` sends still in flight on a server;
/// `Server::shutdown` lets them finish before it closes the connection.
pub(crate) type Cancels = Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>;

/// Sends `notifications/cancelled` for a request whose caller stopped
/// waiting (its future dropped, or its timeout passed), unless disarmed.
struct CancelOnDrop(Option<(rmcp::Peer<RoleClient>, rmcp::model::RequestId, Cancels)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, id, cancels)) = self.0.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let notification =
            rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("request abandoned by the caller".to_owned()),
            ));
        // Drop cannot await: the send runs on a task of its own, which
        // ends once the notification is written (or the connection is gone).
        let send = async move {
            let notification = rmcp::model::ClientNotification::CancelledNotification(notification);
            let _ =
                tokio::time::timeout(Duration::from_secs(1), peer.send_notification(notification))
                    .await;
        };
        if let Ok(mut cancels) = cancels.lock() {
            cancels.spawn_on(send, &runtime);
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
    let (mut child, stdout, stdin) = ChildProcess::spawn(
        &entry.name,
        command,
        args,
        env,
        options.supervisor.as_ref(),
        options.kill_grace,
        entry.spec.limits.max_message_bytes,
    )
    .await?;
    // The filter already stops at the limit; rmcp's own cap (16 MiB by
    // default) must not drop a line the limit allows.
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin)
        .with_max_line_length(entry.spec.limits.max_message_bytes.saturating_add(2));
    let error = match handshake(handler, transport, options.timeout).await {
        Some(Ok(service)) => return Ok((service, Some(child))),
        Some(Err(e)) => {
            // A child that died explains the failure better than the broken pipe did.
            let exited = match child.exited() {
                Some(status) => Some(status),
                None => child.wait_exit(Duration::from_millis(200)).await,
            };
            let mut stderr = child.stderr_lines().await;
            let stdout = child.stdout_noise();
            match (exited, e) {
                // It was stopped for a message past the limit: say so.
                (_, _) if child.stdout_overflow().is_some() => StartError::Initialize {
                    message: child.stdout_overflow().unwrap_or_default(),
                    stdout,
                    stderr,
                },
                // The supervisor could not start the command: it said why.
                (Some(Ended::Code(crate::supervise::NOT_FOUND)), _) if child.supervised() => {
                    StartError::NotFound {
                        command: command.to_owned(),
                    }
                }
                (Some(Ended::Code(crate::supervise::CANNOT_START)), _) if child.supervised() => {
                    StartError::Spawn {
                        command: command.to_owned(),
                        message: stderr.pop().unwrap_or_default(),
                    }
                }
                (Some(ended), _) => StartError::Exited {
                    status: ended.status(),
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
    max_message: usize,
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
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    // One body or SSE event past the limit ends the request with
    // `ResponseBodyTooLarge`, never an unbounded read.
    config.max_sse_event_size = max_message;
    config.max_json_response_size = max_message;
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
            "the server requires authorization (HTTP 401, WWW-Authenticate: {challenge}); if it supports OAuth, log in to `{server}` first, else add a token to `headers`, e.g. \"Authorization\": \"Bearer ${{TOKEN}}\""
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
    match e {
        ClientInitializeError::TransportError { error, .. } => transport_words(error),
        _ => plain(text),
    }
}

/// An HTTP transport error in words: a connection failure by its innermost
/// cause ("Connection refused (os error 111)", "dns error: …", a redirect
/// loop), else what the server answered.
fn transport_words(error: &rmcp::transport::DynamicTransportError) -> String {
    match error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        Some(StreamableHttpError::Client(client)) => {
            let mut cause: &dyn std::error::Error = client;
            while let Some(next) = cause.source() {
                cause = next;
            }
            let cause = cause.to_string();
            if cause.contains("too many redirects") || cause.contains("exceeded 10 redirects") {
                return format!(
                    "the server redirected more than 10 times ({cause}): a redirect loop; check `url`"
                );
            }
            format!("cannot reach the server: {cause}")
        }
        // rmcp keeps only the status of a 5xx or 429 (no body).
        Some(StreamableHttpError::HttpStatus(failure)) => {
            match http::StatusCode::from_u16(failure.status) {
                Ok(status) if status.is_server_error() => format!(
                    "the server answered HTTP {status}: it failed on its side; its own logs say why"
                ),
                Ok(status) => format!("the server answered HTTP {status}; try again later"),
                Err(_) => format!("the server answered HTTP {}", failure.status),
            }
        }
        Some(StreamableHttpError::ResponseBodyTooLarge { max_size }) => format!(
            "the server's answer was longer than max_message_bytes ({}), so it was not read; raise `limits.max_message_bytes` for this server if such answers are expected",
            crate::child::bytes(*max_size)
        ),
        _ => plain(error.to_string()),
    }
}

/// rmcp's error text without its type names (`Transport [<types>] error: `)
/// and the request it was about (`, when send initialize request`).
fn plain(text: String) -> String {
    let text = match text.find("] error: ") {
        Some(i) => &text[i + "] error: ".len()..],
        None => &text,
    };
    text.split(", when send")
        .next()
        .unwrap_or_default()
        .to_owned()
}
