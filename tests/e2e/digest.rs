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
    assert_eq!(envelope["call_id"], "e2e-1");
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
    let run = p.run(&["raw", "e2e-1", "--session-db", db]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{raw_text}\n"));
    let run = p.run(&["raw", "e2e-1", "--pointer", "/items/41", "--session-db", db]);
    run.expect_code(0);
    let item: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(item["sku"], "SKU-0042");

    // So does the model, through the built-in, in a later run of the session.
    let run = p.run(&[
        "call",
        "--yes",
        "retrieve_raw",
        r#"{"call_id": "e2e-1", "pointer": "/total"}"#,
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
        run.stderr.contains("no raw payload is stored under `nope`"),
        "{}",
        run.stderr
    );

    // Telemetry.
    let run = p.run(&["usage", "--session", "e2e", "--session-db", db, "--json"]);
    run.expect_code(0);
    let usage = run.json();
    assert_eq!(usage["digest_methods"]["counts"]["structural_json"], 1);
    let saved = usage["digest_methods"]["bytes_saved"]["structural_json"]
        .as_u64()
        .unwrap();
    assert!(saved > 30_000, "{saved}");
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
