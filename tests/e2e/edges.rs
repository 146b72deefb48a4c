//! Edges, end to end against real servers: `.mcp.json` files as Claude
//! Code, Cursor and Cline write them (disabled servers, the legacy SSE
//! transport, keys other tools use, Cline's `timeout` in seconds, a
//! misspelling of ours), and policy at its corners (the protocol's hint
//! defaults, counts of what the allowlist left out, a server tool that would
//! take a built-in's name, `retrieve_raw` under trust levels and the gate,
//! `wait_and_verify` under plan-first, advice naming `--agents-dir`).

use std::collections::BTreeSet;
use std::time::Duration;

use core_agent_e2e::{Project, ReservedPort, Run, bin};
use serde_json::{Value, json};

use crate::gate::batch;
use crate::{by_name, demo_server, everything_stdio, fixture, python_stdio};

/// A core-dialect server entry as a peer tool writes it in `.mcp.json`: no
/// `transport`, plus `extra` (`type`, `disabled`, `autoApprove`, …).
fn peer(mut entry: Value, extra: Value) -> Value {
    let fields = entry.as_object_mut().unwrap();
    fields.remove("transport");
    fields.extend(extra.as_object().unwrap().clone());
    entry
}

/// A project whose only config is this `.mcp.json`.
fn dot_mcp_json(config: &Value) -> Project {
    let p = Project::empty();
    p.write(".mcp.json", &serde_json::to_string_pretty(config).unwrap());
    p
}

/// The lines of stderr that contain `needle`.
fn lines_with<'a>(run: &'a Run, needle: &str) -> Vec<&'a str> {
    run.stderr.lines().filter(|l| l.contains(needle)).collect()
}

/// (status, error) of each server of `mcp list --json`, by name.
fn statuses(list: &Value, names: &[&str]) -> Vec<(String, Value)> {
    names
        .iter()
        .map(|name| {
            let s = by_name(list, name);
            (s["status"].as_str().unwrap().to_owned(), s["error"].clone())
        })
        .collect()
}

const DISABLED: &str =
    "disabled (\"disabled\": true); set it to false or remove it to start the server";
const SSE: &str = "uses the legacy SSE transport, which core-agent does not speak; ask the server for its streamable HTTP endpoint (often the same URL ending in /mcp) and write \"type\": \"http\"";

