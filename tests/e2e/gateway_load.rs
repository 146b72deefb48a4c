//! `core-agent serve --http` under load and under faults: many client
//! sessions over one set of backends, clients and backends that go away
//! mid-call, tools that change under connected clients, the HTTP guards
//! (token, session owner, body size, Host), and draining on SIGTERM.
//!
//! Every test starts its own `core-agent serve` in its own process group;
//! [`Serve`] kills it, and every backend it recorded, when dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{Background, Project, ReservedPort, alive, bin, recorded_pids};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// The default token (`CORE_AGENT_GATEWAY_TOKEN`) of every gateway here.
const TOKEN: &str = "e2e-gateway-token-0123456789abcdef";
/// How long anything may take before the test calls it a hang.
const PATIENCE: Duration = Duration::from_secs(60);
/// The protocol version the raw requests speak.
const PROTOCOL: &str = "2025-06-18";

/// A stdio server entry running the fixture's `load` mode, recording its
/// pid in `pid_file`.
fn load_backend(pid_file: &Path) -> Value {
    json!({
        "transport": "stdio",
        "command": bin("fixture-server"),
        "args": ["load"],
        "env": {"FIXTURE_PID_FILE": pid_file},
    })
}

/// A running `core-agent serve --http 127.0.0.1:0 --mode yolo`, killed with
/// its process group (and every backend it recorded) when dropped.
struct Serve {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
    stderr: Arc<Mutex<String>>,
    pid_file: PathBuf,
    project: Project,
    /// A token `/health` takes (it shows details only with one): the
    /// default token, or the first of the config's (`TOK_*`).
    token: String,
}

impl Serve {
    /// Starts the gateway in `project` (whose backends record their pids in
    /// [`Serve::pid_file_of`]), with `env` set, and waits until it listens
    /// and every backend is connected.
    async fn start(project: Project, env: &[(&str, &str)]) -> Serve {
        let serve = Serve::launch(project, env).await;
        serve.wait_ready().await;
        serve
    }

    /// [`Serve::start`] without waiting for the backends.
    async fn launch(project: Project, env: &[(&str, &str)]) -> Serve {
        Serve::launch_with(project, env, &[]).await
    }

