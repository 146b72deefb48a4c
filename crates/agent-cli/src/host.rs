use std::time::Duration;

use core_agent_mcp_config::{Config, Env};
use core_agent_mcp_policy::{Catalog, CatalogEntry, DiscoveredTool};
use core_agent_mcp_transport::model::{CallToolResult, JsonObject, Tool};
use core_agent_mcp_transport::{Server, Servers, StartOptions, Status};
use serde::Serialize;

use crate::{Error, Result};

/// How the Host starts servers and runs calls.
#[derive(Clone)]
pub struct HostOptions {
    /// How servers are started (timeout, elicitor, client info).
    pub start: StartOptions,
    /// Limit on one tool call; past it the request is cancelled on the server.
    pub call_timeout: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            start: StartOptions::default(),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// The MCP host: every configured server, and the namespaced catalog of
/// their tools.
///
/// Always call [`Host::shutdown`] before dropping it: that is what stops the
/// servers' child processes.
pub struct Host {
    servers: Servers,
    options: HostOptions,
}

/// One server's state, as `core-agent mcp list --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// The server's key in `mcp.json`.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: String,
    /// `"project"` or `"user"`.
    pub scope: String,
    /// `"connected"` or `"error"`.
    pub status: String,
    /// How many tools it lists.
    pub tools: usize,
    /// Why it is not connected, or `null`.
    pub error: Option<String>,
}

/// One tool of the catalog, as `core-agent tools --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolReport {
    /// The namespaced name the model calls.
    pub name: String,
    /// The server's key in `mcp.json`.
    pub server: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The description the model reads.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub input_schema: serde_json::Value,
}

impl From<&CatalogEntry> for ToolReport {
    fn from(e: &CatalogEntry) -> Self {
        ToolReport {
            name: e.name.clone(),
            server: e.server.clone(),
            tool: e.tool.clone(),
            description: e.description.clone(),
            input_schema: e.input_schema.clone(),
        }
    }
}

impl Host {
    /// Starts every server of `config` concurrently; `on_ready` hears about
    /// each one as it connects or fails. Servers that fail stay in the list
    /// with their error; they never stop the others.
    pub async fn start(
        config: &Config,
        env: &dyn Env,
        options: HostOptions,
        on_ready: &(dyn Fn(&Server) + Sync),
    ) -> Host {
        let servers = Servers::start(&config.servers, env, &options.start, on_ready).await;
        Host { servers, options }
    }

    /// The servers, in config order.
    pub fn servers(&self) -> impl Iterator<Item = &Server> {
        self.servers.iter()
    }

    /// Every server's state.
    pub fn server_reports(&self) -> Vec<ServerReport> {
        self.servers
            .iter()
            .map(|s| ServerReport {
                name: s.name().to_owned(),
                transport: s.transport().to_owned(),
                scope: s.scope().as_str().to_owned(),
                status: s.status().as_str().to_owned(),
                tools: s.tools().len(),
                error: s.error().map(ToString::to_string),
            })
            .collect()
    }

    /// The namespaced catalog of every connected server's current tools.
    pub fn catalog(&self) -> Catalog {
        let discovered: Vec<(&str, Vec<DiscoveredTool>)> = self
            .servers
            .iter()
            .filter(|s| s.status() == Status::Connected)
            .map(|s| (s.name(), s.tools().iter().map(discovered).collect()))
            .collect();
        Catalog::build(
            discovered
                .iter()
                .map(|(name, tools)| (*name, tools.as_slice())),
        )
    }

    /// The catalog as `core-agent tools --json` prints it.
    pub fn tool_reports(&self) -> Vec<ToolReport> {
        self.catalog()
            .entries()
            .iter()
            .map(ToolReport::from)
            .collect()
    }

    /// Calls the tool published as `name` (namespaced) with `arguments`.
    ///
    /// `Ok` with `is_error: Some(true)` means the tool ran and reported a
    /// failure; `Err` means the call could not be made or did not finish.
    pub async fn call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult> {
        let catalog = self.catalog();
        let Some(entry) = catalog.get(name) else {
            return Err(Error::UnknownTool {
                name: name.to_owned(),
                suggestions: suggest(&catalog, name),
            });
        };
        let server = self
            .servers
            .get(&entry.server)
            .ok_or_else(|| Error::UnknownTool {
                name: name.to_owned(),
                suggestions: Vec::new(),
            })?;
        Ok(server
            .call_tool(&entry.tool, arguments, self.options.call_timeout)
            .await?)
    }

    /// Stops every server (stdio children: EOF, SIGTERM, then SIGKILL).
    pub async fn shutdown(&mut self) {
        self.servers.shutdown().await;
    }
}

fn discovered(tool: &Tool) -> DiscoveredTool {
    DiscoveredTool::new(
        tool.name.to_string(),
        tool.description.as_deref().unwrap_or_default(),
        serde_json::Value::Object((*tool.input_schema).clone()),
    )
}

/// Up to three catalog names close to `name`, best first: tools whose own
/// name is `name` (the namespace was left out), then near spellings.
fn suggest(catalog: &Catalog, name: &str) -> Vec<String> {
    let bare = core_agent_mcp_policy::sanitize(name);
    let mut scored: Vec<(f64, &str)> = catalog
        .entries()
        .iter()
        .map(|e| {
            let score = if core_agent_mcp_policy::sanitize(&e.tool) == bare {
                2.0
            } else {
                strsim::jaro_winkler(name, &e.name)
            };
            (score, e.name.as_str())
        })
        .filter(|(score, _)| *score >= 0.88)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_owned())
        .collect()
}
