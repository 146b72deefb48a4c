//! The survey tools from the command line: `core-agent call grep` searches
//! the project directory (the one holding `.agents`), and `--no-survey` or
//! `"survey": false` turns them off.

use core_agent_e2e::Project;
use serde_json::{Value, json};

fn project(extra: Value) -> Project {
    let mut config = json!({"version": 1, "servers": {}});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let p = Project::new(&config);
    p.write("src/lib.rs", "pub fn survey_marker() {}\n");
    p
}

#[test]
fn grep_finds_a_match_in_the_project_and_the_switches_turn_it_off() {
    let p = project(json!({}));
    let run = p.run(&[
        "call",
        "--yes",
        "grep",
        r#"{"pattern": "survey_marker"}"#,
        "--json",
    ]);
    run.expect_code(0);
    let result = run.json();
    let found: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        found["matches"],
        json!([{"path": "src/lib.rs", "line": 1, "text": "pub fn survey_marker() {}"}]),
        "{found:#}"
    );

    let run = p.run(&["call", "--yes", "list_dir", r#"{"path": "."}"#, "--json"]);
    run.expect_code(0);
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(run.stdout.contains("\"read_many_files\""), "{}", run.stdout);

    let run = p.run(&[
        "call",
        "--yes",
        "--no-survey",
        "grep",
        r#"{"pattern": "x"}"#,
    ]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no tool named `grep`"),
        "{}",
        run.stderr
    );

    let off = project(json!({"survey": false}));
    let run = off.run(&["call", "--yes", "grep", r#"{"pattern": "x"}"#]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no tool named `grep`"),
        "{}",
        run.stderr
    );
    let run = off.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(
        !run.stdout.contains("\"read_many_files\""),
        "{}",
        run.stdout
    );
}

/// The reserved name `builtin` narrows the survey tools: `tools` in
/// `mcp.json`, `allowedTools`/`allowedTrustLevels` under `auggy.servers` in
/// `.mcp.json`; one left out is unknown, one above the caller's trust level
/// is refused saying which levels may call it.
#[test]
fn the_reserved_name_builtin_narrows_the_survey_tools_in_both_dialects() {
    let p = project(json!({"servers": {"builtin": {"tools": ["grep"]}}}));
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"grep"), "{names:?}");
    assert!(!names.contains(&"list_dir"), "{names:?}");
    let run = p.run(&["call", "--yes", "grep", r#"{"pattern": "survey_marker"}"#]);
    run.expect_code(0);
    let run = p.run(&["call", "--yes", "list_dir", r#"{"path": "."}"#]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no tool named `list_dir`"),
        "{}",
        run.stderr
    );

    let peer = Project::empty();
    peer.write("src/lib.rs", "pub fn survey_marker() {}\n");
    peer.write(
        ".mcp.json",
        r#"{"mcpServers": {}, "auggy": {"servers": {"builtin": {
            "blockedTools": ["read_many_files"],
            "allowedTrustLevels": ["creator"]}}}}"#,
    );
    let run = peer.run(&["call", "--yes", "grep", r#"{"pattern": "survey_marker"}"#]);
    run.expect_code(0);
    // `tools` says why the survey tools are the creator's alone.
    let run = peer.run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let grep = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "grep")
        .unwrap();
    assert_eq!(
        (&grep["trust_levels"], &grep["why_restricted"]),
        (
            &json!(["creator"]),
            &json!("the server's allowedTrustLevels")
        )
    );
    let run = peer.run(&[
        "call",
        "--yes",
        "--trust-level",
        "agent",
        "grep",
        r#"{"pattern": "survey_marker"}"#,
    ]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("not available at trust level `agent`; it allows `creator`"),
        "{}",
        run.stderr
    );
    let run = peer.run(&[
        "call",
        "--yes",
        "read_many_files",
        r#"{"paths": ["src/lib.rs"]}"#,
    ]);
    run.expect_code(2);

    let bad = project(json!({"servers": {"builtin": {"transport": "stdio", "command": "x"}}}));
    let run = bad.run(&["tools"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("`builtin` is reserved"),
        "{}",
        run.stderr
    );
}
