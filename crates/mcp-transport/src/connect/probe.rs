//! The `server/discover` probe, made safe for servers that predate it.
//!
//! rmcp falls back to `initialize` when the probe is answered with a JSON-RPC
//! error. Some older servers answer every method they do not know with an
//! empty result instead (`{"result": {}}`); rmcp then fails the connection.
//! This transport wrapper turns such an answer to `server/discover` (any
//! result that is not a discover result) into the "method not found" error
//! the server meant, so the fallback runs.
//!
//! rmcp also gives up on the probe after 10 s and sends `initialize`; a slow
//! server (a Python one starting on a loaded machine) may then answer the
//! probe late, and rmcp took that answer for the answer to `initialize`
//! ("conflict initialized response id: expected 1, got 0"). Once
//! `initialize` is sent, a late answer to an abandoned probe is dropped; a
//! late discover result is noted (the server speaks 2026-07-28 and will
//! refuse `initialize`: the start is tried again with discover alone).
//! Everything else passes through.

use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::transport::Transport;

/// `inner`, with answers to `server/discover` that are not discover
/// results turned into "method not found" errors.
pub(super) struct DiscoverProbe<T> {
    inner: T,
    /// The ids of `server/discover` requests not yet answered.
    pending: HashSet<RequestId>,
    /// Probes given up on (`initialize` was sent while they were pending):
    /// their answers are dropped.
    abandoned: HashSet<RequestId>,
    /// Set when a probe given up on is answered with a discover result.
    late_discover: Arc<AtomicBool>,
}

impl<T> DiscoverProbe<T> {
    pub(super) fn new(inner: T, late_discover: Arc<AtomicBool>) -> Self {
        DiscoverProbe {
            inner,
            pending: HashSet::new(),
            abandoned: HashSet::new(),
            late_discover,
        }
    }

    /// Whether `message` answers a probe given up on (and is to be dropped).
    fn late(&mut self, message: &ServerJsonRpcMessage) -> bool {
        if self.abandoned.is_empty() {
            return false;
        }
        let (id, discovered) = match message {
            ServerJsonRpcMessage::Response(response) => (
                Some(&response.id),
                matches!(response.result, ServerResult::DiscoverResult(_)),
            ),
            ServerJsonRpcMessage::Error(error) => (error.id.as_ref(), false),
            _ => (None, false),
        };
        let late = id.is_some_and(|id| self.abandoned.remove(id));
        if late && discovered {
            self.late_discover.store(true, Ordering::Relaxed);
        }
        late
    }

    /// `message`, or the error that an answer to a pending probe that is
    /// not a discover result stands for.
    fn screen(&mut self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        if self.pending.is_empty() {
            return message;
        }
        match message {
            ServerJsonRpcMessage::Response(response) if self.pending.remove(&response.id) => {
                if matches!(response.result, ServerResult::DiscoverResult(_)) {
                    return ServerJsonRpcMessage::Response(response);
                }
                ServerJsonRpcMessage::error(
                    ErrorData::new(
                        ErrorCode::METHOD_NOT_FOUND,
                        "server/discover was answered with a result that is not a discover result; the server predates it",
                        None,
                    ),
                    Some(response.id),
                )
            }
            ServerJsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.pending.remove(id);
                }
                ServerJsonRpcMessage::Error(error)
            }
            other => other,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for DiscoverProbe<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item {
            match request.request {
                ClientRequest::DiscoverRequest(_) => {
                    self.pending.insert(request.id.clone());
                }
                ClientRequest::InitializeRequest(_) => {
                    self.abandoned.extend(self.pending.drain());
                }
                _ => {}
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if self.late(&message) {
                tracing::debug!("dropped a late answer to server/discover, given up on");
                continue;
            }
            return Some(self.screen(message));
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{DiscoverRequest, DiscoverRequestParams, EmptyResult, NumberOrString};

    use super::*;

    /// A transport that records what is sent and hands out `replies`.
    struct Canned {
        replies: Vec<ServerJsonRpcMessage>,
    }

    impl Transport<RoleClient> for Canned {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: ClientJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
            (!self.replies.is_empty()).then(|| self.replies.remove(0))
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn probed(canned: Canned) -> DiscoverProbe<Canned> {
        DiscoverProbe::new(canned, Arc::default())
    }

    fn id(n: i64) -> RequestId {
        NumberOrString::Number(n)
    }

    fn empty(n: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), id(n))
    }

    fn discover(n: i64) -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {})),
            id(n),
        )
    }

    #[tokio::test]
    async fn an_empty_answer_to_discover_becomes_method_not_found() {
        let mut probe = probed(Canned {
            replies: vec![empty(0), empty(0)],
        });
        probe.send(discover(0)).await.unwrap();
        let Some(ServerJsonRpcMessage::Error(error)) = probe.receive().await else {
            panic!("the empty answer to the probe was not turned into an error");
        };
        assert_eq!(error.id, Some(id(0)));
        assert_eq!(error.error.code, ErrorCode::METHOD_NOT_FOUND);
        // Answered once: a later response with the same id passes unchanged.
        assert!(matches!(
            probe.receive().await,
            Some(ServerJsonRpcMessage::Response(_))
        ));
    }

    #[tokio::test]
    async fn other_answers_pass_unchanged() {
        let mut probe = probed(Canned {
            replies: vec![empty(7), empty(1)],
        });
        // Not a probe: an empty result to it is an ordinary answer.
        probe
            .send(ClientJsonRpcMessage::request(
                ClientRequest::PingRequest(Default::default()),
                id(7),
            ))
            .await
            .unwrap();
        probe.send(discover(1)).await.unwrap();
        assert!(matches!(
            probe.receive().await,
            Some(ServerJsonRpcMessage::Response(r)) if r.id == id(7)
        ));
        assert!(matches!(
            probe.receive().await,
            Some(ServerJsonRpcMessage::Error(e)) if e.id == Some(id(1))
        ));
    }

    #[tokio::test]
    async fn a_late_answer_to_a_probe_given_up_on_is_dropped() {
        // rmcp gave up on probe 0 and sent `initialize` as request 1; the
        // server then answers both, the probe first.
        let mut probe = probed(Canned {
            replies: vec![empty(0), empty(1)],
        });
        probe.send(discover(0)).await.unwrap();
        probe
            .send(ClientJsonRpcMessage::request(
                ClientRequest::InitializeRequest(rmcp::model::InitializeRequest::new(
                    Default::default(),
                )),
                id(1),
            ))
            .await
            .unwrap();
        assert!(matches!(
            probe.receive().await,
            Some(ServerJsonRpcMessage::Response(r)) if r.id == id(1)
        ));
        assert!(probe.receive().await.is_none());
    }
}
