//! `core-agent serve`'s telemetry in the tools a team already runs: a real
//! Prometheus (Debian's `prometheus`) scrapes the gateway's `/metrics` with
//! its bearer token and a PromQL query returns the calls the test made; an
//! OTLP receiver on the official protobuf definitions (PyPI
//! `opentelemetry-proto`, `tests/fixture/otlp_receiver.py`) gets the spans
//! of calls the official TypeScript SDK client made with a `traceparent` in
//! `_meta`, and the Python SDK backend saw the same trace in its request's
//! `_meta`; and the `/health/live` and `/health/ready` probes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use core_agent_e2e::{Background, Project, hermetic, py_server, python, root};
use serde_json::{Value, json};

use crate::demo_server;
use crate::gateway_clients::{HttpGateway, Sdk, TOKEN, run_scenario};

/// `GET path` on `addr` with an optional bearer token: the status and body.
fn get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    (status, body)
}

/// The body of a chunked response.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The gateway's `host:port`, from its MCP URL.
fn address(gateway: &HttpGateway) -> String {
    gateway
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

/// A port on 127.0.0.1 free a moment ago (for Prometheus, which cannot say
/// the port it got from port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process killed with its group when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

/// The demo server (required, so `/health/ready` waits for it) and one
/// that never starts (required too, so the gateway is not ready); the
/// gate allows `demo_divide` and denies `demo_add_note`.
fn metrics_project() -> Project {
    let mut demo = demo_server();
    demo["required"] = json!(true);
    let p = Project::new(&json!({
        "version": 1,
        "servers": {
            "demo": demo,
            "broken": {"transport": "stdio", "command": "/nonexistent/mcp-server", "required": true},
            "spare": {"transport": "stdio", "command": "/nonexistent/other-server"},
        },
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {
            "mode": "allowlist",
            "allow": ["mcp:demo_divide", "mcp:demo_lookup_item"],
            "deny": ["mcp:demo_add_note"],
        }})
        .to_string(),
    );
    p
}

/// Runs PromQL `query` on Prometheus at `addr` until its single value is
/// `want` (Prometheus scrapes every second), at most 60 s; the last answer.
fn wait_for_value(addr: &str, query: &str, want: f64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let path = format!("/api/v1/query?query={}", encode(query));
    loop {
        let (status, body) = get(addr, &path, None);
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let value = answer["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok());
        if status == 200 && value == Some(want) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never answered {want} to `{query}`; last answer ({status}): {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `query` percent-encoded for a URL's query string.
fn encode(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_gateway_metrics_and_the_probes_answer() {
    let prometheus = which("prometheus").unwrap_or_else(|| {
        panic!("Debian's `prometheus` is not on PATH: `cargo xtask deps` installs it (apt-get, as root)")
    });
    let p = metrics_project();
    let gateway = HttpGateway::start_with(&p, &["--metrics-addr", "127.0.0.1:0"], &[]);
    let addr = address(&gateway);
    // `--metrics-addr`: the metrics alone, on a listener of their own, no token.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics_addr = loop {
        let stderr = gateway.stderr();
        if let Some(rest) = stderr.split("metrics at http://").nth(1) {
            break rest.split('/').next().unwrap_or_default().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no metrics address on stderr:\n{stderr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    // The probes: live at once; not ready while a required server is down.
    let (status, body) = get(&addr, "/health/live", None);
    assert_eq!(status, 200, "{body}");
    let ready_deadline = Instant::now() + Duration::from_secs(30);
    let ready = loop {
        let (status, body) = get(&addr, "/health/ready", Some(TOKEN));
        let ready: Value = serde_json::from_str(&body).unwrap();
        let starting = ready["down"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["status"] == "starting");
        if !starting || Instant::now() > ready_deadline {
            assert_eq!(status, 503, "{body}");
            break ready;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(ready["ready"], false, "{ready}");
    assert_eq!(ready["required"], json!(["broken", "demo"]), "{ready}");
    assert_eq!(
        ready["down"],
        json!([{"name": "broken", "status": "error"}]),
        "{ready}"
    );
    // /health says so too: degraded, to anyone, and in detail with the token.
    let (status, body) = get(&addr, "/health", None);
    assert_eq!((status, body.as_str()), (503, r#"{"status":"degraded"}"#));
    let (status, body) = get(&addr, "/health", Some(TOKEN));
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, &health["status"]),
        (503, &json!("degraded")),
        "{health}"
    );

    // /metrics on the gateway's listener needs the token.
    let (status, _) = get(&addr, "/metrics", None);
    assert_eq!(status, 401);

    // Calls through the official TypeScript SDK: 3 allowed, 1 denied, one
    // tool that does not exist.
    let scenario = json!({
        "wait_for_tools": ["demo_divide", "demo_add_note"],
        "calls": [
            {"name": "demo_divide", "arguments": {"a": 1, "b": 4}},
            {"name": "demo_divide", "arguments": {"a": 3, "b": 4}},
            {"name": "demo_divide", "arguments": {"a": 1, "b": 0}},
            {"name": "demo_add_note", "arguments": {"text": "no"}},
            {"name": "no_such_tool_0123", "arguments": {}},
        ],
    });
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let observed = run_scenario(&p, Sdk::TypeScript, &scenario, &target, None);
    let calls = observed.json["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 5, "{}", observed.json);

    let (status, text) = get(&addr, "/metrics", Some(TOKEN));
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("# TYPE mcp_server_operation_duration_seconds histogram"),
        "{text}"
    );
    // A tool name that is in no catalog never becomes a label.
    assert!(!text.contains("no_such_tool_0123"), "{text}");
    let (status, alone) = get(&metrics_addr, "/metrics", None);
    assert_eq!(status, 200, "{alone}");
    assert!(
        alone.contains("core_agent_backend_up{core_agent_server=\"demo\"} 1"),
        "{alone}"
    );
    assert_eq!(get(&metrics_addr, "/sessions", None).0, 404);
    assert!(
        text.contains("core_agent_backend_up{core_agent_server=\"demo\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("core_agent_backend_up{core_agent_server=\"broken\"} 0"),
        "{text}"
    );

    // A real Prometheus scrapes it with the token.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: core-agent\n    metrics_path: /metrics\n    authorization:\n      type: Bearer\n      credentials: {TOKEN}\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(prometheus);
    hermetic(&mut cmd)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _prometheus = Killed(cmd.spawn().unwrap());
    let prom = format!("127.0.0.1:{port}");

    let up = wait_for_value(&prom, "up{job=\"core-agent\"}", 1.0);
    assert_eq!(up["status"], "success", "{up}");
    // Three calls of demo_divide served (one of them a tool error: 1/0).
    wait_for_value(
        &prom,
        "sum(mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"demo_divide\"})",
        3.0,
    );
    // Each reached the demo server.
    wait_for_value(
        &prom,
        "sum(mcp_client_operation_duration_seconds_count{core_agent_server=\"demo\",gen_ai_tool_name=\"demo_divide\"})",
        3.0,
    );
    // The gate allowed three and denied one.
    wait_for_value(
        &prom,
        "sum(core_agent_gate_decisions_total{decision=\"allow\",gen_ai_tool_name=\"demo_divide\"})",
        3.0,
    );
    wait_for_value(
        &prom,
        "core_agent_gate_decisions_total{decision=\"deny\",gen_ai_tool_name=\"demo_add_note\"}",
        1.0,
    );
    // The unknown tool was counted, without a name.
    wait_for_value(
        &prom,
        "sum(mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"\"})",
        1.0,
    );
    wait_for_value(
        &prom,
        "core_agent_backend_up{core_agent_server=\"demo\"}",
        1.0,
    );
    assert_eq!(gateway.stop(), 130);
}

/// `program`'s path when it is an executable on `PATH`.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// Everything the receiver got so far.
fn dump(receiver: &Background) -> Value {
    let (status, body) = get(&format!("127.0.0.1:{}", receiver.port), "/dump", None);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn otlp_traces_cross_client_gateway_and_backend_under_one_trace_id() {
    let mut receiver_cmd = Command::new(python());
    receiver_cmd.arg(root().join("tests/fixture/otlp_receiver.py"));
    let receiver = Background::start(receiver_cmd);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);

    let p = Project::new(&json!({
        "version": 1,
        "servers": {"py": {
            "transport": "stdio", "command": python(), "args": [py_server(), "stdio"],
            "env": {"PY_FIXTURE_META": "1"},
        }},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "allowlist", "allow": ["mcp:py_echo_meta", "mcp:py_fail"]}})
            .to_string(),
    );
    let secret = "otlp-api-key-never-printed-7f3a";
    let gateway = HttpGateway::start_with(
        &p,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                &format!("x-otlp-key={secret}"),
            ),
            ("OTEL_SERVICE_NAME", "core-agent-e2e"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "300"),
        ],
    );

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let failing_trace = "0af7651916cd43dd8448eb211c80319c";
    let scenario = json!({
        "wait_for_tools": ["py_echo_meta", "py_fail"],
        "calls": [
            {"name": "py_echo_meta", "arguments": {},
             "_meta": {"traceparent": format!("00-{trace}-{client_span}-01"), "tracestate": "vendor=abc"}},
            {"name": "py_fail", "arguments": {},
             "_meta": {"traceparent": format!("00-{failing_trace}-b7ad6b7169203331-01")}},
        ],
    });
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let observed = run_scenario(&p, Sdk::TypeScript, &scenario, &target, None);
    let calls = observed.json["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false, "{}", observed.json);
    assert_eq!(calls[1]["isError"], true, "{}", observed.json);
    // The backend's request carried the client's trace, under the gateway's span.
    let seen: Value = serde_json::from_str(calls[0]["text"].as_str().unwrap()).unwrap();
    let backend_parent = seen["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("the backend's request had no traceparent in its _meta: {seen}"));
    let parts: Vec<&str> = backend_parent.split('-').collect();
    assert_eq!(parts.len(), 4, "{backend_parent}");
    assert_eq!(parts[1], trace, "{backend_parent}");
    assert_ne!(
        parts[2], client_span,
        "the gateway passed on its own span: {backend_parent}"
    );
    assert_eq!(seen["tracestate"], "vendor=abc", "{seen}");

    // SIGTERM: the gateway drains, then flushes what is queued.
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130);
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        let got = dump(&receiver);
        let names: Vec<&str> = got["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        if names.contains(&"tools/call py_fail") && !got["metrics"].as_array().unwrap().is_empty() {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the receiver got: {got}\ngateway stderr:\n{stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let spans = got["spans"].as_array().unwrap();
    let named = |name: &str, trace_id: &str| -> Vec<&Value> {
        spans
            .iter()
            .filter(|s| s["name"] == name && s["trace_id"] == trace_id)
            .collect()
    };
    // The request span: SERVER (2), child of the client's span.
    let request = named("tools/call py_echo_meta", trace);
    let request = request
        .iter()
        .find(|s| s["kind"] == 2)
        .unwrap_or_else(|| panic!("no server span of the call: {got}"));
    assert_eq!(request["parent_span_id"], client_span, "{request}");
    assert_eq!(request["service"], "core-agent-e2e", "{request}");
    let attrs = &request["attributes"];
    assert_eq!(attrs["mcp.method.name"], "tools/call", "{request}");
    assert_eq!(attrs["gen_ai.tool.name"], "py_echo_meta", "{request}");
    assert!(attrs["mcp.session.id"].is_string(), "{request}");
    assert!(attrs["jsonrpc.request.id"].is_string(), "{request}");
    assert!(attrs["mcp.protocol.version"].is_string(), "{request}");
    assert!(attrs.get("error.type").is_none(), "{request}");
    let request_id = request["span_id"].as_str().unwrap();
    // Its children: the gate, and the backend call (CLIENT, 3), whose
    // context the backend's request carried.
    let gate = named("gate", trace);
    assert!(
        gate.iter().any(|s| s["parent_span_id"] == request_id
            && s["attributes"]["core_agent.gate.decision"] == "allow"),
        "no gate span under the request: {got}"
    );
    let backend = named("tools/call echo_meta", trace);
    let backend = backend
        .iter()
        .find(|s| s["kind"] == 3)
        .unwrap_or_else(|| panic!("no client span of the backend call: {got}"));
    assert_eq!(backend["parent_span_id"], request_id, "{backend}");
    assert_eq!(backend["span_id"], parts[2], "{backend}");
    assert_eq!(
        backend["attributes"]["core_agent.server"], "py",
        "{backend}"
    );
    // The failing call: its own trace, error.type tool_error.
    let failed = named("tools/call py_fail", failing_trace);
    let failed = failed
        .iter()
        .find(|s| s["kind"] == 2)
        .unwrap_or_else(|| panic!("no span of the failing call: {got}"));
    assert_eq!(failed["attributes"]["error.type"], "tool_error", "{failed}");
    assert_eq!(failed["status"], 2, "{failed}");
    // Metrics went over OTLP too, and the API key in the headers arrived
    // and was never printed.
    let metric_names: Vec<&str> = got["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    for name in [
        "mcp.server.operation.duration",
        "mcp.client.operation.duration",
        "core_agent.gate.decisions",
        "core_agent.backend.up",
        "core_agent.sessions.open",
    ] {
        assert!(
            metric_names.contains(&name),
            "{name} not in {metric_names:?}"
        );
    }
    assert!(
        got["headers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["x-otlp-key"] == secret),
        "{}",
        got["headers"]
    );
    assert!(!stderr.contains(secret), "{stderr}");
}
