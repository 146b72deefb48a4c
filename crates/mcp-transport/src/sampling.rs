//! What a host offers its servers beside elicitation: its model
//! (`sampling/createMessage`) and its roots (`roots/list`). Each is declared
//! in the handshake only when the host has one.

#![allow(deprecated)] // sampling and roots (SEP-2577), which servers still use

use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, ErrorData, Root};

use crate::elicit::BoxFuture;

/// Answers servers' `sampling/createMessage` requests: runs a completion on
/// the host's model (or a client's, for a gateway) for server `server`.
pub trait Sampler: Send + Sync {
    /// The completion `request` asks for, or the error the server gets.
    fn sample<'a>(
        &'a self,
        server: &'a str,
        request: CreateMessageRequestParams,
    ) -> BoxFuture<'a, Result<CreateMessageResult, ErrorData>>;
}

/// Answers servers' `roots/list` requests: the directories and files the
/// host lets server `server` work in.
pub trait Roots: Send + Sync {
    /// The roots `server` sees now.
    fn roots<'a>(&'a self, server: &'a str) -> BoxFuture<'a, Vec<Root>>;
}

/// A fixed list of roots, the same for every server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FixedRoots(pub Vec<Root>);

impl Roots for FixedRoots {
    fn roots<'a>(&'a self, _server: &'a str) -> BoxFuture<'a, Vec<Root>> {
        Box::pin(std::future::ready(self.0.clone()))
    }
}

impl crate::Server {
    /// Tells the server that the roots changed
    /// (`notifications/roots/list_changed`); it lists them again.
    pub async fn notify_roots_changed(&self) {
        if let Some(live) = self.live() {
            let _ = live.connection().peer.notify_roots_list_changed().await;
        }
    }
}

impl crate::Servers {
    /// Tells every connected server that the roots changed.
    pub async fn notify_roots_changed(&self) {
        futures::future::join_all(self.iter().map(|s| s.notify_roots_changed())).await;
    }
}
