//! Policy, the permission gate and dispatch, end to end: batches against a
//! Python SDK server whose barrier tools count the calls in flight at once,
//! timeouts with cancellation, plan-first, ask mode without a terminal, trust
//! levels, allowlists, notes, limits and the built-ins.

use core_agent_e2e::{Project, filesystem_js, node};
use serde_json::{Value, json};

use crate::{demo_server, python_stdio};

fn python_server(limits: Value) -> Value {
    let mut server = python_stdio();
    server["limits"] = limits;
    server
}

/// Runs `core-agent call --batch -` with these calls and returns the JSON lines.
pub(crate) fn batch(p: &Project, extra: &[&str], calls: &[Value]) -> (i32, Vec<Value>, String) {
    let mut args = vec!["call", "--batch", "-"];
    args.extend_from_slice(extra);
    let mut cmd = p.command(&args);
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let file = p.write("batch.jsonl", &input);
    cmd.stdin(std::fs::File::open(file).unwrap());
    let run = p.run_with(cmd);
    let lines = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (run.code, lines, run.stderr)
}

fn ms(line: &Value) -> u64 {
    line["ms"].as_u64().unwrap()
}

/// A call of the fixture's `barrier` (read-only) or `barrier_mut` (mutating):
/// it waits until `n` barrier calls are in flight on the server at once, or
/// `timeout_ms` passes.
fn barrier(tool: &str, n: u64, timeout_ms: u64) -> Value {
    json!({"name": tool, "arguments": {"n": n, "timeout_ms": timeout_ms}})
}

/// What each barrier call answered: whether `n` calls were in flight at once
/// while it waited, and the most the server ever had in flight at once.
fn barrier_answers(lines: &[Value]) -> Vec<(bool, u64)> {
    lines
        .iter()
        .map(|line| {
            assert_eq!(line["ok"], true, "{line}");
            let text = line["result"]["content"][0]["text"].as_str().unwrap();
            let answer: Value = serde_json::from_str(text).unwrap();
            (
                answer["met"].as_bool().unwrap(),
                answer["in_flight_max"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn four_reads_are_in_flight_at_once() {
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_server(json!({}))}}));
    let call = barrier("py_barrier", 4, 1500);
    let (code, lines, stderr) = batch(&p, &["--yes"], &vec![call; 4]);
    assert_eq!(code, 0, "{stderr}");
    // Each call waits until all four are in flight: a dispatcher that ran
    // fewer at once would leave the first one waiting until its timeout.
    assert_eq!(barrier_answers(&lines), [(true, 4); 4]);
}

#[test]
fn mutations_run_one_at_a_time_in_the_order_asked() {
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_server(json!({}))}}));
    let call = barrier("py_barrier_mut", 2, 500);
    let (code, lines, stderr) = batch(&p, &["--yes"], &vec![call; 3]);
    assert_eq!(code, 0, "{stderr}");
    // No mutation ever had another beside it, so none saw two in flight.
    assert_eq!(barrier_answers(&lines), [(false, 1); 3]);
    let times: Vec<u64> = lines.iter().map(ms).collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "mutations finish in the order asked: {times:?} ms"
    );
}

#[test]
fn at_most_max_concurrent_calls_per_server() {
    // One call more than the limit, each waiting for all of them to be in
    // flight: none ever is, and the server saw exactly the limit at once.
    // The limit of 2 differs from the default of 4, so it must come from the config.
    for limit in [4, 2] {
        let p = Project::new(
            &json!({"version": 1, "servers": {"py": python_server(json!({"max_concurrent_calls": limit}))}}),
        );
        let calls = limit + 1;
        let call = barrier("py_barrier", calls, 1500);
        let (code, lines, stderr) = batch(&p, &["--yes"], &vec![call; calls as usize]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            barrier_answers(&lines),
            vec![(false, limit); calls as usize],
            "max_concurrent_calls {limit}"
        );
    }
}

#[test]
fn a_hanging_call_times_out_and_the_server_sees_the_cancellation() {
    let p = Project::new(
        &json!({"version": 1, "servers": {"py": python_server(json!({"call_timeout_ms": 800}))}}),
    );
    let marker = p.path().join("cancelled");
    let run = p.run(&[
        "call",
        "--yes",
        "py_hang",
        &json!({"marker": marker}).to_string(),
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "`hang` on server `py` did not answer within 800 ms; the request was cancelled"
        ),
        "{}",
        run.stderr
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "cancelled"
    );
}

