//! `core-agent mcp add`: writes one server into the project's or the
//! user's config file.

use core_agent_mcp_config::NewServer;

use super::write_file;
use crate::cli::{Global, ScopeArg};
use crate::setup::Setup;
use crate::{FAILED, USAGE, words};

pub(crate) fn run(
    global: &Global,
    name: &str,
    scope: ScopeArg,
    env: &[String],
    url: Option<&str>,
    headers: &[String],
    command: &[String],
) -> u8 {
    let Some(Setup { paths, .. }) = Setup::new(global) else {
        return USAGE;
    };
    let server = match NewServer::from_args(url, headers, env, command) {
        Ok(server) => server,
        Err(e) => {
            errln!("core-agent: {}", words::config::add_error(&e));
            return USAGE;
        }
    };
    // A project with only `.mcp.json` gets the server there, in its dialect,
    // not a second file beside it.
    let path = match (scope.scope(), &paths.dot_mcp) {
        (core_agent_mcp_config::Scope::Project, Some(dot))
            if !paths.project.exists() && dot.is_file() =>
        {
            Some(dot.as_path())
        }
        (scope, _) => paths.file(scope),
    };
    let Some(path) = path else {
        errln!("core-agent: HOME is not set, so there is no user config; pass --user-config FILE");
        return USAGE;
    };
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            errln!("core-agent: cannot read {}: {e}", path.display());
            return FAILED;
        }
    };
    let text = match core_agent_mcp_config::add_server(path, existing.as_deref(), name, &server) {
        Ok(text) => text,
        Err(e) => {
            errln!("core-agent: {}", words::config::config_error(&e));
            return USAGE;
        }
    };
    if let Err(e) = write_file(path, &text) {
        errln!("core-agent: cannot write {}: {e}", path.display());
        return FAILED;
    }
    for (k, v) in server.pairs() {
        if !v.contains("${")
            && let Some(kind) = core_agent_mcp_config::secret_kind(k, v)
        {
            errln!(
                "core-agent: warning: `{k}` holds {kind}; put it in .env and write ${{{k}}} instead, so the file can be committed"
            );
        }
    }
    outln!("added server `{name}` to {}", path.display());
    0
}
