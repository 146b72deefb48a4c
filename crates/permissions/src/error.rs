//! `config.json` reports through the machinery of `mcp.json`: the same
//! error type, whose problems carry file, field, position and fix.

/// Why the permissions config could not be loaded: the file could not be
/// read ([`Error::Read`]), is not JSON ([`Error::Syntax`]), or has wrong
/// fields ([`Error::Invalid`], every problem with its line and column; the
/// project file's first, each file's in file order).
pub use core_agent_mcp_config::Error;
/// The result type of this crate.
pub use core_agent_mcp_config::Result;