#[test]
fn plan_first_denies_mutations_until_record_plan() {
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_server(json!({}))}}));
    p.write(
        ".agents/config.json",
        r#"{"permissions": {"allow": ["mcp:py_*"], "require_plan_artifact": true}}"#,
    );
    let write = json!({"name": "py_write_slow", "arguments": {"ms": 1}});
    let read = json!({"name": "py_add", "arguments": {"a": 1, "b": 2}});
    let plan = json!({"name": "record_plan", "arguments": {"plan": "1. write once"}});
    let (code, lines, _) = batch(&p, &[], &[read, write.clone(), plan, write]);
    assert_eq!(code, 1, "the first write was refused");
    let ok: Vec<bool> = lines.iter().map(|l| l["ok"].as_bool().unwrap()).collect();
    assert_eq!(ok, [true, false, true, true]);
    let error = lines[1]["error"].as_str().unwrap();
    assert!(
        error.starts_with("permission denied: plan-first is on"),
        "{error}"
    );
    assert!(
        error.ends_with("call `record_plan` with your plan first; read-only tools need no plan"),
        "{error}"
    );
}

#[test]
fn ask_mode_without_a_terminal_refuses_with_advice() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}));
    let run = p.run(&["call", "demo_add_note", r#"{"text": "x"}"#]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "permission denied: `demo_add_note` needs approval (permissions.mode is \"ask\") and was not approved; approve it when asked, or add \"mcp:demo_add_note\" to permissions.allow in .agents/config.json, or run with --yes to approve every ask of this run"
        ),
        "{}",
        run.stderr
    );
    // --yes approves; an allow pattern needs no approval; a deny pattern beats it.
    p.run(&["call", "--yes", "demo_add_note", r#"{"text": "x"}"#])
        .expect_code(0);
    p.write(".agents/config.json", r#"{"permissions": {"allow": ["mcp:demo_*"], "deny": ["mcp:demo_add_*", "mcp:nothing_*"]}}"#);
    p.run(&["call", "demo_divide", r#"{"a": 1, "b": 1}"#])
        .expect_code(0);
    let run = p.run(&["call", "--yes", "demo_add_note", r#"{"text": "x"}"#]);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("`demo_add_note` is denied by `mcp:demo_add_*` in .agents/config.json"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("core-agent: permissions: pattern `mcp:nothing_*` in .agents/config.json matches no tool in the catalog"),
        "{}",
        run.stderr
    );
    // allowlist mode refuses without asking; yolo skips the gate, even deny.
    let run = p.run(&[
        "call",
        "--mode",
        "allowlist",
        "--yes",
        "demo_add_note",
        r#"{"text": "x"}"#,
    ]);
    run.expect_code(1);
    p.run(&[
        "call",
        "--mode",
        "yolo",
        "demo_add_note",
        r#"{"text": "x"}"#,
    ])
    .expect_code(0);
}

#[test]
fn trust_levels_hide_destructive_tools() {
    let p = Project::empty();
    let root = p.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fs": {"transport": "stdio", "command": node(), "args": [filesystem_js(), root]}}})
            .to_string(),
    );
    let names = |level: &str| -> Vec<String> {
        let run = p.run(&["tools", "--json", "--trust-level", level]);
        run.expect_code(0);
        run.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let public = names("public");
    // write_file, edit_file and move_file are destructive: creator only.
    assert_eq!(
        public,
        [
            "record_plan",
            "wait_and_verify",
            "retrieve_raw",
            "list_dir",
            "glob",
            "grep",
            "read_many_files",
            "fs_create_directory",
            "fs_directory_tree",
            "fs_get_file_info",
            "fs_list_allowed_directories",
            "fs_list_directory",
            "fs_list_directory_with_sizes",
            "fs_read_file",
            "fs_read_media_file",
            "fs_read_multiple_files",
            "fs_read_text_file",
            "fs_search_files"
        ]
    );
    let mut creator = names("creator");
    creator.retain(|n| !public.contains(n));
    assert_eq!(creator, ["fs_edit_file", "fs_move_file", "fs_write_file"]);

    let run = p.run(&["mcp", "list", "--json", "--trust-level", "public"]);
    let server = &run.json()[0];
    assert_eq!(
        server["restricted"], 3,
        "write_file, edit_file and move_file"
    );
    assert_eq!(
        server["tools"].as_u64().unwrap() as usize,
        public.len() - 7,
        "minus the seven built-ins (three host tools, four survey tools)"
    );

    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "public",
        "fs_write_file",
        r#"{"path": "x", "content": "y"}"#,
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "`fs_write_file` is not available at trust level `public`; it allows `creator`"
        ),
        "{}",
        run.stderr
    );

    // The read-only class comes from the server's own annotations.
    let run = p.run(&["tools", "--json"]);
    let tools = run.json();
    let class = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["read_only"]
            .clone()
    };
    assert_eq!(class("fs_read_text_file"), true);
    assert_eq!(class("fs_write_file"), false);
}

#[test]
fn allowlists_notes_and_limits_shape_the_catalog() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": {
        "transport": "stdio",
        "command": core_agent_e2e::bin("core-agent"),
        "args": ["demo-server"],
        "tools": ["divide", "list_inventory", "lookup_itme"],
        "tool_notes": {"divide": "Use for ratios only.", "add_note": "excluded", "nope": "typo"},
        "limits": {"max_result_bytes": 1000}
    }}}));
    let run = p.run(&["tools", "--json"]);
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
            "demo_divide",
            "demo_list_inventory"
        ]
    );
    assert_eq!(
        tools[7]["description"],
        "Divide a by b. Fails when b is zero.\n\nUse for ratios only."
    );
    for line in [
        "core-agent: mcp: demo: tools allowlist names 1 tool(s) this server does not expose: lookup_itme; it exposes: add_note, divide, list_inventory, lookup_item",
        "core-agent: mcp: demo: tool_notes names 1 tool(s) this server does not expose: nope; it exposes: add_note, divide, list_inventory, lookup_item",
        "core-agent: mcp: demo: tool_notes names 1 tool(s) the allowlist excluded, so the note describes nothing: add_note",
    ] {
        assert!(
            run.stderr.contains(line),
            "missing `{line}` in:\n{}",
            run.stderr
        );
    }
    // The human listing shows the same description as the declaration.
    let human = p.run(&["tools"]);
    assert!(
        human.stdout.contains("demo_divide  [read-only; creator, agent, user, public]\n    Divide a by b. Fails when b is zero.\n    \n    Use for ratios only.\n"),
        "{}",
        human.stdout
    );

    let run = p.run(&[
        "call",
        "--yes",
        "demo_list_inventory",
        "--json",
        "--no-mcp-digest",
    ]);
    run.expect_code(0);
    // The whole result, as serialized, is within the bound; the text kept is
    // the start of the listing, and the marker says what was cut.
    let result = run.json();
    assert!(
        serde_json::to_string(&result).unwrap().len() <= 1000,
        "{result}"
    );
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 2);
    let kept = content[0]["text"].as_str().unwrap();
    assert!(kept.starts_with("{\"items\":[{\"id\":1,"), "{kept}");
    let marker = content[1]["text"].as_str().unwrap();
    // The same call without the bound: its serialized size is what the marker names.
    let whole = Project::new(&json!({"version": 1, "servers": {"demo": {
        "transport": "stdio",
        "command": core_agent_e2e::bin("core-agent"),
        "args": ["demo-server"],
    }}}));
    let run = whole.run(&[
        "call",
        "--yes",
        "demo_list_inventory",
        "--json",
        "--no-mcp-digest",
    ]);
    run.expect_code(0);
    let full = run.json();
    let text = full["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with(kept));
    assert_eq!(
        marker,
        format!(
            "[core-agent: the result was {} bytes, over max_result_bytes (1000): {} bytes of text cut]",
            serde_json::to_string(&full).unwrap().len(),
            text.len() - kept.len()
        )
    );
}

