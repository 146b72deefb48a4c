//! The fault suite: one test per way a server can misbehave. Each checks
//! that the faulty server is reported with a clear reason, that the demo
//! server in the same config keeps answering, and that no call outlives
//! its timeout.

use std::time::{Duration, Instant};

use core_agent_e2e::{Background, Project, Run, bin, hermetic};
use serde_json::{Value, json};

use crate::{by_name, demo_server, fixture};

/// A project with the server `bad`, next to the demo.
fn project(bad: Value) -> Project {
    Project::new(&json!({"version": 1, "servers": {"bad": bad, "demo": demo_server()}}))
}

/// A project with the fixture `mode` as `bad`, next to the demo, whose
/// environment variable `var` names the file `file` in the project: the
/// project and that file's path.
fn project_with_file(mode: &str, var: &str, file: &str) -> (Project, std::path::PathBuf) {
    let p = Project::empty();
    let path = p.path().join(file);
    let mut bad = fixture(mode);
    bad["env"] = json!({var: path});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"bad": bad, "demo": demo_server()}}).to_string(),
    );
    (p, path)
}

/// `mcp list --json` (start timeout `start` seconds): the servers `bad` and `demo`.
fn list(p: &Project, start: &str) -> (Value, Value) {
    let run = p.run(&["mcp", "list", "--json", "--start-timeout", start]);
    run.expect_code(0);
    let list = run.json();
    (by_name(&list, "bad"), by_name(&list, "demo"))
}

/// Asserts that the demo server is connected and answers a call.
fn demo_answers(p: &Project, demo: &Value) {
    assert_eq!(demo["status"], "connected", "{demo}");
    let run = p.run(&["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "0.25\n");
}

/// Calls `tool` with a 3 s call timeout, and asserts it ended within it.
fn call_within(p: &Project, tool: &str) -> Run {
    let run = p.run(&["call", "--yes", "--call-timeout", "3", tool, "{}"]);
    assert!(
        run.elapsed < Duration::from_secs(3 + 10),
        "the call took {:?}: {run:?}",
        run.elapsed
    );
    run
}

/// A project with the fixture `mode` as `bad` beside the demo, after
/// asserting that `bad` connected with `tools` tools and the demo answers.
fn connected_beside_demo(mode: &str, tools: u64) -> Project {
    let p = project(fixture(mode));
    let (bad, demo) = list(&p, "10");
    connected(&bad, tools);
    demo_answers(&p, &demo);
    p
}

/// Asserts that `bad` is connected with `tools` tools and no error.
fn connected(bad: &Value, tools: u64) {
    assert_eq!(
        (&bad["status"], &bad["tools"], &bad["error"]),
        (&json!("connected"), &json!(tools), &json!(null)),
        "{bad}"
    );
}

#[test]
fn garbage_on_stdout_mid_session_is_skipped() {
    let p = connected_beside_demo("noisy", 2);
    // `fault` writes three non-JSON lines before its answer: they are
    // skipped, and the answer after them still arrives.
    let run = call_within(&p, "bad_fault");
    run.expect_code(0);
    assert_eq!(run.stdout, "fault answered\n");
}

#[test]
fn invalid_json_rpc_frames_end_in_the_call_timeout() {
    let p = connected_beside_demo("bad-frames", 2);
    let run = call_within(&p, "bad_fault");
    run.expect_code(1);
    assert_eq!(
        run.stderr,
        "core-agent: `fault` on server `bad` did not answer within 3 s; the request was cancelled\n"
    );
    assert!(run.elapsed >= Duration::from_secs(3), "{run:?}");
}

#[test]
fn a_server_that_exits_during_initialize_is_an_error_with_its_stderr() {
    let p = project(fixture("exit-init"));
    let (bad, demo) = list(&p, "10");
    let reason = "exited during start (exit status: 4); its stderr ended with:\n    fixture: cannot load plugins, giving up";
    assert_eq!(
        (&bad["status"], &bad["error"]),
        (&json!("error"), &json!(reason))
    );
    demo_answers(&p, &demo);
    let run = call_within(&p, "bad_fault");
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("core-agent: mcp: bad (stdio): error after "),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(reason), "{}", run.stderr);
}

#[test]
fn slow_start_past_the_start_timeout_is_an_error() {
    let p = Project::empty();
    let mut waits = fixture("waits");
    waits["env"] = json!({"FIXTURE_WAIT_FOR": p.path().join("never")});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"bad": waits, "demo": demo_server()}}).to_string(),
    );
    let (bad, demo) = list(&p, "1");
    let reason = "did not finish starting within 1 s; is the server stuck, or does it need a longer start timeout?";
    assert_eq!(
        (&bad["status"], &bad["error"]),
        (&json!("error"), &json!(reason))
    );
    demo_answers(&p, &demo);
    let run = p.run(&[
        "call",
        "--yes",
        "--start-timeout",
        "1",
        "bad_echo",
        r#"{"text": "hi"}"#,
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains(reason), "{}", run.stderr);
    // The 30 s the server would wait are not waited for.
    assert!(run.elapsed < Duration::from_secs(10), "{run:?}");
}

