//! Failing servers stay isolated, and no process outlives core-agent.

use std::time::Duration;

use core_agent_e2e::{Project, ReservedPort, alive, recorded_pids};
use serde_json::json;

use crate::{by_name, demo_server, fixture};

#[test]
fn broken_servers_end_up_in_error_and_the_others_carry_on() {
    // Held for the test and never listening: the connection is refused.
    let nothing_there = ReservedPort::new();
    let p = Project::new(&json!({"version": 1, "servers": {
        "demo": demo_server(),
        "missing": {"transport": "stdio", "command": "/nonexistent/mcp-server"},
        "crashes": fixture("exit"),
        "hangs": fixture("hang"),
        "nothing-there": {"transport": "http", "url": nothing_there.url("/mcp")},
    }}));
    let run = p.run(&["mcp", "list", "--json", "--start-timeout", "2"]);
    run.expect_code(0);
    let list = run.json();
    for server in list.as_array().unwrap() {
        let keys: Vec<&str> = server
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "name",
                "transport",
                "scope",
                "status",
                "tools",
                "listed",
                "left_out",
                "error",
                "restricted",
                "restricted_tools",
                "warnings",
                "auth",
                "source"
            ]
        );
    }
    let demo = by_name(&list, "demo");
    assert_eq!(
        (
            demo["status"].as_str(),
            demo["tools"].as_u64(),
            &demo["error"]
        ),
        (Some("connected"), Some(4), &json!(null))
    );

    let error = |name: &str| {
        let s = by_name(&list, name);
        assert_eq!(s["status"], "error", "{name}: {s}");
        assert_eq!(s["tools"], 0);
        s["error"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        error("missing"),
        "command not found: `/nonexistent/mcp-server`; install it or fix `command` (PATH is searched when it has no `/`)"
    );
    assert_eq!(
        error("crashes"),
        "exited during start (exit status: 3); its stderr ended with:\n    fixture: fatal: cannot open database /nonexistent/db.sqlite"
    );
    assert_eq!(
        error("hangs"),
        "did not finish starting within 2 s; is the server stuck, or does it need a longer start timeout?"
    );
    assert_eq!(
        error("nothing-there"),
        "initialize failed: cannot reach the server: Connection refused (os error 111)"
    );

    // One stderr line per server, as each becomes ready or fails.
    for name in ["demo", "missing", "crashes", "hangs", "nothing-there"] {
        assert!(
            run.stderr.contains(&format!("core-agent: mcp: {name} (")),
            "{name}: {}",
            run.stderr
        );
    }
    assert!(
        run.stderr
            .contains("core-agent: mcp: demo (stdio): 4 tools in ")
    );
    assert!(
        run.stderr
            .contains("core-agent: mcp: missing (stdio): error after ")
    );

    // The human listing says the same in one line per server.
    let run = p.run(&["mcp", "list", "--start-timeout", "2"]);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("missing "))
        .unwrap();
    assert!(
        line.contains("stdio  project  error      error: command not found"),
        "{line}"
    );
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_with_its_group() {
    let p = Project::empty();
    let pid_file = p.path().join("pids");
    let mut stubborn = fixture("stubborn");
    stubborn["env"] = json!({"FIXTURE_PID_FILE": pid_file});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"stubborn": stubborn}}).to_string(),
    );

    let run = p.run(&["call", "--yes", "stubborn_echo", r#"{"text": "hi"}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "hi\n");
    let pids = recorded_pids(&pid_file);
    assert_eq!(pids.len(), 2, "the fixture and its grandchild");
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} outlived core-agent");
    }
    // It ignored EOF and SIGTERM, so it took the SIGKILL after the 3 s grace.
    assert!(run.elapsed >= Duration::from_secs(3), "{:?}", run.elapsed);
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

#[test]
fn a_server_that_hangs_at_start_is_stopped_too() {
    let p = Project::empty();
    let pid_file = p.path().join("pids");
    let mut hang = fixture("hang");
    hang["env"] = json!({"FIXTURE_PID_FILE": pid_file});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"hang": hang}}).to_string(),
    );
    let run = p.run(&["mcp", "list", "--json", "--start-timeout", "0.5"]);
    // Its one server did not start: the listing lists it, and exits 1.
    run.expect_code(1);
    assert_eq!(run.json()[0]["status"], "error");
    let pids = recorded_pids(&pid_file);
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]));
}

/// SIGTERM while a call is in the server (`hold` has created its
/// `.entered` file and waits to be released, which never happens).
#[test]
fn sigterm_to_core_agent_stops_its_servers() {
    let p = Project::empty();
    let pid_file = p.path().join("pids");
    let mut held = fixture("load");
    held["env"] = json!({"FIXTURE_PID_FILE": pid_file});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fx": held}}).to_string(),
    );
    let release = p.path().join("release");
    let entered = p.path().join("release.entered");
    let args = json!({"path": release}).to_string();
    let mut cmd = p.command(&["call", "--yes", "fx_hold", &args]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !entered.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the fixture"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(recorded_pids(&pid_file).len(), 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("core-agent: terminated: stopping the servers")
    );
    for pid in recorded_pids(&pid_file) {
        assert!(!alive(pid), "process {pid} outlived core-agent");
    }
}

/// A call waits only for its own server: next to a server that never answers
/// `initialize`, it runs as soon as its own server is ready, long before the
/// other's start timeout, and the stuck server is stopped at exit. The call
/// (`hold`) answers once the stuck server has recorded its pid, so the stuck
/// server is certainly running while the call is made.
#[test]
fn a_call_does_not_wait_for_a_server_that_never_starts() {
    let p = Project::empty();
    let pid_file = p.path().join("pids");
    let mut hang = fixture("hang");
    hang["env"] = json!({"FIXTURE_PID_FILE": pid_file});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"held": fixture("load"), "stuck": hang}}).to_string(),
    );
    let args = json!({"path": pid_file}).to_string();
    let run = p.run(&[
        "call",
        "--verbose",
        "--yes",
        "held_hold",
        &args,
        "--start-timeout",
        "30",
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("released {}\n", pid_file.display()));
    // Had the call waited for every server, the stuck one's start would have
    // timed out first and said so.
    assert!(
        !run.stderr.contains("stuck (stdio): error"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("core-agent: mcp: held (stdio): 3 tools in"),
        "{}",
        run.stderr
    );
    let pids = recorded_pids(&pid_file);
    assert_eq!(pids.len(), 1, "the stuck server was started");
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived core-agent");
    }
    // A listing still waits for every server.
    let run = p.run(&["mcp", "list", "--json", "--start-timeout", "1"]);
    run.expect_code(0);
    assert_eq!(crate::by_name(&run.json(), "stuck")["status"], "error");
}

/// A call past its timeout is cancelled on the server
/// (`notifications/cancelled`), not only abandoned by core-agent.
#[test]
fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let p = Project::new(&json!({"version": 1, "servers": {"probe": fixture("cancel-probe")}}));
    let marker = p.path().join("cancelled");
    let run = p.run(&[
        "call",
        "--yes",
        "--call-timeout",
        "0.5",
        "probe_wait_cancel",
        &json!({"path": marker}).to_string(),
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "core-agent: `wait_cancel` on server `probe` did not answer within 500 ms; the request was cancelled"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "cancelled: request abandoned by the caller"
    );
}
