//! What a hostile caller or backend can make `core-agent serve --http`
//! spend, against the `abuse` fixture (`tests/fixture/abuse.rs`): a 1 MiB
//! tool name, a backend's 1,400 long tool names and 500,000 empty content
//! blocks, a call queued behind a busy slot. Costs are asserted as CPU
//! seconds and peak memory of the gateway's process (`/proc`), sizes in
//! bytes, never as wall time.

use std::time::Duration;

use core_agent_e2e::Project;
use serde_json::{Value, json};

use crate::fixture;
use crate::gateway_clients::{HttpGateway, TOKEN};

/// The gateway with the `abuse` backend, its entry extended by `extra`
/// (environment, limits), every call allowed, its audit trail on.
fn gateway(extra: Value) -> (Project, HttpGateway) {
    let mut abuse = fixture("abuse");
    for (k, v) in extra.as_object().unwrap() {
        abuse[k] = v.clone();
    }
    let p = Project::new(&json!({"version": 1, "servers": {"abuse": abuse}}));
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"mode": "yolo"},
            "gateway": {"audit": {"path": "audit.jsonl"}}
        })
        .to_string(),
    );
    let gateway = HttpGateway::start(&p);
    (p, gateway)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A 2026-07-28 request of `method` with `params`, as a client without a
/// session sends it: the JSON-RPC answer (result or error) and the size of
/// the body it came in.
async fn rpc(url: &str, method: &str, mut params: Value) -> (Value, usize) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
    });
    let mut request = http()
        .post(url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        request = request.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = tokio::time::timeout(
        Duration::from_secs(60),
        request.body(body.to_string()).send(),
    )
    .await
    .expect("no answer within 60 s")
    .unwrap();
    let text = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("no whole answer within 60 s")
        .unwrap();
    let size = text.len();
    let frame = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|f| f.get("id") == Some(&json!(1)))
        .unwrap_or_else(|| panic!("no answer to {method} in {}", &text[..text.len().min(2000)]));
    (frame, size)
}

