//! The client side of each connection: capabilities, elicitation and
//! `tools/list_changed`.
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorData, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};

use crate::elicit::Elicitor;
use crate::features::Notice;
use crate::tools::ToolState;

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

/// Per-connection client handler (cloned for the connection's listen
/// streams, which route what it would).
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) progress: ProgressSinks,
    pub(crate) elicitor: Arc<dyn Elicitor>,
    /// How long this connection's elicitations have waited (`elicitor`
    /// counts them on it).
    pub(crate) asking: Arc<crate::elicit::AskClock>,
    pub(crate) client_info: Implementation,
    pub(crate) tools: Arc<ToolState>,
    pub(crate) max_pages: usize,
    /// This connection's re-lister is running (or about to). Per
    /// connection, not in the `ToolState` a restart keeps: a re-lister of a
    /// connection that ended never holds the slot of the next one.
    pub(crate) relisting: Arc<AtomicBool>,
    /// How long one re-list may take before it counts as failed.
    pub(crate) relist_timeout: Duration,
    /// Hears what the server says outside any request's result.
    pub(crate) notices: Option<crate::NoticeSink>,
    /// Answers its `sampling/createMessage` (declared only when set).
    pub(crate) sampler: Option<Arc<dyn crate::Sampler>>,
    /// Answers its `roots/list` (declared only when set).
    pub(crate) roots: Option<Arc<dyn crate::Roots>>,
    /// The last list change of each kind, and whether it came on a listen
    /// stream, shared with the connection's streams (see [`Handler::twin`]).
    pub(crate) changes: Arc<std::sync::Mutex<std::collections::HashMap<List, (bool, Instant)>>>,
}

/// A list a server can say changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum List {
    Tools,
    Prompts,
    Resources,
}

/// Within this long, the same list change on the other path is its twin.
const TWIN_WINDOW: Duration = Duration::from_millis(200);

impl Handler {
    /// Whether a change of `list`, come on a listen stream (`streamed`) or
    /// unscoped, is the twin of one just told by the other path: a
    /// 2026-07-28 server may send one change both ways. A change on the
    /// same path as the last is never a twin, so distinct changes, however
    /// close, are all told.
    pub(crate) fn twin(&self, list: List, streamed: bool) -> bool {
        let Ok(mut changes) = self.changes.lock() else {
            return false;
        };
        let now = Instant::now();
        match changes.get(&list) {
            Some((path, at)) if *path != streamed && now.duration_since(*at) < TWIN_WINDOW => {
                // Told once; a third is a change again.
                changes.remove(&list);
                true
            }
            _ => {
                changes.insert(list, (streamed, now));
                false
            }
        }
    }

    /// The server said its tools changed: list them again.
    pub(crate) fn tools_changed(&self, peer: rmcp::Peer<RoleClient>) {
        self.relist(peer, true);
    }

    /// The tools' listing went past its freshness (`ttlMs`): list them
    /// again, telling a change only when they differ.
    pub(crate) fn tools_stale(&self, peer: rmcp::Peer<RoleClient>) {
        self.relist(peer, false);
    }

    fn relist(&self, peer: rmcp::Peer<RoleClient>, said: bool) {
        crate::tools::list_changed(
            &self.tools,
            &self.relisting,
            &self.server,
            self.max_pages,
            self.relist_timeout,
            peer,
            said,
        );
    }

    pub(crate) fn tell(&self, notice: impl FnOnce(String) -> Notice) {
        if let Some(sink) = &self.notices {
            sink(notice(self.server.clone()));
        }
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
        if self.sampler.is_some() {
            capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
        }
        if self.roots.is_some() {
            let mut roots = rmcp::model::RootsCapabilities::default();
            roots.list_changed = Some(true);
            capabilities.roots = Some(roots);
        }
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
        if !self.twin(List::Tools, false) {
            self.tools_changed(context.peer);
        }
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.tell(|server| Notice::ResourceUpdated {
            server,
            uri: params.uri,
        });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if !self.twin(List::Resources, false) {
            self.tell(|server| Notice::ResourcesChanged { server });
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if !self.twin(List::Prompts, false) {
            self.tell(|server| Notice::PromptsChanged { server });
        }
    }

    #[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
    async fn on_logging_message(
        &self,
        message: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.tell(|server| Notice::Log { server, message });
    }

    #[allow(deprecated)] // sampling (SEP-2577), which servers still use
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        match &self.sampler {
            Some(sampler) => sampler.sample(&self.server, params).await,
            None => Err(ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >()),
        }
    }

    #[allow(deprecated)] // roots (SEP-2577), which servers still use
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        let roots = match &self.roots {
            Some(roots) => roots.roots(&self.server).await,
            None => Vec::new(),
        };
        Ok(rmcp::model::ListRootsResult::new(roots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler() -> Handler {
        Handler {
            server: "s".to_owned(),
            progress: Arc::default(),
            elicitor: Arc::new(crate::Decline),
            asking: Arc::default(),
            client_info: Implementation::new("t", "0"),
            tools: Arc::new(ToolState::new(Arc::new(tokio::sync::watch::channel(0).0))),
            max_pages: 1,
            relisting: Arc::default(),
            relist_timeout: Duration::from_secs(1),
            notices: None,
            sampler: None,
            roots: None,
            changes: Arc::default(),
        }
    }

    #[test]
    fn a_change_said_both_ways_is_told_once_and_changes_on_one_path_always() {
        let h = handler();
        // The same change on the stream and unscoped: the second is its twin.
        assert!(!h.twin(List::Prompts, true));
        assert!(h.twin(List::Prompts, false));
        // Then a new change again, whichever way it comes.
        assert!(!h.twin(List::Prompts, false));
        // Changes on one path, however close, are each told.
        assert!(!h.twin(List::Resources, false));
        assert!(!h.twin(List::Resources, false));
        assert!(!h.twin(List::Resources, false));
        // Kinds are apart: a tools change is no resources change's twin.
        assert!(!h.twin(List::Tools, true));
    }
}