    /// [`Serve::launch`] with more arguments to `serve`.
    async fn launch_with(project: Project, env: &[(&str, &str)], args: &[&str]) -> Serve {
        let pid_file = Serve::pid_file_of(&project);
        let mut all = vec!["serve", "--http", "127.0.0.1:0", "--mode", "yolo"];
        all.extend_from_slice(args);
        let mut cmd = project.command(&all);
        cmd.env_remove("CORE_AGENT_GATEWAY_TOKEN")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, addr) = std::sync::mpsc::channel();
        let mut pipe = BufReader::new(child.stderr.take().unwrap());
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while pipe.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Some(rest) = line.split("serving MCP at http://").nth(1) {
                    let _ = found.send(rest.split("/mcp").next().unwrap_or_default().to_owned());
                }
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let addr = addr.recv_timeout(PATIENCE);
        let token = env
            .iter()
            .find(|(k, _)| *k == "CORE_AGENT_GATEWAY_TOKEN" || k.starts_with("TOK_"))
            .map_or(TOKEN, |(_, v)| *v)
            .to_owned();
        let mut serve = Serve {
            child,
            addr: String::new(),
            stderr,
            pid_file,
            project,
            token,
        };
        match addr {
            Ok(addr) => serve.addr = addr,
            Err(_) => panic!("core-agent serve did not listen:\n{}", serve.stderr()),
        }
        serve
    }

    /// Where the backends of `project` record their pids.
    fn pid_file_of(project: &Project) -> PathBuf {
        project.path().join("backend-pids")
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The pids every backend recorded so far.
    fn backend_pids(&self) -> Vec<i32> {
        recorded_pids(&self.pid_file)
    }

    /// `GET /health` (with the token: its details), as JSON.
    async fn health(&self) -> Value {
        let response = http()
            .get(format!("http://{}/health", self.addr))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        serde_json::from_str(&response.text().await.unwrap()).unwrap()
    }

    /// Waits until no backend is starting and all of them are connected.
    async fn wait_ready(&self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let health = self.health().await;
            let ready = health["starting"].as_array().is_some_and(Vec::is_empty)
                && health["servers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|s| s["status"] == "connected");
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the backends did not connect: {health:#}\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the gateway has no call in flight.
    async fn wait_idle(&self) {
        let deadline = Instant::now() + PATIENCE;
        while self.health().await["calls_in_flight"] != 0 {
            assert!(Instant::now() < deadline, "a call never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// An MCP client session with `token`, answering notifications with `handler`.
    async fn client<H: ClientHandler>(
        &self,
        token: &str,
        handler: H,
    ) -> RunningService<RoleClient, H> {
        let config = StreamableHttpClientTransportConfig::with_uri(self.url()).auth_header(token);
        let transport = StreamableHttpClientTransport::from_config(config);
        within(handler.serve(transport)).await.unwrap()
    }

    /// A raw `POST /mcp` of `body`, with `token` and `session` when given.
    async fn post(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        body: &Value,
    ) -> reqwest::Response {
        let mut request = http()
            .post(self.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        within(request.send()).await.unwrap()
    }

    /// Opens an MCP session with raw requests; its id.
    async fn raw_session(&self, token: &str) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }});
        let response = self.post(Some(token), None, &init).await;
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = within(response.text()).await.unwrap();
        assert!(body.contains("\"serverInfo\""), "{body}");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self.post(Some(token), Some(&id), &initialized).await;
        assert_eq!(response.status(), 202);
        id
    }

    /// `GET path` with `token`: the status and the body as JSON (`null` when not JSON).
    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let response = http()
            .get(format!("http://{}{path}", self.addr))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// Waits until the process exits; its exit code.
    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "core-agent serve did not exit:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.wait();
        // The backends run in process groups of their own.
        for pid in self.backend_pids() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if alive(pid) && String::from_utf8_lossy(&cmdline).contains("fixture-server") {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// A plain HTTP client (no proxy, whatever the environment says).
fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// `future`, or a panic when it takes longer than [`PATIENCE`].
async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .expect("no answer: it hangs")
}

/// Calls `tool` with `arguments` through `client`.
async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    within(client.call_tool(params)).await.unwrap()
}

/// The text of a result's first content block.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// `(text, pid)` of an `echo` answer.
fn echoed(result: &CallToolResult) -> (String, i32) {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let answer: Value = serde_json::from_str(&text(result))
        .unwrap_or_else(|e| panic!("echo did not answer JSON ({e}): {result:?}"));
    (
        answer["text"].as_str().unwrap().to_owned(),
        answer["pid"].as_i64().unwrap() as i32,
    )
}

/// Live processes whose parent is `parent`, with their command lines.
fn children_of(parent: i32) -> Vec<(i32, String)> {
    core_agent_e2e::live_processes()
        .into_iter()
        .filter(|p| p.ppid == parent)
        .map(|p| (p.pid, p.cmdline))
        .collect()
}

/// A project serving two `load` backends, `a` and `b`.
fn two_backends() -> Project {
    let p = Project::empty();
    let pids = Serve::pid_file_of(&p);
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {
            "a": load_backend(&pids),
            "b": load_backend(&pids),
        }})
        .to_string(),
    );
    p
}

