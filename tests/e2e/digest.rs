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

#[test]
fn the_llm_second_chance_summarizes_bills_and_stops_at_the_ceiling() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = Project::new(
        &json!({"version": 1, "agentic_wrap_model": "small-model", "servers": {"fx": {
            "transport": "stdio", "command": bin("fixture-server"), "args": ["ok"]
        }}}),
    );
    let prose = "Widgets are small. ".repeat(600); // 11 400 bytes of prose
    let call = json!({"name": "fx_echo", "arguments": {"text": prose}});
    let input: String = (0..3).map(|_| format!("{call}\n")).collect();
    let file = p.write("batch.jsonl", &input);
    let db = p.path().join("llm.db");
    let run = |extra: &[&str], session: &str| {
        let mut args = vec![
            "call",
            "--yes",
            "--batch",
            file.to_str().unwrap(),
            "--session-db",
            db.to_str().unwrap(),
        ];
        args.extend_from_slice(&["--session", session]);
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
                serde_json::from_str::<Value>(
                    line["result"]["content"][0]["text"].as_str().unwrap(),
                )
                .unwrap()
            })
            .collect::<Vec<Value>>()
    };
    // Each summary costs 1000 × $0.30/M + 50 × $2.50/M = $0.000425: the
    // third call finds $0.00085 spent, over the $0.0005 ceiling.
    let envelopes = run(
        &["--mcp-agentic-wrap-llm", "--cost-ceiling", "0.0005"],
        "llm",
    );
    // The three reads run concurrently, so which one meets the ceiling varies.
    let mut methods: Vec<&str> = envelopes
        .iter()
        .map(|e| e["method"].as_str().unwrap())
        .collect();
    methods.sort();
    assert_eq!(methods, ["llm_fallback", "llm_fallback", "passthrough"]);
    let summarized = envelopes
        .iter()
        .find(|e| e["method"] == "llm_fallback")
        .unwrap();
    assert_eq!(
        summarized["digest"],
        "SUMMARY by small-model: a long text about widgets."
    );
    assert_eq!(summarized["raw_bytes"], prose.len());

    let usage = p
        .run(&[
            "usage",
            "--session",
            "llm",
            "--session-db",
            db.to_str().unwrap(),
            "--json",
        ])
        .json();
    let savings = &usage["digest_savings"];
    assert_eq!(savings["agentic_calls"], 2);
    assert_eq!(savings["structural_calls"], 1);
    assert_eq!(savings["subagent_input_tokens"], 2000);
    assert_eq!(savings["subagent_output_tokens"], 100);
    assert!(
        (savings["subagent_cost_usd"].as_f64().unwrap() - 0.00085).abs() < 1e-9,
        "{savings}"
    );
    assert_eq!(savings["ceiling_skips"], 1);
    assert_eq!(usage["digest_methods"]["counts"]["llm_fallback"], 2);

    // --mcp-agentic-wrap-model wins over agentic_wrap_model; a failing LLM falls back.
    let envelopes = run(
        &[
            "--mcp-agentic-wrap-llm",
            "--mcp-agentic-wrap-model",
            "broken",
        ],
        "broken",
    );
    assert!(
        envelopes.iter().all(|e| e["method"] == "passthrough"),
        "{envelopes:?}"
    );
    let usage = p
        .run(&[
            "usage",
            "--session",
            "broken",
            "--session-db",
            db.to_str().unwrap(),
            "--json",
        ])
        .json();
    assert_eq!(usage["digest_savings"]["subagent_cost_usd"], 0.0);
    // Without the switch, no LLM.
    let envelopes = run(&[], "off");
    assert!(envelopes.iter().all(|e| e["method"] == "passthrough"));
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

/// The fixture server of a job whose `status` holds a long history.
fn job_project() -> Project {
    Project::new(&json!({"version": 1, "servers": {"job": {
        "transport": "stdio", "command": bin("fixture-server"), "args": ["job"]
    }}}))
}

/// The synthetic response in the first text block of a `--json` result.
fn envelope_of(result: &Value) -> Value {
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
    let envelope = envelope_of(&result);
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
    let envelope = envelope_of(&result);
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
    let envelope = envelope_of(&run.json());
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
    let envelope = envelope_of(&run.json());
    assert!(envelope.get("note").is_none(), "{envelope}");
    let run = p.run(&[
        "raw",
        envelope["call_id"].as_str().unwrap(),
        "--session-db",
        db.to_str().unwrap(),
    ]);
    run.expect_code(0);
}
