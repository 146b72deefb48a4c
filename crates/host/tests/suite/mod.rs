//! Integration tests of the `Host` library API against the demo server, run
//! as `core-agent demo-server` (the binary of this package).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use core_agent_host::{
    AuthStatus, DigestOptions, Error, Host, HostOptions, ServerReport, SessionOptions,
};
use core_agent_mcp_config::{
    Config, Dialect, Scope, ServerEntry, ServerSpec, StdioSpec, Transport, TrustLevel,
};
use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use expect_test::expect;
use serde_json::{Value, json};

mod calls;
mod catalog;
mod restart;
mod sessions;
mod survey;

fn stdio(name: &str, command: &str, args: &[&str]) -> ServerEntry {
    ServerEntry {
        name: name.to_owned(),
        scope: Scope::Project,
        source: PathBuf::from(".agents/mcp.json"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(Transport::Stdio(StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
        })),
    }
}

/// `<target>/debug/examples/demo_server`, built by `cargo test` with this
/// crate's `demo` feature.
fn demo_server() -> String {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let path = debug.join("examples").join("demo_server");
    assert!(
        path.exists(),
        "{} is missing; run `cargo test -p core-agent-host`",
        path.display()
    );
    path.display().to_string()
}

fn demo(name: &str) -> ServerEntry {
    stdio(name, &demo_server(), &[])
}

fn config(servers: Vec<ServerEntry>) -> Config {
    Config::default().with_servers(servers)
}

/// A shared host, and the session options its calls are made with.
struct TestHost {
    host: std::sync::Arc<Host>,
    session: SessionOptions,
}

impl std::ops::Deref for TestHost {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

impl TestHost {
    /// One call, in a session of `level`.
    async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> core_agent_host::Result<CallToolResult> {
        let mut options = self.session.clone();
        options.trust_level = level;
        self.host.session(options).call(name, arguments).await
    }
}

/// A host whose sessions approve every ask: these tests are about the
/// Host's dispatch, not its permissions.
async fn start(servers: Vec<ServerEntry>, options: HostOptions) -> TestHost {
    start_with(servers, options, approving()).await
}

async fn start_with(
    servers: Vec<ServerEntry>,
    options: HostOptions,
    session: SessionOptions,
) -> TestHost {
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Host::start(&config(servers), &env, options, &|_, _| {}).await;
    TestHost {
        host: std::sync::Arc::new(host),
        session,
    }
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// The text of a result's single text block.
fn text(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    assert_eq!(
        value["content"].as_array().map(Vec::len),
        Some(1),
        "{value}"
    );
    value["content"][0]["text"].as_str().unwrap().to_owned()
}

/// Host options whose gate approves every ask: these tests are about the
/// Host's dispatch, not its permissions.
fn approving() -> SessionOptions {
    SessionOptions::default().with_prompter(std::sync::Arc::new(core_agent_permissions::ApproveAll))
}

/// Counts the asks it answers, approving each.
#[derive(Default)]
struct CountingPrompter(std::sync::atomic::AtomicUsize);

impl core_agent_permissions::Prompter for CountingPrompter {
    fn ask<'a>(
        &'a self,
        _tool: &'a str,
        _detail: &'a str,
    ) -> core_agent_permissions::AskFuture<'a> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(std::future::ready(core_agent_permissions::Answer::Yes))
    }
}

fn signal(pid: &str, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}