#[test]
fn claude_code_cursor_and_cline_files_load_and_a_disabled_server_is_not_started() {
    let p = Project::empty();
    let started = p.path().join("off-started");
    // `off` would record that it ran before serving; it must never run.
    let off = json!({
        "command": "/bin/sh",
        "args": ["-c", format!("echo started > '{}'; exec '{}' ok", started.display(), bin("fixture-server").display())],
        "env": {},
        "disabled": true,
        "autoApprove": [],
        "timeout": 60,
    });
    let config = json!({"mcpServers": {
        // Claude Code: `type` on every server, `env` always present.
        "py": peer(python_stdio(), json!({"type": "stdio", "env": {}})),
        // Cursor: command, args and env, no `type`.
        "everything": peer(everything_stdio(), json!({"env": {}})),
        // Cline: `disabled`, `autoApprove` and `timeout` (seconds) on every server.
        "fx": peer(fixture("ok"), json!({"disabled": false, "autoApprove": [], "timeout": 60})),
        "off": off,
    }});
    p.write(".mcp.json", &serde_json::to_string_pretty(&config).unwrap());

    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    assert_eq!(
        statuses(&list, &["py", "everything", "fx", "off"]),
        [
            ("connected".to_owned(), Value::Null),
            ("connected".to_owned(), Value::Null),
            ("connected".to_owned(), Value::Null),
            ("disabled".to_owned(), json!(DISABLED)),
        ]
    );
    assert_eq!(
        (
            by_name(&list, "off")["tools"].as_u64(),
            by_name(&list, "off")["scope"].as_str()
        ),
        (Some(0), Some("project"))
    );
    // The disabled server is said once; Cline's `"autoApprove": []` and
    // `"disabled": false` say nothing, so nothing warns about them.
    assert_eq!(
        lines_with(&run, "`off`"),
        [format!(
            "core-agent: mcp: ./.mcp.json: server `off`: {DISABLED}"
        )]
    );
    assert_eq!(lines_with(&run, "ignored keys"), Vec::<&str>::new());
    assert!(!started.exists(), "the disabled server was started");

    // Every started server's tools are callable; the disabled one has none.
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let servers: BTreeSet<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["server"].as_str())
        .collect();
    assert_eq!(servers, BTreeSet::from(["everything", "fx", "py"]));
    for (tool, args, answer) in [
        ("py_add", r#"{"a": 2, "b": 3}"#, "5\n"),
        ("everything_echo", r#"{"message": "hi"}"#, "Echo: hi\n"),
        ("fx_echo", r#"{"text": "hi"}"#, "hi\n"),
    ] {
        let run = p.run(&["call", "--yes", tool, args]);
        run.expect_code(0);
        assert_eq!(run.stdout, answer, "{tool}");
    }
    assert!(!started.exists(), "the disabled server was started");
}

#[test]
fn an_sse_server_is_left_out_and_the_others_start() {
    // Nothing listens on the port (held for the test): were core-agent to
    // try SSE, it would fail to connect rather than report the transport.
    let nothing_there = ReservedPort::new();
    let url = nothing_there.url("/sse");
    let p = dot_mcp_json(&json!({"mcpServers": {
        "legacy": {"type": "sse", "url": url},
        // Cline's spelling of the same.
        "cline-sse": {"url": url, "transportType": "sse", "disabled": false, "autoApprove": []},
        "py": peer(python_stdio(), json!({})),
        "fx": peer(fixture("ok"), json!({"type": "stdio"})),
    }}));
    // A server that is left out still shadows one of the same name lower in
    // the list: the user file's working `legacy` is not started either.
    p.write(
        "home/.agents/mcp.json",
        &json!({"version": 1, "servers": {"legacy": fixture("ok")}}).to_string(),
    );

    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    assert_eq!(
        statuses(&list, &["legacy", "cline-sse", "py", "fx"]),
        [
            ("left-out".to_owned(), json!(SSE)),
            ("left-out".to_owned(), json!(SSE)),
            ("connected".to_owned(), Value::Null),
            ("connected".to_owned(), Value::Null),
        ]
    );
    assert_eq!(list.as_array().unwrap().len(), 4, "{list:#}");
    assert_eq!(by_name(&list, "legacy")["scope"], "project");
    for name in ["legacy", "cline-sse"] {
        assert_eq!(
            lines_with(&run, &format!("server `{name}`")),
            [format!(
                "core-agent: mcp: ./.mcp.json: server `{name}`: {SSE}"
            )]
        );
    }

    let run = p.run(&["call", "--yes", "py_add", r#"{"a": 2, "b": 3}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "5\n");
    let run = p.run(&["call", "--yes", "fx_echo", r#"{"text": "still here"}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "still here\n");
    let run = p.run(&["call", "--yes", "legacy_echo", r#"{"text": "x"}"#]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no tool named `legacy_echo`"),
        "{}",
        run.stderr
    );
}

#[test]
fn keys_other_tools_use_give_one_warning_per_server_and_the_server_works() {
    let p = dot_mcp_json(&json!({"mcpServers": {
        "py": peer(python_stdio(), json!({"autoApprove": ["x"], "alwaysAllow": ["y"]})),
        // Values that say nothing give no warning.
        "fx": peer(fixture("ok"), json!({"autoApprove": [], "alwaysAllow": [], "description": ""})),
    }}));
    let warning = "ignored keys other tools use: autoApprove, alwaysAllow";
    // Even a call that went well says it, once; `-v` says it once too;
    // `--quiet` silences it.
    for flags in [&[][..], &["-v"][..]] {
        let mut args = vec!["call"];
        args.extend_from_slice(flags);
        args.extend(["--yes", "py_add", r#"{"a": 2, "b": 3}"#]);
        let run = p.run(&args);
        run.expect_code(0);
        assert_eq!(run.stdout, "5\n");
        assert_eq!(
            lines_with(&run, "ignored keys"),
            [format!(
                "core-agent: config: ./.mcp.json: server `py`: {warning}"
            )],
            "{flags:?}"
        );
    }
    let run = p.run(&["call", "--quiet", "--yes", "py_add", r#"{"a": 2, "b": 3}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "5\n");
    assert_eq!(run.stderr, "");

    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    assert_eq!(by_name(&list, "py")["warnings"], json!([warning]));
    assert_eq!(by_name(&list, "fx")["warnings"], json!([]));
    assert_eq!(by_name(&list, "py")["status"], "connected");
}

#[test]
fn a_cline_timeout_is_in_seconds_and_a_larger_one_in_milliseconds() {
    // `timeout` up to 3600 is seconds (Cline, Roo Code); above, milliseconds
    // (Gemini CLI); from 1000 to 3600 it is seconds, with a warning.
    let p = dot_mcp_json(&json!({"mcpServers": {
        "py": peer(python_stdio(), json!({"disabled": false, "autoApprove": [], "timeout": 1})),
        "gemini": peer(python_stdio(), json!({"timeout": 3601})),
        "doubt": peer(fixture("ok"), json!({"timeout": 1500})),
    }}));
    let marker = p.path().join("cancelled");
    // `hang` mutates (no annotations) and `read_slow` reads, so they run at once.
    let (code, lines, stderr) = batch(
        &p,
        &["--yes"],
        &[
            json!({"name": "py_hang", "arguments": {"marker": marker}}),
            json!({"name": "gemini_read_slow", "arguments": {"ms": 60_000}}),
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    let outcome = |line: &Value| {
        (
            line["ok"].as_bool(),
            line["error"].as_str().map(str::to_owned),
        )
    };
    assert_eq!(
        lines.iter().map(outcome).collect::<Vec<_>>(),
        [
            (
                Some(false),
                Some("`hang` on server `py` did not answer within 1 s; the request was cancelled".to_owned())
            ),
            (
                Some(false),
                Some("`read_slow` on server `gemini` did not answer within 3.6 s; the request was cancelled".to_owned())
            ),
        ],
        "{stderr}"
    );
    // Neither can have given up before its timeout.
    assert!(lines[0]["ms"].as_u64().unwrap() >= 1000, "{}", lines[0]);
    assert!(lines[1]["ms"].as_u64().unwrap() >= 3601, "{}", lines[1]);
    // The server saw the cancellation.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "cancelled"
    );
    // 1500 could be either unit: taken as seconds, with a warning.
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("\"timeout\""))
            .collect::<Vec<_>>(),
        [
            "core-agent: config: ./.mcp.json: server `doubt`: \"timeout\": 1500 is taken as seconds (as Cline and Roo Code write it), not milliseconds (as Gemini CLI does); if you meant milliseconds, add \"auggy\": {\"servers\": {\"doubt\": {\"limits\": {\"call_timeout_ms\": 1500}}}}, which wins over \"timeout\""
        ]
    );
}

#[test]
fn a_misspelled_key_of_ours_is_still_an_error() {
    let mut entry = peer(fixture("ok"), json!({"timout": 60, "autoApprove": ["x"]}));
    let command = entry.as_object_mut().unwrap().remove("command").unwrap();
    entry["comand"] = command;
    let p = dot_mcp_json(&json!({"mcpServers": {"fx": entry}}));
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(2);
    assert_eq!(run.stdout, "");
    // `<file>:<line>:<column>: server `fx`: <problem>`, one line each.
    let (header, problems) = run.stderr.split_once('\n').unwrap();
    assert_eq!(header, "core-agent: bad config:");
    let mut problems: Vec<&str> = problems
        .lines()
        .map(|l| l.split_once(": server `fx`: ").map_or(l, |(_, rest)| rest))
        .collect();
    problems.sort();
    assert_eq!(
        problems,
        [
            "/mcpServers/fx/comand: unknown field `comand`; did you mean `command`?",
            "/mcpServers/fx/timout: unknown field `timout`; did you mean `timeout`?",
        ],
        "{}",
        run.stderr
    );
}

#[test]
fn doctor_reports_left_out_servers_and_ignored_keys_as_warnings() {
    let nothing_there = ReservedPort::new();
    let url = nothing_there.url("/sse");
    let p = dot_mcp_json(&json!({"mcpServers": {
        "legacy": {"type": "sse", "url": url},
        "off": peer(fixture("ok"), json!({"disabled": true, "autoApprove": []})),
        "fx": peer(fixture("ok"), json!({"autoApprove": ["x"], "alwaysAllow": ["y"]})),
    }}));
    let run = p.run(&["mcp", "doctor", "--json"]);
    // Warnings alone exit 0.
    run.expect_code(0);
    let report = run.json();
    let findings: Vec<Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| json!([f["severity"], f["check"], f["server"], f["message"]]))
        .collect();
    assert_eq!(
        findings,
        [
            json!([
                "warning",
                "ignored-keys",
                "fx",
                "./.mcp.json: ignored keys other tools use: autoApprove, alwaysAllow"
            ]),
            json!([
                "warning",
                "unsupported-transport",
                "legacy",
                format!("left out: {SSE}")
            ]),
        ]
    );
    assert_eq!(
        (report["errors"].as_u64(), report["warnings"].as_u64()),
        (Some(0), Some(2))
    );
    let servers: Vec<Value> = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["name"], s["status"], s["tools"], s["error"]]))
        .collect();
    assert_eq!(
        servers,
        [
            json!(["legacy", "left-out", 0, SSE]),
            json!(["off", "disabled", 0, DISABLED]),
            json!(["fx", "connected", 4, null]),
        ]
    );
    assert_eq!(report["tools"], 4);
}

/// The entries of `tools --json --trust-level LEVEL`.
fn catalog_at(p: &Project, level: &str) -> Vec<Value> {
    let run = p.run(&["tools", "--json", "--trust-level", level]);
    run.expect_code(0);
    run.json().as_array().unwrap().clone()
}

fn entry<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|t| t["name"] == name)
}

#[test]
fn an_annotation_block_without_hints_is_for_the_creator_only() {
    // `annotated_plain` has annotations with only a title: a block without
    // readOnlyHint is mutating, and it does not say `destructiveHint: false`,
    // so it is creator only.
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_stdio()}}));
    let public = catalog_at(&p, "public");
    assert_eq!(entry(&public, "py_annotated_plain"), None);
    let add = entry(&public, "py_add").unwrap();
    assert_eq!(
        (&add["read_only"], &add["trust_levels"]),
        (&json!(true), &json!(["creator", "agent", "user", "public"]))
    );
    let creator = catalog_at(&p, "creator");
    let plain = entry(&creator, "py_annotated_plain").unwrap();
    assert_eq!(
        (&plain["read_only"], &plain["trust_levels"]),
        (&json!(false), &json!(["creator"]))
    );
    for level in ["agent", "user"] {
        assert_eq!(
            entry(&catalog_at(&p, level), "py_annotated_plain"),
            None,
            "{level}"
        );
    }
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "public",
        "py_annotated_plain",
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "core-agent: `py_annotated_plain` is not available at trust level `public`; it allows `creator`\n"
        ),
        "{}",
        run.stderr
    );
    let run = p.run(&["call", "--yes", "py_annotated_plain"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "plain\n");
}

