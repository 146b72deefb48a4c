//! The config's and catalog's warnings reach the people who can fix them:
//! every run prints each once on stderr (a quiet, successful `call` too;
//! `--quiet` silences them), and `serve --http` lists them in `/health`.
//! (A client hearing them as `notifications/message`, and the warnings of
//! a rebuild, are in `gateway_clients.rs`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use core_agent_e2e::Project;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::demo_server;

/// The demo server with a `tool_notes` entry for a tool it does not have.
fn noted_project() -> Project {
    let mut demo = demo_server();
    demo["tool_notes"] = json!({"nosuch": "A note for a tool the server does not have."});
    Project::new(&json!({"version": 1, "servers": {"demo": demo}}))
}

/// The stderr lines of `stderr` that say the `tool_notes` warning.
fn notes_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("core-agent: mcp: demo: tool_notes names 1 "))
        .collect()
}

#[test]
fn a_successful_quiet_call_prints_a_catalog_warning_once_and_quiet_silences_it() {
    let p = noted_project();
    let run = p.run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "0.25\n");
    let lines = notes_warnings(&run.stderr);
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].ends_with(
            "does not expose: nosuch; it exposes: add_note, divide, list_inventory, lookup_item"
        ),
        "{}",
        lines[0]
    );

    let run = p.run(&["call", "-q", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "0.25\n");
    assert_eq!(run.stderr, "");

    // Listings print it once too.
    let run = p.run(&["tools"]);
    run.expect_code(0);
    assert_eq!(notes_warnings(&run.stderr).len(), 1, "{}", run.stderr);
}

/// `GET /health` on `addr`, as JSON.
fn health(addr: &str) -> Value {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /health HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer e2e-gateway-token-0123456789abcdef\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{response}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

#[test]
fn serve_over_http_lists_the_warnings_in_health_and_prints_them_once() {
    let p = noted_project();
    let mut cmd = p.command(&["serve", "--http", "127.0.0.1:0"]);
    cmd.env(
        "CORE_AGENT_GATEWAY_TOKEN",
        "e2e-gateway-token-0123456789abcdef",
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let pgid = Pid::from_raw(child.id() as i32);
    let (lines, heard) = std::sync::mpsc::channel::<String>();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut stderr = String::new();
    let mut addr = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Until it listens, and has printed the warning (once its server started).
    while Instant::now() < deadline && (addr.is_none() || notes_warnings(&stderr).is_empty()) {
        let Ok(line) = heard.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if let Some(rest) = line.split("serving MCP at http://").nth(1) {
            addr = rest.split("/mcp").next().map(str::to_owned);
        }
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let Some(addr) = addr else {
        let _ = killpg(pgid, Signal::SIGKILL);
        panic!("serve did not listen:\n{stderr}");
    };
    let body = health(&addr);
    let _ = killpg(pgid, Signal::SIGTERM);
    let _ = child.wait();
    while let Ok(line) = heard.recv_timeout(Duration::from_millis(200)) {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let warnings: Vec<&str> = body["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(warnings.len(), 1, "{body}");
    assert!(
        warnings[0].starts_with("mcp: demo: tool_notes names 1 ")
            && warnings[0].contains("does not expose: nosuch"),
        "{body}"
    );
    assert_eq!(
        notes_warnings(&stderr),
        [format!("core-agent: {}", warnings[0])],
        "{stderr}"
    );
}

/// `.agents/mcp.json` and `.mcp.json` both define `demo`: the second's
/// entry and its `auggy` policy are dropped, and the run says so (on
/// stderr once, in `config show`); a server only `.mcp.json` defines gets
/// `read_only`, `tool_notes` and `agentic_never` from its `auggy` policy.
#[test]
fn a_server_in_both_project_files_warns_and_auggy_carries_the_core_settings() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": demo_server()}}));
    let mut fx = crate::fixture("ok");
    fx.as_object_mut().unwrap().remove("transport");
    let mut dropped = demo_server();
    dropped.as_object_mut().unwrap().remove("transport");
    p.write(
        ".mcp.json",
        &json!({
            "mcpServers": {"demo": dropped, "fx": fx},
            "auggy": {"servers": {
                "demo": {"pin": "strict", "allowedTools": ["divide"]},
                "fx": {"read_only": true, "agentic_never": true,
                       "tool_notes": {"env": "Reads one variable."}},
            }},
        })
        .to_string(),
    );
    let shadowed = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.contains("server `demo`: also defined in"))
            .map(str::to_owned)
            .collect()
    };
    let run = p.run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "0.25\n");
    let lines = shadowed(&run.stderr);
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    let line = &lines[0];
    assert!(
        line.starts_with("core-agent: config: ")
            && line.contains(".agents/mcp.json: server `demo`: also defined in ")
            && line.contains(".mcp.json, whose entry is dropped: its stdio command `")
            && line.contains("and its auggy policy (allowedTools, pin) are not used"),
        "{line}"
    );
    // The dropped allowlist is not applied: every demo tool is there.
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    let tools = run.json();
    let tool = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {tools:#}"))
    };
    tool("demo_add_note");
    // fx's policy: the note, and its unannotated `env` is read-only.
    let env = tool("fx_env");
    assert!(
        env["description"]
            .as_str()
            .unwrap()
            .ends_with("\n\nReads one variable."),
        "{env}"
    );
    assert_eq!(env["read_only"], true, "{env}");

    let run = p.run(&["config", "show"]);
    run.expect_code(0);
    let text = line.trim_start_matches("core-agent: config: ");
    assert!(
        run.stdout.contains(&format!("warning: {text}\n")),
        "{}",
        run.stdout
    );
    // doctor has it as a finding, with what to do.
    let run = p.run(&["mcp", "doctor", "--json"]);
    let doctor = run.json();
    let finding = doctor["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "shadowed")
        .cloned()
        .unwrap_or_else(|| panic!("{doctor:#}"));
    assert_eq!(
        (&finding["severity"], &finding["server"]),
        (&json!("warning"), &json!("demo")),
        "{finding}"
    );
    assert!(
        finding["fix"]
            .as_str()
            .unwrap()
            .starts_with("keep the server in one file"),
        "{finding}"
    );
    let run = p.run(&["config", "show", "--json"]);
    run.expect_code(0);
    let report = run.json();
    let fx = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx")
        .cloned()
        .unwrap();
    assert_eq!(
        (&fx["read_only"], &fx["agentic_never"], &fx["tool_notes"]),
        (
            &json!(true),
            &json!(true),
            &json!({"env": "Reads one variable."})
        ),
        "{fx}"
    );
}
