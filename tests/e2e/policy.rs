//! What the model sees, end to end against real servers: `max_pages` on a
//! paged tool list, a tool list that changes while core-agent runs,
//! `max_tools` and schema quarantine on server-everything, and the `.mcp.json`
//! policy block (`blockedTools`, `allowedTrustLevels`, `toolPolicies`).

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use core_agent_e2e::{Project, Run};
use serde_json::{Value, json};

use crate::{everything_stdio, fixture, python_stdio};

/// The names `tools --json` lists, built-ins left out.
fn server_tools(run: &Run) -> Vec<String> {
    run.expect_code(0);
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["server"].is_null())
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The findings of `mcp doctor --json` with this check, as (server, message).
fn findings(run: &Run, check: &str) -> Vec<(String, String)> {
    run.expect_code(0);
    run.json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .map(|f| {
            assert_eq!(f["severity"], "warning", "{f}");
            (
                f["server"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn with_limits(mut server: Value, limits: Value) -> Value {
    server["limits"] = limits;
    server
}

#[test]
fn max_pages_cuts_a_paged_tool_list_with_a_warning() {
    // Six tools, two per page: every page is read by default.
    let p = Project::new(&json!({"version": 1, "servers": {"pg": fixture("paged")}}));
    assert_eq!(
        server_tools(&p.run(&["tools", "--json"])),
        [
            "pg_page1_a",
            "pg_page1_b",
            "pg_page2_a",
            "pg_page2_b",
            "pg_page3_a",
            "pg_page3_b"
        ]
    );

    let p = Project::new(&json!({"version": 1, "servers": {
        "pg": with_limits(fixture("paged"), json!({"max_pages": 2}))
    }}));
    let warning = "pg: stopped listing tools after 2 pages (max_pages); tools on later pages are not published";
    let run = p.run(&["tools", "--json"]);
    assert_eq!(
        server_tools(&run),
        ["pg_page1_a", "pg_page1_b", "pg_page2_a", "pg_page2_b"]
    );
    assert!(
        run.stderr
            .contains(&format!("core-agent: mcp: {warning}\n")),
        "{}",
        run.stderr
    );
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let server = &run.json()[0];
    assert_eq!(server["tools"], 4);
    assert_eq!(server["warnings"], json!([warning]));
    let run = p.run(&["mcp", "doctor", "--json"]);
    assert_eq!(
        findings(&run, "max-pages"),
        [("pg".to_owned(), warning.to_owned())]
    );
}

#[test]
fn a_tool_listed_after_list_changed_is_callable_in_the_same_run() {
    // `fx` lists only `stable` until the file `go` exists; then it adds
    // `late` and sends tools/list_changed. `gate` holds core-agent's start
    // open until `fx` has answered a tools/list that includes `late`, so the
    // call below runs after the re-list, in the process that saw `fx` start
    // with one tool.
    let p = Project::empty();
    let go = p.path().join("go");
    let relisted = p.path().join("relisted");
    let mut grows = fixture("grows");
    grows["env"] = json!({"FIXTURE_GROW_WHEN": go, "FIXTURE_RELISTED": relisted});
    let mut waits = fixture("waits");
    waits["env"] = json!({"FIXTURE_WAIT_FOR": relisted});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fx": grows, "gate": waits}}).to_string(),
    );

    // A turn waits for the servers its names belong to: naming a `gate` tool
    // first holds the turn until `gate` has started, after the re-list.
    let batch = p.write(
        "batch.jsonl",
        "{\"name\": \"gate_echo\", \"arguments\": {\"text\": \"in\"}}\n{\"name\": \"fx_late\"}\n",
    );
    // -v: every server's start is reported, which the reader below waits for.
    let mut cmd = p.command(&["call", "-v", "--yes", "--batch", batch.to_str().unwrap()]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    // `fx` grows only once core-agent has reported it started, so its first
    // listing has certainly been taken.
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if line.starts_with("core-agent: mcp: fx (stdio): ") {
                std::fs::write(&go, "go").unwrap();
            }
            lines.push(line);
        }
        lines
    });
    let out = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap().join("\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[1]["name"], "fx_late");
    assert_eq!(lines[1]["ok"], true, "{stdout}");
    assert_eq!(lines[1]["result"]["content"][0]["text"], "late answered");
    assert!(
        stderr.contains("core-agent: mcp: fx (stdio): 1 tool in "),
        "`fx` started with `stable` only: {stderr}"
    );
}

#[test]
fn a_list_changed_during_the_first_listing_is_not_lost() {
    // `fx` sends tools/list_changed while core-agent's first tools/list is in
    // flight, answers the re-list that follows (with `late`), and only then
    // answers the first request, with the list from before it grew. The
    // listing asked for after the notification is the newer one and must win.
    let p = Project::new(&json!({"version": 1, "servers": {"fx": fixture("grows-early")}}));
    let run = p.run(&["call", "--yes", "fx_late"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "late answered\n");
}

#[test]
fn max_tools_publishes_the_first_tools_and_names_the_rest() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "everything": with_limits(everything_stdio(), json!({"max_tools": 3}))
    }}));
    let run = p.run(&["tools", "--json"]);
    assert_eq!(
        server_tools(&run),
        [
            "everything_echo",
            "everything_get_annotated_message",
            "everything_get_env"
        ]
    );
    let warning = "everything: only the first 3 tools are published (max_tools); left out: get-resource-links, get-resource-reference, get-structured-content, get-sum, get-tiny-image, gzip-file-as-resource, toggle-simulated-logging, toggle-subscriber-updates, trigger-long-running-operation, trigger-elicitation-request, simulate-research-query";
    assert!(
        run.stderr
            .contains(&format!("core-agent: mcp: {warning}\n")),
        "{}",
        run.stderr
    );
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json()[0]["warnings"], json!([warning]));
    let run = p.run(&["mcp", "doctor", "--json"]);
    assert_eq!(
        findings(&run, "max-tools"),
        [("everything".to_owned(), warning.to_owned())]
    );
    // A dropped tool cannot be called.
    let run = p.run(&["call", "--yes", "everything_get_sum", r#"{"a": 2, "b": 3}"#]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(&format!(
            "core-agent: `everything_get_sum` is not published: {warning}"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn tools_with_large_input_schemas_are_quarantined_and_the_rest_stay() {
    // server-everything's schemas, in compact JSON: echo 167 bytes, get-env,
    // get-tiny-image, the two toggles and trigger-elicitation-request 85;
    // get-resource-links 205, get-sum 208, get-structured-content 209, …
    let quarantined = [
        ("get-annotated-message", 357),
        ("get-resource-links", 205),
        ("get-resource-reference", 249),
        ("get-structured-content", 209),
        ("get-sum", 208),
        ("gzip-file-as-resource", 648),
        ("trigger-long-running-operation", 266),
        ("simulate-research-query", 333),
    ];
    let kept = [
        "everything_echo",
        "everything_get_env",
        "everything_get_tiny_image",
        "everything_toggle_simulated_logging",
        "everything_toggle_subscriber_updates",
        "everything_trigger_elicitation_request",
    ];
    // At 205 bytes the limit itself is allowed: only larger schemas are out.
    for limit in [200, 205] {
        let p = Project::new(&json!({"version": 1, "servers": {
            "everything": with_limits(everything_stdio(), json!({"max_input_schema_bytes": limit}))
        }}));
        let out: Vec<(&str, usize)> = quarantined
            .iter()
            .copied()
            .filter(|(_, bytes)| *bytes > limit)
            .collect();
        let warnings: Vec<String> = out
            .iter()
            .map(|(tool, bytes)| format!("everything: tool `{tool}` is left out: its input schema is {bytes} bytes, over max_input_schema_bytes ({limit})"))
            .collect();
        let mut expected: Vec<String> = kept.iter().map(|t| t.to_string()).collect();
        if limit >= 205 {
            expected.push("everything_get_resource_links".to_owned());
        }
        expected.sort();

        let run = p.run(&["tools", "--json"]);
        assert_eq!(server_tools(&run), expected, "limit {limit}");
        for w in &warnings {
            assert!(
                run.stderr.contains(&format!("core-agent: mcp: {w}\n")),
                "{}",
                run.stderr
            );
        }
        let run = p.run(&["mcp", "doctor", "--json"]);
        let got: Vec<String> = findings(&run, "schema-size")
            .into_iter()
            .map(|(server, message)| {
                assert_eq!(server, "everything");
                message
            })
            .collect();
        assert_eq!(got, warnings, "limit {limit}");
    }
    // A quarantined tool cannot be called; a kept one can.
    let p = Project::new(&json!({"version": 1, "servers": {
        "everything": with_limits(everything_stdio(), json!({"max_input_schema_bytes": 200}))
    }}));
    let run = p.run(&["call", "--yes", "everything_get_sum", r#"{"a": 2, "b": 3}"#]);
    run.expect_code(2);
    let run = p.run(&[
        "call",
        "--yes",
        "everything_echo",
        r#"{"message": "small"}"#,
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "Echo: small\n");
}

/// A project whose `.mcp.json` runs the Python fixture as `py` under `policy`.
fn python_with_policy(policy: Value) -> Project {
    let p = Project::empty();
    let mut server = python_stdio();
    let entry = server.as_object_mut().unwrap();
    entry.remove("transport");
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"py": server}, "auggy": {"servers": {"py": policy}}}).to_string(),
    );
    p
}

/// `tools --json --trust-level LEVEL`: each server tool with its levels.
fn tools_at(p: &Project, level: &str) -> Vec<(String, Vec<String>)> {
    let run = p.run(&["tools", "--json", "--trust-level", level]);
    run.expect_code(0);
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["server"].is_null())
        .map(|t| {
            let levels = t["trust_levels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect();
            (t["name"].as_str().unwrap().to_owned(), levels)
        })
        .collect()
}

fn levels(tools: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    tools
        .iter()
        .map(|(name, levels)| {
            (
                (*name).to_owned(),
                levels.iter().map(|l| (*l).to_owned()).collect(),
            )
        })
        .collect()
}

#[test]
fn blocked_tools_trust_levels_and_tool_policies_from_dot_mcp_json() {
    let p = python_with_policy(json!({
        "blockedTools": ["fail", "hang", "read_slow", "barrier", "barrier_mut", "annotated_plain", "long_text", "big_structured", "big_resource", "plan"],
        "allowedTrustLevels": ["creator", "agent", "user"],
        "toolPolicies": {
            // Widens past the server's levels, to public.
            "add": {"allowedTrustLevels": ["public", "user", "agent", "creator"]},
            // Widens a destructive (creator-only) tool to agent.
            "delete_everything": {"allowedTrustLevels": ["agent", "creator"]},
        }
    }));
    const ABOVE_PUBLIC: &[&str] = &["creator", "agent", "user"];
    const ALL: &[&str] = &["creator", "agent", "user", "public"];
    const TO_AGENT: &[&str] = &["creator", "agent"];
    // get_env and get_header have no annotations (mutating, creator only by
    // default): the server's allowedTrustLevels widens them to its levels.
    let creator = levels(&[
        ("py_add", ALL),
        ("py_delete_everything", TO_AGENT),
        ("py_get_env", ABOVE_PUBLIC),
        ("py_get_header", ABOVE_PUBLIC),
        ("py_write_slow", ABOVE_PUBLIC),
    ]);
    assert_eq!(tools_at(&p, "creator"), creator);
    assert_eq!(tools_at(&p, "agent"), creator);
    let user: Vec<_> = creator
        .iter()
        .filter(|(name, _)| name != "py_delete_everything")
        .cloned()
        .collect();
    assert_eq!(tools_at(&p, "user"), user);
    assert_eq!(tools_at(&p, "public"), levels(&[("py_add", ALL)]));

    let run = p.run(&["mcp", "list", "--json", "--trust-level", "public"]);
    run.expect_code(0);
    let server = &run.json()[0];
    assert_eq!(
        (server["tools"].as_u64(), server["restricted"].as_u64()),
        (Some(1), Some(4))
    );

    // A call the caller's level may not make exits 1 and says who may.
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "public",
        "py_write_slow",
        r#"{"ms": 1}"#,
    ]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("core-agent: `py_write_slow` is not available at trust level `public`; it allows `creator`, `agent`, `user`\n"),
        "{}",
        run.stderr
    );
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "user",
        "py_delete_everything",
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains("core-agent: `py_delete_everything` is not available at trust level `user`; it allows `creator`, `agent`\n"),
        "{}",
        run.stderr
    );
    // What the policy allows runs.
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "agent",
        "py_delete_everything",
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "deleted nothing\n");
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "public",
        "py_add",
        r#"{"a": 2, "b": 3}"#,
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "5\n");
    // A blocked tool is not in the catalog at any level.
    let run = p.run(&["call", "--yes", "py_fail"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("core-agent: no tool named `py_fail`"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_tool_policy_without_levels_overrides_nothing() {
    // `{}` sets no levels: each tool keeps what it would have without the
    // entry (the server's allowedTrustLevels, which widens the destructive
    // one to agent), rather than no level at all.
    let p = python_with_policy(json!({
        "blockedTools": ["fail", "hang", "read_slow", "barrier", "barrier_mut", "get_env", "get_header", "annotated_plain", "long_text", "big_structured", "big_resource", "plan"],
        "allowedTrustLevels": ["creator", "agent"],
        "toolPolicies": {"write_slow": {}, "delete_everything": {}}
    }));
    const TO_AGENT: &[&str] = &["creator", "agent"];
    let expected = levels(&[
        ("py_add", TO_AGENT),
        ("py_delete_everything", TO_AGENT),
        ("py_write_slow", TO_AGENT),
    ]);
    assert_eq!(tools_at(&p, "creator"), expected);
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "agent",
        "py_write_slow",
        r#"{"ms": 1}"#,
    ]);
    run.expect_code(0);
}
