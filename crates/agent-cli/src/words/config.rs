//! mcp-config's errors, worded with `core-agent`'s commands and flags.

use core_agent_mcp_config::{AddError, Error};

/// What is wrong with `mcp add`'s arguments, in its flags' terms.
pub(crate) fn add_error(e: &AddError) -> String {
    match e {
        AddError::Header { entry } => format!("--header `{entry}` is not `Name: value`"),
        AddError::Env { entry } => format!("--env `{entry}` is not `NAME=value`"),
        AddError::NoTransport => "say how to reach the server: `mcp add NAME -- COMMAND [ARGS…]` or `mcp add NAME --url URL`".to_owned(),
        AddError::BothTransports => "give either --url or a command after `--`, not both".to_owned(),
        AddError::EnvOnHttp => "--env is for stdio servers; an http server takes --header".to_owned(),
        other => other.to_string(),
    }
}

/// A config error, with the command that fixes it where there is one.
pub(crate) fn config_error(e: &Error) -> String {
    match e {
        Error::NameTaken {
            path,
            pointer,
            server,
        } => format!(
            "{}: {pointer}: a server named `{server}` already exists; remove it first with `core-agent mcp remove {server}`, or pick another name",
            path.display()
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_names_the_remove_command() {
        let e = Error::NameTaken {
            path: ".agents/mcp.json".into(),
            pointer: "/servers/fx".into(),
            server: "fx".into(),
        };
        assert_eq!(
            config_error(&e),
            ".agents/mcp.json: /servers/fx: a server named `fx` already exists; remove it first with `core-agent mcp remove fx`, or pick another name"
        );
    }

    #[test]
    fn add_errors_name_the_flags() {
        let e = AddError::Env {
            entry: "KEY".into(),
        };
        assert_eq!(add_error(&e), "--env `KEY` is not `NAME=value`");
        assert!(add_error(&AddError::EnvOnHttp).contains("--header"));
    }
}
