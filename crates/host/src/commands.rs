//! The commands a front end offers for the steps the host's messages ask
//! of their reader.

use std::fmt;

/// The commands a front end offers for the steps that the host's messages
/// ask of their reader: logging in to a server (MCP OAuth), accepting a
/// changed tool's definition into `mcp.lock`.
///
/// The host's messages name these commands where they ask for the step,
/// so a user of a front end reads the command to type; without them (the
/// default, [`HostOptions::commands`](crate::HostOptions::commands) `None`)
/// the messages say the step in words. A library user that offers its own
/// steps implements this; the `core-agent` binary names its subcommands.
///
/// ```
/// use core_agent_host::Commands;
///
/// #[derive(Debug)]
/// struct MyAgent;
///
/// impl Commands for MyAgent {
///     fn login(&self, server: &str) -> Option<String> {
///         Some(format!("my-agent login {server}"))
///     }
///     fn trust(&self, server: &str, tool: Option<&str>) -> Option<String> {
///         Some(format!("my-agent trust {server} {}", tool.unwrap_or("--all")))
///     }
/// }
/// assert_eq!(MyAgent.login("gh").as_deref(), Some("my-agent login gh"));
/// ```
pub trait Commands: Send + Sync + fmt::Debug {
    /// The command that logs in to `server`, or `None` to say it in words.
    fn login(&self, server: &str) -> Option<String>;
    /// The command that accepts `server`'s current definition of `tool`
    /// (of every tool it lists when `tool` is `None`) into `mcp.lock`, or
    /// `None` to say it in words.
    fn trust(&self, server: &str, tool: Option<&str>) -> Option<String>;
}
