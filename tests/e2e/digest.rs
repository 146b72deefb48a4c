//! The digest wrap end to end: a large result comes back digested, the raw
//! payload comes back whole (or one part of it), the switches turn it off
//! where they should, and `core-agent usage` counts it.

use core_agent_e2e::{Project, bin, filesystem_js, node};
use serde_json::{Value, json};

fn demo(extra: Value) -> Value {
    let mut server =
        json!({"transport": "stdio", "command": bin("core-agent"), "args": ["demo-server"]});
    if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    server
}

fn inventory(p: &Project, extra: &[&str]) -> Value {
    let mut args = vec!["call", "--yes", "demo_list_inventory", "--json"];
    args.extend_from_slice(extra);
    let run = p.run(&args);
    run.expect_code(0);
    run.json()
}

#[test]
fn a_large_result_is_digested_and_the_raw_payload_comes_back() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo(json!({}))}}));
    let whole = inventory(&p, &["--no-mcp-digest"]);
    let raw_text = whole["content"][0]["text"].as_str().unwrap().to_owned();

    let db = p.path().join("session.db");
    let db = db.to_str().unwrap();
    let result = inventory(&p, &["--session-db", db, "--session", "e2e"]);
    let envelope: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    let keys: Vec<&str> = envelope
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["digest", "raw_bytes", "method", "call_id"]);
    assert_eq!(envelope["method"], "structural_json");
    assert_eq!(envelope["raw_bytes"], raw_text.len());
    let call_id = envelope["call_id"].as_str().unwrap().to_owned();
    assert!(
        call_id.len() == 31
            && call_id.starts_with("call-")
            && call_id[5..]
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()),
        "a ULID call id: {call_id}"
    );
    let digest: Value = serde_json::from_str(envelope["digest"].as_str().unwrap()).unwrap();
    let items = digest["items"].as_array().unwrap();
    assert_eq!(items.len(), 21);
    assert_eq!(items[15], "[digest: 180 of 200 items omitted]");
    assert_eq!(items[20]["sku"], "SKU-0200");
    assert!(
        envelope["digest"].as_str().unwrap().len() * 5 < raw_text.len(),
        "at least 5× smaller"
    );

    // The shell gets the original bytes back, or one item.
    let run = p.run(&["raw", &call_id, "--session-db", db]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{raw_text}\n"));
    let run = p.run(&[
        "raw",
        &call_id,
        "--pointer",
        "/items/41",
        "--session-db",
        db,
    ]);
    run.expect_code(0);
    let item: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(item["sku"], "SKU-0042");

    // So does the model, through the built-in, in a later run of the session.
    let run = p.run(&[
        "call",
        "--yes",
        "retrieve_raw",
        &json!({"call_id": call_id, "pointer": "/total"}).to_string(),
        "--session-db",
        db,
        "--session",
        "e2e",
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "200\n");
    let run = p.run(&[
        "call",
        "--yes",
        "retrieve_raw",
        r#"{"call_id": "nope"}"#,
        "--session-db",
        db,
    ]);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("no raw payload is stored under `nope` in this session"),
        "{}",
        run.stderr
    );

    // Telemetry.
    let run = p.run(&["usage", "--session", "e2e", "--session-db", db, "--json"]);
    run.expect_code(0);
    let usage = run.json();
    assert_eq!(usage["digest_methods"]["counts"]["structural_json"], 1);
    // Saved: the raw payload less the envelope the model read instead.
    let envelope_text = result["content"][0]["text"].as_str().unwrap();
    let saved = (raw_text.len() - envelope_text.len()) as u64;
    assert_eq!(
        usage["digest_methods"]["bytes_saved"]["structural_json"],
        saved
    );
    assert_eq!(usage["digest_savings"]["structural_calls"], 1);
    assert_eq!(usage["digest_savings"]["parent_tokens_saved"], saved / 4);
    // The text lists only the methods used, each count with its noun.
    let run = p.run(&["usage", "--session", "e2e", "--session-db", db]);
    run.expect_code(0);
    let methods: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("bytes saved"))
        .collect();
    assert_eq!(
        methods,
        [format!("  structural_json  1 call, {saved} bytes saved")],
        "{}",
        run.stdout
    );
}