#[test]
fn infinite_pagination_stops_at_max_pages() {
    let p = project(fixture("endless-pages"));
    let (bad, demo) = list(&p, "10");
    // The default `max_pages` is 20: `echo` and `fault`, then `page1` … `page19`.
    connected(&bad, 21);
    assert_eq!(
        bad["warnings"],
        json!([
            "bad: stopped listing tools after 20 pages (max_pages); tools on later pages are not published"
        ])
    );
    demo_answers(&p, &demo);
    let run = call_within(&p, "bad_page19");
    run.expect_code(0);
    assert_eq!(run.stdout, "page19 answered\n");
}

#[test]
fn a_tool_list_that_changes_on_every_listing_still_serves_calls() {
    // `echo`, `fault` and one `gen<n>`, whichever listing was kept last.
    let p = connected_beside_demo("shifting", 3);
    let run = call_within(&p, "bad_fault");
    run.expect_code(0);
    assert_eq!(run.stdout, "fault answered\n");
}

/// Under `serve`, which lives for days, a server that announces a change
/// after every listing is re-listed a few times a second (the re-lists are
/// coalesced and paced), not once per notification as fast as it answers.
#[test]
fn a_tool_list_that_changes_on_every_listing_is_re_listed_at_a_bounded_rate() {
    let (p, lists) = project_with_file("shifting", "FIXTURE_LISTS", "lists");
    let (mut child, _) = crate::recovery::serve_until_ready(&p, 2);
    // The fixture rewrites the count on every listing: read until whole.
    let count = || loop {
        if let Ok(n) = std::fs::read_to_string(&lists)
            .unwrap_or_default()
            .parse::<u64>()
        {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Six more listings: re-lists begin 500 ms apart at most, so they take
    // 2.5 s, 2 s with slack for one more in flight (before the fix: a few
    // milliseconds, thousands a second). Timed from listing to listing,
    // with a deadline that says when re-listing stopped instead.
    let ready = count();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(30);
    while count() < ready + 6 {
        assert!(
            Instant::now() < deadline,
            "{} listings in 30 s: re-listing stopped",
            count() - ready
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        took >= Duration::from_secs(2),
        "6 listings in {took:?} (paced: at least 2 s; before the fix: thousands a second)"
    );
}

#[test]
fn a_flood_of_log_notifications_does_not_stop_the_answer() {
    let p = connected_beside_demo("flood", 2);
    // 10,000 `notifications/message` before the answer.
    let run = call_within(&p, "bad_fault");
    run.expect_code(0);
    assert_eq!(run.stdout, "fault answered\n");
}

/// Runs `core-agent ARGS` in `p` under `fixture-server peak-rss`: the run
/// (its stderr without the measurement) and the peak resident size in KiB
/// of the largest process of the run (core-agent; its supervisors and
/// servers stay small).
fn measured(p: &Project, args: &[&str]) -> (Run, u64) {
    let inner = p.command(args);
    let mut cmd = std::process::Command::new(bin("fixture-server"));
    hermetic(&mut cmd)
        .arg("peak-rss")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(p.path())
        .stdin(std::process::Stdio::null());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    let mut run = p.run_with(cmd);
    let (rest, last) = run
        .stderr
        .trim_end_matches('\n')
        .rsplit_once('\n')
        .unwrap_or(("", run.stderr.trim_end_matches('\n')));
    let kib = last
        .strip_prefix("peak-rss-kib ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no measurement: {run:?}"));
    run.stderr = if rest.is_empty() {
        String::new()
    } else {
        format!("{rest}\n")
    };
    (run, kib)
}

/// The peak memory of a small call in `p`: what core-agent needs anyway.
fn baseline(p: &Project) -> u64 {
    let (run, kib) = measured(p, &["call", "--yes", "demo_divide", r#"{"a": 1, "b": 4}"#]);
    run.expect_code(0);
    kib
}

const MIB_IN_KIB: u64 = 1024;

/// What a call says when its server sent more than the default limit.
const OVER_THE_LIMIT: &str = "core-agent: server `bad` sent a message longer than \
     max_message_bytes (16 MiB), so it was stopped during the call to `fault`";

#[test]
fn a_100_mib_line_without_a_newline_stops_that_server_in_bounded_memory() {
    let p = project(fixture("huge-line"));
    let (bad, demo) = list(&p, "10");
    connected(&bad, 2);
    let base = baseline(&p);
    // `fault` starts a notification and writes 100 MiB of it, never ending it.
    let (run, peak) = measured(
        &p,
        &["call", "--yes", "--call-timeout", "60", "bad_fault", "{}"],
    );
    run.expect_code(1);
    assert!(run.stderr.contains(OVER_THE_LIMIT), "{run:?}");
    // It failed when the line passed the limit, not at the call timeout.
    assert!(run.elapsed < Duration::from_secs(30), "{run:?}");
    // Reading stopped at the limit: the growth stays under 3x the largest
    // message allowed (16 MiB), far from the 100 MiB sent.
    let growth = peak.saturating_sub(base);
    assert!(
        growth < 3 * 16 * MIB_IN_KIB,
        "peak {peak} KiB, {growth} KiB over the {base} KiB of a small call"
    );
    demo_answers(&p, &demo);

    // A line that is not JSON at all is bounded the same way.
    let mut noise = fixture("huge-line");
    noise["env"] = json!({"FIXTURE_NOISE": "1", "FIXTURE_MB": "20"});
    let p = project(noise);
    let run = p.run(&["call", "--yes", "--call-timeout", "60", "bad_fault", "{}"]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "core-agent: server `bad` wrote a non-protocol stdout line longer than \
             max_message_bytes (16 MiB), so it was stopped during the call to `fault`"
        ),
        "{run:?}"
    );
}

#[test]
fn a_50_mib_result_is_refused_at_the_default_limit_and_kept_whole_under_a_raised_one() {
    let mut big = fixture("huge-result");
    big["limits"] = json!({"max_message_bytes": 64 * 1024 * 1024});
    let p = Project::new(&json!({"version": 1, "servers": {
        "bad": fixture("huge-result"), "big": big, "demo": demo_server(),
    }}));
    let base = baseline(&p);
    // At the default limit (16 MiB) the answer is not read: the server is
    // stopped and the call says why, at once.
    let (run, peak) = measured(&p, &["call", "--yes", "bad_fault", "{}"]);
    run.expect_code(1);
    assert!(run.stderr.contains(OVER_THE_LIMIT), "{run:?}");
    let growth = peak.saturating_sub(base);
    assert!(
        growth < 3 * 16 * MIB_IN_KIB,
        "peak {peak} KiB, base {base} KiB"
    );

    // Under 64 MiB it is read, digested for the caller, and stored whole.
    let db = p.path().join("s.db");
    let db = db.to_str().unwrap();
    let (run, peak) = measured(
        &p,
        &[
            "call",
            "--yes",
            "--json",
            "--session-db",
            db,
            "big_fault",
            "{}",
        ],
    );
    run.expect_code(0);
    let result = run.json();
    let envelope: Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["raw_bytes"], 50 * 1024 * 1024, "{envelope}");
    assert!(run.stdout.len() < 200 * 1024, "{} bytes", run.stdout.len());
    let growth = peak.saturating_sub(base);
    assert!(
        growth < 3 * 64 * MIB_IN_KIB,
        "peak {peak} KiB, {growth} KiB over the {base} KiB of a small call"
    );
    let raw = p.run(&[
        "raw",
        envelope["call_id"].as_str().unwrap(),
        "--session-db",
        db,
    ]);
    raw.expect_code(0);
    let payload = raw.stdout.trim_end_matches('\n');
    assert_eq!(payload.len(), 50 * 1024 * 1024);
    assert!(payload.bytes().all(|b| b == b'y'));
    eprintln!("50 MiB result: peak {peak} KiB, a small call {base} KiB");
}

/// `fixture-server http-fault KIND` in the background, and its URL.
fn http_fault(kind: &str) -> (Background, String) {
    let mut cmd = std::process::Command::new(bin("fixture-server"));
    cmd.args(["http-fault", kind]);
    let server = Background::start(cmd);
    let url = server.url();
    (server, url)
}

#[test]
fn http_servers_answering_500_a_redirect_loop_or_an_endless_body_are_errors() {
    let (_e500, e500) = http_fault("500");
    let (_looping, looping) = http_fault("redirect");
    let (_endless, endless) = http_fault("endless");
    let p = Project::new(&json!({"version": 1, "servers": {
        "e500": {"transport": "http", "url": e500},
        "looping": {"transport": "http", "url": looping},
        "endless": {"transport": "http", "url": endless},
        "demo": demo_server(),
    }}));
    let base = baseline(&p);
    let (run, peak) = measured(&p, &["mcp", "list", "--json", "--start-timeout", "20"]);
    run.expect_code(0);
    // Each fails at once, not at the start timeout.
    assert!(run.elapsed < Duration::from_secs(10), "{run:?}");
    let list = run.json();
    let error = |name: &str| {
        let s = by_name(&list, name);
        assert_eq!(s["status"], "error", "{s}");
        s["error"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(
        error("e500"),
        "initialize failed: the server answered HTTP 500 Internal Server Error: it failed on its side; its own logs say why"
    );
    assert!(
        error("looping").starts_with("initialize failed: the server redirected more than 10 times"),
        "{list}"
    );
    assert_eq!(
        error("endless"),
        "initialize failed: the server's answer was longer than max_message_bytes (16 MiB), so it was not read; raise `limits.max_message_bytes` for this server if such answers are expected"
    );
    // The endless body was read up to the limit, no further.
    let growth = peak.saturating_sub(base);
    assert!(
        growth < 3 * 16 * MIB_IN_KIB,
        "peak {peak} KiB, base {base} KiB"
    );
    demo_answers(&p, &by_name(&list, "demo"));
}

#[test]
fn a_server_that_hangs_and_ignores_the_cancel_costs_the_call_timeout_and_is_killed() {
    let (p, pids) = project_with_file("deaf", "FIXTURE_PID_FILE", "pids");
    let run = call_within(&p, "bad_fault");
    run.expect_code(1);
    assert_eq!(
        run.stderr,
        "core-agent: `fault` on server `bad` did not answer within 3 s; the request was cancelled\n"
    );
    // It ignores the cancel, stdin's end and SIGTERM: it was killed after
    // the grace (3 s), and core-agent did not wait longer than that.
    assert!(run.elapsed < Duration::from_secs(3 + 3 + 5), "{run:?}");
    for pid in core_agent_e2e::recorded_pids(&pids) {
        assert!(
            !core_agent_e2e::alive(pid),
            "process {pid} outlived core-agent"
        );
    }
    let (_, demo) = list(&p, "10");
    demo_answers(&p, &demo);
}

#[test]
fn a_server_that_crashes_mid_call_fails_that_call_saying_so() {
    let p = project(fixture("crashy"));
    let run = p.run(&["call", "--yes", "bad_crash", "{}"]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "core-agent: server `bad` exited with status 1 during the call to `crash`; its stderr ended with:"
        ) && run.stderr.contains("fixture: crashing on purpose"),
        "{run:?}"
    );
    let (_, demo) = list(&p, "10");
    demo_answers(&p, &demo);
}

#[test]
fn http_calls_answered_with_500_an_endless_body_or_never_fail_clearly() {
    let (_e500, e500) = http_fault("call-500");
    let (_endless, endless) = http_fault("call-endless");
    let (_hang, hang) = http_fault("call-hang");
    let p = Project::new(&json!({"version": 1, "servers": {
        "e500": {"transport": "http", "url": e500},
        "endless": {"transport": "http", "url": endless},
        "hang": {"transport": "http", "url": hang},
        "demo": demo_server(),
    }}));
    let base = baseline(&p);
    // A 500 and a body past the limit fail the call at once (long before
    // its 20 s timeout), in words.
    let call = |tool: &str, timeout: &str| {
        measured(
            &p,
            &["call", "--yes", "--call-timeout", timeout, tool, "{}"],
        )
    };
    let (run, _) = call("e500_fault", "20");
    run.expect_code(1);
    assert_eq!(
        run.stderr,
        "core-agent: `fault` on server `e500` failed: the server answered HTTP 500 Internal Server Error: it failed on its side; its own logs say why\n"
    );
    assert!(run.elapsed < Duration::from_secs(15), "{run:?}");
    let (run, peak) = call("endless_fault", "20");
    run.expect_code(1);
    assert_eq!(
        run.stderr,
        "core-agent: `fault` on server `endless` failed: the server's answer was longer than max_message_bytes (16 MiB), so it was not read; raise `limits.max_message_bytes` for this server if such answers are expected\n"
    );
    assert!(run.elapsed < Duration::from_secs(15), "{run:?}");
    let growth = peak.saturating_sub(base);
    assert!(
        growth < 3 * 16 * MIB_IN_KIB,
        "peak {peak} KiB, base {base} KiB"
    );
    // One that never answers costs its timeout, no more.
    let (run, _) = call("hang_fault", "3");
    run.expect_code(1);
    assert_eq!(
        run.stderr,
        "core-agent: `fault` on server `hang` did not answer within 3 s; the request was cancelled\n"
    );
    assert!(run.elapsed < Duration::from_secs(3 + 10), "{run:?}");
    let run = p.run(&["mcp", "list", "--json"]);
    demo_answers(&p, &by_name(&run.json(), "demo"));
}

/// A server that answers `server/discover` only after rmcp has given up on
/// it (10 s) and sent `initialize`: the late answer comes first.
const SLOW_PROBE_SERVER: &str = r#"
import json, sys, time
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "server/discover":
        probe = rid
    elif method == "initialize":
        time.sleep(0.2)
        send({"jsonrpc": "2.0", "id": probe, "error": {"code": -32601, "message": "Method not found"}})
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow-probe", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": "ping", "inputSchema": {"type": "object"}}]}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
"#;