#[test]
fn startup_list_and_doctor_count_what_the_allowlist_left_out() {
    // How many tools the fixture has, from a run without an allowlist.
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_stdio()}}));
    let all = catalog_at(&p, "creator")
        .iter()
        .filter(|t| t["server"] == "py")
        .count();
    assert!(all > 2, "{all}");
    let n = all - 2;

    let mut server = python_stdio();
    server["tools"] = json!(["add", "fail"]);
    let p = Project::new(&json!({"version": 1, "servers": {"py": server}}));
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    let prefix =
        format!("core-agent: mcp: py (stdio): 2 tools ({n} left out by the allowlist) in ");
    let started: Vec<&str> = lines_with(&run, "core-agent: mcp: py (stdio): ");
    assert_eq!(started.len(), 1, "{}", run.stderr);
    let ms = started[0]
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(" ms"))
        .unwrap_or_else(|| panic!("not `{prefix}<ms> ms`: {}", started[0]));
    assert!(ms.parse::<u64>().is_ok(), "{}", started[0]);

    let run = p.run(&["mcp", "list"]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        format!(
            "{:<20} {:<6} {:<8} {:<10} 2 tools ({n} left out by the allowlist)\n    \
             creator only (mutating, not marked non-destructive): fail\n",
            "py", "stdio", "project", "connected"
        )
    );

    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let py = by_name(&run.json(), "py");
    assert_eq!(
        (
            &py["tools"],
            &py["listed"],
            &py["left_out"],
            &py["restricted"]
        ),
        (
            &json!(2),
            &json!(n + 2),
            &json!({"the allowlist": n}),
            &json!(0)
        )
    );

    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(0);
    let report = run.json();
    let py = by_name(&report["servers"], "py");
    assert_eq!(
        (&py["status"], &py["tools"], &py["listed"], &py["left_out"]),
        (
            &json!("connected"),
            &json!(2),
            &json!(n + 2),
            &json!({"the allowlist": n})
        )
    );
    assert_eq!(report["tools"], 2);
}