#[test]
fn each_switch_turns_the_digest_off_where_it_should() {
    let digested = |v: &Value| {
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("{\"digest\":")
    };
    // On by default.
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo(json!({}))}}));
    assert!(digested(&inventory(&p, &[])));
    // --no-mcp-digest: off, and retrieve_raw is not registered.
    assert!(!digested(&inventory(&p, &["--no-mcp-digest"])));
    let run = p.run(&["tools", "--json", "--no-mcp-digest"]);
    assert!(!run.stdout.contains("retrieve_raw"));
    // agentic_wrap: false in mcp.json.
    let p = Project::new(
        &json!({"version": 1, "agentic_wrap": false, "servers": {"demo": demo(json!({}))}}),
    );
    assert!(!digested(&inventory(&p, &[])));
    // agentic_never on the server: that server only.
    let p = Project::new(
        &json!({"version": 1, "servers": {"demo": demo(json!({"agentic_never": true})), "other": demo(json!({}))}}),
    );
    assert!(!digested(&inventory(&p, &[])));
    let run = p.run(&["call", "--yes", "other_list_inventory", "--json"]);
    assert!(digested(&run.json()));
    // A threshold above the payload's size.
    let p = Project::new(
        &json!({"version": 1, "agentic_wrap_threshold": 100000, "servers": {"demo": demo(json!({}))}}),
    );
    assert!(!digested(&inventory(&p, &[])));
    // Small results are never digested.
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo(json!({}))}}));
    let run = p.run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    assert_eq!(run.stdout, "0.25\n");
}

#[test]
fn a_third_party_servers_large_json_is_digested() {
    let p = Project::empty();
    let root = p.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let records: Vec<Value> = (0..500)
        .map(|i| json!({"id": i, "name": format!("record-{i}"), "notes": "n".repeat(700)}))
        .collect();
    std::fs::write(
        root.join("records.json"),
        json!({"records": records}).to_string(),
    )
    .unwrap();
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fs": {"transport": "stdio", "command": node(), "args": [filesystem_js(), root]}}})
            .to_string(),
    );
    let path = root.join("records.json");
    let run = p.run(&[
        "call",
        "--yes",
        "fs_read_text_file",
        &json!({"path": path}).to_string(),
    ]);
    run.expect_code(0);
    let envelope: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(envelope["method"], "structural_json");
    let digest: Value = serde_json::from_str(envelope["digest"].as_str().unwrap()).unwrap();
    assert_eq!(digest["records"][0]["name"], "record-0");
    let notes = digest["records"][0]["notes"].as_str().unwrap();
    assert!(notes.ends_with("…[digest: 200 more characters]"), "{notes}");
    assert_eq!(digest["records"][15], "[digest: 480 of 500 items omitted]");
}

/// A project with the fixture server `fx`, and `mcp.json` extended by `extra`.
fn llm_project(extra: Value) -> Project {
    let mut config = json!({"version": 1, "servers": {"fx": {
        "transport": "stdio", "command": bin("fixture-server"), "args": ["ok"]
    }}});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    Project::new(&config)
}