#[test]
fn a_late_answer_to_the_discover_probe_is_not_taken_for_initializes() {
    let p = Project::empty();
    let script = p.write("slow_probe.py", SLOW_PROBE_SERVER);
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"slow": {
            "transport": "stdio",
            "command": core_agent_e2e::python(),
            "args": [script],
        }}})
        .to_string(),
    );
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("slow_ping"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

/// A shim in front of a server: the first time it runs (no `marker` file
/// yet) it holds the client's first message 10.5 s, past rmcp's wait for
/// the discover probe, then passes everything through both ways.
const SLOW_FIRST_START: &str = r#"
import os, subprocess, sys, threading, time
marker, command = sys.argv[1], sys.argv[2:]
slow = not os.path.exists(marker)
open(marker, "a").close()
child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def up():
    for line in child.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
threading.Thread(target=up, daemon=True).start()
first = True
for line in sys.stdin.buffer:
    if first and slow:
        time.sleep(10.5)
    first = False
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
"#;

#[test]
fn a_2026_server_that_answers_the_probe_too_late_is_started_again_with_discover() {
    let p = Project::empty();
    let shim = p.write("slow_first.py", SLOW_FIRST_START);
    let marker = p.path().join("started-once");
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"py": {
            "transport": "stdio",
            "command": core_agent_e2e::python(),
            "args": [shim, marker, core_agent_e2e::python(), core_agent_e2e::py_server(), "stdio"],
        }}})
        .to_string(),
    );
    let run = p.run(&["call", "--yes", "py_add", r#"{"a": 2, "b": 3}"#]);
    run.expect_code(0);
    assert_eq!(run.stdout, "5\n", "{}", run.stderr);
    assert!(marker.exists());
}