/// Sessions, and calls each makes (half to each backend).
const SESSIONS: usize = 100;
const CALLS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_sessions_share_one_process_per_backend_and_get_their_own_answers() {
    let serve = Serve::start(two_backends(), &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    // Every session connects, then all start calling at once.
    let start = Arc::new(tokio::sync::Barrier::new(SESSIONS));
    let url = serve.url();
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let start = start.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(TOKEN);
                let client = within(().serve(StreamableHttpClientTransport::from_config(config)))
                    .await
                    .unwrap();
                start.wait().await;
                let mut pids: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
                for c in (0..CALLS).step_by(2) {
                    // One call to each backend at a time, both in flight.
                    let mine = [format!("s{s}-c{c}"), format!("s{s}-c{}", c + 1)];
                    let (a, b) = tokio::join!(
                        call(&client, "a_echo", json!({"text": mine[0]})),
                        call(&client, "b_echo", json!({"text": mine[1]})),
                    );
                    for ((backend, result), sent) in [("a", a), ("b", b)].into_iter().zip(&mine) {
                        let (got, pid) = echoed(&result);
                        assert_eq!(&got, sent, "session {s} got another caller's answer");
                        pids.entry(backend).or_default().insert(pid);
                    }
                }
                (client, pids)
            })
        })
        .collect();
    let mut clients = Vec::new();
    let mut pids: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for session in sessions {
        let (client, seen) = within(session).await.unwrap();
        clients.push(client);
        for (backend, set) in seen {
            pids.entry(backend).or_default().extend(set);
        }
    }

    // One process per backend, all along: every answer of a backend came
    // from the same pid, the two differ, and nothing else was ever started.
    assert_eq!(pids["a"].len(), 1, "{pids:?}");
    assert_eq!(pids["b"].len(), 1, "{pids:?}");
    let both: BTreeSet<i32> = pids.values().flatten().copied().collect();
    assert_eq!(both.len(), 2, "{pids:?}");
    let recorded: BTreeSet<i32> = serve.backend_pids().into_iter().collect();
    assert_eq!(recorded, both, "processes the backends started");
    // Each backend runs under a supervisor of its own, a child of core-agent serve.
    let children: BTreeSet<i32> = children_of(serve.pid())
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("__supervise") && cmd.contains("fixture-server"))
        .flat_map(|(supervisor, _)| children_of(supervisor))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(
        children, both,
        "the fixture grandchildren of core-agent serve"
    );

    // Every session is listed with its own 50 calls: 5000 in all.
    let (status, list) = serve.get("/sessions", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    let listed = list["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), SESSIONS, "{list:#}");
    for session in listed {
        assert_eq!(session["calls"], CALLS, "{session}");
        assert_eq!(session["caller"], "default");
        assert_eq!(session["live"], true);
    }
    let total: u64 = listed.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
    assert_eq!(total, (SESSIONS * CALLS) as u64);
    let ids: BTreeSet<&str> = listed.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), SESSIONS, "session ids are distinct");
    assert_eq!(serve.health().await["calls_in_flight"], 0);

    // Closed sessions stay listed, ended, with their ledgers.
    for client in clients {
        within(client.cancel()).await.unwrap();
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, list) = serve.get("/sessions", TOKEN).await;
        let listed = list["sessions"].as_array().unwrap();
        assert_eq!(listed.len(), SESSIONS);
        if listed.iter().all(|s| s["live"] == false) {
            let total: u64 = listed.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
            assert_eq!(total, (SESSIONS * CALLS) as u64);
            break;
        }
        assert!(Instant::now() < deadline, "sessions never ended: {list:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks that a brand-new session can list and call `tool` (an `echo`).
async fn still_serves(serve: &Serve, tool: &str) {
    let client = serve.client(TOKEN, ()).await;
    let tools = within(client.list_all_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == tool), "{tools:?}");
    let (got, _) = echoed(&call(&client, tool, json!({"text": "still here"})).await);
    assert_eq!(got, "still here");
    within(client.cancel()).await.unwrap();
}

/// Waits until `path` exists.
async fn wait_for(path: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_call_leaves_the_gateway_serving() {
    let serve = Serve::start(two_backends(), &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    let release = serve.project.path().join("release");
    let entered = serve.project.path().join("release.entered");
    let session = serve.raw_session(TOKEN).await;
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "a_hold", "arguments": {"path": release},
    }});
    let gone = {
        let serve_url = serve.url();
        tokio::spawn(async move {
            let response = http()
                .post(serve_url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", PROTOCOL)
                .header("mcp-session-id", session)
                .bearer_auth(TOKEN)
                .body(request.to_string())
                .send()
                .await
                .unwrap();
            response.text().await
        })
    };
    // The call reached the backend; then the client goes away.
    wait_for(&entered).await;
    assert_eq!(serve.health().await["calls_in_flight"], 1);
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());

    still_serves(&serve, "a_echo").await;
    still_serves(&serve, "b_echo").await;
    // A disconnect is not a cancellation (the MCP spec says so; a client
    // cancels with `notifications/cancelled`): the abandoned call runs on
    // until its backend answers, then no longer counts as in flight.
    std::fs::write(&release, "go").unwrap();
    serve.wait_idle().await;
    still_serves(&serve, "a_echo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_crashes_mid_call_fails_its_calls_and_comes_back() {
    let serve = Serve::start(
        two_backends(),
        &[
            ("CORE_AGENT_GATEWAY_TOKEN", TOKEN),
            ("CORE_AGENT_RESTART_DELAY_MS", "50"),
        ],
    )
    .await;
    let release = serve.project.path().join("never");
    let entered = serve.project.path().join("never.entered");
    let holder = serve.client(TOKEN, ()).await;
    let crasher = serve.client(TOKEN, ()).await;
    let (_, before) = echoed(&call(&crasher, "a_echo", json!({"text": "before"})).await);
    let held = {
        let release = release.clone();
        async move { call(&holder, "a_hold", json!({"path": release})).await }
    };
    let crash = async {
        wait_for(&entered).await;
        call(&crasher, "a_crash", json!({})).await
    };
    // Both calls end, as tool errors saying what happened, although nobody
    // releases the hold.
    let (held, crashed) = tokio::join!(held, crash);
    for (result, tool) in [(&crashed, "crash"), (&held, "hold")] {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert_eq!(
            text(result),
            format!(
                "server `a` exited with status 9 during the call to `{tool}` (restarting it in 50 ms); its stderr ended with:\n    fixture: crashing on purpose"
            )
        );
    }
    assert!(!release.exists());

    // The other backend, and new sessions, are unaffected; the same
    // session's next call to the same tool name is answered by the
    // restarted backend.
    still_serves(&serve, "b_echo").await;
    assert_eq!(serve.health().await["calls_in_flight"], 0);
    let (text_after, after) = echoed(&call(&crasher, "a_echo", json!({"text": "after"})).await);
    assert_eq!(text_after, "after");
    assert_ne!(before, after, "a new process answers");
    let health = serve.health().await;
    assert_eq!(health["servers"][0]["status"], "connected", "{health:#}");
}

/// A backend that dies every time it starts is restarted five times, then
/// stays down and says so, while the other backend keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_always_dies_stays_down_after_five_restarts() {
    let p = Project::empty();
    let pids = Serve::pid_file_of(&p);
    let mut dies = crate::fixture("dies");
    dies["env"] = json!({"FIXTURE_PID_FILE": pids});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"a": load_backend(&pids), "d": dies}}).to_string(),
    );
    let serve = Serve::launch(
        p,
        &[
            ("CORE_AGENT_GATEWAY_TOKEN", TOKEN),
            ("CORE_AGENT_RESTART_DELAY_MS", "10"),
        ],
    )
    .await;
    let client = serve.client(TOKEN, ()).await;
    let deadline = Instant::now() + PATIENCE;
    let status = |health: &Value, name: &str| {
        health["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    let mut a_pid;
    loop {
        // The other backend answers all along.
        let (text_a, pid) = echoed(&call(&client, "a_echo", json!({"text": "still"})).await);
        assert_eq!(text_a, "still");
        a_pid = pid;
        if status(&serve.health().await, "d") == "down" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "d never went down:\n{}",
            serve.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let result = call(&client, "d_echo", json!({"text": "hi"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "server `d` is down: it exited with status 1; it was restarted 5 times within 10 min, so it stays down; its stderr ended with:\n    fixture: dying again"
    );
    // The first start and five restarts: six processes of `d`, all gone.
    let d_pids: Vec<i32> = serve
        .backend_pids()
        .into_iter()
        .filter(|pid| *pid != a_pid)
        .collect();
    assert_eq!(d_pids.len(), 6, "{d_pids:?}");
    for pid in &d_pids {
        assert!(!alive(*pid), "process {pid} of `d` is still running");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status(&serve.health().await, "d"), "down");
    assert_eq!(
        serve.backend_pids().len(),
        d_pids.len() + 1,
        "no more restarts"
    );
    still_serves(&serve, "a_echo").await;
}

/// A client handler that reports every `notifications/tools/list_changed`.
#[derive(Clone)]
struct ListChanged(tokio::sync::mpsc::UnboundedSender<()>);

impl ClientHandler for ListChanged {
    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connected_clients_hear_when_a_backend_tools_change() {
    let p = Project::empty();
    let grow = p.path().join("grow");
    let pids = Serve::pid_file_of(&p);
    let mut grows = crate::fixture("grows");
    grows["env"] = json!({"FIXTURE_GROW_WHEN": grow, "FIXTURE_PID_FILE": pids});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"g": grows, "a": load_backend(&pids)}}).to_string(),
    );
    let serve = Serve::start(p, &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    let mut clients = Vec::new();
    let mut heard = Vec::new();
    for _ in 0..3 {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = serve.client(TOKEN, ListChanged(tx)).await;
        let tools = within(client.list_all_tools()).await.unwrap();
        let names: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert!(
            names.contains("g_stable") && !names.contains("g_late"),
            "{names:?}"
        );
        clients.push(client);
        heard.push(rx);
    }

    std::fs::write(&grow, "now").unwrap();
    for (client, rx) in clients.iter().zip(&mut heard) {
        within(rx.recv()).await.unwrap();
        let tools = within(client.list_all_tools()).await.unwrap();
        assert!(tools.iter().any(|t| t.name == "g_late"), "{tools:?}");
        let late = call(client, "g_late", json!({})).await;
        assert_eq!(text(&late), "late answered");
    }
    still_serves(&serve, "a_echo").await;
}

/// Raw `GET /health` with `host` as the `Host` header: the status line.
fn status_with_host(addr: &str, host: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_guards_refuse_what_they_must_and_health_stays_open() {
    const TOKEN_A: &str = "token-a-for-the-creator-0123456789";
    const TOKEN_B: &str = "token-b-for-the-public-0123456789";
    let p = two_backends();
    p.write(
        ".agents/config.json",
        &json!({"gateway": {"tokens": {
            "a": {"env": "TOK_A", "trust_level": "creator"},
            "b": {"env": "TOK_B", "trust_level": "public"},
        }}})
        .to_string(),
    );
    let serve = Serve::start(p, &[("TOK_A", TOKEN_A), ("TOK_B", TOKEN_B)]).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    // /health answers with a token (and only its status without one).
    let health = serve.health().await;
    assert_eq!(health["status"], "ok", "{health}");

    // No token, or a wrong one: 401 with a challenge.
    for token in [None, Some("not-a-token-of-this-gateway"), Some(TOKEN)] {
        let response = serve.post(token, None, &list).await;
        assert_eq!(response.status(), 401, "{token:?}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer "), "{challenge}");
    }
    let (status, _) = serve.get("/sessions", "wrong-token-0123456789").await;
    assert_eq!(status, 401);

    // A session id this gateway never gave out: 404.
    let response = serve
        .post(Some(TOKEN_A), Some("no-such-session"), &list)
        .await;
    assert_eq!(response.status(), 404);

    // A session opened with token A, used with token B: 403; A still may.
    let session = serve.raw_session(TOKEN_A).await;
    let response = serve.post(Some(TOKEN_B), Some(&session), &list).await;
    assert_eq!(response.status(), 403);
    let response = serve.post(Some(TOKEN_A), Some(&session), &list).await;
    assert_eq!(response.status(), 200);
    let body = within(response.text()).await.unwrap();
    assert!(body.contains("a_echo"), "{body}");
    // B's listing does not show A's session; A's (creator) does.
    let (_, mine) = serve.get("/sessions", TOKEN_B).await;
    assert_eq!(mine["sessions"], json!([]), "{mine}");
    let (_, all) = serve.get("/sessions", TOKEN_A).await;
    let listed = all["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{all}");
    assert_eq!(listed[0]["caller"], "a");
    let id = listed[0]["id"].as_str().unwrap();
    let (status, _) = serve.get(&format!("/sessions/{id}/usage"), TOKEN_B).await;
    assert_eq!(status, 404);

    // A body over 4 MiB: 413.
    let big = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "a_echo", "arguments": {"text": "x".repeat(4 * 1024 * 1024 + 1)},
    }});
    let response = serve.post(Some(TOKEN_A), Some(&session), &big).await;
    assert_eq!(response.status(), 413);

    // A Host that is not loopback: 403, even for /health.
    for path in ["/health", "/mcp", "/sessions"] {
        let line = status_with_host(&serve.addr, "evil.example", path);
        assert!(line.starts_with("HTTP/1.1 403"), "{path}: {line}");
    }
    let port = serve.addr.rsplit(':').next().unwrap();
    let line = status_with_host(&serve.addr, &format!("localhost:{port}"), "/health");
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");

    // After all that, token B opens and uses a session of its own.
    let client = serve.client(TOKEN_B, ()).await;
    let (got, _) = echoed(&call(&client, "b_echo", json!({"text": "public"})).await);
    assert_eq!(got, "public");
    within(client.cancel()).await.unwrap();
    let (_, mine) = serve.get("/sessions", TOKEN_B).await;
    let listed = mine["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{mine}");
    assert_eq!(
        (&listed[0]["caller"], &listed[0]["trust_level"]),
        (&json!("b"), &json!("public"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_the_call_in_flight_then_stops_every_backend() {
    let mut serve = Serve::start(two_backends(), &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    let backends = serve.backend_pids();
    assert_eq!(backends.len(), 2);
    let release = serve.project.path().join("release");
    let entered = serve.project.path().join("release.entered");
    let client = serve.client(TOKEN, ()).await;
    let held = tokio::spawn({
        let release = release.clone();
        async move {
            let result = call(&client, "a_hold", json!({"path": release})).await;
            (client, result)
        }
    });
    wait_for(&entered).await;

    kill(Pid::from_raw(serve.pid()), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !serve.stderr().contains("draining the calls in flight") {
        assert!(Instant::now() < deadline, "{}", serve.stderr());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Draining: the call is still being waited for.
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "{}",
        serve.stderr()
    );
    std::fs::write(&release, "go").unwrap();
    let (client, result) = match tokio::time::timeout(PATIENCE, held).await {
        Ok(Ok(done)) => done,
        other => panic!(
            "the call in flight did not complete ({other:?}):\n{}",
            serve.stderr()
        ),
    };
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), format!("released {}", release.display()));
    drop(client);

    let code = serve.wait_exit();
    assert_eq!(code, Some(130), "{}", serve.stderr());
    for pid in backends {
        assert!(!alive(pid), "backend {pid} outlived core-agent serve");
    }
    assert_eq!(serve.backend_pids().len(), 2, "no backend was restarted");
}

/// `serve` runs for days: a backend that is not up when it starts (an HTTP
/// server still booting) is tried again, paced like restarts, and joins the
/// catalog once it answers; its clients hear `tools/list_changed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_is_not_up_at_start_joins_once_it_answers() {
    // Held, and refused, until the server is started on it.
    let port = ReservedPort::new();
    let p = Project::new(&json!({"version": 1, "servers": {
        "later": {"transport": "http", "url": port.url("/mcp")},
    }}));
    // Tries again 0.5 s, 1.5 s, 3.5 s, 7.5 s and 15.5 s after the first start.
    let serve = Serve::launch(
        p,
        &[
            ("CORE_AGENT_GATEWAY_TOKEN", TOKEN),
            ("CORE_AGENT_RESTART_DELAY_MS", "500"),
        ],
    )
    .await;
    let status = |health: &Value| health["servers"][0]["status"].as_str().map(str::to_owned);
    let deadline = Instant::now() + PATIENCE;
    while status(&serve.health().await).as_deref() != Some("error") {
        assert!(Instant::now() < deadline, "{}", serve.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let client = serve.client(TOKEN, ListChanged(tx)).await;
    let tools = within(client.list_all_tools()).await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name.starts_with("later_")),
        "{tools:?}"
    );

    let _python = Background::python_on(&port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&serve.health().await).as_deref() != Some("connected") {
        assert!(Instant::now() < deadline, "{}", serve.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    within(heard.recv()).await.unwrap();
    let tools = within(client.list_all_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "later_add"), "{tools:?}");
    let result = call(&client, "later_add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&result), "5");
}

/// A client that declares form and URL elicitation, accepts every request
/// (a form with `content`), and keeps what it was asked.
#[derive(Clone)]
struct Accepts {
    content: Value,
    asked: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Accepts {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::default()
                .with_form(rmcp::model::FormElicitationCapability::default())
                .with_url(rmcp::model::UrlElicitationCapability::default()),
        );
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("e2e-accepts", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        let accept = rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept);
        Ok(match request {
            rmcp::model::ElicitRequestParams::FormElicitationParams { .. } => {
                accept.with_content(self.content.clone())
            }
            _ => accept,
        })
    }
}

/// A backend's own elicitations (server-everything's form and URL ones)
/// reach the client whose call caused them, through `serve`, and the
/// client's answers reach the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_form_and_url_elicitations_reach_the_calling_client() {
    let p =
        Project::new(&json!({"version": 1, "servers": {"everything": crate::everything_stdio()}}));
    let serve = Serve::start(p, &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let client = serve
        .client(
            TOKEN,
            Accepts {
                content: json!({"name": "Ada Lovelace"}),
                asked: asked.clone(),
            },
        )
        .await;
    let form = call(&client, "everything_trigger_elicitation_request", json!({})).await;
    let texts: Vec<String> = form
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("User provided the requested information!"))
            && texts.iter().any(|t| t.contains("Ada Lovelace")),
        "{texts:?}"
    );
    let url = call(
        &client,
        "everything_trigger_url_elicitation",
        json!({"url": "https://example.com/consent", "elicitationId": "gw-1"}),
    )
    .await;
    assert!(
        text(&url).contains("User completed the URL elicitation flow."),
        "{url:?}"
    );
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0]["mode"], "form", "{asked:?}");
    assert!(asked[0]["requestedSchema"]["properties"]["name"].is_object());
    assert_eq!(asked[1]["mode"], "url", "{asked:?}");
    assert_eq!(asked[1]["url"], "https://example.com/consent");
}

