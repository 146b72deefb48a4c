//! Integration tests of `core-agent-mcp-transport` against real child
//! processes: the `echo_server` example of this crate, `sh`, and commands
//! that do not exist. Nothing here needs the network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{ReservedPort, alive};
use core_agent_mcp_config::{
    AuthSpec, Dialect, HttpSpec, OAuthSpec, Scope, ServerEntry, ServerSpec, StdioSpec, Template,
    Transport,
};
use core_agent_mcp_transport::model::{
    CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject,
};
use core_agent_mcp_transport::{
    AcceptDefaults, BoxFuture, Decline, Elicitor, Error, RestartPolicy, Servers, StartError,
    StartOptions, Status, Supervisor,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------- helpers

/// `<target>/debug/examples/echo_server`, built by `cargo test` with this
/// test binary (`<target>/debug/deps/all-…`).
fn echo_server() -> String {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    let path = debug.join("examples").join("echo_server");
    assert!(path.exists(), "{} is not built", path.display());
    path.to_string_lossy().into_owned()
}

fn entry(name: &str, transport: Transport) -> ServerEntry {
    ServerEntry {
        name: name.to_owned(),
        scope: Scope::Project,
        source: PathBuf::from(".agents/mcp.json"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(transport),
    }
}

fn templates(pairs: &[(&str, &str)]) -> BTreeMap<String, Template> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Template::parse(v).unwrap()))
        .collect()
}

fn stdio(name: &str, command: &str, args: &[&str], env: &[(&str, &str)]) -> ServerEntry {
    entry(
        name,
        Transport::Stdio(StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: templates(env),
        }),
    )
}

fn echo(name: &str, env: &[(&str, &str)]) -> ServerEntry {
    stdio(name, &echo_server(), &[], env)
}

fn http(name: &str, url: &str, headers: &[(&str, &str)], auth: Option<AuthSpec>) -> ServerEntry {
    entry(
        name,
        Transport::Http(HttpSpec {
            url: url.to_owned(),
            headers: templates(headers),
            auth,
        }),
    )
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn options(timeout: Duration) -> StartOptions {
    StartOptions::default().with_timeout(timeout)
}

async fn start(entries: &[ServerEntry], options: &StartOptions) -> Servers {
    Servers::start(entries, &env(&[]), options, &|_| {}).await
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// The text of a result's single text block.
fn text(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    assert_eq!(
        value["content"].as_array().map(Vec::len),
        Some(1),
        "{value}"
    );
    value["content"][0]["text"].as_str().unwrap().to_owned()
}

const CALL: Duration = Duration::from_secs(10);

/// Waits briefly for `pid` to go: a SIGKILL is delivered asynchronously, so
/// the process may still be listed for a moment after `kill` returned.
async fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Asserts that `pids` run, shuts `servers` down, and asserts that it took
/// no kill grace (every server exits on stdin EOF) and left none of them.
async fn shutdown_stops(servers: &Servers, pids: &[i32]) {
    for pid in pids {
        assert!(alive(*pid), "pid {pid} should run before shutdown");
    }
    let started = Instant::now();
    servers.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(3));
    for pid in pids {
        assert!(
            gone(*pid).await,
            "pid {pid} is still running after shutdown"
        );
    }
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

fn kind(e: &StartError) -> &'static str {
    match e {
        StartError::NotFound { .. } => "NotFound",
        StartError::Spawn { .. } => "Spawn",
        StartError::Exited { .. } => "Exited",
        StartError::Timeout { .. } => "Timeout",
        StartError::Initialize { .. } => "Initialize",
        StartError::ListTools { .. } => "ListTools",
        StartError::InvalidHeader { .. } => "InvalidHeader",
        StartError::Unsupported { .. } => "Unsupported",
        StartError::Auth(_) => "Auth",
        _ => "unknown",
    }
}

// ---------------------------------------------------------------- start and call

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

// ---------------------------------------------------------------- failures at start

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

// ---------------------------------------------------------------- shutdown

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

// ---------------------------------------------------------------- elicitation

/// Remembers which server asked, and what, then declines.
/// The message of a form or URL request.
fn message(request: &ElicitRequestParams) -> String {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
        _ => String::new(),
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String)>>);