#[test]
fn a_server_tool_never_takes_a_built_in_name() {
    // Server `record` with a tool `plan` would publish `record_plan`.
    let mut server = python_stdio();
    server["env"] = json!({"PY_FIXTURE_PLAN": "1"});
    let p = Project::new(&json!({"version": 1, "servers": {"record": server}}));
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let tools = tools.as_array().unwrap();
    let named =
        |name: &str| -> Vec<&Value> { tools.iter().filter(|t| t["name"] == name).collect() };
    let builtin = named("record_plan");
    assert_eq!(builtin.len(), 1, "{tools:#?}");
    assert_eq!(builtin[0]["server"], Value::Null);
    let theirs: Vec<&Value> = tools
        .iter()
        .filter(|t| t["server"] == "record" && t["tool"] == "plan")
        .collect();
    assert_eq!(theirs.len(), 1, "{tools:#?}");
    let published = theirs[0]["name"].as_str().unwrap().to_owned();
    let suffix = published.strip_prefix("record_plan_").unwrap_or_default();
    assert!(
        suffix.len() == 8
            && suffix
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "`record_plan_<8 hex>`: {published}"
    );
    assert_eq!(theirs[0]["read_only"], true);
    assert_eq!(
        lines_with(&run, "built-in"),
        [format!(
            "core-agent: mcp: record: tool `plan` would be named `record_plan`, the name of a built-in tool; it is published as `{published}`"
        )]
    );

    // The name runs the built-in; the suffixed name runs the server's tool.
    let run = p.run(&["call", "record_plan", r#"{"plan": "x"}"#]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        "plan recorded; mutating tools may run from now on in this session\n"
    );
    let run = p.run(&["call", "--yes", &published]);
    run.expect_code(0);
    assert_eq!(run.stdout, "server plan\n");

    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(0);
    let reserved: Vec<(Value, Value)> = run.json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reserved-name")
        .map(|f| (f["server"].clone(), f["severity"].clone()))
        .collect();
    assert_eq!(reserved, [(json!("record"), json!("warning"))]);
}

#[test]
fn retrieve_raw_follows_trust_levels_and_the_gate() {
    let mut demo = demo_server();
    demo.as_object_mut().unwrap().remove("transport");
    let p = dot_mcp_json(&json!({
        "mcpServers": {"demo": demo},
        "auggy": {"servers": {"demo": {"toolPolicies": {"list_inventory": {"allowedTrustLevels": ["creator"]}}}}}
    }));
    let db = p.path().join("session.db");
    let db = db.to_str().unwrap();
    let session = ["--session-db", db, "--session", "edges"];

    let mut args = vec!["call", "--yes", "demo_list_inventory", "--json"];
    args.extend_from_slice(&session);
    let run = p.run(&args);
    run.expect_code(0);
    let envelope: Value =
        serde_json::from_str(run.json()["content"][0]["text"].as_str().unwrap()).unwrap();
    let call_id = envelope["call_id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("call-"), "{envelope}");
    let whole = json!({"call_id": call_id}).to_string();
    let total = json!({"call_id": call_id, "pointer": "/total"}).to_string();
    let retrieve = |flags: &[&str], arguments: &str, session: &[&str]| {
        let mut args = vec!["call"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["retrieve_raw", arguments]);
        args.extend_from_slice(session);
        p.run(&args)
    };

    // The payload is as restricted as the tool that produced it.
    let run = retrieve(&["--trust-level", "public", "--yes"], &whole, &session);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("core-agent: `demo_list_inventory` is not available at trust level `public`; it allows `creator`\n"),
        "{}",
        run.stderr
    );
    // The creator still goes through the gate: ask mode, no terminal.
    let run = retrieve(&["--trust-level", "creator"], &whole, &session);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("core-agent: permission denied: `retrieve_raw` needs approval (permissions.mode is \"ask\") and was not approved; approve it when asked, or add \"builtin:retrieve_raw\" to permissions.allow in .agents/config.json, or run with --yes to approve every ask of this run\n"),
        "{}",
        run.stderr
    );
    // An allow pattern needs no approval.
    p.write(
        ".agents/config.json",
        r#"{"permissions": {"allow": ["builtin:retrieve_raw"]}}"#,
    );
    let run = retrieve(&["--trust-level", "creator"], &total, &session);
    run.expect_code(0);
    assert_eq!(run.stdout, "200\n");
    // Allowed by the gate, still restricted by the level.
    let run = retrieve(&["--trust-level", "public"], &total, &session);
    run.expect_code(1);
    assert!(
        run.stderr
            .contains("`demo_list_inventory` is not available at trust level `public`"),
        "{}",
        run.stderr
    );
    // Another session has nothing under that id.
    let run = retrieve(&[], &total, &["--session-db", db, "--session", "other"]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&format!(
            "no raw payload is stored under `{call_id}` in this session"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn wait_and_verify_is_decided_where_it_stands_in_the_batch() {
    let config = r#"{"permissions": {"allow": ["mcp:*"], "require_plan_artifact": true}, "tools": {"wait_and_verify": {"poll_allow": ["mcp:py_write_slow"]}}}"#;
    let wait = json!({"name": "wait_and_verify", "arguments": {
        "tool": "py_write_slow", "arguments": {"ms": 1}, "until": {"contains": "wrote"}, "interval_ms": 10
    }});
    let plan =
        json!({"name": "record_plan", "arguments": {"plan": "1. write once and wait for it"}});
    let recorded = json!({"content": [{"type": "text", "text": "plan recorded; mutating tools may run from now on in this session"}], "isError": false});
    let result = |line: &Value| {
        let mut result = line["result"].clone();
        result.as_object_mut().unwrap().remove("resultType");
        result
    };

    // Before the plan: refused, though the plan is recorded before it would run.
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_stdio()}}));
    p.write(".agents/config.json", config);
    let (code, lines, stderr) = batch(&p, &[], &[wait.clone(), plan.clone()]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        (&lines[0]["name"], &lines[0]["ok"], &lines[0]["error"]),
        (
            &json!("wait_and_verify"),
            &json!(false),
            &json!(
                "permission denied: plan-first is on (permissions.require_plan_artifact) and `py_write_slow` changes state, but no plan has been recorded in this session; call `record_plan` with your plan first; read-only tools need no plan"
            )
        )
    );
    assert_eq!(
        (&lines[1]["ok"], result(&lines[1])),
        (&json!(true), recorded.clone())
    );

    // After the plan: both run.
    let p = Project::new(&json!({"version": 1, "servers": {"py": python_stdio()}}));
    p.write(".agents/config.json", config);
    let (code, lines, stderr) = batch(&p, &[], &[plan, wait]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        (&lines[0]["ok"], result(&lines[0])),
        (&json!(true), recorded)
    );
    assert_eq!(lines[1]["ok"], true, "{}", lines[1]);
    let report: Value =
        serde_json::from_str(lines[1]["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        report,
        json!({"satisfied": true, "attempts": 1, "outcomes": [{"attempt": 1, "outcome": "met"}], "result": {"content": [{"type": "text", "text": "wrote after 1 ms"}], "isError": false}})
    );
}

