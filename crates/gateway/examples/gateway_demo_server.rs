//! The demo MCP server on stdin/stdout (what `core-agent demo-server` runs),
//! named apart from the host's `demo_server` example (cargo wants example
//! names unique in a workspace);
//! the gateway's integration tests put it behind the host.

#![allow(clippy::print_stderr)]

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(e) = core_agent_host::demo::serve_stdio().await {
        eprintln!("gateway_demo_server: {e}");
        std::process::exit(1);
    }
}
