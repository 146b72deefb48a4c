//! Integration tests of the `Host` library API against the demo server, run
//! as `core-agent demo-server` (the binary of this package).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use core_agent_host::{
    AuthStatus, DigestOptions, Error, Host, HostOptions, ServerReport, SessionOptions,
};
use core_agent_mcp_config::{
    Config, Dialect, Scope, ServerEntry, ServerSpec, StdioSpec, Transport, TrustLevel,
};
use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use expect_test::expect;
use serde_json::{Value, json};

fn stdio(name: &str, command: &str, args: &[&str]) -> ServerEntry {
    ServerEntry {
        name: name.to_owned(),
        scope: Scope::Project,
        source: PathBuf::from(".agents/mcp.json"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(Transport::Stdio(StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
        })),
    }
}

/// `<target>/debug/examples/demo_server`, built by `cargo test` with this
/// crate's `demo` feature.
fn demo_server() -> String {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let path = debug.join("examples").join("demo_server");
    assert!(
        path.exists(),
        "{} is missing; run `cargo test -p core-agent-host`",
        path.display()
    );
    path.display().to_string()
}

fn demo(name: &str) -> ServerEntry {
    stdio(name, &demo_server(), &[])
}

fn config(servers: Vec<ServerEntry>) -> Config {
    Config {
        servers,
        ..Config::default()
    }
}

/// A shared host, and the session options its calls are made with.
struct TestHost {
    host: std::sync::Arc<Host>,
    session: SessionOptions,
}