/// The resident memory of process `pid`, in KiB (`VmRSS`).
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// Opens `count` MCP sessions with raw requests (`initialize`, then
/// `notifications/initialized`) that then go away without a `DELETE`, 16 at
/// a time; the statuses of the `initialize` answers, counted.
async fn abandon_sessions(url: &str, token: &str, count: usize) -> BTreeMap<u16, usize> {
    const AT_ONCE: usize = 16;
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..AT_ONCE {
        let (url, token) = (url.to_owned(), token.to_owned());
        let share = count / AT_ONCE + usize::from(w < count % AT_ONCE);
        workers.spawn(async move {
            let client = http();
            let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
            for _ in 0..share {
                let post = |session: Option<&str>, body: Value| {
                    let mut request = client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .header("mcp-protocol-version", PROTOCOL)
                        .body(body.to_string());
                    if let Some(session) = session {
                        request = request.header("mcp-session-id", session);
                    }
                    request.send()
                };
                let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "abandoned", "version": "0"},
                }});
                let response = within(post(None, init)).await.unwrap();
                *statuses.entry(response.status().as_u16()).or_default() += 1;
                let id = response
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let _ = within(response.bytes()).await;
                if let Some(id) = id {
                    let initialized =
                        json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                    let response = within(post(Some(&id), initialized)).await.unwrap();
                    assert_eq!(response.status(), 202);
                }
            }
            statuses
        });
    }
    let mut statuses = BTreeMap::new();
    while let Some(done) = workers.join_next().await {
        for (status, n) in done.unwrap() {
            *statuses.entry(status).or_default() += n;
        }
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_abandoned_sessions_leave_the_gateway_under_120_mb() {
    let p = Project::empty();
    let pids = Serve::pid_file_of(&p);
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"a": load_backend(&pids)}}).to_string(),
    );
    let serve = Serve::start(p, &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)]).await;
    let url = serve.url();
    let before = rss_kib(serve.pid());
    let first = abandon_sessions(&url, TOKEN, 2000).await;
    let at_2000 = rss_kib(serve.pid());
    let rest = abandon_sessions(&url, TOKEN, 3000).await;
    let at_5000 = rss_kib(serve.pid());
    eprintln!(
        "RSS: {before} KiB at start, {at_2000} KiB after 2,000 abandoned sessions, \
         {at_5000} KiB after 5,000"
    );
    // Every session opened: the oldest idle ones made room.
    for statuses in [&first, &rest] {
        assert_eq!(statuses.keys().collect::<Vec<_>>(), [&200], "{statuses:?}");
    }
    assert!(
        at_5000 * 1024 < 120 * 1000 * 1000,
        "RSS {at_5000} KiB after 5,000 abandoned sessions"
    );
    // The gateway still serves, and says how many sessions it holds.
    let client = serve.client(TOKEN, ()).await;
    let (got, _) = echoed(&call(&client, "a_echo", json!({"text": "still here"})).await);
    assert_eq!(got, "still here");
    let health = serve.health().await;
    let open = health["sessions"]["open"].as_u64().unwrap();
    let max = health["sessions"]["max"].as_u64().unwrap();
    assert!(open <= max && max < 5000, "{health}");
    assert!(
        serve.stderr().contains("closed the idle session"),
        "no eviction was logged:\n{}",
        serve.stderr()
    );
}

