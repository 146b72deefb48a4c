//! The supervisor: a supervised server behaves like a direct one.

use super::*;

/// `<target>/debug/examples/supervisor`: a supervisor binary written with
/// the library, as a library user would.
fn supervisor() -> Supervisor {
    let echo = PathBuf::from(echo_server());
    let path = echo.with_file_name("supervisor");
    assert!(path.exists(), "{} is not built", path.display());
    Supervisor::new(path)
}

#[tokio::test]
async fn a_supervised_server_starts_fails_and_stops_like_a_direct_one() {
    let dir = tempfile::tempdir().unwrap();
    let leader_file = dir.path().join("leader");
    let grandchild_file = dir.path().join("grandchild");
    let escapee_file = dir.path().join("escapee");
    // One grandchild stays in the server's group; the other leaves it
    // (setsid): once the server is gone, it is the supervisor's child.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'; \
         setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exec '{}'",
        grandchild_file.display(),
        escapee_file.display(),
        echo_server()
    );
    let entries = [
        stdio(
            "family",
            "sh",
            &["-c", &script],
            &[("ECHO_SERVER_PID_FILE", leader_file.to_str().unwrap())],
        ),
        stdio("missing", "/nonexistent/server", &[], &[]),
        stdio("dies", "sh", &["-c", "echo boom >&2; exit 3"], &[]),
    ];
    let options = StartOptions::default().with_supervisor(Some(supervisor()));
    let servers = start(&entries, &options).await;
    let family = servers.get("family").unwrap();
    assert_eq!(family.status(), Status::Connected, "{:?}", family.error());
    let result = family
        .call_tool("echo", args(json!({"text": "through a supervisor"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "through a supervisor");
    assert_eq!(
        servers.get("missing").unwrap().error().unwrap().to_string(),
        "command not found: `/nonexistent/server`; install it or fix `command` (PATH is searched when it has no `/`)"
    );
    assert_eq!(
        servers.get("dies").unwrap().error().unwrap().to_string(),
        "exited during start (exit status: 3); its stderr ended with:\n    boom"
    );

    let pids = [
        read_pid(&leader_file),
        read_pid(&grandchild_file),
        read_pid(&escapee_file),
    ];
    // The server exits on stdin EOF; the supervisor then stops the rest of
    // its group and its reparented children (the `sleep`s) and exits.
    shutdown_stops(&servers, &pids).await;
}
