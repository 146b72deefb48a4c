//! `core-agent mcp remove`: removes a server from the file that declares it.

use super::write_file;
use crate::cli::{Global, ScopeArg};
use crate::setup::Setup;
use crate::{FAILED, USAGE};

pub(crate) fn run(global: &Global, name: &str, scope: Option<ScopeArg>) -> u8 {
    let Some(Setup { paths, .. }) = Setup::new(global) else {
        return USAGE;
    };
    let wanted = scope.map(ScopeArg::scope);
    let everywhere = match core_agent_mcp_config::remove_from(&paths, name, wanted) {
        Ok(core_agent_mcp_config::Removal::Removed { path, text }) => {
            if let Err(e) = write_file(&path, &text) {
                errln!("core-agent: cannot write {}: {e}", path.display());
                return FAILED;
            }
            outln!("removed server `{name}` from {}", path.display());
            return 0;
        }
        Ok(core_agent_mcp_config::Removal::NotFound { configured }) => configured,
        Err(e) => {
            errln!("core-agent: {e}");
            return USAGE;
        }
    };
    let known = if everywhere.is_empty() {
        "no servers are configured".to_owned()
    } else {
        format!("configured servers: {}", everywhere.join(", "))
    };
    errln!("core-agent: no server named `{name}`; {known}");
    USAGE
}
