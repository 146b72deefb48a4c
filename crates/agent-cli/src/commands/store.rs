//! The shared store of a fleet (PostgreSQL): found from `--store`,
//! `CORE_AGENT_STORE` or `gateway.store`, connected and migrated; and the
//! notices replicas send each other.

use std::sync::Arc;

use core_agent_fleet::{Listening, Notice, Options, Postgres};
use core_agent_host::Host;

use crate::{FAILED, USAGE};

/// The shared store: `--store` (or `CORE_AGENT_STORE`), else
/// `gateway.store` with its placeholders expanded; connected and migrated.
/// `Err` is the exit code, the reason printed.
pub(crate) async fn shared_store(
    flag: Option<String>,
    configured: Option<String>,
    env: &dyn core_agent_mcp_config::Env,
) -> Result<Option<Postgres>, u8> {
    let url = match (flag, configured) {
        (Some(url), _) => url,
        (None, Some(raw)) => {
            let template = match core_agent_mcp_config::Template::parse(&raw) {
                Ok(t) => t,
                Err(e) => {
                    errln!("core-agent: gateway.store: {e}");
                    return Err(USAGE);
                }
            };
            let missing = template.missing(env);
            if !missing.is_empty() {
                errln!(
                    "core-agent: gateway.store needs {} set in the environment (or the project's .env)",
                    missing.join(", ")
                );
                return Err(USAGE);
            }
            template.expand(env).value
        }
        (None, None) => return Ok(None),
    };
    match Postgres::connect(&url, Options::default()).await {
        Ok(db) => {
            errln!("core-agent: shared store: {}", db.url());
            Ok(Some(db))
        }
        Err(e) => {
            errln!("core-agent: {e}");
            Err(FAILED)
        }
    }
}

/// Follows the fleet for `host`: the other replicas' pin changes rebuild
/// its catalog and their tool changes reach its clients; its own servers'
/// tool changes are told to them. Both stop when the returned value is
/// dropped.
pub(crate) fn follow(
    db: &Postgres,
    host: &Arc<Host>,
) -> (Listening, crate::commands::serve::AbortOnDrop) {
    let weak = Arc::downgrade(host);
    let listening = db.listen(move |notice| {
        let Some(host) = weak.upgrade() else {
            return;
        };
        match notice {
            Notice::ToolsChanged => host.tools_changed_elsewhere(),
            // Missed notices may have been either.
            _ => host.pins_changed(),
        }
    });
    let db = db.clone();
    let host = Arc::downgrade(host);
    let telling = tokio::spawn(async move {
        let Some(mut changes) = host.upgrade().map(|h| h.subscribe()) else {
            return;
        };
        let mut told = host.upgrade().map_or(0, |h| h.changes_here());
        while changes.changed().await.is_ok() {
            let Some(now) = host.upgrade().map(|h| h.changes_here()) else {
                return;
            };
            if now > told {
                told = now;
                if let Err(e) = db.announce_tools_changed().await {
                    errln!(
                        "core-agent: cannot tell the other replicas that the tools changed: {e}"
                    );
                }
            }
        }
    });
    (listening, crate::commands::serve::AbortOnDrop(telling))
}