impl std::ops::Deref for TestHost {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

impl TestHost {
    /// One call, in a session of `level`.
    async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> core_agent_host::Result<CallToolResult> {
        let options = SessionOptions {
            trust_level: level,
            ..self.session.clone()
        };
        self.host.session(options).call(name, arguments).await
    }
}

/// A host whose sessions approve every ask: these tests are about the
/// Host's dispatch, not its permissions.
async fn start(servers: Vec<ServerEntry>, options: HostOptions) -> TestHost {
    start_with(servers, options, approving()).await
}

async fn start_with(
    servers: Vec<ServerEntry>,
    options: HostOptions,
    session: SessionOptions,
) -> TestHost {
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Host::start(&config(servers), &env, options, &|_, _| {}).await;
    TestHost {
        host: std::sync::Arc::new(host),
        session,
    }
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

#[tokio::test]
async fn start_reports_every_server_in_config_order() {
    let ready = Mutex::new(Vec::new());
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Host::start(
        &config(vec![
            demo("demo"),
            stdio("missing", "/nonexistent/mcp-server", &[]),
        ]),
        &env,
        HostOptions::default(),
        &|s, summary| {
            let tools = summary.map(ToString::to_string);
            ready
                .lock()
                .unwrap()
                .push(format!("{} {tools:?}", s.name()))
        },
    )
    .await;
    let mut heard = ready.into_inner().unwrap();
    heard.sort();
    assert_eq!(heard, ["demo Some(\"4 tools\")", "missing None"]);
    let names: Vec<&str> = host.servers().map(|s| s.name()).collect();
    assert_eq!(names, ["demo", "missing"]);

    let reports = host.server_reports(TrustLevel::Creator);
    assert_eq!(
        reports,
        [
            ServerReport {
                name: "demo".into(),
                transport: core_agent_host::TransportKind::Stdio,
                scope: core_agent_mcp_config::Scope::Project,
                status: core_agent_host::ServerStatus::Connected,
                tools: 4,
                listed: 4,
                left_out: Default::default(),
                error: None,
                restricted: 0,
                restricted_tools: vec![],
                warnings: vec![],
                auth: AuthStatus {
                    kind: "none".into(),
                    detail: None,
                },
                source: ".agents/mcp.json".into(),
            },
            ServerReport {
                name: "missing".into(),
                transport: core_agent_host::TransportKind::Stdio,
                scope: core_agent_mcp_config::Scope::Project,
                status: core_agent_host::ServerStatus::Error,
                tools: 0,
                listed: 0,
                left_out: Default::default(),
                error: Some("command not found: `/nonexistent/mcp-server`; install it or fix `command` (PATH is searched when it has no `/`)".into()),
                restricted: 0,
                restricted_tools: vec![],
                warnings: vec![],
                auth: AuthStatus {
                    kind: "none".into(),
                    detail: None,
                },
                source: ".agents/mcp.json".into(),
            },
        ]
    );
    // The JSON shape `core-agent mcp list --json` prints.
    expect![[r#"
        [
          {
            "name": "demo",
            "transport": "stdio",
            "scope": "project",
            "status": "connected",
            "tools": 4,
            "listed": 4,
            "left_out": {},
            "error": null,
            "restricted": 0,
            "restricted_tools": [],
            "warnings": [],
            "auth": {
              "kind": "none",
              "detail": null
            },
            "source": ".agents/mcp.json"
          },
          {
            "name": "missing",
            "transport": "stdio",
            "scope": "project",
            "status": "error",
            "tools": 0,
            "listed": 0,
            "left_out": {},
            "error": "command not found: `/nonexistent/mcp-server`; install it or fix `command` (PATH is searched when it has no `/`)",
            "restricted": 0,
            "restricted_tools": [],
            "warnings": [],
            "auth": {
              "kind": "none",
              "detail": null
            },
            "source": ".agents/mcp.json"
          }
        ]"#]]
    .assert_eq(&serde_json::to_string_pretty(&reports).unwrap());
    host.shutdown().await;
}

#[tokio::test]
async fn the_catalog_namespaces_every_connected_servers_tools() {
    let host = start(
        vec![
            demo("demo"),
            demo("inv.demo"),
            stdio("missing", "/nonexistent/mcp-server", &[]),
        ],
        HostOptions::default(),
    )
    .await;
    let catalog = host.catalog();
    assert!(catalog.warnings().is_empty());
    let routes: Vec<String> = catalog
        .entries()
        .iter()
        .map(|e| format!("{} -> {} / {}", e.name, e.server, e.tool))
        .collect();
    expect![[r#"
        demo_add_note -> demo / add_note
        demo_divide -> demo / divide
        demo_list_inventory -> demo / list_inventory
        demo_lookup_item -> demo / lookup_item
        inv_demo_add_note -> inv.demo / add_note
        inv_demo_divide -> inv.demo / divide
        inv_demo_list_inventory -> inv.demo / list_inventory
        inv_demo_lookup_item -> inv.demo / lookup_item"#]]
    .assert_eq(&routes.join("\n"));

    let reports = host.tool_reports(TrustLevel::Creator);
    let names: Vec<&str> = reports.iter().map(|r| r.name.as_str()).collect();
    let catalog_names: Vec<&str> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
    // The built-ins come first, then the catalog.
    assert_eq!(names[..2], ["record_plan", "wait_and_verify"]);
    assert_eq!(names[2..], catalog_names);
    let divide = reports.iter().find(|r| r.name == "demo_divide").unwrap();
    assert_eq!(
        (
            divide.server.as_deref().unwrap_or_default(),
            divide.tool.as_str()
        ),
        ("demo", "divide")
    );
    assert_eq!(divide.description, "Divide a by b. Fails when b is zero.");
    assert_eq!(divide.input_schema["type"], "object");
    assert_eq!(
        divide.input_schema["properties"]["b"]["description"],
        "The divisor; must not be zero."
    );
    let keys: Vec<String> = serde_json::to_value(divide)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "server",
            "tool",
            "description",
            "input_schema",
            "read_only",
            "trust_levels",
            "why_restricted"
        ]
    );

    // Calls go to the server that published the name: each process counts its own notes.
    for (tool, want) in [
        ("demo_add_note", "saved note #1: a"),
        ("demo_add_note", "saved note #2: a"),
        ("inv_demo_add_note", "saved note #1: a"),
    ] {
        let result = host
            .call(tool, args(json!({"text": "a"})), TrustLevel::Creator)
            .await
            .unwrap();
        assert_eq!(text(&result), want, "{tool}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn calls_return_the_tools_results() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table = [
        ("demo_divide", json!({"a": 1, "b": 4}), "0.25"),
        ("demo_divide", json!({"a": -9, "b": 3}), "-3"),
        (
            "demo_add_note",
            json!({"text": "buy milk"}),
            "saved note #1: buy milk",
        ),
    ];
    for (tool, arguments, want) in table {
        let result = host
            .call(tool, args(arguments.clone()), TrustLevel::Creator)
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{tool} {arguments}");
        assert_eq!(text(&result), want, "{tool} {arguments}");
    }

    let result = host
        .call(
            "demo_lookup_item",
            args(json!({"sku": "SKU-0042"})),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    let item: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(
        (item["id"].as_u64(), item["sku"].as_str()),
        (Some(42), Some("SKU-0042"))
    );

    let result = host
        .call(
            "demo_list_inventory",
            JsonObject::new(),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    let listing = text(&result);
    assert!(listing.len() > 8000, "{} bytes", listing.len());
    let listing: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(listing["total"], 200);
    assert_eq!(listing["items"].as_array().map(Vec::len), Some(200));
    host.shutdown().await;
}

#[tokio::test]
async fn a_tool_that_reports_failure_is_ok_with_is_error() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table = [
        (
            "demo_divide",
            json!({"a": 1, "b": 0}),
            "cannot divide by zero; pass a non-zero `b`",
        ),
        (
            "demo_lookup_item",
            json!({"sku": "SKU-9999"}),
            "no item with SKU `SKU-9999`; SKUs run from SKU-0001 to SKU-0200",
        ),
    ];
    for (tool, arguments, want) in table {
        let result = host
            .call(tool, args(arguments), TrustLevel::Creator)
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert_eq!(text(&result), want, "{tool}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn an_unknown_name_suggests_close_ones() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table: [(&str, &[&str], &str); 6] = [
        (
            "demo_divid",
            &["demo_divide"],
            "no tool named `demo_divid`; did you mean `demo_divide`?",
        ),
        (
            "add_note",
            &["demo_add_note"],
            "no tool named `add_note`; did you mean `demo_add_note`?",
        ),
        (
            "add-note",
            &["demo_add_note"],
            "no tool named `add-note`; did you mean `demo_add_note`?",
        ),
        (
            "divide",
            &["demo_divide"],
            "no tool named `divide`; did you mean `demo_divide`?",
        ),
        (
            "frobnicate",
            &[],
            "no tool named `frobnicate`; list the tools with tools/list",
        ),
        ("", &[], "no tool named ``; list the tools with tools/list"),
    ];
    for (name, want, message) in table {
        let err = host
            .call(name, JsonObject::new(), TrustLevel::Creator)
            .await
            .unwrap_err();
        match &err {
            Error::UnknownTool {
                name: got,
                suggestions,
            } => {
                assert_eq!(got, name);
                assert_eq!(suggestions, want, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(err.to_string(), message);
    }
    host.shutdown().await;
}

fn signal(pid: &str, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test]
async fn a_call_to_a_stuck_server_times_out_as_a_call_error() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "echo $$ > '{}'; exec '{}'",
        pid_file.display(),
        demo_server()
    );
    let options = HostOptions {
        call_timeout: Some(Duration::from_millis(300)),
        ..HostOptions::default()
    };
    let host = start(vec![stdio("demo", "sh", &["-c", &script])], options).await;
    assert_eq!(host.catalog().entries().len(), 4);
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();

    // A stopped server reads nothing and answers nothing. Wait until the
    // kernel reports it stopped before calling.
    signal(&pid, "-STOP");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .trim_start()
            .chars()
            .next();
        if state == Some('T') || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    signal(&pid, "-CONT");
    assert!(
        matches!(
            &err,
            Error::Call(core_agent_mcp_transport::Error::Timeout { server, tool, .. })
                if server == "demo" && tool == "divide"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`divide` on server `demo` did not answer within 300 ms; the request was cancelled"
    );
    // Once it runs again, so do calls.
    let result = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    assert_eq!(text(&result), "0.5");
    host.shutdown().await;
}

#[tokio::test]
async fn after_shutdown_nothing_is_published() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    assert_eq!(host.catalog().entries().len(), 4);
    // Built once: the same catalog until the tools change.
    assert!(std::sync::Arc::ptr_eq(&host.catalog(), &host.catalog()));
    let mut changes = host.subscribe();
    changes.mark_unchanged();
    host.shutdown().await;
    assert!(
        changes.has_changed().unwrap(),
        "subscribers hear of the change"
    );
    assert!(host.catalog().entries().is_empty());
    let reports = host.server_reports(TrustLevel::Creator);
    assert_eq!(reports.len(), 1);
    assert_ne!(reports[0].status, core_agent_host::ServerStatus::Connected);
    assert_eq!(reports[0].tools, 0);
    let err = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownTool { suggestions, .. } if suggestions.is_empty()),
        "{err:?}"
    );
    // Shutting down twice is harmless.
    host.shutdown().await;
}

#[test]
fn host_options_default_as_documented() {
    let options = HostOptions::default();
    assert_eq!(
        options.call_timeout, None,
        "each server's call_timeout_ms applies"
    );
    assert_eq!(options.start.timeout, Duration::from_secs(30));
}

/// Host options whose gate approves every ask: these tests are about the
/// Host's dispatch, not its permissions.
fn approving() -> SessionOptions {
    SessionOptions {
        prompter: std::sync::Arc::new(core_agent_permissions::ApproveAll),
        ..SessionOptions::default()
    }
}

/// Counts the asks it answers, approving each.
#[derive(Default)]
struct CountingPrompter(std::sync::atomic::AtomicUsize);

impl core_agent_permissions::Prompter for CountingPrompter {
    fn ask<'a>(
        &'a self,
        _tool: &'a str,
        _detail: &'a str,
    ) -> core_agent_permissions::AskFuture<'a> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(std::future::ready(core_agent_permissions::Answer::Yes))
    }
}

#[tokio::test]
async fn wait_and_verify_asks_once_for_every_attempt() {
    let prompter = std::sync::Arc::new(CountingPrompter::default());
    let session = SessionOptions {
        prompter: prompter.clone(),
        ..SessionOptions::default()
    };
    let host = start_with(vec![demo("demo")], HostOptions::default(), session).await;
    let outcome = host
        .call(
            "wait_and_verify",
            args(json!({
                "tool": "demo_divide",
                "arguments": {"a": 1, "b": 4},
                "until": {"contains": "never"},
                "max_attempts": 3,
                "interval_ms": 0
            })),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    assert_eq!(outcome.is_error, Some(true));
    assert!(
        text(&outcome).contains("\"attempts\":3"),
        "{}",
        text(&outcome)
    );
    assert_eq!(
        prompter.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one ask for three attempts"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn retrieve_raw_is_gated_like_a_read_only_tool() {
    let prompter = std::sync::Arc::new(CountingPrompter::default());
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::new());
    let options = HostOptions {
        digest: Some(DigestOptions {
            settings: core_agent_digest::Settings::default(),
            store,
            llm: None,
        }),
        ..HostOptions::default()
    };
    let session = SessionOptions {
        prompter: prompter.clone(),
        id: Some("s".into()),
        ..SessionOptions::default()
    };
    let host = start_with(vec![demo("demo")], options, session).await;
    let listed = host
        .call("demo_list_inventory", JsonObject::new(), TrustLevel::Public)
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    let asks = prompter.0.load(std::sync::atomic::Ordering::SeqCst);
    let raw = host
        .call(
            "retrieve_raw",
            args(json!({"call_id": envelope["call_id"], "pointer": "/total"})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_eq!(text(&raw), "200");
    assert_eq!(
        prompter.0.load(std::sync::atomic::Ordering::SeqCst),
        asks + 1,
        "retrieve_raw went through the gate, which asked"
    );
    host.shutdown().await;
}

/// A session's calls can run on any runtime thread (the gateway spawns them).
#[tokio::test]
async fn calls_are_send_and_sessions_share_one_host() {
    fn spawnable<T: Send>(_: &T) {}
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let a = host.host.session(approving());
    let b = host.host.session(SessionOptions {
        trust_level: TrustLevel::Public,
        ..approving()
    });
    {
        let call = a.call("demo_divide", args(json!({"a": 1, "b": 2})));
        spawnable(&call);
    }
    let (ra, rb) = tokio::join!(
        tokio::spawn(async move { a.call("demo_divide", args(json!({"a": 1, "b": 2}))).await }),
        tokio::spawn(async move { b.call("demo_divide", args(json!({"a": 3, "b": 4}))).await }),
    );
    assert_eq!(text(&ra.unwrap().unwrap()), "0.5");
    assert_eq!(text(&rb.unwrap().unwrap()), "0.75");
    host.shutdown().await;
}

/// A payload is readable from the session that produced it and from the
/// other sessions of its owner (a gateway token, a later run with the same
/// `--session-db`), never from another owner's or an anonymous session.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn retrieve_raw_reads_the_owners_other_sessions_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let digest = |store: std::sync::Arc<dyn core_agent_digest::Store>| {
        Some(DigestOptions {
            settings: core_agent_digest::Settings::default(),
            store,
            llm: None,
        })
    };
    let owned = |owner: Option<&str>| SessionOptions {
        owner: owner.map(str::to_owned),
        ..approving()
    };
    let call_id = {
        let store = std::sync::Arc::new(core_agent_digest::SqliteStore::open(&db).unwrap());
        let options = HostOptions {
            digest: digest(store),
            ..HostOptions::default()
        };
        let host = start(vec![demo("demo")], options).await;
        let first = host.host.session(owned(Some("bot")));
        let listed = first
            .call("demo_list_inventory", JsonObject::new())
            .await
            .unwrap();
        let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
        host.shutdown().await;
        envelope["call_id"].as_str().unwrap().to_owned()
    };
    // A new run on the same database: the owner's new session reads it.
    let store = std::sync::Arc::new(core_agent_digest::SqliteStore::open(&db).unwrap());
    let options = HostOptions {
        digest: digest(store),
        ..HostOptions::default()
    };
    let host = start(vec![demo("demo")], options).await;
    let pointer = args(json!({"call_id": call_id, "pointer": "/total"}));
    let again = host.host.session(owned(Some("bot")));
    let raw = again.call("retrieve_raw", pointer.clone()).await.unwrap();
    assert_eq!(text(&raw), "200");
    for other in [owned(Some("me")), owned(None)] {
        let err = host
            .host
            .session(other)
            .call("retrieve_raw", pointer.clone())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no raw payload"), "{err}");
    }
    host.shutdown().await;
}

/// Host options that digest with the default settings into `store`.
fn digesting_into(store: std::sync::Arc<core_agent_digest::MemoryStore>) -> HostOptions {
    HostOptions {
        digest: Some(DigestOptions {
            settings: core_agent_digest::Settings::default(),
            store,
            llm: None,
        }),
        ..HostOptions::default()
    }
}

/// A session that stored nothing leaves no owner entry in an in-memory
/// store once dropped (sessions that come and go do not grow it); one whose
/// call was digested keeps its owner, and its owner's next session reads it.
#[tokio::test]
async fn a_dropped_session_that_stored_nothing_leaves_no_owner() {
    use core_agent_digest::Store;
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::new());
    let host = start(vec![demo("demo")], digesting_into(store.clone())).await;
    let owned = |id: &str| SessionOptions {
        owner: Some("bot".to_owned()),
        id: Some(id.to_owned()),
        ..approving()
    };
    let idle = host.host.session(owned("session-idle"));
    let small = idle
        .call("demo_divide", args(json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_eq!(text(&small), "0.5", "under the threshold: nothing stored");
    assert_eq!(store.owner("session-idle").unwrap().as_deref(), Some("bot"));
    drop(idle);
    assert_eq!(store.owner("session-idle").unwrap(), None);

    let busy = host.host.session(owned("session-busy"));
    let listed = busy
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    drop(busy);
    assert_eq!(store.owner("session-busy").unwrap().as_deref(), Some("bot"));
    assert_eq!(store.held().unwrap().1, 1, "only the busy session's owner");
    let later = host.host.session(owned("session-later"));
    let raw = later
        .call(
            "retrieve_raw",
            args(json!({"call_id": envelope["call_id"], "pointer": "/total"})),
        )
        .await
        .unwrap();
    assert_eq!(text(&raw), "200");
    drop(later);
    host.shutdown().await;
}

/// A payload the in-memory store dropped to stay under its budget: get
/// says so, with the figures, and what keeps every payload.
#[tokio::test]
async fn retrieve_raw_of_a_dropped_payload_says_it_was_dropped_to_bound_memory() {
    use core_agent_digest::Store;
    let budget = 1024 * 1024;
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::with_budget(budget));
    let host = start(vec![demo("demo")], digesting_into(store.clone())).await;
    let session = host.host.session(approving());
    let listed = session
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    let call_id = envelope["call_id"].as_str().unwrap().to_owned();
    // Another caller's big payload fills the budget: the older one goes.
    store
        .put(core_agent_digest::RawRecord {
            call_id: "call-big".to_owned(),
            session_id: "other".to_owned(),
            server: "demo".to_owned(),
            tool: "list_inventory".to_owned(),
            created_ms: 0,
            payload: "x".repeat(budget as usize - 100),
        })
        .unwrap();
    assert_eq!(store.get(&call_id).unwrap(), None);
    let err = session
        .call("retrieve_raw", args(json!({"call_id": call_id})))
        .await
        .unwrap_err()
        .to_string();
    for said in [
        "no raw payload is stored",
        "dropped its 1 oldest payloads",
        "budget of 1048576 bytes",
        "a session database keeps every payload",
    ] {
        assert!(err.contains(said), "{said}: {err}");
    }
    drop(session);
    host.shutdown().await;
}

/// The survey tools over `root`, with the default limits.
fn survey_over(root: &std::path::Path) -> Option<core_agent_host::SurveyOptions> {
    Some(core_agent_host::SurveyOptions::new(root))
}

/// Host options with the survey tools over `root` and the digest on (a
/// store in memory).
fn digested_survey_over(root: &std::path::Path) -> HostOptions {
    HostOptions {
        survey: survey_over(root),
        digest: Some(DigestOptions {
            settings: core_agent_digest::Settings::default(),
            store: std::sync::Arc::new(core_agent_digest::MemoryStore::new()),
            llm: None,
        }),
        ..HostOptions::default()
    }
}

const SURVEY_TOOLS: [&str; 4] = ["list_dir", "glob", "grep", "read_many_files"];

#[tokio::test]
async fn survey_tools_are_listed_and_grep_returns_json_records() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    serve();\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "# Demo\n").unwrap();
    let options = HostOptions {
        survey: survey_over(dir.path()),
        ..HostOptions::default()
    };
    let host = start(Vec::new(), options).await;
    let reports = host.tool_reports(TrustLevel::Public);
    for name in SURVEY_TOOLS {
        let report = reports.iter().find(|r| r.name == name).unwrap();
        assert!(report.read_only && report.server.is_none(), "{name}");
        assert_eq!(report.trust_levels.len(), 4, "{name} is open to all");
        let tool = core_agent_survey::Tool::from_name(name).unwrap();
        assert_eq!(report.description, tool.description());
        assert_eq!(report.input_schema, core_agent_survey::input_schema(tool));
    }

    let found = host
        .call(
            "grep",
            args(json!({"pattern": r"serve\("})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_ne!(found.is_error, Some(true), "{found:?}");
    let value: Value = serde_json::from_str(&text(&found)).unwrap();
    assert_eq!(
        value["matches"],
        json!([{"path": "src/main.rs", "line": 2, "text": "    serve();"}])
    );
    assert_eq!((&value["total"], &value["files"]), (&json!(1), &json!(1)));

    let listed = host
        .call("list_dir", args(json!({"path": "."})), TrustLevel::Public)
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&listed)).unwrap();
    assert_eq!(value["entries"][0]["path"], "src");

    let read = host
        .call(
            "read_many_files",
            args(json!({"paths": ["README.md"]})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&read)).unwrap();
    assert_eq!(value["files"][0]["text"], "# Demo\n");
    host.shutdown().await;
}

#[tokio::test]
async fn survey_refusals_are_tool_errors_naming_the_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let options = HostOptions {
        survey: survey_over(dir.path()),
        ..HostOptions::default()
    };
    let host = start(Vec::new(), options).await;
    let root = dir.path().canonicalize().unwrap();
    let escape = host
        .call(
            "read_many_files",
            args(json!({"paths": ["../secret"]})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_eq!(escape.is_error, Some(true));
    let message = text(&escape);
    assert!(message.contains("outside the root"), "{message}");
    assert!(message.contains(&root.display().to_string()), "{message}");

    for (tool, arguments, says) in [
        ("grep", json!({"pattern": "("}), "bad regex"),
        ("glob", json!({"pattern": "[z-a]"}), "bad glob"),
        (
            "list_dir",
            json!({"depth": "deep"}),
            "bad arguments for `list_dir`",
        ),
        (
            "glob",
            json!({"pattern": "*", "extra": 1}),
            "bad arguments for `glob`",
        ),
    ] {
        let result = host
            .call(tool, args(arguments), TrustLevel::Public)
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert!(text(&result).contains(says), "{tool}: {}", text(&result));
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_large_grep_is_digested_and_retrieve_raw_returns_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..5000).map(|i| format!("needle {i}\n")).collect();
    std::fs::write(dir.path().join("hay.txt"), lines).unwrap();
    let host = start(Vec::new(), digested_survey_over(dir.path())).await;
    let session = host.host.session(approving());
    let found = session
        .call("grep", args(json!({"pattern": "needle"})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&found)).unwrap();
    let call_id = envelope["call_id"].as_str().expect("a digest envelope");
    assert!(envelope["raw_bytes"].as_u64().unwrap() > 8000, "{envelope}");
    let raw = session
        .call("retrieve_raw", args(json!({"call_id": call_id})))
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&raw)).unwrap();
    assert_eq!(value["total"], 5000);
    assert_eq!(value["matches"].as_array().unwrap().len(), 500);
    assert_eq!(value["matches"][0]["text"], "needle 0");
    let total = session
        .call(
            "retrieve_raw",
            args(json!({"call_id": call_id, "pointer": "/total"})),
        )
        .await
        .unwrap();
    assert_eq!(text(&total), "5000");
    host.shutdown().await;
}

#[tokio::test]
async fn with_the_survey_off_its_tools_are_unknown() {
    let host = start(Vec::new(), HostOptions::default()).await;
    let names: Vec<String> = host
        .tool_reports(TrustLevel::Creator)
        .into_iter()
        .map(|r| r.name)
        .collect();
    for name in SURVEY_TOOLS {
        assert!(!names.iter().any(|n| n == name), "{name} is listed");
        let err = host
            .call(name, args(json!({"pattern": "x"})), TrustLevel::Creator)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnknownTool { .. }), "{name}: {err}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_survey_call_past_the_call_timeout_is_cancelled_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        let lines: String = (0..200).map(|j| format!("line {j} of {i}\n")).collect();
        std::fs::write(dir.path().join(format!("f{i}.txt")), lines).unwrap();
    }
    let options = HostOptions {
        survey: survey_over(dir.path()),
        call_timeout: Some(Duration::ZERO),
        ..HostOptions::default()
    };
    let host = start(Vec::new(), options).await;
    let err = host
        .call(
            "grep",
            args(json!({"pattern": "line"})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimedOut { .. }), "{err}");
    assert!(
        err.to_string().contains("did not finish within 0 ms"),
        "{err}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_survey_root_that_cannot_be_used_turns_the_tools_off_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let options = HostOptions {
        survey: survey_over(&dir.path().join("missing")),
        ..HostOptions::default()
    };
    let host = start(Vec::new(), options).await;
    assert_eq!(host.survey_root(), None);
    let warnings = host.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("survey: the survey tools are off")),
        "{warnings:?}"
    );
    host.shutdown().await;
}

