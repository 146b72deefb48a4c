//! `core-agent __supervise`: the hidden entry that runs one stdio server
//! under supervision (see `core_agent_mcp_transport::supervise`).

use std::process::ExitCode;

use crate::FAILED;

/// `core-agent __supervise …`: runs one stdio server under supervision.
pub(crate) fn run(words: Vec<std::ffi::OsString>) -> ExitCode {
    use core_agent_mcp_transport::supervise::{self, Exit, Plan};
    let exit = match Plan::parse(words) {
        Ok(plan) => supervise::run(&plan),
        Err(e) => Exit::usage(e),
    };
    if let Some(message) = &exit.message {
        errln!("core-agent {message}");
    }
    ExitCode::from(u8::try_from(exit.code).unwrap_or(FAILED))
}