impl Elicitor for Recorder {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        self.0
            .lock()
            .unwrap()
            .push((server.to_owned(), message(&request)));
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}

#[tokio::test]
async fn a_servers_elicitation_is_answered_by_the_elicitor() {
    let recorder = Arc::new(Recorder::default());
    let table: [(Arc<dyn Elicitor>, Value); 3] = [
        (
            Arc::new(AcceptDefaults),
            json!({"action": "accept", "content": {"age": 30, "name": "John"}}),
        ),
        (Arc::new(Decline), json!({"action": "decline"})),
        (recorder.clone(), json!({"action": "decline"})),
    ];
    for (elicitor, want) in table {
        let options = StartOptions::default().with_elicitor(elicitor);
        let servers = start(&[echo("asker", &[])], &options).await;
        let server = servers.get("asker").unwrap();
        let result = server.call_tool("ask", JsonObject::new(), CALL).await;
        servers.shutdown().await;
        let reply: Value = serde_json::from_str(&text(&result.unwrap())).unwrap();
        assert_eq!(reply, want);
    }
    assert_eq!(
        *recorder.0.lock().unwrap(),
        [("asker".to_owned(), "Who are you?".to_owned())]
    );
}

fn form(message: &str, properties: Value) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties},
    }))
    .unwrap()
}

fn url(message: &str, url: &str) -> ElicitRequestParams {
    serde_json::from_value(json!({
        "mode": "url",
        "message": message,
        "url": url,
        "elicitationId": "e-1",
    }))
    .unwrap()
}

#[tokio::test]
async fn the_stock_elicitors_answer_as_documented() {
    let with_defaults = form(
        "Sign up",
        json!({
            "name": {"type": "string", "default": "John"},
            "age": {"type": "integer", "default": 30},
            "subscribe": {"type": "boolean", "default": false},
            "email": {"type": "string"}
        }),
    );
    let without_defaults = form("Email?", json!({"email": {"type": "string"}}));
    let link = url("Log in", "https://example.com/login");
    let table: [(&str, &dyn Elicitor, &ElicitRequestParams, Value); 6] = [
        (
            "accept form",
            &AcceptDefaults,
            &with_defaults,
            json!({"action": "accept", "content": {"age": 30, "name": "John", "subscribe": false}}),
        ),
        (
            "accept form without defaults",
            &AcceptDefaults,
            &without_defaults,
            json!({"action": "accept", "content": {}}),
        ),
        (
            "accept url",
            &AcceptDefaults,
            &link,
            json!({"action": "decline"}),
        ),
        (
            "decline form",
            &Decline,
            &with_defaults,
            json!({"action": "decline"}),
        ),
        (
            "decline form without defaults",
            &Decline,
            &without_defaults,
            json!({"action": "decline"}),
        ),
        ("decline url", &Decline, &link, json!({"action": "decline"})),
    ];
    for (case, elicitor, request, want) in table {
        let got = elicitor.elicit("srv", request.clone()).await;
        assert_eq!(serde_json::to_value(&got).unwrap(), want, "{case}");
    }
}

#[test]
fn start_options_default_as_documented() {
    let options = StartOptions::default();
    assert_eq!(options.timeout, Duration::from_secs(30));
    assert_eq!(options.kill_grace, Duration::from_secs(3));
    assert_eq!(options.client_name, "core-agent");
    assert_eq!(options.client_version, env!("CARGO_PKG_VERSION"));
}

// ---------------------------------------------------------------- crashes and restarts

fn kill9(pid: i32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Restarts after 10 ms, 20 ms, 40 ms …
fn quick_restarts() -> StartOptions {
    StartOptions::default().with_restart(Some(RestartPolicy {
        first_delay: Duration::from_millis(10),
        ..RestartPolicy::default()
    }))
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

// ---------------------------------------------------------------- the supervisor

/// `<target>/debug/examples/supervisor`: a supervisor binary written with
/// the library, as a library user would.
fn supervisor() -> Supervisor {
    let echo = PathBuf::from(echo_server());
    let path = echo.with_file_name("supervisor");
    assert!(path.exists(), "{} is not built", path.display());
    Supervisor {
        program: path,
        args: Vec::new(),
    }
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
