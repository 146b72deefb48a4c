//! Hardening: nothing a server started outlives core-agent, even when
//! core-agent is killed with `kill -9` (each stdio server runs under
//! `core-agent __supervise`), and a server that crashes is explained, and
//! in long-lived runs (`call --batch`, `serve`) started again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use core_agent_e2e::{Project, alive, bin, processes_mentioning, recorded_pids};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::fixture;

/// An `npx`-style wrapper: a shell that starts the fixture as its child
/// and waits for it (`; true` keeps `sh` from exec-ing it), so the server
/// is a grandchild of whatever starts the wrapper. `marker` is an unused
/// argument that puts the project's path in every command line.
fn wrapper(mode: &str, pid_file: &Path, marker: &Path) -> Value {
    json!({
        "transport": "stdio",
        "command": "sh",
        "args": ["-c", "\"$0\" \"$1\"; true", bin("fixture-server"), mode, marker],
        "env": {"FIXTURE_PID_FILE": pid_file},
    })
}

/// The fixture's `stubborn` mode (ignores SIGTERM and stdin EOF, starts a
/// `sleep 300` grandchild), recording pids in `pid_file` and each SIGTERM
/// it ignores in `<pid_file>.sigterms`.
fn stubborn(pid_file: &Path) -> Value {
    let mut s = fixture("stubborn");
    s["env"] = json!({
        "FIXTURE_PID_FILE": pid_file,
        "FIXTURE_SIGTERMS": sigterms(pid_file),
    });
    s
}

/// Where the `stubborn` server of `pid_file` records the SIGTERMs it ignores.
fn sigterms(pid_file: &Path) -> std::path::PathBuf {
    pid_file.with_extension("sigterms")
}

/// Starts `core-agent serve` (stdio; its stdin stays open) in `p`, and
/// waits until the stderr lines of `ready` servers say they are up.
pub(crate) fn serve_until_ready(p: &Project, ready: usize) -> (Child, Vec<String>) {
    let mut cmd = p.command(&["serve", "--mode", "yolo"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    let mut line = String::new();
    while lines
        .iter()
        .filter(|l: &&String| l.contains(" tools in "))
        .count()
        < ready
    {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "core-agent serve ended early: {lines:?}"
        );
        lines.push(line.clone());
    }
    // Keep draining, so core-agent never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while stderr.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    (child, lines)
}

/// Waits until no process mentions `needle` and every pid is gone; panics
/// with what is left after `limit`.
fn wait_until_gone(needle: &str, pids: &[i32], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_mentioning(needle);
        let pids_left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() && pids_left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "left running: {left:?}, recorded pids alive: {pids_left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_of_core_agent_leaves_no_server_and_no_grandchild_behind() {
    let p = Project::empty();
    let pids = p.path().join("pids");
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {
            "wrapped": wrapper("ok", &pids, p.path()),
            "stubborn": stubborn(&pids),
        }})
        .to_string(),
    );
    let (mut child, _) = serve_until_ready(&p, 2);
    // The wrapped fixture, the stubborn fixture and its `sleep` grandchild.
    let recorded = recorded_pids(&pids);
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    let needle = p.path().to_string_lossy().into_owned();
    // The wrapper's shell and its supervisor mention the project.
    let mentioning = processes_mentioning(&needle);
    assert!(
        mentioning.iter().any(|(_, c)| c.starts_with("sh -c"))
            && mentioning.iter().any(|(_, c)| c.contains("__supervise")),
        "{mentioning:?}"
    );

    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    // The stubborn server ignores SIGTERM: it goes at the end of the 3 s grace.
    wait_until_gone(&needle, &recorded, Duration::from_secs(10));
}

#[test]
fn sigterm_while_servers_start_leaves_nothing_behind() {
    let (p, pids, child) = serve_while_starting(Stdio::piped());
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    // core-agent waited for its supervisors: nothing is left when it exits.
    let left = processes_mentioning(&p.path().to_string_lossy());
    assert!(left.is_empty(), "{left:?}");
    for pid in recorded_pids(&pids) {
        assert!(!alive(pid), "process {pid} outlived core-agent");
    }
}

