//! A server that connected: its current connection, replaced when it is
//! restarted, and what outlives each connection.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::Implementation;
use rmcp::service::RunningService;

use crate::child::ChildProcess;
use crate::elicit::Elicitor;
use crate::error::{Error, Result};
use crate::handler::{Handler, ProgressSinks};
use crate::restart::{Ending, Health};
use crate::supervise::Ended;
use crate::tools::ToolState;

/// A server that connected: its current connection (replaced when it is
/// restarted) and what outlives each connection (its tools, call slots,
/// progress sinks, health).
pub(crate) struct Live {
    current: std::sync::RwLock<Arc<Connection>>,
    health: tokio::sync::watch::Sender<Health>,
    pub(crate) tools: Arc<ToolState>,
    /// Where each call's progress updates go.
    pub(crate) progress: ProgressSinks,
    /// At most `max_concurrent_calls` calls in flight.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    /// `shutdown` has begun: no new call starts, no restart either.
    closed: std::sync::atomic::AtomicBool,
    /// The task that watches the connection and restarts it.
    pub(crate) monitor: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Cancellations of abandoned calls, still being sent.
    pub(crate) cancels: Cancels,
    /// The log level asked for (`Server::set_log_level`): sent in each
    /// call's `_meta` on 2026-07-28, which has no `logging/setLevel`.
    #[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
    pub(crate) log_level: std::sync::Mutex<Option<rmcp::model::LoggingLevel>>,
    /// `auth.token_exchange`: each call carries its caller's token.
    pub(crate) exchange: Option<Arc<crate::behalf::TokenExchange>>,
}

impl Live {
    /// A server connected as `conn`: up, its tools kept in `tools`, its
    /// calls' progress sinks in `progress`, at most `max_calls` calls in
    /// flight (at least one).
    pub(crate) fn new(
        conn: Connection,
        tools: Arc<ToolState>,
        progress: ProgressSinks,
        max_calls: usize,
    ) -> Live {
        Live {
            current: std::sync::RwLock::new(Arc::new(conn)),
            health: tokio::sync::watch::channel(Health::Up).0,
            tools,
            progress,
            slots: Arc::new(tokio::sync::Semaphore::new(max_calls.max(1))),
            closed: std::sync::atomic::AtomicBool::new(false),
            monitor: std::sync::Mutex::new(None),
            cancels: Cancels::default(),
            log_level: std::sync::Mutex::new(None),
            exchange: None,
        }
    }

    /// Its calls carry their callers' tokens for `exchange`, when set.
    pub(crate) fn with_exchange(
        mut self,
        exchange: Option<Arc<crate::behalf::TokenExchange>>,
    ) -> Live {
        self.exchange = exchange;
        self
    }

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

    pub(crate) fn health(&self) -> Health {
        self.health.borrow().clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits, at most `timeout`, while the server is being restarted;
    /// refuses when it is down.
    pub(crate) async fn ready(&self, server: &str, timeout: Duration) -> Result<()> {
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

    /// Closes it for good: no call or restart starts any more, calls
    /// abandoned just before are cancelled on the server, then the
    /// connection is stopped.
    pub(crate) async fn shutdown(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        // A restart in flight is dropped, and its child with it.
        let monitor = self.monitor.lock().ok().and_then(|mut m| m.take());
        if let Some(monitor) = monitor {
            monitor.abort();
            let _ = monitor.await;
        }
        // A call abandoned just before (Ctrl-C) is cancelled on the server
        // before the connection closes.
        let mut cancels = self
            .cancels
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while cancels.join_next().await.is_some() {}
        })
        .await;
        self.connection().stop().await;
    }

    /// Stops the task that watches the connection, without waiting.
    pub(crate) fn forget(&self) {
        if let Some(monitor) = self.monitor.lock().ok().and_then(|mut m| m.take()) {
            monitor.abort();
        }
    }
}

