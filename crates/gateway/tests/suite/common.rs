//! What the gateway's integration tests share: the demo server behind them.

use std::collections::BTreeMap;

use core_agent_mcp_config::{Dialect, Scope, ServerEntry, ServerSpec, StdioSpec, Transport};

/// The `gateway_demo_server` example, built beside the test binaries.
pub(crate) fn demo_server() -> String {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let path = debug.join("examples").join("gateway_demo_server");
    assert!(path.exists(), "{} is missing", path.display());
    path.display().to_string()
}

/// The demo server as the project's stdio server `demo`.
pub(crate) fn demo_entry() -> ServerEntry {
    ServerEntry {
        name: "demo".to_owned(),
        scope: Scope::Project,
        source: "mcp.json".into(),
        dialect: Dialect::Core,
        spec: ServerSpec::new(Transport::Stdio(StdioSpec {
            command: demo_server(),
            args: Vec::new(),
            env: BTreeMap::new(),
        })),
    }
}
