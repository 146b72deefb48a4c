//! The core-agent Host: the crates of this workspace composed into one MCP
//! host, as the `core-agent` command uses it.
//!
//! [`Host::start`] starts every server of a loaded [`Config`](core_agent_mcp_config::Config)
//! concurrently, [`Host::catalog`] gives the namespaced tools
//! (`<server>_<tool>`), [`Host::call`] routes a call by namespaced name, and
//! [`Host::shutdown`] stops every server and child process.
//!
//! # Example
//!
//! ```no_run
//! use core_agent::{Host, HostOptions};
//! use core_agent_mcp_config::{load, ConfigPaths, ProcessEnv};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = load(&ConfigPaths::new(".agents", None))?;
//! let mut host = Host::start(&config, &ProcessEnv, HostOptions::default(), &|_| {}).await;
//! for tool in host.catalog().entries() {
//!     println!("{}: {}", tool.name, tool.description);
//! }
//! let result = host.call("demo_divide", serde_json::from_str(r#"{"a": 1, "b": 4}"#)?).await;
//! host.shutdown().await;
//! println!("{:?}", result?.content);
//! # Ok(()) }
//! ```
//!
//! The [`demo`] module is the small MCP server that `core-agent demo-server`
//! runs, so the repository's own `.agents/mcp.json` works with nothing installed.
//!
//! # Invariants
//!
//! - The library never prints; the `core-agent` binary does.
//! - Every tool call is routed by namespaced name to exactly one (server, tool).
//!
//! # Crate features
//!
//! None.

pub mod demo;
mod error;
mod host;

pub use error::{Error, Result};
pub use host::{Host, HostOptions, ServerReport, ToolReport};