/// Runs `call --batch` of `calls` in session `session` of `db`, with the LLM
/// endpoint at `llm` and `extra` flags; the envelope of each result.
fn batch_envelopes(
    p: &Project,
    llm: &core_agent_e2e::Background,
    calls: &[Value],
    session: &str,
    extra: &[&str],
) -> Vec<Value> {
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let file = p.write(&format!("{session}.jsonl"), &input);
    let db = p.path().join("llm.db");
    let mut args = vec![
        "call",
        "--yes",
        "--batch",
        file.to_str().unwrap(),
        "--session-db",
        db.to_str().unwrap(),
        "--session",
        session,
    ];
    args.extend_from_slice(extra);
    let mut cmd = p.command(&args);
    cmd.env(
        "CORE_AGENT_LLM_BASE_URL",
        format!("http://127.0.0.1:{}/v1", llm.port),
    );
    let run = p.run_with(cmd);
    run.expect_code(0);
    run.stdout
        .lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            serde_json::from_str::<Value>(line["result"]["content"][0]["text"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

/// `core-agent usage --json` of `session` in the project's `llm.db`.
fn llm_usage(p: &Project, session: &str) -> Value {
    let db = p.path().join("llm.db");
    p.run(&[
        "usage",
        "--session",
        session,
        "--session-db",
        db.to_str().unwrap(),
        "--json",
    ])
    .json()
}

#[test]
fn the_llm_second_chance_summarizes_bills_and_stops_at_the_ceiling() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = llm_project(json!({"agentic_wrap_model": "small-model"}));
    let prose = "Widgets are small. ".repeat(600); // 11 400 bytes of prose
    let call = json!({"name": "fx_echo", "arguments": {"text": prose}});
    let three = [call.clone(), call.clone(), call.clone()];
    let on = ["--mcp-agentic-wrap-llm"];
    // Each summary costs 1000 × $0.30/M + 50 × $2.50/M = $0.000425, but its
    // worst case (a token per byte of its ~11.7 KB of messages, and 2000
    // output tokens) is about $0.0085: a $0.0005 ceiling covers no call, so
    // none starts, and nothing is spent.
    let envelopes = batch_envelopes(
        &p,
        &llm,
        &three,
        "tight",
        &[&on[..], &["--cost-ceiling", "0.0005"]].concat(),
    );
    assert!(
        envelopes.iter().all(|e| e["method"] == "passthrough"),
        "{envelopes:?}"
    );
    let savings = &llm_usage(&p, "tight")["digest_savings"];
    assert_eq!(savings["ceiling_skips"], 3, "{savings}");
    assert_eq!(savings["subagent_cost_usd"], 0.0);
    let db = p.path().join("llm.db");
    let text = p.run(&[
        "usage",
        "--session",
        "tight",
        "--session-db",
        db.to_str().unwrap(),
    ]);
    assert!(
        text.stdout.ends_with("\n  3 skipped at the cost ceiling\n"),
        "{}",
        text.stdout
    );

    // A $0.012 ceiling covers one worst case at a time: the three reads run
    // concurrently, so how many are summarized varies, but never what they spend.
    let envelopes = batch_envelopes(
        &p,
        &llm,
        &three,
        "one",
        &[&on[..], &["--cost-ceiling", "0.012"]].concat(),
    );
    let summarized = envelopes
        .iter()
        .filter(|e| e["method"] == "llm_fallback")
        .count() as u64;
    assert!(summarized >= 1, "{envelopes:?}");
    let savings = &llm_usage(&p, "one")["digest_savings"];
    let spent = savings["subagent_cost_usd"].as_f64().unwrap();
    assert!(spent <= 0.012, "{savings}");
    assert!(
        (spent - summarized as f64 * 0.000425).abs() < 1e-9,
        "{savings}"
    );
    assert_eq!(savings["ceiling_skips"].as_u64().unwrap(), 3 - summarized);

    // No ceiling: every read is summarized and billed what the provider reported.
    let envelopes = batch_envelopes(&p, &llm, &three, "llm", &on);
    assert!(
        envelopes.iter().all(|e| e["method"] == "llm_fallback"),
        "{envelopes:?}"
    );
    assert_eq!(
        envelopes[0]["digest"],
        "SUMMARY by small-model: a long text about widgets."
    );
    assert_eq!(envelopes[0]["raw_bytes"], prose.len());
    let usage = llm_usage(&p, "llm");
    let savings = &usage["digest_savings"];
    assert_eq!(savings["agentic_calls"], 3);
    assert_eq!(savings["structural_calls"], 0);
    assert_eq!(savings["subagent_input_tokens"], 3000);
    assert_eq!(savings["subagent_output_tokens"], 150);
    assert!(
        (savings["subagent_cost_usd"].as_f64().unwrap() - 0.001275).abs() < 1e-9,
        "{savings}"
    );
    let counts = usage["digest_methods"]["counts"].as_object().unwrap();
    assert_eq!(counts["llm_fallback"], 3, "{counts:?}");
    assert_eq!(
        counts.values().filter_map(Value::as_u64).sum::<u64>(),
        3,
        "{counts:?}"
    );

    // --mcp-agentic-wrap-model wins over agentic_wrap_model; a failing LLM
    // falls back, billed what its error reported.
    let broken = batch_envelopes(
        &p,
        &llm,
        &three[..1],
        "broken",
        &[&on[..], &["--mcp-agentic-wrap-model", "broken"]].concat(),
    );
    assert_eq!(broken[0]["method"], "passthrough");
    let savings = &llm_usage(&p, "broken")["digest_savings"];
    assert_eq!(
        (
            savings["subagent_failures"].as_u64(),
            savings["subagent_cost_usd"].as_f64()
        ),
        (Some(1), Some(0.0))
    );
    let billed = batch_envelopes(
        &p,
        &llm,
        &three[..1],
        "billed",
        &[&on[..], &["--mcp-agentic-wrap-model", "billed-error"]].concat(),
    );
    assert_eq!(billed[0]["method"], "passthrough");
    let savings = &llm_usage(&p, "billed")["digest_savings"];
    assert_eq!(savings["subagent_failures"], 1);
    assert_eq!(savings["subagent_input_tokens"], 1000);
    assert!(
        (savings["subagent_cost_usd"].as_f64().unwrap() - 0.0003).abs() < 1e-9,
        "{savings}"
    );
    // Without the switch, no LLM.
    let envelopes = batch_envelopes(&p, &llm, &three[..1], "off", &[]);
    assert!(envelopes.iter().all(|e| e["method"] == "passthrough"));
}

#[test]
fn the_llm_is_shown_a_bounded_head_and_tail_of_a_large_payload() {
    let llm = core_agent_e2e::Background::fake_llm();
    let payload = format!(
        "BEGIN {} FINISH",
        "a long line of a log file\n".repeat(30_000)
    );
    assert!(payload.len() > 700_000);
    let call = json!({"name": "fx_echo", "arguments": {"text": payload}});
    let on = [
        "--mcp-agentic-wrap-llm",
        "--mcp-agentic-wrap-model",
        "measure",
    ];
    let marker = |max: usize| {
        format!(
            "[core-agent: bytes {}..{} of this {}-byte payload ({} bytes) were cut before summarizing; only its head and tail are shown]",
            max / 2,
            payload.len() - (max - max / 2),
            payload.len(),
            payload.len() - max
        )
    };
    let preamble = "Compress this to under 8000 bytes:\n\n";
    // By default the endpoint sees 256 KiB of the payload and the marker.
    let p = llm_project(json!({}));
    let envelopes = batch_envelopes(&p, &llm, std::slice::from_ref(&call), "bounded", &on);
    assert_eq!(envelopes[0]["method"], "llm_fallback", "{}", envelopes[0]);
    let seen = preamble.len() + 256 * 1024 + marker(256 * 1024).len() + 2;
    let head = &format!("{preamble}{payload}")[..40];
    let tail = &payload[payload.len() - 40..];
    assert_eq!(
        envelopes[0]["digest"],
        format!("saw {seen} bytes: {head}…{tail}")
    );
    // `agentic_wrap_llm_max_input_bytes` sets the bound, and config show lists it.
    let p = llm_project(json!({"agentic_wrap_llm_max_input_bytes": 10_000}));
    let envelopes = batch_envelopes(&p, &llm, std::slice::from_ref(&call), "small", &on);
    let seen = preamble.len() + 10_000 + marker(10_000).len() + 2;
    let digest = envelopes[0]["digest"].as_str().unwrap();
    assert!(
        digest.starts_with(&format!("saw {seen} bytes: ")),
        "{digest}"
    );
    let shown = p.run(&["config", "show", "--json"]).json();
    assert_eq!(
        shown["settings"]["agentic_wrap_llm_max_input_bytes"]["value"], 10_000,
        "{shown}"
    );
}

#[test]
fn llm_prices_can_be_set_in_mcp_json() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = Project::new(&json!({"version": 1,
        "agentic_wrap_llm": true,
        "agentic_wrap_model": "priced-model",
        "agentic_wrap_pricing": {"priced-model": {"input": 1.0, "output": 10.0}},
        "servers": {"fx": {"transport": "stdio", "command": bin("fixture-server"), "args": ["ok"]}}}));
    let db = p.path().join("p.db");
    let text = json!({"text": "Widgets are small. ".repeat(600)}).to_string();
    let mut cmd = p.command(&[
        "call",
        "--yes",
        "fx_echo",
        &text,
        "--session-db",
        db.to_str().unwrap(),
        "--session",
        "priced",
    ]);
    cmd.env(
        "CORE_AGENT_LLM_BASE_URL",
        format!("http://127.0.0.1:{}/v1", llm.port),
    );
    let run = p.run_with(cmd);
    run.expect_code(0);
    let envelope: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        envelope["method"], "llm_fallback",
        "agentic_wrap_llm in mcp.json turns it on"
    );
    let usage = p
        .run(&["usage", "--session-db", db.to_str().unwrap(), "--json"])
        .json();
    // 1000 × $1/M + 50 × $10/M
    let cost = usage["digest_savings"]["subagent_cost_usd"]
        .as_f64()
        .unwrap();
    assert!((cost - 0.0015).abs() < 1e-9, "{cost}");
}

