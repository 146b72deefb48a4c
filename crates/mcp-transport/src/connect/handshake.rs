//! The MCP handshake: `server/discover` (falling back to `initialize` for a
//! server that predates it), then the first listing of tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, RunningService, serve_client_with_lifecycle};
use rmcp::{ClientLifecycleMode, RoleClient};

use super::probe::DiscoverProbe;

use crate::child::ChildProcess;
use crate::error::StartError;
use crate::handler::Handler;
use crate::tools::list_tools;

pub(crate) type Started =
    std::result::Result<(RunningService<RoleClient, Handler>, Option<ChildProcess>), StartError>;

/// How a connection starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// `server/discover` at the latest revision (each request then carries
    /// the protocol version, client info and capabilities in its `_meta`);
    /// a server that answers it with an error (or not at all, within rmcp's
    /// 10 s) predates it and gets the `initialize` handshake of the latest
    /// revision that has one. One that answers it with a result other than
    /// a discover result predates it too ([`DiscoverProbe`]).
    Probe,
    /// `server/discover` only, waited for as long as the start may take: for
    /// a server known to speak it (it answered a probe too late).
    Discover,
}

impl Lifecycle {
    fn mode(self) -> ClientLifecycleMode {
        match self {
            Lifecycle::Probe => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::LATEST],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
            Lifecycle::Discover => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::LATEST],
            },
        }
    }
}

/// Runs the handshake (discover or initialize, then up to `max_pages` pages
/// of tools/list, kept in the handler's tool state) under `timeout`.
pub(super) async fn handshake<T, E, A>(
    handler: Handler,
    transport: T,
    timeout: Duration,
    lifecycle: Lifecycle,
) -> Option<std::result::Result<RunningService<RoleClient, Handler>, HandshakeError>>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let late = Arc::new(AtomicBool::new(false));
    let run = async {
        let transport = DiscoverProbe::new(transport.into_transport(), late.clone());
        let service = serve_client_with_lifecycle(handler, transport, lifecycle.mode())
            .await
            .map_err(|e| {
                if late.load(Ordering::Relaxed) {
                    HandshakeError::LateDiscover(Box::new(e))
                } else {
                    HandshakeError::Init(Box::new(e))
                }
            })?;
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
    /// The server answered the probe with a discover result after rmcp gave
    /// up on it and sent `initialize`, which it then refused: it speaks
    /// 2026-07-28 but started slowly. A new connection with
    /// [`Lifecycle::Discover`] gets it.
    LateDiscover(Box<ClientInitializeError>),
    List(rmcp::ServiceError),
}
