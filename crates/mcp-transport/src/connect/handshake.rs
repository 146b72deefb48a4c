//! The MCP handshake: `initialize`, then the first listing of tools.

use std::time::Duration;

use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::{RoleClient, ServiceExt};

use crate::child::ChildProcess;
use crate::error::StartError;
use crate::handler::Handler;
use crate::tools::list_tools;

pub(crate) type Started =
    std::result::Result<(RunningService<RoleClient, Handler>, Option<ChildProcess>), StartError>;

/// Runs the handshake (initialize, then up to `max_pages` pages of
/// tools/list, kept in the handler's tool state) under `timeout`.
pub(super) async fn handshake<T, E, A>(
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

pub(super) enum HandshakeError {
    Init(Box<ClientInitializeError>),
    List(rmcp::ServiceError),
}
