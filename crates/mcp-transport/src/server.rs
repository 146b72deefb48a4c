//! One configured server, connected or not: what it is, how it is doing,
//! its tools, and its shutdown.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use core_agent_mcp_config::{Limits, Scope, ServerEntry};
use rmcp::model::{CallToolResult, Implementation, JsonObject, Tool};

use crate::auth::Auth;
use crate::call;
use crate::error::{Error, Result, StartError};
use crate::handler::ProgressSink;
use crate::live::{Connection, Live};
use crate::restart::Health;

/// Whether a server came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Initialized and its tools listed.
    Connected,
    /// It failed to start; see [`Server::error`].
    Error,
    /// It was connected and has been shut down.
    Closed,
    /// Its connection ended unexpectedly and it is being started again;
    /// see [`Server::problem`]. Its tools stay listed.
    Restarting,
    /// Its connection ended unexpectedly and it is not started again (no
    /// restart policy, or it was restarted too often); see
    /// [`Server::problem`]. Its tools stay listed, and calls to them fail
    /// saying so.
    Down,
}

impl Status {
    /// `"connected"`, `"error"`, `"closed"`, `"restarting"` or `"down"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Connected => "connected",
            Status::Error => "error",
            Status::Closed => "closed",
            Status::Restarting => "restarting",
            Status::Down => "down",
        }
    }

    /// Whether its tools are published: connected, or connected once and
    /// restarting or down (so names stay stable and calls say why they fail).
    pub fn publishes(self) -> bool {
        matches!(self, Status::Connected | Status::Restarting | Status::Down)
    }
}

/// A connection to one configured server, or the reason there is none.
pub struct Server {
    name: String,
    scope: Scope,
    limits: Limits,
    transport: &'static str,
    auth: Auth,
    elapsed: Duration,
    state: State,
    /// A server whose first start failed, started later by the retries of
    /// a long-lived run (a restart policy is set).
    late: Arc<std::sync::OnceLock<Arc<Live>>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The live connection (rmcp service, child process) is shown as its status.
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("transport", &self.transport)
            .field("auth", &self.auth)
            .field("elapsed", &self.elapsed)
            .field("status", &self.status())
            .field("error", &self.error())
            .finish_non_exhaustive()
    }
}

enum State {
    Connected(Arc<Live>),
    Failed(StartError),
}

impl Server {
    /// A server whose start ended after `elapsed`: connected (`started` is
    /// its live connection) or failed; `late` is where the retries of a
    /// failed first start put it once one succeeds.
    pub(crate) fn new(
        entry: &ServerEntry,
        auth: Auth,
        elapsed: Duration,
        started: std::result::Result<Arc<Live>, StartError>,
        late: Arc<std::sync::OnceLock<Arc<Live>>>,
    ) -> Server {
        Server {
            name: entry.name.clone(),
            scope: entry.scope,
            limits: entry.spec.limits,
            transport: entry.spec.transport.kind(),
            auth,
            elapsed,
            state: match started {
                Ok(live) => State::Connected(live),
                Err(e) => State::Failed(e),
            },
            late,
        }
    }

    /// The server's key in `mcp.json`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it was configured.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// `"stdio"` or `"http"`.
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// How its requests are authenticated (`none`, `static`, or the token
    /// source's description); never a secret.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// How long the start took (until connected or failed).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Connected, failed to start, shut down, restarting or down.
    pub fn status(&self) -> Status {
        match self.started() {
            None => Status::Error,
            Some(live) if live.is_closed() => Status::Closed,
            Some(live) => match live.health() {
                Health::Up => Status::Connected,
                Health::Restarting(_) => Status::Restarting,
                Health::Down(_) => Status::Down,
            },
        }
    }

    /// The server once it started (at first, or later after a failed first
    /// start), shut down or not.
    fn started(&self) -> Option<&Arc<Live>> {
        match &self.state {
            State::Connected(live) => Some(live),
            State::Failed(_) => self.late.get(),
        }
    }

    /// The server, unless it failed to start or was shut down.
    pub(crate) fn live(&self) -> Option<&Arc<Live>> {
        self.started().filter(|live| !live.is_closed())
    }

    /// The current connection, unless the server failed or was shut down.
    fn connection(&self) -> Option<Arc<Connection>> {
        self.live().map(|l| l.connection())
    }

    /// Why the server failed to start.
    pub fn error(&self) -> Option<&StartError> {
        match &self.state {
            State::Failed(e) if self.late.get().is_none() => Some(e),
            _ => None,
        }
    }

    /// Why the server is not answering, in words: why it failed to start,
    /// or why its connection ended (when it is restarting or down).
    pub fn problem(&self) -> Option<String> {
        match (self.started(), &self.state) {
            (None, State::Failed(e)) => Some(e.to_string()),
            (None, State::Connected(_)) => None,
            (Some(live), _) => match live.health() {
                Health::Up => None,
                Health::Restarting(reason) => Some(format!("restarting: it {reason}")),
                Health::Down(reason) => Some(format!("down: it {reason}")),
            },
        }
    }