/// A digest of a grep with thousands of matches keeps what the model needs
/// to act on it: the first and the last records returned, each with its
/// path and line number whole, and the counts.
#[tokio::test]
async fn a_digested_grep_keeps_the_first_and_last_matches_with_paths_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..20 {
        let sub = dir.path().join(format!("pkg{f:02}/src"));
        std::fs::create_dir_all(&sub).unwrap();
        let lines: String = (1..=300)
            .map(|i| format!("let needle_{i} = compute({f}, {i}); // padding to make a line\n"))
            .collect();
        std::fs::write(sub.join("lib.rs"), lines).unwrap();
    }
    let host = start(Vec::new(), digested_survey_over(dir.path())).await;
    let session = host.host.session(approving());
    let found = session
        .call("grep", args(json!({"pattern": "needle_"})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&found)).unwrap();
    assert_eq!(envelope["method"], "structural_json", "{envelope}");
    let digest = envelope["digest"].as_str().unwrap();
    assert!(digest.len() < 8000, "{} bytes: {digest}", digest.len());
    let pruned: Value = serde_json::from_str(digest).unwrap_or_else(|e| panic!("{e}: {digest}"));
    // 6,000 matching lines; the first 500 records come back (20 files of
    // 300: pkg00 lines 1..=300, then pkg01 lines 1..=200).
    assert_eq!(pruned["total"], 6000, "{pruned:#}");
    assert_eq!(pruned["files"], 20, "{pruned:#}");
    let records = pruned["matches"].as_array().unwrap();
    let first = &records[0];
    assert_eq!(
        (&first["path"], &first["line"]),
        (&json!("pkg00/src/lib.rs"), &json!(1)),
        "{pruned:#}"
    );
    let last = records
        .iter()
        .rev()
        .find(|r| r.get("path").is_some())
        .unwrap();
    assert_eq!(
        (&last["path"], &last["line"]),
        (&json!("pkg01/src/lib.rs"), &json!(200)),
        "{pruned:#}"
    );
    host.shutdown().await;
}