#[test]
fn cached_input_tokens_are_billed_at_the_cached_price() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = llm_project(json!({
        "agentic_wrap_pricing": {"cached": {"input": 1.0, "cached_input": 0.1, "output": 10.0}},
    }));
    let call = json!({"name": "fx_echo", "arguments": {"text": "Widgets are small. ".repeat(600)}});
    let on = [
        "--mcp-agentic-wrap-llm",
        "--mcp-agentic-wrap-model",
        "cached",
    ];
    let envelopes = batch_envelopes(&p, &llm, &[call], "cached", &on);
    assert_eq!(envelopes[0]["digest"], "SUMMARY from the cache");
    let savings = &llm_usage(&p, "cached")["digest_savings"];
    assert_eq!(savings["subagent_input_tokens"], 1000);
    assert_eq!(savings["subagent_cached_input_tokens"], 800);
    // 200 × $1/M + 800 × $0.10/M + 50 × $10/M
    let cost = savings["subagent_cost_usd"].as_f64().unwrap();
    assert!((cost - 0.00078).abs() < 1e-9, "{cost}");
}

/// `core-agent serve --http 127.0.0.1:0 --mode yolo` in a project, with the
/// fake LLM behind it; stopped with SIGTERM (then SIGKILL) when dropped.
struct HttpServe {
    child: std::process::Child,
    addr: String,
    token: &'static str,
}