/// `core-agent serve` in a new project whose two servers are still
/// starting (one never finishes, the other is behind an `sh` wrapper), once
/// both have recorded their pids: the project, the pid file and serve.
fn serve_while_starting(stderr: Stdio) -> (Project, std::path::PathBuf, Child) {
    let p = Project::empty();
    let pids = p.path().join("pids");
    let mut waits = fixture("waits");
    waits["env"] = json!({
        "FIXTURE_PID_FILE": pids,
        "FIXTURE_WAIT_FOR": p.path().join("never"),
    });
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {
            "slow": waits,
            "wrapped": wrapper("ok", &pids, p.path()),
        }})
        .to_string(),
    );
    let mut cmd = p.command(&["serve", "--mode", "yolo"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(stderr);
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while recorded_pids(&pids).len() < 2 {
        assert!(Instant::now() < deadline, "the servers never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    (p, pids, child)
}

#[test]
fn sigterm_while_core_agent_stops_its_servers_leaves_nothing_behind() {
    let (_p, pids, mut child) = call_while_stopping();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the second signal is ignored");
    let recorded = recorded_pids(&pids);
    assert_eq!(recorded.len(), 2);
    for pid in recorded {
        assert!(!alive(pid), "process {pid} outlived core-agent");
    }
}

/// `core-agent call` of a server that ignores SIGTERM, once it printed the
/// answer and is stopping that server (the server has ignored its SIGTERM,
/// so the 3 s grace runs): the project, the pid file (the server and its
/// grandchild) and the call.
fn call_while_stopping() -> (Project, std::path::PathBuf, Child) {
    let p = Project::empty();
    let pids = p.path().join("pids");
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"stubborn": stubborn(&pids)}}).to_string(),
    );
    let mut cmd = p.command(&["call", "--yes", "stubborn_echo", r#"{"text": "hi"}"#]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answer = String::new();
    stdout.read_line(&mut answer).unwrap();
    assert_eq!(answer, "hi\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sigterms(&pids).exists() {
        assert!(
            Instant::now() < deadline,
            "core-agent answered but never sent the server its SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    (p, pids, child)
}

/// A project with the `crashy` fixture as server `t`, recording its pids.
fn crashy_project() -> (Project, std::path::PathBuf) {
    let p = Project::empty();
    let pids = p.path().join("pids");
    let mut t = fixture("crashy");
    t["env"] = json!({"FIXTURE_PID_FILE": pids});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"t": t, "demo": crate::demo_server()}}).to_string(),
    );
    (p, pids)
}

#[test]
fn a_one_shot_call_says_how_the_server_died() {
    let (p, pids) = crashy_project();
    let run = p.run(&["call", "--yes", "t_crash"]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "core-agent: server `t` exited with status 1 during the call to `crash`; its stderr ended with:\n    fixture: crashing on purpose\n"
        ),
        "{}",
        run.stderr
    );
    // A one-shot call does not restart it.
    assert_eq!(recorded_pids(&pids).len(), 1);
}