/// Dropping a survey call's future stops its walk: with one blocking
/// thread, a second survey call can only run once the first has let go of
/// it, so it finishes long before the first walk would have ended.
#[test]
fn a_dropped_survey_call_stops_its_walk() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Two million matching lines: every one is a cancellation check.
    let lines: String = (0..2_000).map(|i| format!("hay {i}\n")).collect();
    for d in 0..10 {
        let sub = dir.path().join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(sub.join(format!("f{f}.txt")), &lines).unwrap();
        }
    }
    std::fs::write(dir.path().join("small.txt"), "x\n").unwrap();
    runtime.block_on(async {
        let options = HostOptions {
            survey: survey_over(dir.path()),
            ..HostOptions::default()
        };
        let host = start(Vec::new(), options).await;
        let grep = || host.call("grep", args(json!({"pattern": "hay"})), TrustLevel::Creator);

        let started = std::time::Instant::now();
        let whole = grep().await.unwrap();
        let full = started.elapsed();
        let value: Value = serde_json::from_str(&text(&whole)).unwrap();
        assert_eq!(value["total"], 2_000_000);

        // Start the same walk, let it run a little, then drop its future.
        let dropped = tokio::time::timeout(full / 10, grep()).await;
        assert!(dropped.is_err(), "the walk ended before it was dropped");
        let after_drop = std::time::Instant::now();
        let small = host
            .call(
                "read_many_files",
                args(json!({"paths": ["small.txt"]})),
                TrustLevel::Creator,
            )
            .await
            .unwrap();
        let waited = after_drop.elapsed();
        assert_ne!(small.is_error, Some(true), "{small:?}");
        // Had the walk gone on, the read would have waited ~90 % of `full`.
        assert!(
            waited < full / 3,
            "the next survey call waited {waited:?}; a whole walk takes {full:?}"
        );
        host.shutdown().await;
    });
}

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
    let mut options = HostOptions {
        call_timeout: Some(Duration::from_millis(200)),
        ..HostOptions::default()
    };
    options.start.restart = Some(core_agent_mcp_transport::RestartPolicy {
        first_delay,
        max_restarts,
        window: Duration::from_secs(600),
    });
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