#[test]
fn a_gateway_token_that_cannot_be_read_stops_serve_and_a_bad_one_every_command() {
    let p = Project::empty();
    p.write(
        ".agents/config.json",
        &json!({"gateway": {"tokens": {
            "bot": {"env": "E2E_UNSET_GATEWAY_TOKEN", "trust_level": "public"},
        }}})
        .to_string(),
    );
    let run = p.run(&["serve", "--http", "127.0.0.1:0"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(
            "core-agent: serve: gateway token `bot` (.agents/config.json): $E2E_UNSET_GATEWAY_TOKEN is not set; export it, or remove the token from gateway.tokens"
        ),
        "{}",
        run.stderr
    );
    // A token without a trust level is a mistake in config.json, reported
    // like the file's other mistakes, whatever the command.
    p.write(
        ".agents/config.json",
        "{\"gateway\": {\"tokens\": {\"bot\": {\"env\": \"X\"}}}}",
    );
    let run = p.run(&["tools"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(
            "core-agent: bad config:\n.agents/config.json:1:25: /gateway/tokens/bot/trust_level: every gateway token needs a trust level; add \"trust_level\": one of"
        ),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_session_limits_from_config_json_and_flags() {
    let p = Project::empty();
    p.write(
        ".agents/config.json",
        &json!({"gateway": {"max_sessions": 10, "max_sessions_per_token": 2}}).to_string(),
    );
    // Both caps set, the per-token one above the total: refused, in words.
    let run = p.run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--max-sessions",
        "1",
        "--max-sessions-per-token",
        "3",
    ]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("the per-token session cap (3")
            && run.stderr.contains("is larger than the total (1"),
        "{}",
        run.stderr
    );
    // config.json's caps, the flag's idle timeout.
    let serve = Serve::launch_with(
        p,
        &[("CORE_AGENT_GATEWAY_TOKEN", TOKEN)],
        &["--session-idle-timeout", "1"],
    )
    .await;
    serve.wait_ready().await;
    let health = serve.health().await;
    assert_eq!(
        health["sessions"],
        json!({"open": 0, "max": 10, "max_per_token": 2}),
        "{health}"
    );
    let first = serve.raw_session(TOKEN).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(
        serve.post(Some(TOKEN), Some(&first), &list).await.status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        serve.post(Some(TOKEN), Some(&first), &list).await.status(),
        404
    );
    // A bad value in config.json names its field.
    let p = Project::empty();
    p.write(
        ".agents/config.json",
        &json!({"gateway": {"session_idle_timeout_secs": -5}}).to_string(),
    );
    let run = p.run(&["serve", "--http", "127.0.0.1:0"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("/gateway/session_idle_timeout_secs: expected a whole number of at least 1"),
        "{}",
        run.stderr
    );
}

/// A client that declares form elicitation and sampling: it answers each
/// approval with `answer` and each sampling request with a text, counting
/// both.
#[derive(Clone)]
struct Samples {
    answer: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
    sampled: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientHandler for Samples {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::default()
                .with_form(rmcp::model::FormElicitationCapability::default()),
        );
        #[allow(deprecated)] // sampling (SEP-2577), which servers still use
        {
            capabilities.sampling = Some(Default::default());
        }
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("e2e-samples", "1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request
        else {
            return Ok(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Decline,
            ));
        };
        self.asked.lock().unwrap().push(message);
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({"answer": self.answer})),
        )
    }

    #[allow(deprecated)] // sampling (SEP-2577), which servers still use
    async fn create_message(
        &self,
        _request: rmcp::model::CreateMessageRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let n = self
            .sampled
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(format!("answer {n}")),
            "e2e-model".to_owned(),
        ))
    }
}