impl HttpServe {
    fn start(p: &Project, llm: &core_agent_e2e::Background) -> HttpServe {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let token = "e2e-digest-gateway-token-0123456789";
        let mut cmd = p.command(&["serve", "--http", "127.0.0.1:0", "--mode", "yolo"]);
        cmd.env("CORE_AGENT_GATEWAY_TOKEN", token)
            .env(
                "CORE_AGENT_LLM_BASE_URL",
                format!("http://127.0.0.1:{}/v1", llm.port),
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
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
        let addr = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("core-agent serve did not listen");
        HttpServe { child, addr, token }
    }

    /// `GET path` with the token: the status and the JSON body.
    async fn get(&self, path: &str) -> (u16, Value) {
        let response = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!("http://{}{path}", self.addr))
            .bearer_auth(self.token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (
            status,
            serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null),
        )
    }

    /// Waits until every backend is connected.
    async fn wait_ready(&self) {
        for _ in 0..3000 {
            let (_, health) = self.get("/health").await;
            if health["servers"]
                .as_array()
                .is_some_and(|s| s.iter().all(|s| s["status"] == "connected"))
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the backends did not connect");
    }

    async fn client(&self) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        use rmcp::ServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let config =
            StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", self.addr))
                .auth_header(self.token);
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .unwrap()
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        for _ in 0..500 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// `zeros` with the given methods' values set.
fn with_methods(zeros: &serde_json::Map<String, Value>, set: &[(&str, u64)]) -> Value {
    let mut map = zeros.clone();
    for (method, n) in set {
        map.insert((*method).to_owned(), json!(n));
    }
    Value::Object(map)
}

/// The envelope a call through the gateway came back with, and its text's length.
async fn envelope_of(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> (Value, u64) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let result = client.call_tool(params).await.unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    (serde_json::from_str(&text).unwrap(), text.len() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_api_reports_usage_and_context_after_real_calls() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = Project::new(&json!({"version": 1,
    "agentic_wrap_llm": true,
    "agentic_wrap_model": "cached",
    "agentic_wrap_pricing": {"cached": {"input": 1.0, "cached_input": 0.1, "output": 10.0}},
    "servers": {
        "demo": demo(json!({})),
        "fx": {"transport": "stdio", "command": bin("fixture-server"), "args": ["ok"]},
    }}));
    let serve = HttpServe::start(&p, &llm);
    serve.wait_ready().await;

    // A session that called nothing yet: no methods, every saving at zero.
    let idle = serve.client().await;
    // The gateway opens the session at its first request after `initialized`.
    idle.list_all_tools().await.unwrap();
    let (_, listed) = serve.get("/sessions").await;
    let idle_id = listed["sessions"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    let (status, usage) = serve.get(&format!("/sessions/{idle_id}/usage")).await;
    assert_eq!(status, 200, "{usage}");
    // Every method is listed, at zero (the spec's shape).
    let methods = [
        "structural_json",
        "passthrough",
        "llm_fallback",
        "structural_diff",
        "structural_log",
        "structural_csv",
        "structural_jsonl",
    ];
    let zero_methods: serde_json::Map<String, Value> = methods
        .iter()
        .map(|m| ((*m).to_owned(), json!(0)))
        .collect();
    assert_eq!(
        usage,
        json!({"session": idle_id, "digest_methods": {"counts": zero_methods, "bytes_saved": zero_methods}})
    );
    let zeros = json!({
        "structural_calls": 0, "agentic_calls": 0, "parent_tokens_saved": 0,
        "subagent_input_tokens": 0, "subagent_cached_input_tokens": 0,
        "subagent_output_tokens": 0, "subagent_cost_usd": 0.0, "ceiling_skips": 0,
        "subagent_failures": 0, "subagent_not_smaller": 0, "subagent_worst_case_calls": 0,
    });
    let (_, context) = serve.get(&format!("/sessions/{idle_id}/context")).await;
    assert_eq!(context["digest_savings"], zeros, "{context}");

    // A session with a structural digest and an LLM summary.
    let busy = serve.client().await;
    let (structural, structural_len) = envelope_of(&busy, "demo_list_inventory", json!({})).await;
    assert_eq!(structural["method"], "structural_json");
    let prose = "Widgets are small. ".repeat(600);
    let (summarized, summarized_len) = envelope_of(&busy, "fx_echo", json!({"text": prose})).await;
    assert_eq!(summarized["method"], "llm_fallback", "{summarized}");
    let (_, listed) = serve.get("/sessions").await;
    let busy_id = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .find(|id| *id != idle_id)
        .unwrap();
    let saved_structural = structural["raw_bytes"].as_u64().unwrap() - structural_len;
    let saved_llm = prose.len() as u64 - summarized_len;
    let (status, usage) = serve.get(&format!("/sessions/{busy_id}/usage")).await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(
        usage,
        json!({"session": busy_id, "digest_methods": {
            "counts": with_methods(&zero_methods, &[("structural_json", 1), ("llm_fallback", 1)]),
            "bytes_saved": with_methods(&zero_methods, &[("structural_json", saved_structural), ("llm_fallback", saved_llm)]),
        }})
    );
    let (status, mut context) = serve.get(&format!("/sessions/{busy_id}/context")).await;
    assert_eq!(status, 200, "{context}");
    // 200 × $1/M + 800 × $0.10/M + 50 × $10/M
    let cost = context["digest_savings"]["subagent_cost_usd"].take();
    assert!((cost.as_f64().unwrap() - 0.00078).abs() < 1e-9, "{cost}");
    let mut want = zeros.clone();
    want["structural_calls"] = json!(1);
    want["agentic_calls"] = json!(1);
    want["parent_tokens_saved"] = json!(saved_structural / 4 + saved_llm / 4);
    want["subagent_input_tokens"] = json!(1000);
    want["subagent_cached_input_tokens"] = json!(800);
    want["subagent_output_tokens"] = json!(50);
    want["subagent_cost_usd"] = Value::Null;
    assert_eq!(context["session"], busy_id.as_str());
    assert_eq!(context["digest_savings"], want, "{context}");
    // The idle session's telemetry did not move.
    let (_, usage) = serve.get(&format!("/sessions/{idle_id}/usage")).await;
    assert_eq!(
        usage["digest_methods"]["counts"],
        Value::Object(zero_methods)
    );
    drop((idle, busy));
}

/// The fixture server of a job whose `status` holds a long history.
fn job_project() -> Project {
    Project::new(&json!({"version": 1, "servers": {"job": {
        "transport": "stdio", "command": bin("fixture-server"), "args": ["job"]
    }}}))
}

/// The synthetic response in the first text block of a `--json` result.
fn envelope_in(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not a whole envelope ({e}): {text:.300}"))
}

#[test]
fn a_600_kb_status_history_comes_back_a_whole_envelope_and_its_raw_payload_whole() {
    let p = job_project();
    let db = p.path().join("session.db");
    let db = db.to_str().unwrap();
    let args = json!({"entries": 3750}).to_string();
    let run = p.run(&[
        "call",
        "--yes",
        "job_job_status",
        &args,
        "--json",
        "--session-db",
        db,
        "--session",
        "job",
    ]);
    run.expect_code(0);
    // Within the default max_result_bytes (128 KiB), whole, with no cap marker.
    assert!(run.stdout.len() <= 128 * 1024, "{} bytes", run.stdout.len());
    let result = run.json();
    assert_eq!(
        result["content"].as_array().unwrap().len(),
        1,
        "{result:.300}"
    );
    let envelope = envelope_in(&result);
    assert_eq!(envelope["method"], "structural_json");
    let raw_bytes = envelope["raw_bytes"].as_u64().unwrap() as usize;
    assert!(raw_bytes > 590_000, "{raw_bytes}");
    let digest_text = envelope["digest"].as_str().unwrap();
    let digest: Value = serde_json::from_str(digest_text).unwrap();
    assert_eq!(digest["id"], "job-1");
    assert_eq!(digest["status"]["state"], "running");
    let history = digest["status"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 21);
    assert_eq!(history[15], "[digest: 3730 of 3750 items omitted]");
    eprintln!(
        "600 KB status history: raw {raw_bytes} bytes, digest {} bytes, envelope {} bytes",
        digest_text.len(),
        result["content"][0]["text"].as_str().unwrap().len()
    );

    // The raw payload comes back whole, from the shell and through retrieve_raw.
    let call_id = envelope["call_id"].as_str().unwrap();
    let run = p.run(&["raw", call_id, "--session-db", db]);
    run.expect_code(0);
    let raw = run.stdout.strip_suffix('\n').unwrap();
    assert_eq!(raw.len(), raw_bytes);
    let raw: Value = serde_json::from_str(raw).unwrap();
    assert_eq!(raw["status"]["history"].as_array().unwrap().len(), 3750);
    assert_eq!(raw["status"]["history"][3749]["at"], "2026-12-01T01:02:29Z");
    let run = p.run(&[
        "call",
        "--yes",
        "retrieve_raw",
        &json!({"call_id": call_id, "pointer": "/status/history/3321/message"}).to_string(),
        "--session-db",
        db,
        "--session",
        "job",
    ]);
    run.expect_code(0);
    assert!(
        run.stdout.starts_with("\"step 3321 of the rollout"),
        "{}",
        run.stdout
    );

    // A cap far under the digest: the digest is pruned again to fit, the
    // envelope stays whole and valid.
    let p = Project::new(&json!({"version": 1, "servers": {"job": {
        "transport": "stdio", "command": bin("fixture-server"), "args": ["job"],
        "limits": {"max_result_bytes": 4096}
    }}}));
    let run = p.run(&[
        "call",
        "--yes",
        "job_job_status",
        &args,
        "--json",
        "--session-db",
        db,
    ]);
    run.expect_code(0);
    let result = run.json();
    assert!(serde_json::to_vec(&result).unwrap().len() <= 4096);
    let envelope = envelope_in(&result);
    let digest: Value = serde_json::from_str(envelope["digest"].as_str().unwrap()).unwrap();
    assert_eq!(digest["id"], "job-1");
    let run = p.run(&[
        "raw",
        envelope["call_id"].as_str().unwrap(),
        "--session-db",
        db,
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout.len(), raw_bytes + 1);
}

#[test]
fn a_call_without_a_session_db_says_in_the_envelope_how_to_keep_the_payload() {
    let p = job_project();
    let args = json!({"entries": 200}).to_string();
    let note = "the raw payload is kept in memory only and is gone when this run ends; to keep raw payloads, run with --session-db PATH, then `core-agent raw <call_id> --session-db PATH` prints it whole";
    // One call, and a batch: both end with the process.
    let run = p.run(&["call", "--yes", "job_job_status", &args, "--json"]);
    run.expect_code(0);
    let envelope = envelope_in(&run.json());
    let keys: Vec<&str> = envelope
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["digest", "raw_bytes", "method", "call_id", "note"]);
    assert_eq!(envelope["note"], note);
    let file = p.write(
        "batch.jsonl",
        &format!(
            "{}\n",
            json!({"name": "job_job_status", "arguments": {"entries": 200}})
        ),
    );
    let run = p.run(&["call", "--yes", "--batch", file.to_str().unwrap()]);
    run.expect_code(0);
    let line: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let envelope: Value =
        serde_json::from_str(line["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["note"], note);
    // With a session database the payload outlives the run: no note.
    let db = p.path().join("kept.db");
    let run = p.run(&[
        "call",
        "--yes",
        "job_job_status",
        &args,
        "--json",
        "--session-db",
        db.to_str().unwrap(),
    ]);
    run.expect_code(0);
    let envelope = envelope_in(&run.json());
    assert!(envelope.get("note").is_none(), "{envelope}");
    let run = p.run(&[
        "raw",
        envelope["call_id"].as_str().unwrap(),
        "--session-db",
        db.to_str().unwrap(),
    ]);
    run.expect_code(0);
}
