//! The demo server and the CLI's commands against it.

use core_agent_e2e::Project;
use serde_json::json;

use crate::demo_server;

fn project() -> Project {
    Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}))
}

#[test]
fn tools_json_lists_the_namespaced_catalog() {
    let run = project().run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "record_plan",
            "wait_and_verify",
            "retrieve_raw",
            "list_dir",
            "glob",
            "grep",
            "read_many_files",
            "demo_add_note",
            "demo_divide",
            "demo_list_inventory",
            "demo_lookup_item"
        ]
    );
    let divide = &tools[8];
    let keys: Vec<&str> = divide
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "server",
            "tool",
            "description",
            "input_schema",
            "read_only",
            "trust_levels",
            "why_restricted"
        ]
    );
    assert_eq!(divide["server"], "demo");
    assert_eq!(divide["read_only"], true);
    assert_eq!(divide["why_restricted"], serde_json::Value::Null);
    assert_eq!(
        divide["trust_levels"],
        serde_json::json!(["creator", "agent", "user", "public"])
    );
    assert_eq!(
        tools[7]["read_only"], false,
        "add_note is annotated mutating"
    );
    assert_eq!(
        tools[0]["server"],
        serde_json::Value::Null,
        "record_plan is a built-in"
    );
    assert_eq!(divide["tool"], "divide");
    assert_eq!(divide["input_schema"]["type"], "object");
    assert!(divide["input_schema"]["properties"]["b"].is_object());
    assert!(
        run.stderr
            .contains("core-agent: mcp: demo (stdio): 4 tools in "),
        "{}",
        run.stderr
    );
}

#[test]
fn tools_prints_names_and_descriptions() {
    let run = project().run(&["tools"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("demo_add_note  [mutating; creator, agent, user, public]\n    Add a note to this session's notebook.\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn call_prints_text_and_exits_zero() {
    let run = project().run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "0.25\n");
}

#[test]
fn call_reads_arguments_from_stdin() {
    let p = project();
    let mut cmd = p.command(&["call", "--yes", "demo_lookup_item", "-"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"sku": "SKU-0042"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let item: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(item["id"], 42);
}

#[test]
fn a_tool_error_exits_one_and_json_shows_is_error() {
    let p = project();
    let run = p.run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 0}"#]);
    run.expect_code(1);
    assert_eq!(run.stdout, "cannot divide by zero; pass a non-zero `b`\n");
    assert!(
        run.stderr.contains("`demo_divide` reported an error"),
        "{}",
        run.stderr
    );

    let run = p.run(&[
        "call",
        "--yes",
        "--json",
        "demo_divide",
        r#"{"a": 1, "b": 0}"#,
    ]);
    run.expect_code(1);
    let result = run.json();
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["type"], "text");
}

#[test]
fn json_call_prints_the_whole_result() {
    let run = project().run(&[
        "call",
        "--yes",
        "demo_list_inventory",
        "--json",
        "--no-mcp-digest",
    ]);
    run.expect_code(0);
    let result = run.json();
    let listing: serde_json::Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listing["items"].as_array().unwrap().len(), 200);
    assert!(
        result["content"][0]["text"].as_str().unwrap().len() > 30_000,
        "the listing is large"
    );
}

#[test]
fn unknown_tool_exits_two_with_suggestions() {
    let run = project().run(&["call", "--yes", "demo_divid"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("no tool named `demo_divid`; did you mean `demo_divide`?"),
        "{}",
        run.stderr
    );

    let run = project().run(&["call", "--yes", "add_note"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("did you mean `demo_add_note`?"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_arguments_exit_two_before_any_server_starts() {
    let run = project().run(&["call", "--yes", "demo_divide", "[1, 2]"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("the arguments must be a JSON object"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("core-agent: mcp: demo"),
        "no server was started: {}",
        run.stderr
    );

    let run = project().run(&["call", "--yes", "demo_divide", "{nope"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("the arguments are not valid JSON"),
        "{}",
        run.stderr
    );
}

#[test]
fn global_flags_work_after_the_subcommand() {
    let p = project();
    let other = Project::empty();
    let agents = p.path().join(".agents");
    let run = other.run(&[
        "mcp",
        "list",
        "--json",
        "--agents-dir",
        agents.to_str().unwrap(),
    ]);
    run.expect_code(0);
    assert_eq!(run.json()[0]["name"], "demo");
}

#[test]
fn the_repository_demo_config_is_valid() {
    // The README's run command uses the repository's own .agents/mcp.json.
    let paths =
        core_agent_mcp_config::ConfigPaths::only(core_agent_e2e::root().join(".agents/mcp.json"));
    let config = core_agent_mcp_config::load(&paths).unwrap();
    assert_eq!(config.servers.len(), 1);
    assert_eq!(config.servers[0].name, "demo");
}