#[test]
fn wait_and_verify_polls_read_only_tools_only() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}));
    let run = p.run(&[
        "call",
        "--yes",
        "wait_and_verify",
        r#"{"tool": "demo_lookup_item", "arguments": {"sku": "SKU-0007"}, "until": {"pointer": "/stock", "equals": 49}, "interval_ms": 10}"#,
    ]);
    run.expect_code(0);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        (report["satisfied"].as_bool(), report["attempts"].as_u64()),
        (Some(true), Some(1))
    );

    let run = p.run(&[
        "call",
        "--yes",
        "wait_and_verify",
        r#"{"tool": "demo_lookup_item", "arguments": {"sku": "SKU-0007"}, "until": {"contains": "never"}, "max_attempts": 3, "interval_ms": 10}"#,
    ]);
    run.expect_code(1);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        (report["satisfied"].as_bool(), report["attempts"].as_u64()),
        (Some(false), Some(3))
    );

    let run = p.run(&[
        "call",
        "--yes",
        "wait_and_verify",
        r#"{"tool": "demo_add_note", "arguments": {"text": "x"}, "until": {"contains": "saved"}}"#,
    ]);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("refuses to poll `demo_add_note`: it changes state"),
        "{}",
        run.stderr
    );
    p.write(
        ".agents/config.json",
        r#"{"tools": {"wait_and_verify": {"poll_allow": ["mcp:demo_add_note"]}}}"#,
    );
    let run = p.run(&[
        "call",
        "--yes",
        "wait_and_verify",
        r#"{"tool": "demo_add_note", "arguments": {"text": "x"}, "until": {"contains": "saved"}}"#,
    ]);
    run.expect_code(0);
}
