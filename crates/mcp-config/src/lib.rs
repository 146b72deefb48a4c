//! Load, validate and merge core-agent's `mcp.json` files.
//!
//! core-agent reads two files, highest precedence first:
//!
//! | precedence | path | scope |
//! |---|---|---|
//! | 1 | `<agentsDir>/mcp.json` (usually `.agents/mcp.json`) | project |
//! | 2 | `~/.agents/mcp.json` | user |
//!
//! Servers merge by name, the project entry winning. The non-server fields
//! (`agentic_wrap`, `agentic_wrap_threshold`, `agentic_wrap_llm`,
//! `agentic_wrap_model`) take the first value set along that list. A missing
//! file means "no servers here". Every error names the file, the server, the
//! field (as a JSON pointer) and the fix.
//!
//! `${env:NAME}` placeholders in stdio `env` and HTTP `headers` values are
//! checked at load and expanded when a server starts ([`Template::expand`]);
//! an unset variable expands to the empty string.
//!
//! # Example
//!
//! ```
//! use std::collections::BTreeMap;
//! use core_agent_mcp_config::{load, ConfigPaths, Transport};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(
//!     dir.path().join("mcp.json"),
//!     r#"{"version": 1, "servers": {
//!         "api": {"transport": "http", "url": "https://example.com/mcp",
//!                 "headers": {"Authorization": "Bearer ${env:API_TOKEN}"}}}}"#,
//! )?;
//! let config = load(&ConfigPaths { project: dir.path().join("mcp.json"), user: None })?;
//! let Transport::Http(http) = &config.servers[0].spec.transport else { unreachable!() };
//!
//! let env = BTreeMap::from([("API_TOKEN".to_string(), "s3cret".to_string())]);
//! let header = http.headers["Authorization"].expand(&env);
//! assert_eq!(header.value, "Bearer s3cret");
//! assert!(header.interpolated); // a secret: never print it
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Invariants
//!
//! - Performs no I/O beyond reading the files it is pointed at; spawns nothing.
//! - Synchronous; needs no async runtime.
//!
//! # Crate features
//!
//! None.

mod env;
mod error;
mod load;
mod spec;
mod template;

pub use env::{Env, ProcessEnv};
pub use error::{Error, Problem, Result};
pub use load::{ConfigPaths, load};
pub use spec::{
    AuthSpec, Config, ConfigFile, HttpSpec, Scope, ServerEntry, ServerSpec, Setting, StdioSpec,
    Transport,
};
pub use template::{Expanded, Template};
