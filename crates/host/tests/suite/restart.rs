//! `wait_and_verify` across a server's restarts.

use super::*;

/// The demo server under `sh`, appending each started process's pid to
/// `pid_file`, restarted under `restart` (`max_restarts` restarts, the first
/// after `first_delay`), with calls timing out after 200 ms.
async fn restartable_demo(
    pid_file: &std::path::Path,
    max_restarts: usize,
    first_delay: Duration,
) -> TestHost {
    let script = format!(
        "echo $$ >> '{}'; exec '{}'",
        pid_file.display(),
        demo_server()
    );
    let mut options = HostOptions::default().with_call_timeout(Some(Duration::from_millis(200)));
    options.start.restart = Some(
        core_agent_mcp_transport::RestartPolicy::default()
            .with_first_delay(first_delay)
            .with_max_restarts(max_restarts)
            .with_window(Duration::from_secs(600)),
    );
    start(vec![stdio("demo", "sh", &["-c", &script])], options).await
}

fn pids(pid_file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(pid_file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Polls `demo_divide` 1/4 until it answers 0.25, 100 ms apart.
async fn poll_divide(host: &TestHost, max_attempts: u32) -> Value {
    let outcome = host
        .call(
            "wait_and_verify",
            args(json!({
                "tool": "demo_divide",
                "arguments": {"a": 1, "b": 4},
                "until": {"contains": "0.25"},
                "max_attempts": max_attempts,
                "interval_ms": 100
            })),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    let mut report: Value = serde_json::from_str(&text(&outcome)).unwrap();
    report["is_error"] = json!(outcome.is_error == Some(true));
    report
}

#[tokio::test]
async fn wait_and_verify_keeps_polling_while_its_server_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    // The restart comes 800 ms after the crash, past the 200 ms call
    // timeout: the first attempts cannot be answered.
    let host = restartable_demo(&pid_file, 5, Duration::from_millis(800)).await;
    let first = pids(&pid_file);
    assert_eq!(first.len(), 1);
    signal(&first[0], "-KILL");
    let report = poll_divide(&host, 30).await;
    assert_eq!(report["satisfied"], true, "{report}");
    assert_eq!(report["is_error"], false, "{report}");
    let outcomes = report["outcomes"].as_array().unwrap();
    assert_eq!(report["attempts"], outcomes.len(), "{report}");
    assert_eq!(outcomes[0]["outcome"], "failed", "{report}");
    // Crashed (the kill not yet seen) or restarting (seen): both name the server.
    let error = outcomes[0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("server `demo` was killed by signal 9")
            || error.starts_with("server `demo` is being restarted and was not back within 200 ms"),
        "{report}"
    );
    assert_eq!(outcomes.last().unwrap()["outcome"], "met", "{report}");
    assert_eq!(pids(&pid_file).len(), 2);
    host.shutdown().await;
}

#[tokio::test]
async fn wait_and_verify_stops_when_its_server_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    // No restart allowed: once the kill is seen, the server is down.
    let host = restartable_demo(&pid_file, 0, Duration::from_millis(10)).await;
    signal(&pids(&pid_file)[0], "-KILL");
    let report = poll_divide(&host, 30).await;
    assert_eq!(report["satisfied"], false, "{report}");
    assert_eq!(report["is_error"], true, "{report}");
    let outcomes = report["outcomes"].as_array().unwrap();
    assert!(outcomes.len() < 30, "{report}");
    let last = outcomes.last().unwrap();
    assert_eq!(last["outcome"], "down", "{report}");
    assert_eq!(
        report["stopped"],
        "server `demo` is down: it was killed by signal 9 (SIGKILL); it was restarted 0 times within 10 min, so it stays down"
    );
    assert_eq!(last["error"], report["stopped"]);
    host.shutdown().await;
}
