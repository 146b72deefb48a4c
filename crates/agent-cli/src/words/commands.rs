//! The binary's commands for the steps the host's messages ask for.

use core_agent_host::Commands;
use core_agent_mcp_transport::Server;

/// `core-agent mcp login` and `core-agent mcp trust`, named in the host's
/// messages (server reports, warnings, doctor findings, call errors).
#[derive(Debug)]
pub(crate) struct CliCommands;

impl Commands for CliCommands {
    fn login(&self, server: &str) -> Option<String> {
        Some(format!("core-agent mcp login {server}"))
    }

    fn trust(&self, server: &str, tool: Option<&str>) -> Option<String> {
        Some(match tool {
            Some(tool) => format!("core-agent mcp trust {server} {tool}"),
            None => format!("core-agent mcp trust {server}"),
        })
    }
}

/// Why `server` is not up, with the login command when a login is what it
/// needs.
pub(crate) fn problem(server: &Server) -> String {
    let problem = server.problem().unwrap_or_default();
    match server.error() {
        Some(e) if e.needs_login() => match CliCommands.login(server.name()) {
            Some(command) => format!("{problem}: run `{command}`"),
            None => problem,
        },
        _ => problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_name_the_server_and_tool() {
        assert_eq!(
            CliCommands.login("gh").as_deref(),
            Some("core-agent mcp login gh")
        );
        assert_eq!(
            CliCommands.trust("fx", Some("stable")).as_deref(),
            Some("core-agent mcp trust fx stable")
        );
        assert_eq!(
            CliCommands.trust("fx", None).as_deref(),
            Some("core-agent mcp trust fx")
        );
    }
}
