//! A backend server's own elicitation and sampling, forwarded to the client
//! whose call made the server ask, and the clients' roots for `roots/list`.

#![allow(deprecated)] // sampling and roots (SEP-2577), which servers and clients still use

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use core_agent_mcp_transport::{BoxFuture, Elicitor, Roots, Sampler};
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Root};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};

/// Routes each backend's `elicitation/create` and
/// `sampling/createMessage` to the client session that has a call in
/// flight on that backend, and answers its `roots/list` with that client's
/// roots (every client's when none has a call in flight). Install it as the
/// host's `StartOptions::elicitor`, `sampler` and `roots` before the host
/// starts, and give the same one to [`crate::GatewayOptions::elicitations`].
///
/// A request is declined when no session, or more than one, has a call in
/// flight on that server (the request does not say which call it is about),
/// or when that session's client does not answer elicitations (or did not
/// declare sampling). Sampling also needs the session's gate to allow
/// `sampling:<server>`; in `ask` mode the client is asked.
#[derive(Default)]
pub struct ElicitRouter {
    /// Server name → the sessions with calls in flight on it.
    calls: Mutex<HashMap<String, Vec<Caller>>>,
    /// Each session's client's roots, by session id.
    roots: Mutex<HashMap<String, Vec<Root>>>,
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
            roots: Mutex::default(),
            timeout: Some(timeout),
        })
    }

    /// Notes a call of `session` on `server` until the guard drops.
    pub(crate) fn enter(
        self: &Arc<Self>,
        server: &str,
        session: &str,
        peer: &Peer<RoleServer>,
        host_session: Option<Arc<core_agent_host::Session>>,
    ) -> CallOn {
        if let Ok(mut calls) = self.calls.lock() {
            let on = calls.entry(server.to_owned()).or_default();
            match on.iter_mut().find(|c| c.id == session) {
                Some(entry) => entry.calls += 1,
                None => on.push(Caller {
                    id: session.to_owned(),
                    peer: peer.clone(),
                    calls: 1,
                    session: host_session,
                }),
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
                    .map(|on| on.iter().map(|c| c.id.clone()).collect())
            })
            .unwrap_or_default()
    }

    fn client_of(&self, server: &str) -> Option<Peer<RoleServer>> {
        self.caller_of(server).map(|c| c.peer)
    }

    /// The one session with calls in flight on `server`, if exactly one has.
    fn caller_of(&self, server: &str) -> Option<Caller> {
        let calls = self.calls.lock().ok()?;
        match calls.get(server).map(Vec::as_slice) {
            Some([caller]) => Some(caller.clone()),
            _ => None,
        }
    }

    /// The roots session `session`'s client declared (`None`: it declares
    /// none, or is gone).
    pub(crate) fn set_roots(&self, session: &str, roots: Option<Vec<Root>>) {
        if let Ok(mut all) = self.roots.lock() {
            match roots {
                Some(roots) => all.insert(session.to_owned(), roots),
                None => all.remove(session),
            };
        }
    }
}

/// A session with calls in flight on a server: its id, its client, how
/// many calls, and its host session (whose gate approves sampling).
#[derive(Clone)]
struct Caller {
    id: String,
    peer: Peer<RoleServer>,
    calls: usize,
    session: Option<Arc<core_agent_host::Session>>,
}

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
            if let Some(entry) = on.iter_mut().find(|c| c.id == self.session) {
                entry.calls -= 1;
            }
            on.retain(|c| c.calls > 0);
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

#[allow(deprecated)] // sampling (SEP-2577), which servers still use
impl Sampler for ElicitRouter {
    /// A backend's `sampling/createMessage` goes to the client whose call
    /// is in flight on it, when that client declared sampling and its
    /// session's gate allows `sampling:<server>` (asking in `ask` mode).
    fn sample<'a>(
        &'a self,
        server: &'a str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'a, Result<CreateMessageResult, ErrorData>> {
        Box::pin(async move {
            let refused = |why: String| {
                tracing::info!("refused {server}'s sampling request: {why}");
                ErrorData::invalid_request(format!("core-agent: {why}"), None)
            };
            let Some(caller) = self.caller_of(server) else {
                return Err(refused(format!(
                    "not exactly one client has a call in flight on `{server}`, so no client's model can be asked"
                )));
            };
            let declared = caller
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.sampling.is_some());
            if !declared {
                return Err(refused(
                    "the client whose call is in flight did not declare sampling".to_owned(),
                ));
            }
            let Some(session) = &caller.session else {
                return Err(refused("the client's session is not open".to_owned()));
            };
            session
                .approve_sampling(server)
                .await
                .map_err(|e| refused(e.to_string()))?;
            let asked = caller.peer.create_message(request);
            let answered = match self.timeout {
                Some(limit) => tokio::time::timeout(limit, asked)
                    .await
                    .map_err(|_| refused(format!("the client did not answer within {limit:?}")))?,
                None => asked.await,
            };
            answered.map_err(|e| match e {
                rmcp::ServiceError::McpError(e) => e,
                other => refused(format!("the client did not answer: {other}")),
            })
        })
    }
}

impl Roots for ElicitRouter {
    /// The roots of the client whose call is in flight on `server`; when
    /// none is, every client's (once each).
    fn roots<'a>(&'a self, server: &'a str) -> BoxFuture<'a, Vec<Root>> {
        let caller = self.caller_of(server).map(|c| c.id);
        let roots = self
            .roots
            .lock()
            .map(|all| match caller.as_ref().and_then(|id| all.get(id)) {
                Some(roots) => roots.clone(),
                None => {
                    let mut union: Vec<Root> = Vec::new();
                    for root in all.values().flatten() {
                        if !union.iter().any(|r| r.uri == root.uri) {
                            union.push(root.clone());
                        }
                    }
                    union
                }
            })
            .unwrap_or_default();
        Box::pin(std::future::ready(roots))
    }
}
