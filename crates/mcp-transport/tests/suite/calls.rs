//! Starting a server and calling its tools: results, errors, env placeholders,
//! timeouts, and the defaults of `StartOptions`.

use super::*;

#[tokio::test]
async fn a_stdio_server_lists_its_tools_and_answers_a_call() {
    let servers = start(&[echo("echo", &[])], &StartOptions::default()).await;
    let server = servers.get("echo").unwrap();
    assert_eq!(server.status(), Status::Connected);
    assert_eq!(server.status().as_str(), "connected");
    assert!(server.error().is_none());
    assert_eq!(
        (server.name(), server.scope(), server.transport()),
        ("echo", Scope::Project, "stdio")
    );
    assert_eq!(server.server_info().unwrap().name, "echo-server");

    let tools = server.tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ask", "echo", "env", "sleep"]);
    let read_only = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.annotations.as_ref())
            .and_then(|a| a.read_only_hint)
    };
    assert_eq!(read_only("echo"), Some(true));
    assert_eq!(read_only("sleep"), None);
    let echo_schema = &tools
        .iter()
        .find(|t| t.name == "echo")
        .unwrap()
        .input_schema;
    assert_eq!(echo_schema["required"], json!(["text"]));

    let result = server
        .call_tool("echo", args(json!({"text": "hello, world"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "hello, world");
    assert_ne!(result.is_error, Some(true));
    servers.shutdown().await;
}

#[tokio::test]
async fn calls_answer_or_fail_with_the_server_and_tool_named() {
    enum Want {
        Text(&'static str),
        /// A result with `is_error: Some(true)` whose text starts with this.
        ToolError(&'static str),
        /// `Error::Call` whose message starts with this.
        Call(&'static str),
    }
    let table = [
        ("echo", json!({"text": "ünïcödé"}), Want::Text("ünïcödé")),
        ("echo", json!({"text": ""}), Want::Text("")),
        ("sleep", json!({"ms": 5}), Want::Text("slept 5 ms")),
        ("env", json!({"name": "ECHO_TEST_UNSET"}), Want::Text("")),
        (
            "no_such_tool",
            json!({}),
            Want::Call("`no_such_tool` on server `echo` failed: "),
        ),
        // rmcp reports arguments that do not fit the schema as a tool error.
        (
            "echo",
            json!({}),
            Want::ToolError("failed to deserialize parameters: missing field `text`"),
        ),
        (
            "sleep",
            json!({"ms": "soon"}),
            Want::ToolError("failed to deserialize parameters: "),
        ),
    ];
    let servers = start(&[echo("echo", &[])], &StartOptions::default()).await;
    let server = servers.get("echo").unwrap();
    for (tool, arguments, want) in table {
        let got = server.call_tool(tool, args(arguments.clone()), CALL).await;
        match (want, got) {
            (Want::Text(want), Ok(result)) => {
                assert_ne!(result.is_error, Some(true), "{tool} {arguments}");
                assert_eq!(text(&result), want, "{tool} {arguments}")
            }
            (Want::ToolError(prefix), Ok(result)) => {
                assert_eq!(result.is_error, Some(true), "{tool} {arguments}");
                assert!(
                    text(&result).starts_with(prefix),
                    "{tool} {arguments}: {}",
                    text(&result)
                )
            }
            (Want::Call(prefix), Err(e @ Error::Call { .. })) => {
                assert!(e.to_string().starts_with(prefix), "{tool} {arguments}: {e}")
            }
            (_, got) => panic!("{tool} {arguments}: unexpected {got:?}"),
        }
    }
    // A failed call leaves the connection usable.
    let result = server
        .call_tool("echo", args(json!({"text": "still here"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "still here");
    servers.shutdown().await;
}

#[tokio::test]
async fn env_placeholders_are_expanded_from_the_given_env_and_reach_the_child() {
    let entry = echo(
        "echo",
        &[
            ("GREETING", "hello ${env:WHO}!"),
            ("TWO", "${env:WHO}/${env:WHO}"),
            ("UNSET", "[${env:ECHO_TEST_NOT_IN_ENV}]"),
            ("NESTED", "${env:INDIRECT}"),
            ("PLAIN", "no placeholders"),
        ],
    );
    let given = env(&[
        ("WHO", "world"),
        ("INDIRECT", "${env:WHO}"),
        ("ONLY_IN_GIVEN_ENV", "x"),
    ]);
    let servers = Servers::start(&[entry], &given, &StartOptions::default(), &|_| {}).await;
    let server = servers.get("echo").unwrap();
    assert_eq!(server.status(), Status::Connected, "{:?}", server.error());
    let table = [
        ("GREETING", "hello world!"),
        ("TWO", "world/world"),
        // An unset variable expands to the empty string.
        ("UNSET", "[]"),
        // What a variable holds is not expanded again.
        ("NESTED", "${env:WHO}"),
        ("PLAIN", "no placeholders"),
        // The given env only feeds placeholders; it is not the child's environment.
        ("ONLY_IN_GIVEN_ENV", ""),
    ];
    for (name, want) in table {
        let result = server
            .call_tool("env", args(json!({ "name": name })), CALL)
            .await
            .unwrap();
        assert_eq!(text(&result), want, "{name}");
    }
    // The configured variables are layered on top of this process's environment.
    let path = server
        .call_tool("env", args(json!({"name": "PATH"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&path), std::env::var("PATH").unwrap_or_default());
    servers.shutdown().await;
}

#[tokio::test]
async fn a_call_that_takes_too_long_times_out_and_the_server_keeps_working() {
    let servers = start(&[echo("echo", &[])], &StartOptions::default()).await;
    let server = servers.get("echo").unwrap();
    let started = Instant::now();
    let err = server
        .call_tool(
            "sleep",
            args(json!({"ms": 30_000})),
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { server, tool, after }
            if server == "echo" && tool == "sleep" && *after == Duration::from_millis(200)),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`sleep` on server `echo` did not answer within 200 ms; the request was cancelled"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let result = server
        .call_tool("echo", args(json!({"text": "after"})), CALL)
        .await
        .unwrap();
    assert_eq!(text(&result), "after");
    servers.shutdown().await;
}

#[tokio::test]
async fn the_wait_for_a_call_slot_counts_against_the_calls_timeout() {
    let mut entry = echo("echo", &[]);
    entry.spec.limits = entry.spec.limits.with_max_concurrent_calls(1);
    let servers = start(&[entry], &StartOptions::default()).await;
    let server = servers.get("echo").unwrap();
    // One call holds the only slot far longer than the second may wait.
    let busy = server.call_tool("sleep", args(json!({"ms": 30_000})), CALL);
    let queued = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        server
            .call_tool(
                "echo",
                args(json!({"text": "x"})),
                Duration::from_millis(300),
            )
            .await
    };
    let err = tokio::select! {
        _ = busy => panic!("the busy call ended first"),
        err = queued => err.unwrap_err(),
    };
    // Before: the second call waited for the slot (30 s) and then had its
    // whole timeout again; now it fails within its own timeout, and says why.
    assert!(
        matches!(&err, Error::Busy { server, tool, after }
            if server == "echo" && tool == "echo" && *after == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("timed out after 300 ms waiting for a free call slot"),
        "{err}"
    );
    servers.shutdown().await;
}

#[test]
fn start_options_default_as_documented() {
    let options = StartOptions::default();
    assert_eq!(options.timeout, Duration::from_secs(30));
    assert_eq!(options.kill_grace, Duration::from_secs(3));
    assert_eq!(options.client_name, "core-agent");
    assert_eq!(options.client_version, env!("CARGO_PKG_VERSION"));
}
