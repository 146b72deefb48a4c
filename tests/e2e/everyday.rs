//! Small things a user notices: plain log lines off a terminal, a failed
//! server's whole reason in `mcp list`, listings that fail when nothing
//! started, and the session a later `retrieve_raw` needs.

use core_agent_e2e::Project;
use serde_json::{Value, json};

use crate::demo_server;

/// A stdio server that writes two lines to stderr and exits.
fn failing() -> Value {
    json!({"transport": "stdio", "command": "sh",
           "args": ["-c", "echo first problem >&2; echo second problem >&2; exit 3"]})
}

#[test]
fn log_lines_carry_no_colours_into_a_pipe() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}));
    let mut cmd = p.command(&["mcp", "list"]);
    cmd.env("CORE_AGENT_LOG", "debug");
    let run = p.run_with(cmd);
    run.expect_code(0);
    assert!(run.stderr.contains("DEBUG"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
}

#[test]
fn mcp_list_shows_a_failed_servers_stderr_and_exits_1_when_nothing_started() {
    let p = Project::new(&json!({"version": 1, "servers": {"bad": failing()}}));
    let run = p.run(&["mcp", "list"]);
    run.expect_code(1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("bad "), "{}", run.stdout);
    assert!(
        lines[0].ends_with("its stderr ended with:"),
        "{}",
        run.stdout
    );
    assert_eq!(
        lines[1..],
        ["    first problem", "    second problem"],
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("core-agent: the one configured server did not start"),
        "{}",
        run.stderr
    );
    // tools, and JSON, say the same with their exit code.
    p.run(&["tools"]).expect_code(1);
    p.run(&["mcp", "list", "--json"]).expect_code(1);
}

#[test]
fn a_listing_fails_when_a_required_server_is_down_and_not_when_another_is() {
    let mut bad = failing();
    let p = Project::new(
        &json!({"version": 1, "servers": {"bad": bad.clone(), "demo": demo_server()}}),
    );
    p.run(&["mcp", "list"]).expect_code(0);
    bad["required"] = json!(true);
    let p = Project::new(&json!({"version": 1, "servers": {"bad": bad, "demo": demo_server()}}));
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(1);
    assert!(
        run.stderr.contains("required server is not up: bad"),
        "{}",
        run.stderr
    );
}

#[test]
fn call_names_the_session_and_call_id_of_a_digested_result() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}));
    let db = p.path().join("s.db");
    let db = db.to_str().unwrap();
    let run = p.run(&["call", "--yes", "demo_list_inventory", "--session-db", db]);
    run.expect_code(0);
    let note = run
        .stderr
        .lines()
        .find(|l| l.starts_with("core-agent: digested; the raw payload is `"))
        .unwrap_or_else(|| panic!("no note of the session:\n{}", run.stderr));
    let mut quoted = note.split('`').skip(1).step_by(2);
    let call_id = quoted.next().unwrap().to_owned();
    let session = quoted.next().unwrap().to_owned();
    assert!(call_id.starts_with("call-"), "{note}");
    // What it says works: retrieve_raw in a later run of that session.
    let run = p.run(&[
        "call",
        "--yes",
        "retrieve_raw",
        &json!({"call_id": call_id, "pointer": "/total"}).to_string(),
        "--session",
        &session,
        "--session-db",
        db,
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "200\n");
    // A result small enough to pass whole gets no note.
    let run = p.run(&[
        "call",
        "--yes",
        "demo_divide",
        r#"{"a": 1, "b": 4}"#,
        "--session-db",
        db,
    ]);
    run.expect_code(0);
    assert!(!run.stderr.contains("digested"), "{}", run.stderr);
}
