//! Crashes and restarts: a killed server, the restart policy, and first starts
//! tried again.

use super::*;

fn kill9(pid: i32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Restarts after 10 ms, 20 ms, 40 ms …
fn quick_restarts() -> StartOptions {
    StartOptions::default().with_restart(Some(
        RestartPolicy::default().with_first_delay(Duration::from_millis(10)),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_the_call_in_flight_saying_so_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let sleeping = dir.path().join("sleeping");
    let entry = echo(
        "e",
        &[
            ("ECHO_SERVER_PID_FILE", pid_file.to_str().unwrap()),
            ("ECHO_SERVER_SLEEPING_FILE", sleeping.to_str().unwrap()),
        ],
    );
    let servers = start(&[entry], &quick_restarts()).await;
    let server = servers.get("e").unwrap();
    let first = read_pid(&pid_file);
    let version = servers.tools_version();

    let in_flight = server.call_tool("sleep", args(json!({"ms": 60000})), CALL);
    // Killed once the call is in the server.
    let killer = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sleeping.exists() {
            assert!(
                Instant::now() < deadline,
                "the call never reached the server"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        kill9(first);
    };
    let (result, ()) = tokio::join!(in_flight, killer);
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `e` was killed by signal 9 (SIGKILL) during the call to `sleep` (restarting it in 10 ms)"
    );
    assert!(matches!(err, Error::Crashed { .. }), "{err:?}");

    // The next call waits for the restart and is answered by a new process,
    // under the same tool name.
    let result = server
        .call_tool("echo", args(json!({"text": "again"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "again");
    let second = read_pid(&pid_file);
    assert_ne!(first, second);
    assert_eq!(server.status(), Status::Connected);
    assert!(server.problem().is_none());
    // The new process lists one more tool; the list is current.
    assert!(
        servers.tools_version() > version,
        "the restart listed the tools again, so a catalog is rebuilt"
    );
    let mut names: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ask", "echo", "env", "reborn", "sleep"]);
    let result = server
        .call_tool("reborn", args(json!({})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "reborn");
    servers.shutdown().await;
    assert!(gone(second).await);
}

#[tokio::test]
async fn without_a_restart_policy_a_killed_server_stays_down_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let entry = echo("e", &[("ECHO_SERVER_PID_FILE", pid_file.to_str().unwrap())]);
    let servers = start(&[entry], &StartOptions::default()).await;
    let server = servers.get("e").unwrap();
    kill9(read_pid(&pid_file));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.status() != Status::Down {
        assert!(Instant::now() < deadline, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.status().as_str(), "down");
    assert_eq!(
        server.problem().as_deref(),
        Some("down: it was killed by signal 9 (SIGKILL)")
    );
    // Its tools stay listed, so their names do not change under the caller.
    assert_eq!(server.tools().len(), 4);
    let err = server
        .call_tool("echo", args(json!({"text": "x"})), CALL)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `e` is down: it was killed by signal 9 (SIGKILL)"
    );
    servers.shutdown().await;
}

/// A stdio server that counts its starts in `dir/starts` and fails each
/// one (status 3) until `dir/ready` exists.
fn ready_later(name: &str, dir: &Path) -> ServerEntry {
    let script = "echo start >> \"$0/starts\"; test -e \"$0/ready\" || { echo 'not ready yet' >&2; exit 3; }; exec \"$1\"";
    stdio(
        name,
        "sh",
        &["-c", script, dir.to_str().unwrap(), &echo_server()],
        &[],
    )
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_first_start_is_tried_again_in_a_long_lived_run() {
    let dir = tempfile::tempdir().unwrap();
    let servers = start(&[ready_later("late", dir.path())], &quick_restarts()).await;
    let server = servers.get("late").unwrap();
    assert_eq!(server.status(), Status::Error);
    assert!(
        server
            .error()
            .unwrap()
            .to_string()
            .contains("not ready yet"),
        "{:?}",
        server.error()
    );
    let version = servers.tools_version();
    std::fs::write(dir.path().join("ready"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.status() != Status::Connected {
        assert!(Instant::now() < deadline, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Connected now: no error, its tools listed, catalogs told, calls answered.
    assert!(server.error().is_none() && server.problem().is_none());
    assert!(servers.tools_version() > version);
    assert!(server.tools().iter().any(|t| t.name == "echo"));
    let result = server
        .call_tool("echo", args(json!({"text": "late"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "late");
    assert!(starts(dir.path()) >= 2);
    servers.shutdown().await;
    assert_eq!(server.status(), Status::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_that_keeps_failing_is_tried_five_more_times_then_left() {
    let dir = tempfile::tempdir().unwrap();
    let servers = start(&[ready_later("never", dir.path())], &quick_restarts()).await;
    // 10 + 20 + 40 + 80 + 160 ms of delays, then it stays in error.
    let deadline = Instant::now() + Duration::from_secs(10);
    while starts(dir.path()) < 6 {
        assert!(Instant::now() < deadline, "{} starts", starts(dir.path()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(starts(dir.path()), 6, "the first start and five more");
    assert_eq!(servers.get("never").unwrap().status(), Status::Error);
    servers.shutdown().await;

    // A one-shot run (no restart policy) starts it once.
    let dir = tempfile::tempdir().unwrap();
    let servers = start(&[ready_later("once", dir.path())], &StartOptions::default()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(starts(dir.path()), 1);
    assert_eq!(servers.get("once").unwrap().status(), Status::Error);
    servers.shutdown().await;
}
