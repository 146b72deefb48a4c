//! `core-agent raw`: a digested result's raw payload, from `--session-db` or a fleet's shared store (`--store`).

use super::open_store;
use crate::cli::Global;
use crate::setup::Setup;
use crate::{FAILED, USAGE};

pub(crate) async fn run(
    global: &Global,
    call_id: &str,
    pointer: Option<&str>,
    store: Option<String>,
) -> u8 {
    // Bad --start-timeout or --call-timeout values are refused here too.
    if Setup::new(global).is_none() {
        return USAGE;
    }
    let store = match open_store(global.session_db.as_deref(), store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.get(call_id) {
        Ok(Some(record)) => match pointer {
            None => {
                outln!("{}", record.payload);
                0
            }
            Some(p) => match core_agent_digest::extract(&record.payload, p) {
                Ok(part) => {
                    outln!("{part}");
                    0
                }
                Err(e) => {
                    errln!("core-agent: {e}");
                    FAILED
                }
            },
        },
        Ok(None) => {
            errln!("core-agent: no raw payload is stored under `{call_id}`");
            FAILED
        }
        Err(e) => {
            errln!("core-agent: {e}");
            FAILED
        }
    }
}
