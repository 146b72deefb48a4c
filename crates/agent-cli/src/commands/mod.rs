//! One module per subcommand, each with a `run` that `main` calls.

pub(crate) mod call;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod demo_server;
pub(crate) mod man;
pub(crate) mod mcp;
pub(crate) mod raw;
pub(crate) mod serve;
pub(crate) mod store;
pub(crate) mod supervise;
pub(crate) mod tools;
pub(crate) mod usage;

use std::path::Path;

use core_agent_digest::SqliteStore;

use crate::{FAILED, USAGE};

/// Where `raw` and `usage` read: the session database, else a fleet's
/// shared store (`--store`, `CORE_AGENT_STORE`).
async fn open_store(
    path: Option<&Path>,
    shared: Option<String>,
) -> Result<Box<dyn core_agent_digest::Store>, u8> {
    match (path, shared) {
        (Some(path), _) => Ok(Box::new(open_db(path)?)),
        (None, Some(url)) => {
            match core_agent_fleet::Postgres::connect(&url, core_agent_fleet::Options::default())
                .await
            {
                Ok(db) => Ok(Box::new(db)),
                Err(e) => {
                    errln!("core-agent: {e}");
                    Err(FAILED)
                }
            }
        }
        (None, None) => {
            errln!(
                "core-agent: pass --session-db PATH (or --store URL for a fleet's store): raw payloads and telemetry are only kept in a session database"
            );
            Err(USAGE)
        }
    }
}

/// The session database of `raw` and `usage`, which only read it.
fn open_db(path: &Path) -> Result<SqliteStore, u8> {
    if !path.exists() {
        errln!(
            "core-agent: {} does not exist; it is created by a run with --session-db",
            path.display()
        );
        return Err(USAGE);
    }
    SqliteStore::open(path).map_err(|e| {
        errln!("core-agent: {e}");
        FAILED
    })
}
