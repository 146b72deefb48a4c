//! The trust step: whether the caller's trust level may call the tool.

use core_agent_mcp_config::{BuiltinTools, TrustLevel};

use crate::pipeline::Route;
use crate::{Error, Result};

/// The trust step: a server's tool allows the levels policy gave it; a
/// survey tool the levels under the reserved name `builtin` give it (every
/// level by default); the other host tools allow every level (what they
/// reach is checked by the tool).
pub(crate) fn trust(
    route: &Route,
    name: &str,
    level: TrustLevel,
    survey: Option<&BuiltinTools>,
) -> Result<()> {
    match route {
        Route::Mcp(route) if !route.trust_levels.contains(&level) => {
            Err(restricted(name, level, &route.trust_levels))
        }
        Route::Host(tool) if tool.survey().is_some() => {
            let levels = survey.and_then(|a| a.levels(name)).unwrap_or_default();
            if levels.contains(&level) {
                Ok(())
            } else {
                Err(restricted(name, level, &levels))
            }
        }
        _ => Ok(()),
    }
}

pub(crate) fn restricted(name: &str, level: TrustLevel, allowed: &[TrustLevel]) -> Error {
    Error::Restricted {
        name: name.to_owned(),
        level: level.as_str().to_owned(),
        allowed: allowed
            .iter()
            .map(|l| format!("`{}`", l.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use core_agent_mcp_config::BuiltinTools;

    use super::*;
    use crate::pipeline::ToolRoute;
    use crate::tools;

    #[test]
    fn the_trust_step_follows_policy_for_server_tools_and_opens_host_tools() {
        let route = Route::Mcp(Arc::new(ToolRoute {
            server: 0,
            server_name: "fs".into(),
            tool: "delete".into(),
            read_only: false,
            trust_levels: vec![TrustLevel::Creator],
            timeout: Duration::from_secs(30),
            max_result_bytes: 131_072,
            digest: true,
        }));
        assert!(trust(&route, "fs_delete", TrustLevel::Creator, None).is_ok());
        let err = trust(&route, "fs_delete", TrustLevel::Public, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`fs_delete` is not available at trust level `public`; it allows `creator`"
        );
        for tool in &tools::HOST_TOOLS {
            let open = BuiltinTools::default();
            let route = Route::Host(tool);
            assert!(trust(&route, tool.name, TrustLevel::Public, Some(&open)).is_ok());
        }
    }
}
