//! The client side of each connection: capabilities, elicitation and
//! `tools/list_changed`.
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

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
}

impl Handler {
    /// The server's tools changed: list them again.
    pub(crate) fn tools_changed(&self, peer: rmcp::Peer<RoleClient>) {
        crate::tools::list_changed(
            &self.tools,
            &self.relisting,
            &self.server,
            self.max_pages,
            self.relist_timeout,
            peer,
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
        self.tools_changed(context.peer);
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
        self.tell(|server| Notice::ResourcesChanged { server });
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tell(|server| Notice::PromptsChanged { server });
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
