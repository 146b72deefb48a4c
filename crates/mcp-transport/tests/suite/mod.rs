//! Integration tests of `core-agent-mcp-transport` against real child
//! processes: the `echo_server` example of this crate, `sh`, and commands
//! that do not exist. Nothing here needs the network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{ReservedPort, alive};
use core_agent_mcp_config::{
    AuthSpec, Dialect, HttpSpec, OAuthSpec, Scope, ServerEntry, ServerSpec, StdioSpec, Template,
    Transport,
};
use core_agent_mcp_transport::model::{
    CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject,
};
use core_agent_mcp_transport::{
    AcceptDefaults, BoxFuture, Decline, Elicitor, Error, RestartPolicy, Servers, StartError,
    StartOptions, Status, Supervisor,
};
use serde_json::{Value, json};

mod calls;
mod elicitation;
mod restarts;
mod shutdown;
mod start_failures;
mod supervisor;

/// `<target>/debug/examples/echo_server`, built by `cargo test` with this
/// test binary (`<target>/debug/deps/all-…`).
fn echo_server() -> String {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    let path = debug.join("examples").join("echo_server");
    assert!(path.exists(), "{} is not built", path.display());
    path.to_string_lossy().into_owned()
}

fn entry(name: &str, transport: Transport) -> ServerEntry {
    ServerEntry {
        name: name.to_owned(),
        scope: Scope::Project,
        source: PathBuf::from(".agents/mcp.json"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(transport),
    }
}

fn templates(pairs: &[(&str, &str)]) -> BTreeMap<String, Template> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Template::parse(v).unwrap()))
        .collect()
}

fn stdio(name: &str, command: &str, args: &[&str], env: &[(&str, &str)]) -> ServerEntry {
    entry(
        name,
        Transport::Stdio(StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: templates(env),
        }),
    )
}

fn echo(name: &str, env: &[(&str, &str)]) -> ServerEntry {
    stdio(name, &echo_server(), &[], env)
}

fn http(name: &str, url: &str, headers: &[(&str, &str)], auth: Option<AuthSpec>) -> ServerEntry {
    entry(
        name,
        Transport::Http(HttpSpec {
            url: url.to_owned(),
            headers: templates(headers),
            auth,
        }),
    )
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn options(timeout: Duration) -> StartOptions {
    StartOptions::default().with_timeout(timeout)
}

async fn start(entries: &[ServerEntry], options: &StartOptions) -> Servers {
    Servers::start(entries, &env(&[]), options, &|_| {}).await
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

const CALL: Duration = Duration::from_secs(10);

/// Waits briefly for `pid` to go: a SIGKILL is delivered asynchronously, so
/// the process may still be listed for a moment after `kill` returned.
async fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Asserts that `pids` run, shuts `servers` down, and asserts that it took
/// no kill grace (every server exits on stdin EOF) and left none of them.
async fn shutdown_stops(servers: &Servers, pids: &[i32]) {
    for pid in pids {
        assert!(alive(*pid), "pid {pid} should run before shutdown");
    }
    let started = Instant::now();
    servers.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(3));
    for pid in pids {
        assert!(
            gone(*pid).await,
            "pid {pid} is still running after shutdown"
        );
    }
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

fn kind(e: &StartError) -> &'static str {
    match e {
        StartError::NotFound { .. } => "NotFound",
        StartError::Spawn { .. } => "Spawn",
        StartError::Exited { .. } => "Exited",
        StartError::Timeout { .. } => "Timeout",
        StartError::Initialize { .. } => "Initialize",
        StartError::ListTools { .. } => "ListTools",
        StartError::InvalidHeader { .. } => "InvalidHeader",
        StartError::Unsupported { .. } => "Unsupported",
        StartError::Auth(_) => "Auth",
        _ => "unknown",
    }
}