#[test]
fn advice_names_the_config_file_of_the_agents_dir() {
    let p = Project::empty();
    p.write(
        "custom-agents/mcp.json",
        &json!({"version": 1, "servers": {"demo": demo_server()}}).to_string(),
    );
    let advice = "permission denied: `demo_add_note` needs approval (permissions.mode is \"ask\") and was not approved; approve it when asked, or add \"mcp:demo_add_note\" to permissions.allow in custom-agents/config.json, or run with --yes to approve every ask of this run";
    let run = p.run(&[
        "call",
        "--agents-dir",
        "custom-agents",
        "demo_add_note",
        r#"{"text": "x"}"#,
    ]);
    run.expect_code(1);
    assert_eq!(run.stdout, "");
    assert_eq!(
        lines_with(&run, "permission denied"),
        [format!("core-agent: {advice}")]
    );
    let (code, lines, stderr) = batch(
        &p,
        &["--agents-dir", "custom-agents"],
        &[json!({"name": "demo_add_note", "arguments": {"text": "x"}})],
    );
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(lines[0]["error"], advice);
    // What the advice says works, in the file it names.
    p.write(
        "custom-agents/config.json",
        r#"{"permissions": {"allow": ["mcp:demo_add_note"]}}"#,
    );
    let run = p.run(&[
        "call",
        "--agents-dir",
        "custom-agents",
        "demo_add_note",
        r#"{"text": "x"}"#,
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "saved note #1: x\n");
}