#[test]
fn in_a_batch_a_crashed_server_comes_back_and_the_next_call_succeeds() {
    let (p, pids) = crashy_project();
    let batch = [
        json!({"name": "t_echo", "arguments": {"text": "before"}}),
        json!({"name": "t_crash", "arguments": {}}),
        json!({"name": "t_echo", "arguments": {"text": "after"}}),
        json!({"name": "demo_divide", "arguments": {"a": 1, "b": 4}}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    p.write("batch.jsonl", &batch);
    let mut cmd = p.command(&["call", "--yes", "--batch", "batch.jsonl"]);
    cmd.env("CORE_AGENT_RESTART_DELAY_MS", "20");
    let run = p.run_with(cmd);
    run.expect_code(1);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    let echoed = |line: &Value| -> (String, i64) {
        let text = line["result"]["content"][0]["text"].as_str().unwrap();
        let answer: Value = serde_json::from_str(text).unwrap();
        (
            answer["text"].as_str().unwrap().to_owned(),
            answer["pid"].as_i64().unwrap(),
        )
    };
    let (text, first_pid) = echoed(&lines[0]);
    assert_eq!(text, "before");
    assert_eq!(lines[1]["ok"], false);
    assert_eq!(
        lines[1]["error"],
        "server `t` exited with status 1 during the call to `crash` (restarting it in 20 ms); its stderr ended with:\n    fixture: crashing on purpose"
    );
    // The same tool name answers, from a new process.
    let (text, second_pid) = echoed(&lines[2]);
    assert_eq!(text, "after");
    assert_ne!(first_pid, second_pid);
    assert_eq!(lines[3]["ok"], true);
    assert_eq!(
        recorded_pids(&pids)
            .into_iter()
            .map(i64::from)
            .collect::<Vec<_>>(),
        [first_pid, second_pid]
    );
}

/// A project with the fixture in `mode` (`restarts` or `restarts-dies`) as
/// server `t`, recording its pids, and a batch file: `t_restart`, then a
/// poll of the read-only `t_get_status` until its `/status` is `up`.
fn restarts_batch(mode: &str, max_attempts: u32) -> (Project, std::path::PathBuf) {
    let p = Project::empty();
    let pids = p.path().join("pids");
    let mut t = fixture(mode);
    t["env"] = json!({"FIXTURE_PID_FILE": pids});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"t": t}}).to_string(),
    );
    let batch = [
        json!({"name": "t_restart", "arguments": {}}),
        json!({"name": "wait_and_verify", "arguments": {
            "tool": "t_get_status",
            "until": {"pointer": "/status", "equals": "up"},
            "max_attempts": max_attempts,
            "interval_ms": 200
        }}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    p.write("batch.jsonl", &batch);
    (p, pids)
}

/// The report of the batch's `wait_and_verify` line, whose `ok` is `ok`
/// (a poll that ends unsatisfied is a tool error, not a call error).
fn poll_report(stdout: &str, ok: bool) -> Value {
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0]["ok"], true, "{stdout}");
    assert_eq!(lines[1]["ok"], ok, "{stdout}");
    let text = lines[1]["result"]["content"][0]["text"].as_str().unwrap();
    serde_json::from_str(text).unwrap()
}

