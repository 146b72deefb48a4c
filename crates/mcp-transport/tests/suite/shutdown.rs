//! Shutdown: every child and its process group stops.

use super::*;

#[tokio::test]
async fn shutdown_stops_every_child_and_its_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let leader_file = dir.path().join("leader");
    let grandchild_file = dir.path().join("grandchild");
    let plain_file = dir.path().join("plain");
    // The grandchild shares the server's process group but not its pipes.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exec '{}'",
        grandchild_file.display(),
        echo_server()
    );
    let entries = [
        stdio(
            "family",
            "sh",
            &["-c", &script],
            &[("ECHO_SERVER_PID_FILE", leader_file.to_str().unwrap())],
        ),
        echo(
            "plain",
            &[("ECHO_SERVER_PID_FILE", plain_file.to_str().unwrap())],
        ),
    ];
    let servers = start(&entries, &StartOptions::default()).await;
    for server in servers.iter() {
        assert_eq!(server.status(), Status::Connected, "{:?}", server.error());
    }
    let pids = [
        read_pid(&leader_file),
        read_pid(&grandchild_file),
        read_pid(&plain_file),
    ];
    // The echo server exits on stdin EOF.
    shutdown_stops(&servers, &pids).await;

    for server in servers.iter() {
        assert_eq!(server.status(), Status::Closed);
        assert!(server.tools().is_empty());
        let err = server
            .call_tool("echo", args(json!({"text": "x"})), CALL)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::NotConnected { server: s } if s == server.name()),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("server `{}` is not connected", server.name())
        );
    }
    // A second shutdown is harmless.
    servers.shutdown().await;
}
