//! The client side of each connection: capabilities, elicitation and
//! `tools/list_changed`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorData, Implementation, ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};

use crate::Elicitor;

/// One progress update a server sent about a call in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// How far it is (increases with each update).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// What it is doing, in words.
    pub message: Option<String>,
}

/// Receives a call's progress updates, as the server sends them.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// The progress sinks of the calls in flight, by the token rmcp put on each.
pub(crate) type ProgressSinks =
    Arc<std::sync::Mutex<std::collections::HashMap<rmcp::model::ProgressToken, ProgressSink>>>;

/// Per-connection client handler.
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) progress: ProgressSinks,
    pub(crate) elicitor: Arc<dyn Elicitor>,
    pub(crate) client_info: Implementation,
    pub(crate) tools: Arc<ToolState>,
    pub(crate) max_pages: usize,
}

/// A server's current tool list. Listings can overlap (the first
/// `tools/list` with a re-list after `tools/list_changed`, or two re-lists),
/// and the one that *began* last is the newest: a listing that began before
/// a notification never replaces one that began after it.
#[derive(Debug)]
pub(crate) struct ToolState {
    /// How many `tools/list_changed` notifications have arrived.
    notified: AtomicU64,
    current: RwLock<Listing>,
    /// Bumped whenever any server of the set keeps a new listing.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
}

#[derive(Debug, Default)]
struct Listing {
    /// `notified` when this listing began.
    since: u64,
    tools: Vec<Tool>,
    /// The list was cut at `max_pages`.
    truncated: bool,
}

impl ToolState {
    /// An empty state that reports changes on `changed`.
    pub(crate) fn new(changed: Arc<tokio::sync::watch::Sender<u64>>) -> ToolState {
        ToolState {
            notified: AtomicU64::new(0),
            current: RwLock::new(Listing::default()),
            changed,
        }
    }

    /// The generation a listing that begins now reflects.
    pub(crate) fn begin(&self) -> u64 {
        self.notified.load(Ordering::SeqCst)
    }

    /// Counts a `tools/list_changed`; the re-list that follows reflects it.
    pub(crate) fn notify(&self) -> u64 {
        self.notified.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Keeps a listing that began at generation `since`, unless a listing
    /// that began later is already kept.
    pub(crate) fn store(&self, since: u64, (tools, truncated): crate::server::Listed) {
        if let Ok(mut current) = self.current.write()
            && since >= current.since
        {
            *current = Listing {
                since,
                tools,
                truncated,
            };
            drop(current);
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// The tools of the newest listing.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        self.current
            .read()
            .map(|c| c.tools.clone())
            .unwrap_or_default()
    }

    /// Whether the newest listing was cut at `max_pages`.
    pub(crate) fn truncated(&self) -> bool {
        self.current.read().map(|c| c.truncated).unwrap_or(false)
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // What `ClientCapabilities::builder().enable_elicitation()` builds;
        // rmcp compiles the builder only with its server or macros feature.
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::default();
        if self.elicitor.accepts_url() {
            // Forms too: a client that names one mode must name both.
            elicitation = elicitation
                .with_form(rmcp::model::FormElicitationCapability::default())
                .with_url(rmcp::model::UrlElicitationCapability::default());
        }
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(capabilities, self.client_info.clone())
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.elicitor.elicit(&self.server, request).await)
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let sink = self
            .progress
            .lock()
            .ok()
            .and_then(|sinks| sinks.get(&params.progress_token).cloned());
        if let Some(sink) = sink {
            sink(Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let since = self.tools.notify();
        match crate::server::list_tools(&context.peer, self.max_pages).await {
            Ok(listed) => self.tools.store(since, listed),
            // Shutting down while a re-list is in flight is not worth a warning.
            Err(rmcp::ServiceError::TransportClosed) => {}
            Err(e) => {
                tracing::warn!(server = %self.server, "re-listing tools after list_changed failed: {e}")
            }
        }
    }
}
