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

/// The session database of `raw` and `usage`, which only read it.
fn open_db(path: Option<&Path>) -> Result<SqliteStore, u8> {
    let Some(path) = path else {
        eprintln!(
            "core-agent: pass --session-db PATH: raw payloads and telemetry are only kept in a session database"
        );
        return Err(USAGE);
    };
    if !path.exists() {
        eprintln!(
            "core-agent: {} does not exist; it is created by a run with --session-db",
            path.display()
        );
        return Err(USAGE);
    }
    SqliteStore::open(path).map_err(|e| {
        eprintln!("core-agent: {e}");
        FAILED
    })
}
