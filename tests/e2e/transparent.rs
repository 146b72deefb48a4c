//! `core-agent serve --server NAME`: one configured server served under its
//! own tool names, still behind the gate, pinned and digested. Driven by
//! rmcp's client over stdio (the test spawns `core-agent serve`) and over
//! streamable HTTP.

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use core_agent_e2e::Project;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::demo_server;

/// How long anything may take before the test calls it a hang.
const PATIENCE: Duration = Duration::from_secs(60);

/// Two demo servers, `demo` and `other`; a digest threshold under
/// `list_inventory`'s 47 KB; a gate that allows by the bare names, denies
/// `divide` and refuses what it would ask about (no client answers).
fn project() -> Project {
    let p = Project::new(&json!({
        "version": 1,
        "agentic_wrap_threshold": 2000,
        "servers": {"demo": demo_server(), "other": demo_server()},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {
            "mode": "ask",
            "allow": ["mcp:lookup_item", "mcp:list_inventory", "builtin:retrieve_raw"],
            "deny": ["mcp:divide"],
        }})
        .to_string(),
    );
    p
}

/// `future`, or a panic when it takes longer than [`PATIENCE`].
async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .expect("no answer: it hangs")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    within(client.call_tool(params)).await.unwrap()
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// The tool names listed, once the backend's tools are there.
async fn names_once_ready(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let start = Instant::now();
    loop {
        let tools = within(client.list_all_tools()).await.unwrap();
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        if names.iter().any(|n| n == "lookup_item") {
            return names;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the backend's tools never came: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What every client sees through `serve --server demo`.
async fn check_transparent(client: &RunningService<RoleClient, ()>) {
    let names = names_once_ready(client).await;
    for own in ["lookup_item", "list_inventory", "divide", "add_note"] {
        assert!(
            names.iter().any(|n| n == own),
            "{own} missing from {names:?}"
        );
    }
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("demo_") || n.starts_with("other_")),
        "prefixed or other servers' names: {names:?}"
    );
    // The host's own tools are still there.
    assert!(names.iter().any(|n| n == "retrieve_raw"), "{names:?}");

    // An allowed call works by its own name.
    let item = call(client, "lookup_item", json!({"sku": "SKU-0042"})).await;
    assert_ne!(item.is_error, Some(true), "{item:?}");
    let item: Value = serde_json::from_str(&text(&item)).unwrap();
    assert_eq!(item["sku"], "SKU-0042");

    // The gate decides by the bare name.
    let divide = call(client, "divide", json!({"a": 1, "b": 4})).await;
    assert_eq!(divide.is_error, Some(true), "{divide:?}");
    assert!(
        text(&divide).contains("`divide` is denied by `mcp:divide` in "),
        "{}",
        text(&divide)
    );
    // What the gate would ask about is refused without an answer.
    let note = call(client, "add_note", json!({"text": "x"})).await;
    assert_eq!(note.is_error, Some(true), "{note:?}");

    // A large result is digested; retrieve_raw gives it back by call_id.
    let listing = call(client, "list_inventory", json!({})).await;
    assert_ne!(listing.is_error, Some(true), "{listing:?}");
    let envelope: Value = serde_json::from_str(&text(&listing)).unwrap();
    let call_id = envelope["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{envelope}"));
    assert!(call_id.starts_with("call-"), "{envelope}");
    let raw_bytes = envelope["raw_bytes"].as_u64().unwrap();
    assert!(raw_bytes > 2000, "{envelope}");
    let raw = call(client, "retrieve_raw", json!({"call_id": call_id})).await;
    assert_ne!(raw.is_error, Some(true), "{raw:?}");
    let payload: Value = serde_json::from_str(&text(&raw)).unwrap();
    assert_eq!(payload["total"], 200);
    assert_eq!(payload["items"][41]["sku"], "SKU-0042");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_server_over_stdio_lists_own_names_gates_and_digests() {
    let p = project();
    let mut cmd = p.command(&["serve", "--server", "demo"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = within(().serve((stdout, stdin))).await.unwrap();
    check_transparent(&client).await;
    // Only `demo` was started.
    let tools = within(client.list_all_tools()).await.unwrap();
    assert_eq!(
        tools.iter().filter(|t| t.name == "lookup_item").count(),
        1,
        "one server's tools only"
    );
    within(client.cancel()).await.unwrap();
    let status = within(child.wait()).await.unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "serve ends when its client closes stdin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_server_over_http_lists_own_names_gates_and_digests() {
    use std::io::{BufRead, BufReader};
    let p = project();
    let token = "e2e-transparent-token-0123456789abcdef";
    let mut cmd = p.command(&["serve", "--http", "127.0.0.1:0", "--server", "demo"]);
    cmd.env("CORE_AGENT_GATEWAY_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while stderr.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(rest) = line.split("serving MCP at http://").nth(1) {
                let _ = tx.send(rest.split("/mcp").next().unwrap_or_default().to_owned());
            }
            line.clear();
        }
    });
    let addr = rx.recv_timeout(PATIENCE).expect("serve did not listen");
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(token);
    let client = within(().serve(StreamableHttpClientTransport::from_config(config)))
        .await
        .unwrap();
    check_transparent(&client).await;
    let _ = within(client.cancel()).await;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < PATIENCE,
            "serve did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_server_with_an_unknown_name_says_what_is_configured() {
    let p = project();
    let run = p.run(&["serve", "--server", "dmeo"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("core-agent: serve --server: no server named `dmeo` is configured (none in ")
            && run.stderr.contains(".agents/mcp.json")
            && run.stderr.contains("did you mean `demo`?")
            && run
                .stderr
                .contains("the configured servers are: demo, other"),
        "{}",
        run.stderr
    );
}