/// In `ask` mode a backend's use of the client's model is asked once per
/// session: "always" holds for that session's later sampling, and a new
/// session is asked again; "no" refuses it and the client's model is
/// never used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_ask_mode_a_backends_sampling_is_asked_once_per_session() {
    let p =
        Project::new(&json!({"version": 1, "servers": {"everything": crate::everything_stdio()}}));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "ask", "allow": ["mcp:everything_*"]}}).to_string(),
    );
    let gateway = crate::gateway_clients::HttpGateway::start(&p);
    let session = |answer: &'static str| {
        let handler = Samples {
            answer,
            asked: Arc::default(),
            sampled: Arc::default(),
        };
        let config = StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
            .auth_header(crate::gateway_clients::TOKEN);
        let transport = StreamableHttpClientTransport::from_config(config);
        async move {
            let client = within(handler.clone().serve(transport)).await.unwrap();
            (client, handler)
        }
    };
    let sample = json!({"prompt": "hello", "maxTokens": 10});

    let (client, handler) = session("always").await;
    for n in 1..=2 {
        let result = call(
            &client,
            "everything_trigger_sampling_request",
            sample.clone(),
        )
        .await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert!(
            format!("{result:?}").contains(&format!("answer {n}")),
            "{result:?}"
        );
    }
    let asked = handler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "asked once for the session: {asked:?}");
    assert!(asked[0].contains("everything"), "{asked:?}");
    assert!(asked[0].contains("sampling"), "{asked:?}");
    drop(client);

    // Another session is asked again; "no" keeps the model from the backend.
    let (client, handler) = session("no").await;
    let result = call(&client, "everything_trigger_sampling_request", sample).await;
    assert_eq!(handler.asked.lock().unwrap().len(), 1);
    assert_eq!(
        handler.sampled.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the model was used though the answer was no"
    );
    // The backend's sampling failed with the gate's refusal, saying what
    // would allow it.
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(
        format!("{result:?}").contains("sampling:everything"),
        "{result:?}"
    );
    drop(client);
    assert_eq!(gateway.stop(), 130);
}
