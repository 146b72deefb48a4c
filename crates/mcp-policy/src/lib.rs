//! From the tools MCP servers discover to the catalog a model sees.
//!
//! Every tool of server `<server>` is published as `<server>_<tool>`, with
//! every character outside `[A-Za-z0-9_]` replaced by `_`, so names pass the
//! function-name rules of the major model APIs (`my-server` + `get-env` →
//! `my_server_get_env`). The [`Catalog`] maps each namespaced name back to
//! exactly one (server, tool) pair.
//!
//! # Example
//!
//! ```
//! use core_agent_mcp_policy::{Catalog, DiscoveredTool};
//!
//! let tools = vec![DiscoveredTool::new("read_file", "Read a file.", serde_json::json!({"type": "object"}))];
//! let catalog = Catalog::build([("file.system", tools.as_slice())]);
//!
//! let entry = catalog.get("file_system_read_file").unwrap();
//! assert_eq!((entry.server.as_str(), entry.tool.as_str()), ("file.system", "read_file"));
//! ```
//!
//! # Invariants
//!
//! - Pure: no I/O, no async, no dependency on rmcp or the network.
//! - A namespaced name maps back to exactly one (server, tool) pair.
//!
//! # Crate features
//!
//! None.

mod catalog;
mod names;

pub use catalog::{Catalog, CatalogEntry, DiscoveredTool, Warning};
pub use names::{namespaced, sanitize};
