//! The resolve step: the tool a name calls, or names the caller may have meant.

use core_agent_mcp_config::{BuiltinTools, TrustLevel};
use core_agent_mcp_policy::{Catalog, Warning};

use crate::host::Published;
use crate::pipeline::Route;
use crate::tools::{self};
use crate::{Error, Result};

/// The resolve step: the tool published as `name`. A host tool (their
/// names are reserved, so no server's tool can take one; `retrieve_raw` only
/// while the digest is on, the survey tools only while they are on), else the catalog's route; an unknown name comes
/// back with up to three names a caller of `level` could have meant; a
/// name the catalog withheld comes back with its warning, in `word`'s words.
pub(crate) fn resolve(
    published: &Published,
    name: &str,
    level: TrustLevel,
    digest_on: bool,
    survey: Option<&BuiltinTools>,
    word: &dyn Fn(&Warning) -> String,
) -> Result<Route> {
    // No tool has a name longer than MCP allows: refused before any
    // lookup, so a long name costs no more than its size.
    if name.len() > core_agent_mcp_policy::MAX_TOOL_NAME {
        return Err(Error::UnknownTool {
            name: name.to_owned(),
            suggestions: Vec::new(),
        });
    }
    if let Some(tool) = tools::host_tool(name, digest_on, survey.is_some())
        && (tool.survey().is_none() || survey.and_then(|a| a.levels(name)).is_some())
    {
        return Ok(Route::Host(tool));
    }
    match published.routes.get(name) {
        Some(route) => Ok(Route::Mcp(route.clone())),
        // Why a tool is missing is told to the creator and to callers who
        // may see other tools of that server; others hear of no such tool.
        None => match published.catalog.withheld(name).find(|w| {
            level == TrustLevel::Creator
                || w.server().is_some_and(|server| {
                    published.catalog.visible(level).any(|e| e.server == server)
                })
        }) {
            Some(warning) => Err(Error::Withheld {
                name: name.to_owned(),
                reason: word(warning),
            }),
            None => Err(Error::UnknownTool {
                name: name.to_owned(),
                suggestions: suggest(&published.catalog, name, level),
            }),
        },
    }
}

/// Up to three names close to `name` that a caller of `level` may use, best
/// first: tools whose own name is `name` (the namespace was left out), then
/// near spellings (mcp-config's did-you-mean, the one the config's keys use).
pub(crate) fn suggest(catalog: &Catalog, name: &str, level: TrustLevel) -> Vec<String> {
    let bare = core_agent_mcp_policy::sanitize(name);
    let mut out: Vec<&str> = catalog
        .visible(level)
        .filter(|e| core_agent_mcp_policy::sanitize(&e.tool) == bare)
        .map(|e| e.name.as_str())
        .collect();
    out.sort_unstable();
    let near = core_agent_mcp_config::suggestions(
        name,
        catalog.visible(level).map(|e| e.name.as_str()),
        3,
    );
    for n in near {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.into_iter().take(3).map(str::to_owned).collect()
}
