//! The client side of each connection: capabilities, elicitation and
//! `tools/list_changed`.

use std::sync::{Arc, RwLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ErrorData, Implementation,
    ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};

use crate::Elicitor;

/// Per-connection client handler.
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) elicitor: Arc<dyn Elicitor>,
    pub(crate) client_info: Implementation,
    pub(crate) tools: Arc<RwLock<Vec<Tool>>>,
    pub(crate) max_pages: usize,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
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

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        match crate::server::list_tools(&context.peer, self.max_pages).await {
            Ok((tools, _)) => {
                if let Ok(mut current) = self.tools.write() {
                    *current = tools;
                }
            }
            // Shutting down while a re-list is in flight is not worth a warning.
            Err(rmcp::ServiceError::TransportClosed) => {}
            Err(e) => {
                tracing::warn!(server = %self.server, "re-listing tools after list_changed failed: {e}")
            }
        }
    }
}
