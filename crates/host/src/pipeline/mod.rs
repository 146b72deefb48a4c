//! The route a call takes, computed once per tool when the catalog is
//! built, and the steps of the pipeline as plain functions:
//! [`resolve()`], [`trust()`], [`gate_remembering()`], [`shape()`].

use std::sync::Arc;
use std::time::Duration;

use core_agent_mcp_config::TrustLevel;

use crate::tools::{self};

mod gate;
mod resolve;
mod shape;
#[cfg(test)]
mod tests;
mod trust;

#[cfg(test)]
pub(crate) use gate::gate;
pub(crate) use gate::{Remembering, gate_remembering};
pub(crate) use resolve::{resolve, suggest};
pub(crate) use shape::shape;
pub(crate) use trust::{restricted, trust};

/// What a call of one published tool needs, from resolve to the cap,
/// computed when the catalog is built: a call takes it by cloning an `Arc`,
/// and does not look its server, config or catalog entry up again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolRoute {
    /// The server's index in the host's servers.
    pub(crate) server: usize,
    /// The server's key in the config (what the digest records).
    pub(crate) server_name: String,
    /// The server's own name for the tool.
    pub(crate) tool: String,
    /// The dispatch class.
    pub(crate) read_only: bool,
    /// The trust levels that may call it (the catalog entry's).
    pub(crate) trust_levels: Vec<TrustLevel>,
    /// The call's time limit.
    pub(crate) timeout: Duration,
    /// The bound on the result.
    pub(crate) max_result_bytes: usize,
    /// Whether results are digested.
    pub(crate) digest: bool,
}

/// Where an admitted call goes.
#[derive(Debug)]
pub(crate) enum Route {
    /// A server's tool: where dispatch sends it.
    Mcp(Arc<ToolRoute>),
    /// A host tool.
    Host(&'static tools::HostTool),
}
