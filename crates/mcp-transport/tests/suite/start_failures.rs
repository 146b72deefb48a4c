//! Failures at start: each server gets its own error, the others carry on.

use super::*;

#[tokio::test]
async fn each_failing_server_gets_its_own_error_and_the_others_carry_on() {
    struct Row {
        entry: ServerEntry,
        kind: &'static str,
        /// The whole message, or its start when `prefix` is set.
        message: &'static str,
        prefix: bool,
    }
    // Held, never listening, until the test ends: the connection is refused.
    let closed = ReservedPort::new();
    let refused = closed.url("/mcp");
    let rows = [
        Row {
            entry: stdio("missing", "core-agent-no-such-command", &[], &[]),
            kind: "NotFound",
            message: "command not found: `core-agent-no-such-command`; install it or fix `command` (PATH is searched when it has no `/`)",
            prefix: false,
        },
        Row {
            entry: stdio("missing_path", "/nonexistent/bin/server", &["--stdio"], &[]),
            kind: "NotFound",
            message: "command not found: `/nonexistent/bin/server`; install it or fix `command` (PATH is searched when it has no `/`)",
            prefix: false,
        },
        Row {
            entry: stdio("directory", "/", &[], &[]),
            kind: "Spawn",
            message: "cannot start `/`: ",
            prefix: true,
        },
        Row {
            entry: stdio(
                "exits",
                "sh",
                &["-c", "echo 'fatal: no database' >&2; sleep 0.5; exit 3"],
                &[],
            ),
            kind: "Exited",
            message: "exited during start (exit status: 3); its stderr ended with:\n    fatal: no database",
            prefix: false,
        },
        // A child that exits right after writing races the stderr drain: the
        // tail is read without waiting for the drain to reach EOF, so it can
        // come back empty (seen on a current-thread runtime under load). Only
        // the status is certain.
        Row {
            entry: stdio(
                "exits_at_once",
                "sh",
                &["-c", "echo 'fatal: no database' >&2; exit 3"],
                &[],
            ),
            kind: "Exited",
            message: "exited during start (exit status: 3)",
            prefix: true,
        },
        Row {
            entry: http(
                "oauth",
                "http://127.0.0.1:9/mcp",
                &[],
                Some(AuthSpec::GoogleOAuth {
                    scopes: vec!["openid".to_owned()],
                }),
            ),
            // No credentials anywhere, and no metadata server on the
            // discard port: this server fails, with the advice.
            #[cfg(feature = "google")]
            kind: "Auth",
            #[cfg(feature = "google")]
            message: "cannot get a token: no credentials found (GOOGLE_APPLICATION_CREDENTIALS is not set, HOME is not set, and the metadata server at 127.0.0.1:9 gave no token: ",
            // Built without Google ADC: this server fails, saying so.
            #[cfg(not(feature = "google"))]
            kind: "Unsupported",
            #[cfg(not(feature = "google"))]
            message: "`auth.google_oauth` (Google Application Default Credentials) is not supported by this version of core-agent; build core-agent-mcp-transport with its `google` feature",
            prefix: true,
        },
        Row {
            entry: http(
                "mcp_oauth",
                "http://127.0.0.1:9/mcp",
                &[],
                Some(AuthSpec::OAuth(OAuthSpec::default())),
            ),
            // No stored credentials (no credentials directory): a login is
            // needed, and nothing is sent to the server.
            #[cfg(feature = "oauth")]
            kind: "Auth",
            #[cfg(feature = "oauth")]
            message: "cannot get a token: server `mcp_oauth` needs a login",
            // Built without MCP OAuth: this server fails, saying so.
            #[cfg(not(feature = "oauth"))]
            kind: "Unsupported",
            #[cfg(not(feature = "oauth"))]
            message: "`auth.oauth` (MCP OAuth) is not supported by this version of core-agent; build core-agent-mcp-transport with its `oauth` feature",
            prefix: true,
        },
        Row {
            entry: http(
                "bad_name",
                "http://127.0.0.1:9/mcp",
                &[("bad header", "x")],
                None,
            ),
            kind: "InvalidHeader",
            message: "header `bad header` is not a valid HTTP header name; fix it in `headers`",
            prefix: false,
        },
        Row {
            entry: http(
                "bad_value",
                "http://127.0.0.1:9/mcp",
                &[("Authorization", "Bearer ${env:MULTILINE}")],
                None,
            ),
            kind: "InvalidHeader",
            message: "header `Authorization` is not a valid HTTP header value; fix it in `headers`",
            prefix: false,
        },
        Row {
            entry: http("refused", &refused, &[], None),
            kind: "Initialize",
            message: "initialize failed: ",
            prefix: true,
        },
    ];
    let mut entries = vec![echo("good", &[])];
    entries.extend(rows.iter().map(|r| r.entry.clone()));
    entries.push(echo("good_too", &[]));

    let ready = Mutex::new(Vec::new());
    let on_ready = |s: &core_agent_mcp_transport::Server| {
        ready.lock().unwrap().push(s.name().to_owned());
    };
    let given = env(&[
        ("MULTILINE", "abc\ndef"),
        ("GCE_METADATA_HOST", "127.0.0.1:9"),
    ]);
    let servers = Servers::start(
        &entries,
        &given,
        &options(Duration::from_secs(10)),
        &on_ready,
    )
    .await;

    // Config order, whatever the order they finished in.
    let names: Vec<&str> = servers.iter().map(|s| s.name()).collect();
    let want: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, want);
    // `on_ready` heard about every server exactly once.
    let mut heard = ready.lock().unwrap().clone();
    heard.sort();
    let mut want_heard: Vec<String> = want.iter().map(|n| (*n).to_owned()).collect();
    want_heard.sort();
    assert_eq!(heard, want_heard);

    for row in &rows {
        let server = servers.get(&row.entry.name).unwrap();
        assert_eq!(server.status(), Status::Error, "{}", row.entry.name);
        assert_eq!(server.status().as_str(), "error");
        assert!(server.tools().is_empty());
        assert!(server.server_info().is_none());
        let error = server.error().unwrap();
        assert_eq!(kind(error), row.kind, "{}: {error}", row.entry.name);
        let message = error.to_string();
        if row.prefix {
            assert!(
                message.starts_with(row.message),
                "{}: {message}",
                row.entry.name
            );
        } else {
            assert_eq!(message, row.message, "{}", row.entry.name);
        }
        let err = server
            .call_tool("anything", JsonObject::new(), CALL)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NotConnected { .. }), "{err:?}");
    }
    for good in ["good", "good_too"] {
        let server = servers.get(good).unwrap();
        assert_eq!(server.status(), Status::Connected, "{:?}", server.error());
        let result = server
            .call_tool("echo", args(json!({ "text": good })), CALL)
            .await
            .unwrap();
        assert_eq!(text(&result), good);
    }
    assert!(servers.get("no_such_server").is_none());
    servers.shutdown().await;
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.display());
    let started = Instant::now();
    let servers = start(
        &[stdio("hang", "sh", &["-c", &script], &[])],
        &options(Duration::from_millis(300)),
    )
    .await;
    let took = started.elapsed();
    let server = servers.get("hang").unwrap();
    assert_eq!(server.status(), Status::Error);
    let error = server.error().unwrap();
    assert!(
        matches!(error, StartError::Timeout { after, .. } if *after == Duration::from_millis(300)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "did not finish starting within 300 ms; is the server stuck, or does it need a longer start timeout?"
    );
    assert!(server.elapsed() >= Duration::from_millis(300));
    // `sleep` dies on SIGTERM, so the kill grace (3 s) is not waited out.
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The child is stopped at once, not at shutdown.
    let pid = read_pid(&pid_file);
    assert!(
        gone(pid).await,
        "pid {pid} still running after a start timeout"
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn on_ready_is_called_once_per_server_as_each_finishes() {
    let entries = [
        echo("a", &[]),
        stdio("missing", "core-agent-no-such-command", &[], &[]),
        echo("b", &[]),
        stdio("hang", "sh", &["-c", "exec sleep 30"], &[]),
    ];
    let ready: Mutex<Vec<(String, Status)>> = Mutex::new(Vec::new());
    let servers = Servers::start(
        &entries,
        &env(&[]),
        &options(Duration::from_secs(2)),
        &|s| {
            ready
                .lock()
                .unwrap()
                .push((s.name().to_owned(), s.status()))
        },
    )
    .await;
    let ready = ready.into_inner().unwrap();
    assert_eq!(ready.len(), entries.len(), "{ready:?}");
    // The missing command fails before anything else finishes; the hung one
    // is heard of last, when its start timeout passes.
    assert_eq!(ready[0], ("missing".to_owned(), Status::Error));
    assert_eq!(ready[3], ("hang".to_owned(), Status::Error));
    let mut middle = vec![ready[1].clone(), ready[2].clone()];
    middle.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        middle,
        [
            ("a".to_owned(), Status::Connected),
            ("b".to_owned(), Status::Connected)
        ]
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn no_servers_start_as_an_empty_list() {
    let called = Mutex::new(0);
    let servers = Servers::start(&[], &env(&[]), &StartOptions::default(), &|_| {
        *called.lock().unwrap() += 1
    })
    .await;
    assert_eq!(servers.iter().count(), 0);
    assert_eq!(*called.lock().unwrap(), 0);
    servers.shutdown().await;
}
