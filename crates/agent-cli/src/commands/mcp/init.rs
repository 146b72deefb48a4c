//! `core-agent mcp init`: creates the project's `mcp.json` with no servers.

use super::write_file;
use crate::cli::Global;
use crate::setup::Setup;
use crate::{FAILED, USAGE};

pub(crate) fn run(global: &Global) -> u8 {
    let Some(Setup { paths, .. }) = Setup::new(global) else {
        return USAGE;
    };
    if paths.project.exists() {
        outln!("{} already exists; left as it is", paths.project.display());
        return 0;
    }
    match write_file(&paths.project, core_agent_mcp_config::INIT_TEXT) {
        Ok(()) => {
            outln!("created {}", paths.project.display());
            0
        }
        Err(e) => {
            errln!("core-agent: cannot write {}: {e}", paths.project.display());
            FAILED
        }
    }
}
