//! `core-agent demo-server`: the built-in demo MCP server on stdin/stdout.

use crate::FAILED;

pub(crate) async fn run() -> u8 {
    match core_agent_host::demo::serve_stdio().await {
        Ok(()) => 0,
        Err(e) => {
            errln!("core-agent: demo-server: {e}");
            FAILED
        }
    }
}