/// An MCP session of rmcp's client (whose requests carry no `Mcp-Name`
/// header, so a name of any length reaches the gateway).
async fn session(url: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(TOKEN);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// The names of the tools the gateway serves, once `abuse_echo` is one.
async fn tools_when_ready(url: &str) -> Vec<Value> {
    for _ in 0..300 {
        let (listed, _) = rpc(url, "tools/list", json!({})).await;
        let tools = listed["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if tools.iter().any(|t| t["name"] == "abuse_echo") {
            return tools;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the abuse backend's tools never came");
}

/// The process's CPU time so far (user + system), in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The process's peak resident size (`VmHWM`), in MiB.
fn peak_mib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_tool_name_is_refused_at_once_and_the_gateway_stays_responsive() {
    let (p, gateway) = gateway(json!({
        "env": {"ABUSE_TOOLS": "1400"},
        "limits": {"max_tools": 2000}
    }));
    let tools = tools_when_ready(&gateway.url).await;
    assert!(tools.len() > 1400, "{}", tools.len());
    let pid = gateway.pid();
    let before = cpu_seconds(pid);
    // Before: did-you-mean compared the whole name with every tool, ~27 s
    // of CPU per MiB on a runtime worker (the call never answered here).
    let long = format!("abuse_echo{}", "x".repeat(1 << 20));
    let client = session(&gateway.url).await;
    let called = tokio::time::timeout(
        Duration::from_secs(60),
        client.call_tool(rmcp::model::CallToolRequestParams::new(long.clone())),
    )
    .await
    .expect("no answer to the long name within 60 s")
    .map_or_else(|e| e.to_string(), |r| format!("{r:?}"));
    let prompt = tokio::time::timeout(
        Duration::from_secs(60),
        client.get_prompt(rmcp::model::GetPromptRequestParams::new(long.clone())),
    )
    .await
    .expect("no answer to the long prompt name within 60 s")
    .map_or_else(|e| e.to_string(), |r| format!("{r:?}"));
    let live = http()
        .get(gateway.url.replace("/mcp", "/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    let spent = cpu_seconds(pid) - before;
    assert!(
        spent < 3.0,
        "the gateway spent {spent} s of CPU on two long names"
    );
    let error = &called[..called.len().min(2000)];
    assert!(error.contains("no tool named `abuse_echo"), "{error}");
    assert!(error.contains("(1.0 MiB, sha256:"), "{error}");
    assert!(called.len() < 2048, "{} bytes", called.len());
    assert!(prompt.len() < 2048, "{} bytes", prompt.len());
    let _ = client.cancel().await;
    // The audit line names the call cut, not whole (before: 2 MiB+ per line).
    gateway.stop();
    let audit = std::fs::read_to_string(p.path().join(".agents/audit.jsonl"))
        .or_else(|_| std::fs::read_to_string(p.path().join("audit.jsonl")))
        .unwrap();
    let longest = audit.lines().map(str::len).max().unwrap_or(0);
    assert!(audit.contains("sha256:"), "{audit}");
    assert!(longest < 4096, "an audit line of {longest} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_backend_names_are_left_out_and_probes_stay_small() {
    let (_p, gateway) = gateway(json!({
        "env": {"ABUSE_TOOLS": "1400", "ABUSE_NAME_LEN": "10000"},
        "limits": {"max_tools": 2000, "max_message_bytes": 67_108_864}
    }));
    let tools = tools_when_ready(&gateway.url).await;
    // Names that are not valid MCP tool names are not served.
    let served: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("abuse_"))
        .collect();
    assert_eq!(served, ["abuse_blocks", "abuse_echo", "abuse_slow"]);
    let health = gateway.url.replace("/mcp", "/health");
    // Before: 14 MB to anyone, token or not.
    let open = http()
        .get(&health)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(open, json!({"status": "ok"}).to_string());
    let detailed = http()
        .get(&health)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(detailed.len() < 16 * 1024, "{} bytes", detailed.len());
    assert!(detailed.contains("1400 tool(s) are left out"), "{detailed}");
    let stderr = gateway.stderr();
    let longest = stderr.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 4096, "a stderr line of {longest} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titles_and_descriptions_are_served_without_control_characters() {
    let (_p, gateway) = gateway(json!({"env": {"ABUSE_TOOLS": "2"}}));
    let tools = tools_when_ready(&gateway.url).await;
    let long = tools
        .iter()
        .find(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("abuse_long_0"))
        })
        .unwrap();
    let text = long.to_string();
    assert!(
        !text.contains("\\u001b") && !text.contains("\\u0007"),
        "{text}"
    );
    assert_eq!(long["title"], "Long ]8;;http://xtitle", "{long}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_blocks_reach_the_caller_as_a_thousand_and_half_a_million_are_refused_unparsed() {
    let (_p, gateway) = gateway(json!({}));
    tools_when_ready(&gateway.url).await;
    let pid = gateway.pid();
    // 20,000 empty blocks fit the container bound (32,768 at 16 MiB): the
    // caller gets 1,000 of them and a word on the rest.
    let (some, size) = rpc(
        &gateway.url,
        "tools/call",
        json!({"name": "abuse_blocks", "arguments": {"n": 20_000}}),
    )
    .await;
    assert!(size < 1024 * 1024, "an answer of {size} bytes");
    let text = some.to_string();
    assert!(
        text.contains("content blocks the server sent"),
        "{}",
        &text[..text.len().min(2000)]
    );
    let base = peak_mib(pid);
    // 500,000 empty text blocks: about 13 MB of JSON. Before: +518 MiB of
    // peak memory while it was parsed; now the line is cut off unparsed.
    let (many, size) = rpc(
        &gateway.url,
        "tools/call",
        json!({"name": "abuse_blocks", "arguments": {}}),
    )
    .await;
    let grown = peak_mib(pid).saturating_sub(base);
    assert!(size < 1024 * 1024, "an answer of {size} bytes");
    let text = many.to_string();
    assert!(
        text.contains("JSON objects and arrays"),
        "{}",
        &text[..text.len().min(2000)]
    );
    // Under 3× max_message_bytes (16 MiB), as docs/reliability.md promises.
    assert!(grown < 48, "peak memory grew by {grown} MiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_for_a_call_slot_counts_against_the_timeout() {
    let (_p, gateway) = gateway(json!({
        "limits": {"max_concurrent_calls": 1, "call_timeout_ms": 2000}
    }));
    tools_when_ready(&gateway.url).await;
    let url = gateway.url.clone();
    let busy = tokio::spawn(async move {
        rpc(
            &url,
            "tools/call",
            json!({"name": "abuse_slow", "arguments": {"ms": 1900}}),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let (queued, _) = rpc(
        &gateway.url,
        "tools/call",
        json!({"name": "abuse_slow", "arguments": {"ms": 1900}}),
    )
    .await;
    // Before: it waited for the slot (1.6 s) and then had 2 s more, and
    // answered; now its 2 s cover the wait.
    let text = queued.to_string();
    assert!(
        text.contains("waiting for a free call slot") || text.contains("did not answer within"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "answered after {:?}",
        started.elapsed()
    );
    let _ = busy.await;
}