/// One live connection. Calls go through a clone of the peer, so the
/// connection can be shut down through a shared reference.
pub(crate) struct Connection {
    pub(crate) peer: rmcp::Peer<RoleClient>,
    /// Cancels the rmcp service; taken by `stop`.
    cancel: std::sync::Mutex<Option<rmcp::service::RunningServiceCancellationToken>>,
    /// True once the rmcp service has ended (cancelled, or the transport closed).
    done: tokio::sync::watch::Receiver<bool>,
    /// Taken by `stop` and by `ended`.
    child: tokio::sync::Mutex<Option<ChildProcess>>,
    /// How the child ended, once it has.
    pub(crate) exit: Option<tokio::sync::watch::Receiver<Option<Ended>>>,
    /// The child's first non-protocol stdout line, readable without the child.
    pub(crate) noise: Option<Arc<crate::child::StdoutNotes>>,
    pub(crate) server_info: Option<Implementation>,
    /// What the server declared it offers in its handshake.
    pub(crate) capabilities: rmcp::model::ServerCapabilities,
    /// Answers the elicitations of `input_required` results (the
    /// handler's, which answers those sent mid-call).
    pub(crate) elicitor: Arc<dyn Elicitor>,
    /// Answers the sampling of `input_required` results (the handler's).
    pub(crate) sampler: Option<Arc<dyn crate::Sampler>>,
    /// Answers the roots requests of `input_required` results (the handler's).
    pub(crate) roots: Option<Arc<dyn crate::Roots>>,
    /// On 2026-07-28: the handler, for the listen streams of subscribed
    /// resources (`None` on older revisions, where updates come unscoped).
    pub(crate) listener: Option<Handler>,
    /// The connection's handler, which re-lists its tools.
    pub(crate) handler: Handler,
    /// On 2026-07-28: the stream of list changes, ended with the connection.
    lists: Option<tokio::task::JoinHandle<()>>,
    /// On 2026-07-28: the stream of each subscribed resource's updates.
    pub(crate) resource_streams:
        std::sync::Mutex<std::collections::HashMap<String, tokio::task::JoinHandle<()>>>,
    kill_grace: Duration,
    /// Why the connection ended and what happens next, once known (for
    /// the calls that were in flight).
    ending: tokio::sync::watch::Sender<Option<(Ending, String)>>,
}

impl Connection {
    pub(crate) fn new(
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildProcess>,
        kill_grace: Duration,
    ) -> Connection {
        let (ended, done) = tokio::sync::watch::channel(false);
        let peer = service.peer().clone();
        let server_info = service.peer_info().and_then(|p| p.server_info.clone());
        let capabilities = service
            .peer_info()
            .map(|p| p.capabilities.clone())
            .unwrap_or_default();
        let elicitor = service.service().elicitor.clone();
        let sampler = service.service().sampler.clone();
        let roots = service.service().roots.clone();
        let handler = service.service().clone();
        let version = service.peer_info().map(|p| p.protocol_version.clone());
        let listener =
            crate::listen::needs_listen(version.as_ref()).then(|| service.service().clone());
        let lists = listener
            .clone()
            .and_then(|handler| crate::listen::lists(handler, peer.clone(), &capabilities));
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
            capabilities,
            elicitor,
            sampler,
            roots,
            listener,
            handler,
            lists,
            resource_streams: Default::default(),
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
    pub(crate) async fn ending(&self, within: Duration) -> Option<(Ending, String)> {
        let mut ending = self.ending.subscribe();
        tokio::time::timeout(within, ending.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|e| e.ok().and_then(|e| e.clone()))
    }

    fn cancel_service(&self) {
        if let Some(lists) = &self.lists {
            lists.abort();
        }
        if let Ok(mut streams) = self.resource_streams.lock() {
            for (_, stream) in streams.drain() {
                stream.abort();
            }
        }
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

/// The `notifications/cancelled` sends still in flight on a server;
/// `Server::shutdown` lets them finish before it closes the connection.
pub(crate) type Cancels = Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>;
