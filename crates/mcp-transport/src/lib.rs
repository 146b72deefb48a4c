//! Start, call and stop MCP servers over stdio and streamable HTTP.
//!
//! [`Servers::start`] brings up every configured server concurrently, each
//! under its own timeout (spawn or connect, `initialize`, every page of
//! `tools/list`). A server that fails — its binary is missing, its URL answers
//! 404, it crashes or it hangs — ends up with [`Status::Error`] and a
//! [`StartError`] in words a person can act on; the others carry on.
//!
//! stdio servers run in a process group of their own with stderr drained (the
//! last lines are kept for error reports). At shutdown each child gets EOF on
//! stdin, then SIGTERM, then SIGKILL after the kill grace (3 s), together with
//! everything else in its group.
//!
//! A server's `elicitation/create` requests go to an [`Elicitor`]; the default,
//! [`Decline`], declines them all.
//!
//! # Example
//!
//! ```no_run
//! use core_agent_mcp_config::{load, ConfigPaths, ProcessEnv};
//! use core_agent_mcp_transport::{Servers, StartOptions, Status};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = load(&ConfigPaths::new(".agents", None))?;
//! let mut servers = Servers::start(&config.servers, &ProcessEnv, &StartOptions::default(), &|_| {}).await;
//! for server in servers.iter() {
//!     match server.status() {
//!         Status::Connected => println!("{}: {} tools", server.name(), server.tools().len()),
//!         Status::Error => println!("{}: {}", server.name(), server.error().map(|e| e.to_string()).unwrap_or_default()),
//!     }
//! }
//! servers.shutdown().await; // always: it stops the children
//! # Ok(()) }
//! ```
//!
//! # Invariants
//!
//! - A failing server never takes down the others.
//! - After [`Servers::shutdown`] no child process of this crate, nor any process
//!   in its group, is left running.
//! - Never prints; diagnostics go through `tracing`.
//!
//! # Crate features
//!
//! None. TLS for `https://` servers comes from rustls.

mod child;
mod elicit;
mod error;
mod handler;
mod server;

pub use elicit::{AcceptDefaults, BoxFuture, Decline, Elicitor, describe_request, schema_defaults};
pub use error::{Error, Result, StartError};
pub use server::{Server, Servers, StartOptions, Status};

/// The rmcp model types this crate's API uses (`CallToolResult`, `Tool`,
/// `ElicitRequestParams`, …).
pub use rmcp::model;
