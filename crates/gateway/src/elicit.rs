//! A backend server's own elicitation, forwarded to the client whose call
//! made the server ask.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use core_agent_mcp_transport::{BoxFuture, Elicitor};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};

/// Routes each backend's `elicitation/create` to the client session that
/// has a call in flight on that backend. Install it as the host's
/// `StartOptions::elicitor` before the host starts, and give the same one
/// to [`crate::GatewayOptions::elicitations`].
///
/// A request is declined when no session, or more than one, has a call in
/// flight on that server (the request does not say which call it is about),
/// or when that session's client does not answer elicitations.
#[derive(Default)]
pub struct ElicitRouter {
    /// Server name → the sessions with calls in flight on it.
    calls: Mutex<HashMap<String, Vec<Caller>>>,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for ElicitRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitRouter")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ElicitRouter {
    /// A router whose forwarded requests wait at most `timeout` for the client.
    pub fn new(timeout: Duration) -> Arc<ElicitRouter> {
        Arc::new(ElicitRouter {
            calls: Mutex::default(),
            timeout: Some(timeout),
        })
    }

    /// Notes a call of `session` on `server` until the guard drops.
    pub(crate) fn enter(
        self: &Arc<Self>,
        server: &str,
        session: &str,
        peer: &Peer<RoleServer>,
    ) -> CallOn {
        if let Ok(mut calls) = self.calls.lock() {
            let on = calls.entry(server.to_owned()).or_default();
            match on.iter_mut().find(|(id, _, _)| id == session) {
                Some(entry) => entry.2 += 1,
                None => on.push((session.to_owned(), peer.clone(), 1)),
            }
        }
        CallOn {
            router: self.clone(),
            server: server.to_owned(),
            session: session.to_owned(),
        }
    }

    /// The one client with calls in flight on `server`, if exactly one.
    /// The sessions with a call in flight on `server` now.
    pub(crate) fn sessions_on(&self, server: &str) -> Vec<String> {
        self.calls
            .lock()
            .ok()
            .and_then(|calls| {
                calls
                    .get(server)
                    .map(|on| on.iter().map(|(id, _, _)| id.clone()).collect())
            })
            .unwrap_or_default()
    }

    fn client_of(&self, server: &str) -> Option<Peer<RoleServer>> {
        let calls = self.calls.lock().ok()?;
        match calls.get(server).map(Vec::as_slice) {
            Some([(_, peer, _)]) => Some(peer.clone()),
            _ => None,
        }
    }
}

/// A session with calls in flight on a server: its id, its client, how many calls.
type Caller = (String, Peer<RoleServer>, usize);

/// One call in flight on a server, for the router.
#[derive(Debug)]
pub(crate) struct CallOn {
    router: Arc<ElicitRouter>,
    server: String,
    session: String,
}

impl Drop for CallOn {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.router.calls.lock()
            && let Some(on) = calls.get_mut(&self.server)
        {
            if let Some(entry) = on.iter_mut().find(|(id, _, _)| *id == self.session) {
                entry.2 -= 1;
            }
            on.retain(|(_, _, n)| *n > 0);
            if on.is_empty() {
                calls.remove(&self.server);
            }
        }
    }
}

impl Elicitor for ElicitRouter {
    /// URL requests too: each goes to a client that declared URL
    /// elicitation, and is declined for one that did not (as a form is for
    /// a client without elicitation).
    fn accepts_url(&self) -> bool {
        true
    }

    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        Box::pin(async move {
            let decline = ElicitResult::new(ElicitationAction::Decline);
            let Some(peer) = self.client_of(server) else {
                tracing::info!(
                    "declined {server}'s elicitation: not exactly one client has a call in flight on it"
                );
                return decline;
            };
            let mode = match &request {
                ElicitRequestParams::FormElicitationParams { .. } => ElicitationMode::Form,
                _ => ElicitationMode::Url,
            };
            if !peer.supported_elicitation_modes().contains(&mode) {
                return decline;
            }
            match peer
                .create_elicitation_with_timeout(request, self.timeout)
                .await
            {
                Ok(result) => result,
                Err(e) => {
                    tracing::info!(
                        "declined {server}'s elicitation: the client did not answer: {e}"
                    );
                    decline
                }
            }
        })
    }
}