#[test]
fn in_a_batch_wait_and_verify_rides_out_its_servers_restart() {
    let (p, pids) = restarts_batch("restarts", 10);
    let mut cmd = p.command(&["call", "--yes", "--batch", "batch.jsonl"]);
    cmd.env("CORE_AGENT_RESTART_DELAY_MS", "20");
    let run = p.run_with(cmd);
    run.expect_code(0);
    let report = poll_report(&run.stdout, true);
    assert_eq!(report["satisfied"], true, "{report}");
    let outcomes = report["outcomes"].as_array().unwrap();
    // The first attempt was in flight when the server exited: an unmet
    // attempt, reported, not the end of the poll.
    assert_eq!(outcomes[0]["outcome"], "failed", "{report}");
    assert_eq!(
        outcomes[0]["error"],
        "server `t` exited with status 3 during the call to `get_status` (restarting it in 20 ms); its stderr ended with:\n    fixture: restarting on purpose"
    );
    assert_eq!(outcomes.last().unwrap()["outcome"], "met", "{report}");
    assert_eq!(report["attempts"], outcomes.len(), "{report}");
    // It was answered by the new process.
    let answer: Value =
        serde_json::from_str(report["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let started = recorded_pids(&pids);
    assert_eq!(started.len(), 2, "{started:?}");
    assert_eq!(answer["pid"], started[1]);
}

#[test]
fn in_a_batch_wait_and_verify_ends_when_its_server_is_down() {
    // Every process exits 300 ms after it starts: after 5 restarts the
    // server stays down, and the poll stops there with the reason.
    let (p, pids) = restarts_batch("restarts-dies", 60);
    let mut cmd = p.command(&["call", "--yes", "--batch", "batch.jsonl"]);
    cmd.env("CORE_AGENT_RESTART_DELAY_MS", "20");
    let run = p.run_with(cmd);
    run.expect_code(1);
    let report = poll_report(&run.stdout, false);
    assert!(report["result"].is_null(), "{report}");
    assert_eq!(report["satisfied"], false, "{report}");
    let stopped = report["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("server `t` is down: it exited with status 3")
            && stopped.contains("it was restarted 5 times within 10 min, so it stays down"),
        "{report}"
    );
    let outcomes = report["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.last().unwrap()["outcome"], "down", "{report}");
    assert!(outcomes.len() < 60, "the poll stopped early: {report}");
    assert!(
        outcomes[..outcomes.len() - 1]
            .iter()
            .all(|o| o["outcome"] == "failed"),
        "{report}"
    );
    assert_eq!(recorded_pids(&pids).len(), 6);
}

/// A streamable HTTP server that forgets its sessions (it was restarted)
/// answers 404 to the old session id; the session is initialized again and
/// the call goes through, for the gateway's client as if nothing happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_drops_its_session_is_initialized_again() {
    use core_agent_e2e::{Background, ReservedPort};
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    // Both servers listen on the one socket this test holds, so the port
    // stays ours between them.
    let port = ReservedPort::new();
    let first = Background::python_on(&port);
    let p = Project::new(&json!({"version": 1, "servers": {
        "py": {"transport": "http", "url": first.url()},
    }}));
    let mut cmd = tokio::process::Command::from(p.command(&["serve", "--mode", "yolo"]));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut serve = cmd.spawn().unwrap();
    let transport = (serve.stdout.take().unwrap(), serve.stdin.take().unwrap());
    let client = tokio::time::timeout(Duration::from_secs(60), ().serve(transport))
        .await
        .unwrap()
        .unwrap();
    let add = || {
        let params = CallToolRequestParams::new("py_add")
            .with_arguments(json!({"a": 2, "b": 3}).as_object().cloned().unwrap());
        client.call_tool(params)
    };
    let answer = |r: rmcp::model::CallToolResult| {
        assert_ne!(r.is_error, Some(true), "{r:?}");
        r.content[0].as_text().unwrap().text.clone()
    };
    assert_eq!(answer(add().await.unwrap()), "5");

    // A new server on the same port knows nothing of the session.
    drop(first);
    let _second = Background::python_on(&port);
    assert_eq!(answer(add().await.unwrap()), "5");
    drop(client);
    let _ = serve.kill().await;
}

/// `kill -9`, and SIGHUP (a closed terminal; core-agent does not catch it),
/// while servers are still starting: the supervisors stop them, wrappers'
/// grandchildren included.
#[test]
fn kill_9_or_sighup_while_servers_start_leaves_nothing_behind() {
    for signal in [Signal::SIGKILL, Signal::SIGHUP] {
        let (p, pids, mut child) = serve_while_starting(Stdio::null());
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = child.wait().unwrap();
        assert!(status.code().is_none(), "{signal}: {status:?}");
        wait_until_gone(
            &p.path().to_string_lossy(),
            &recorded_pids(&pids),
            Duration::from_secs(10),
        );
    }
}

/// `kill -9` while core-agent stops a server that ignores SIGTERM: its
/// supervisor finishes the job (SIGKILL after the grace).
#[test]
fn kill_9_while_core_agent_stops_its_servers_leaves_nothing_behind() {
    let (p, pids, mut child) = call_while_stopping();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let recorded = recorded_pids(&pids);
    assert_eq!(recorded.len(), 2);
    wait_until_gone(
        &p.path().to_string_lossy(),
        &recorded,
        Duration::from_secs(10),
    );
}