    /// The tools the server lists now (kept current on `tools/list_changed`).
    pub fn tools(&self) -> Vec<Tool> {
        self.live().map(|l| l.tools.tools()).unwrap_or_default()
    }

    /// Lists the server's tools again, in the background, when the freshness
    /// it gave its last listing (`ttlMs`) has passed; a server that gave
    /// none, or gave 0 while declaring `listChanged`, is listed again only
    /// when it says its tools changed. Re-lists
    /// are paced and coalesced with those after `tools/list_changed`, and a
    /// listing that finds the same tools changes nothing. Must be called
    /// within a Tokio runtime.
    pub fn revalidate(&self) {
        let Some(live) = self.live() else {
            return;
        };
        if !live.tools.stale() {
            return;
        }
        let conn = live.connection();
        if conn
            .handler
            .relisting
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        conn.handler.tools_stale(conn.peer.clone());
    }

    /// The first line a stdio server wrote to stdout that was not a protocol
    /// message (such lines are dropped; a well-behaved server writes none).
    pub fn stdout_noise(&self) -> Option<String> {
        let conn = self.connection()?;
        let noise = conn.noise.as_ref()?;
        noise.noise()
    }

    /// Things about the server the operator should hear (for example that
    /// its tool list was cut at `max_pages`).
    pub fn warnings(&self) -> Vec<String> {
        match self.live() {
            Some(l) if l.tools.truncated() => {
                let pages = self.limits.max_pages;
                let noun = if pages == 1 { "page" } else { "pages" };
                vec![format!(
                    "{}: stopped listing tools after {pages} {noun} (max_pages); tools on later pages are not published",
                    self.name
                )]
            }
            _ => Vec::new(),
        }
    }

    /// The server's limits, from its config.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// What the server said about itself in `initialize`.
    pub fn server_info(&self) -> Option<Implementation> {
        self.connection().and_then(|c| c.server_info.clone())
    }

    /// Calls `tool` (the server's own name) with `arguments`. When `timeout`
    /// passes first, the request is cancelled on the server.
    ///
    /// A tool that reports failure comes back as `Ok` with `is_error: Some(true)`;
    /// `Err` means the call itself failed (JSON-RPC error, transport, timeout).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<CallToolResult> {
        self.call_tool_with_progress(tool, arguments, timeout, None)
            .await
    }

    /// [`Server::call_tool`], passing each progress update the server sends
    /// about this call to `progress`.
    pub async fn call_tool_with_progress(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let Some(live) = self.live() else {
            return Err(Error::NotConnected {
                server: self.name.clone(),
            });
        };
        call::call(live, &self.name, tool, arguments, timeout, progress)
            .await
            .map(plain)
    }

    /// Closes the connection; a stdio child gets EOF, then SIGTERM, then
    /// SIGKILL after the kill grace, with its whole process group.
    /// Calls in flight fail; later calls are refused as not connected.
    pub async fn shutdown(&self) {
        let Some(live) = self.started() else {
            return;
        };
        live.shutdown().await;
    }

    /// Stops the task that watches the connection, without waiting.
    pub(crate) fn forget(&self) {
        if let Some(live) = self.started() {
            live.forget();
        }
    }
}

/// A result without what only the protocol needs: `resultType` (always
/// `complete` for a result that arrived) and the `_meta` keys the protocol
/// reserves (`io.modelcontextprotocol/…`, such as the server info a
/// 2026-07-28 server attaches to each result). The server's own `_meta`
/// stays.
fn plain(mut result: CallToolResult) -> CallToolResult {
    result.result_type = None;
    if let Some(meta) = &mut result.meta {
        meta.0
            .retain(|key, _| !key.starts_with("io.modelcontextprotocol/"));
        if meta.0.is_empty() {
            result.meta = None;
        }
    }
    result
}

/// Hears about a server as its start ends (connected or failed).
pub type OnReady = Arc<dyn Fn(&Server) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, MetaObject, ResultType};

    #[test]
    fn a_result_loses_only_what_the_protocol_reserves() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("hi")]);
        result.result_type = Some(ResultType::COMPLETE);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "io.modelcontextprotocol/serverInfo".to_owned(),
            serde_json::json!({"name": "s"}),
        );
        meta.insert("acme/trace".to_owned(), serde_json::json!("t-1"));
        result.meta = Some(MetaObject(meta));
        let plain = plain(result);
        assert_eq!(plain.result_type, None);
        let kept: Vec<&String> = plain.meta.as_ref().unwrap().0.keys().collect();
        assert_eq!(kept, ["acme/trace"]);
        let mut only_reserved = CallToolResult::success(vec![]);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "io.modelcontextprotocol/serverInfo".to_owned(),
            serde_json::json!({}),
        );
        only_reserved.meta = Some(MetaObject(meta));
        assert_eq!(plain_meta(only_reserved), None);
    }

    fn plain_meta(result: CallToolResult) -> Option<MetaObject> {
        plain(result).meta
    }
}
