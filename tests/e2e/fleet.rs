//! A fleet: three `core-agent serve --http` replicas sharing one real
//! PostgreSQL (`--store`), behind a real HAProxy going round robin. Any
//! replica serves any request: sessions opened on one continue on the
//! others, digested payloads are read back through any, an "always" answer
//! given through one is honoured by another, one user's payloads stay
//! refused to another, and a replica killed with SIGKILL mid-run costs
//! only the calls it had in flight, each failing with a retriable error.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{Haproxy, Postgres, Project, processes_mentioning};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

const ALICE: &str = "fleet-alice-token-0123456789abcdef";
const BOB: &str = "fleet-bob-token-0123456789abcdef01";
const SESSIONS: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";
const PATIENCE: Duration = Duration::from_secs(60);

/// The project every replica serves: the fixture's `load` backend (`echo`,
/// answering with its pid) and the demo (a large inventory, digested; a
/// note tool the gate asks about).
fn project(cluster: &Postgres) -> Project {
    let p = Project::new(&json!({
        "version": 1,
        "servers": {
            "load": crate::fixture("load"),
            "demo": crate::demo_server(),
        },
    }));
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {
                "mode": "ask",
                "allow": ["mcp:load_*", "mcp:demo_list_inventory", "mcp:demo_lookup_item", "builtin:retrieve_raw"],
            },
            "gateway": {
                "store": "${FLEET_STORE}",
                "tokens": {
                    "alice": {"env": "ALICE_TOKEN", "trust_level": "creator"},
                    "bob": {"env": "BOB_TOKEN", "trust_level": "creator"},
                },
            },
        })
        .to_string(),
    );
    p.write(".env", &format!("FLEET_STORE={}\n", cluster.url()));
    p
}

/// One replica: `core-agent serve --http 127.0.0.1:0` in `project`, its
/// process group killed when dropped.
struct Replica {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    project_dir: std::path::PathBuf,
}

impl Replica {
    fn start(project: &Project) -> Replica {
        Replica::start_with(project, &[])
    }

    /// [`Replica::start`] with more environment.
    fn start_with(project: &Project, env: &[(&str, &str)]) -> Replica {
        let mut cmd = project.command(&["serve", "--http", "127.0.0.1:0"]);
        cmd.envs(env.iter().copied());
        cmd.env_remove("CORE_AGENT_GATEWAY_TOKEN")
            .env_remove("CORE_AGENT_STORE")
            .env("ALICE_TOKEN", ALICE)
            .env("BOB_TOKEN", BOB)
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
        let Ok(addr) = addr.recv_timeout(PATIENCE) else {
            panic!(
                "a replica did not listen:\n{}",
                stderr.lock().unwrap().clone()
            );
        };
        Replica {
            child,
            addr: addr.parse().unwrap(),
            stderr,
            project_dir: project.path().to_path_buf(),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until both backends are connected.
    async fn wait_ready(&self) {
        self.wait_servers(2).await;
    }

    /// Waits until `count` backends are connected.
    async fn wait_servers(&self, count: usize) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let health: Value = async {
                let text = http()
                    .get(format!("http://{}/health", self.addr))
                    .bearer_auth(ALICE)
                    .send()
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                serde_json::from_str(&text).ok()
            }
            .await
            .unwrap_or(Value::Null);
            let servers = health["servers"].as_array().cloned().unwrap_or_default();
            if servers.len() == count && servers.iter().all(|s| s["status"] == "connected") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the backends did not connect: {health:#}\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
        // Its backends end when their stdin closes; none may outlive the test.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = processes_mentioning(&self.project_dir.display().to_string());
            if left.is_empty() || Instant::now() > deadline {
                for p in left {
                    let _ = kill(Pid::from_raw(p.0), Signal::SIGKILL);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// How a request failed.
#[derive(Debug)]
enum Failed {
    /// What a client retries: the connection broke, or the balancer said
    /// 502, 503 or 504.
    Retriable(String),
    /// Anything else.
    Fatal(String),
}

/// A client of the fleet: the token, and the session when it has one
/// (2025-11-25), else none (2026-07-28).
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    token: &'static str,
    protocol: &'static str,
    session: Option<String>,
}

impl Client {
    fn new(url: String, token: &'static str, protocol: &'static str) -> Client {
        Client {
            http: http(),
            url,
            token,
            protocol,
            session: None,
        }
    }

    /// The same client, talking to another address (a replica directly).
    fn at(&self, url: String) -> Client {
        Client {
            url,
            ..self.clone()
        }
    }

    /// Opens its session (2025-11-25 only).
    async fn open(&mut self) -> Result<(), Failed> {
        let init = json!({"protocolVersion": SESSIONS, "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "fleet", "version": "0"}});
        let (session, _) = self.send(1, "initialize", init, None).await?;
        self.session = session;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self
            .request(&note, None)
            .send()
            .await
            .map_err(|e| Failed::Retriable(e.to_string()))?;
        match response.status().as_u16() {
            202 => Ok(()),
            s => Err(Failed::Fatal(format!("initialized: {s}"))),
        }
    }

    fn request(&self, body: &Value, method: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.protocol)
            .timeout(PATIENCE)
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if self.protocol == STATELESS
            && let Some(method) = method
        {
            request = request.header("mcp-method", method);
            if let Some(name) = body["params"]["name"].as_str() {
                request = request.header("mcp-name", name);
            }
        }
        request
    }

    /// Sends request `id`; its answer's session id and result. An
    /// elicitation the gateway sends on the way is answered with `answer`,
    /// or, without one, fails the request (it asked).
    async fn send(
        &self,
        id: u64,
        method: &str,
        mut params: Value,
        answer: Option<&str>,
    ) -> Result<(Option<String>, Value), Failed> {
        if self.protocol == STATELESS {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "fleet", "version": "0"},
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut response = self
            .request(&body, Some(method))
            .send()
            .await
            .map_err(|e| Failed::Retriable(chain(&e)))?;
        let status = response.status().as_u16();
        if matches!(status, 502..=504) {
            return Err(Failed::Retriable(format!("{method}: HTTP {status}")));
        }
        if status != 200 {
            let text = response.text().await.unwrap_or_default();
            return Err(Failed::Fatal(format!("{method}: HTTP {status}: {text}")));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut buffer = String::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| Failed::Retriable(format!("{method}: {e}")))?;
            let Some(chunk) = chunk else {
                return Err(Failed::Retriable(format!(
                    "{method}: the answer ended without a result: {buffer}"
                )));
            };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find('\n') {
                let line: String = buffer.drain(..=end).collect();
                let Some(data) = line.trim_end().strip_prefix("data:") else {
                    continue;
                };
                let Ok(frame) = serde_json::from_str::<Value>(data.trim()) else {
                    continue;
                };
                if frame["method"] == "elicitation/create" {
                    let Some(answer) = answer else {
                        return Err(Failed::Fatal(format!(
                            "{method}: the gateway asked: {frame}"
                        )));
                    };
                    let reply = json!({"jsonrpc": "2.0", "id": frame["id"],
                        "result": {"action": "accept", "content": {"answer": answer}}});
                    let status = self
                        .request(&reply, None)
                        .send()
                        .await
                        .map_err(|e| Failed::Fatal(e.to_string()))?
                        .status();
                    assert_eq!(status, 202, "the answer to the elicitation");
                    continue;
                }
                if frame["id"] == json!(id) {
                    return match frame.get("result") {
                        Some(result) => Ok((session, result.clone())),
                        None => Err(Failed::Fatal(format!("{method}: {frame}"))),
                    };
                }
            }
        }
    }

    /// Calls `tool`; its result.
    async fn call(&self, id: u64, tool: &str, arguments: Value) -> Result<Value, Failed> {
        let params = json!({"name": tool, "arguments": arguments});
        Ok(self.send(id, "tools/call", params, None).await?.1)
    }

    /// Calls `tool`, retrying what is retriable; the result and the
    /// failures on the way.
    async fn call_retrying(&self, id: u64, tool: &str, arguments: Value) -> (Value, Vec<String>) {
        let mut failures = Vec::new();
        loop {
            match self.call(id, tool, arguments.clone()).await {
                Ok(result) => return (result, failures),
                Err(Failed::Retriable(why)) if failures.len() < 10 => {
                    failures.push(why);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{tool} failed: {e:?} (after {failures:?})"),
            }
        }
    }
}

/// An error and its sources, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

/// The text of a result's first content block.
fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A payload's `call_id`, from a digested result's envelope.
fn call_id_of(result: &Value) -> String {
    let envelope: Value = serde_json::from_str(text(result))
        .unwrap_or_else(|e| panic!("not an envelope ({e}): {result}"));
    envelope["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no call_id: {envelope}"))
        .to_owned()
}

/// HAProxy over `addrs`, checking each every second and waiting up to 5 s
/// for an answer: on two busy cores a debug replica may take longer than
/// the fixture's 200 ms to say it is ready, and a replica wrongly marked
/// down would turn requests away with 503. A killed replica refuses
/// connections at once, and those are sent to another.
/// Returns once HAProxy sees every replica up.
fn balancer(addrs: &[SocketAddr]) -> Haproxy {
    let balancer = Haproxy::builder(addrs)
        .check_interval(Duration::from_secs(1))
        .backend_line("timeout check 5s")
        .start();
    balancer.wait_until_up(addrs.len(), PATIENCE);
    balancer
}

/// Three replicas on one cluster, behind HAProxy.
async fn fleet(cluster: &Postgres) -> (Project, Vec<Replica>, Haproxy) {
    let p = project(cluster);
    // One replica first: the migrations ran once it listens.
    let mut replicas = vec![Replica::start(&p)];
    replicas.push(Replica::start(&p));
    replicas.push(Replica::start(&p));
    for replica in &replicas {
        replica.wait_ready().await;
    }
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    let balancer = balancer(&addrs);
    (p, replicas, balancer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_serves_any_request_from_any_replica() {
    let cluster = Postgres::new();
    let (p, replicas, balancer) = fleet(&cluster).await;
    let url = balancer.url("/mcp");
    let direct: Vec<String> = replicas.iter().map(Replica::url).collect();

    // A session opened through one replica continues on each of the others.
    let mut alice = Client::new(direct[0].clone(), ALICE, SESSIONS);
    alice.open().await.unwrap();
    let mut pids = Vec::new();
    for (i, at) in direct.iter().enumerate() {
        let result = alice
            .at(at.clone())
            .call(10 + i as u64, "load_echo", json!({"text": "hi"}))
            .await;
        let result = result.unwrap_or_else(|e| panic!("replica {i}: {e:?}"));
        let answer: Value = serde_json::from_str(text(&result)).unwrap();
        assert_eq!(answer["text"], "hi");
        pids.push(answer["pid"].as_i64().unwrap());
    }
    pids.dedup();
    assert_eq!(pids.len(), 3, "each replica ran its own backend: {pids:?}");

    // A payload digested through one replica is read back through another,
    // by the same session and by another session of the same user.
    let listing = alice
        .call(20, "demo_list_inventory", json!({}))
        .await
        .unwrap();
    let call_id = call_id_of(&listing);
    let raw = alice
        .at(direct[1].clone())
        .call(21, "retrieve_raw", json!({"call_id": call_id}))
        .await
        .unwrap();
    assert!(text(&raw).contains("SKU-0042"), "{raw}");
    let alice_later = Client::new(url.clone(), ALICE, STATELESS);
    let raw = alice_later
        .call(22, "retrieve_raw", json!({"call_id": call_id}))
        .await
        .unwrap();
    assert!(text(&raw).contains("SKU-0042"), "{raw}");

    // The operator reads it from the store too.
    let out = p
        .command(&[
            "raw",
            &call_id,
            "--pointer",
            "/items/41/sku",
            "--store",
            &cluster.url(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "\"SKU-0042\"");

    // Another user is refused it, on every replica.
    for at in &direct {
        let bob = Client::new(at.clone(), BOB, STATELESS);
        let refused = bob
            .call(23, "retrieve_raw", json!({"call_id": call_id}))
            .await
            .unwrap();
        assert_eq!(refused["isError"], true, "{refused}");
        assert!(!text(&refused).contains("SKU-0042"), "{refused}");
    }
    // And cannot take over alice's session on a replica that never saw it.
    let mut thief = alice.at(direct[2].clone());
    thief.token = BOB;
    match thief.call(24, "load_echo", json!({"text": "x"})).await {
        Err(Failed::Fatal(why)) => assert!(why.contains("403"), "{why}"),
        other => panic!("bob used alice's session: {other:?}"),
    }

    // An "always" given through one replica is honoured by the others:
    // they do not ask again.
    let note = alice
        .send(
            30,
            "tools/call",
            json!({"name": "demo_add_note", "arguments": {"text": "one"}}),
            Some("always"),
        )
        .await
        .unwrap()
        .1;
    assert_eq!(note["isError"], false, "{note}");
    for (i, at) in direct.iter().enumerate().skip(1) {
        let again = alice
            .at(at.clone())
            .call(31 + i as u64, "demo_add_note", json!({"text": "again"}))
            .await
            .unwrap_or_else(|e| panic!("replica {i} asked again: {e:?}"));
        assert_eq!(again["isError"], false, "{again}");
    }
    // A session of its own is still asked.
    let mut fresh = Client::new(direct[1].clone(), ALICE, SESSIONS);
    fresh.open().await.unwrap();
    assert!(matches!(
        fresh.call(40, "demo_add_note", json!({"text": "x"})).await,
        Err(Failed::Fatal(why)) if why.contains("asked")
    ));

    // `/sessions` lists the fleet's sessions, each replica's own marked.
    let sessions: Value = http()
        .get(format!("http://{}/sessions", replicas[1].addr))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let shared = sessions["fleet"].as_array().expect("a fleet list");
    let mine = shared
        .iter()
        .find(|s| s["id"].as_str() == alice.session.as_deref())
        .unwrap_or_else(|| panic!("alice's session is not listed: {sessions:#}"));
    assert_eq!(mine["caller"], "alice");
    assert_eq!(mine["here"], true, "replica 1 continued it");

    // Through the balancer, 2026-07-28 requests land anywhere.
    let stateless = Client::new(url, BOB, STATELESS);
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..9 {
        let result = stateless
            .call(50 + i, "load_echo", json!({"text": format!("{i}")}))
            .await
            .unwrap();
        let answer: Value = serde_json::from_str(text(&result)).unwrap();
        seen.insert(answer["pid"].as_i64().unwrap());
    }
    assert_eq!(seen.len(), 3, "round robin reached every replica: {seen:?}");

    // The store goes away: calls that need it fail, the rest keep working;
    // it comes back, and so do they.
    let mut cluster = cluster;
    cluster.stop();
    let echo = alice
        .call(60, "load_echo", json!({"text": "still"}))
        .await
        .unwrap();
    assert!(text(&echo).contains("still"), "{echo}");
    let sessionless = Client::new(direct[2].clone(), BOB, STATELESS);
    let echo = sessionless
        .call(63, "load_echo", json!({"text": "too"}))
        .await
        .unwrap();
    assert!(text(&echo).contains("too"), "{echo}");
    cluster.start();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let listing = alice
            .call(61, "demo_list_inventory", json!({}))
            .await
            .unwrap();
        if let Some(id) = serde_json::from_str::<Value>(text(&listing))
            .ok()
            .and_then(|e| e["call_id"].as_str().map(str::to_owned))
        {
            let raw = alice
                .at(direct[2].clone())
                .call(62, "retrieve_raw", json!({"call_id": id}))
                .await
                .unwrap();
            if text(&raw).contains("SKU-0042") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the store never came back: {listing}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// 100 sessions × 50 calls through HAProxy, half of them session-based
/// (2025-11-25) and half sessionless (2026-07-28), alice's and bob's; one
/// replica is killed with SIGKILL a third of the way through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_run_costs_only_its_calls_in_flight() {
    const CLIENTS: usize = 100;
    const CALLS: usize = 50;
    let cluster = Postgres::new();
    let (_p, mut replicas, balancer) = fleet(&cluster).await;
    let url = balancer.url("/mcp");
    let done = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let token = if c % 2 == 0 { ALICE } else { BOB };
        let protocol = if c % 4 < 2 { SESSIONS } else { STATELESS };
        let mut client = Client::new(url.clone(), token, protocol);
        let done = done.clone();
        let in_flight = in_flight.clone();
        tasks.push(tokio::spawn(async move {
            if protocol == SESSIONS {
                let mut tries = 0;
                while let Err(e) = client.open().await {
                    tries += 1;
                    assert!(tries < 10, "client {c} could not open a session: {e:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            let mut failures = Vec::new();
            let mut payloads = Vec::new();
            for i in 0..CALLS {
                in_flight.fetch_add(1, Ordering::SeqCst);
                let (tool, arguments) = if i % 10 == 9 {
                    ("demo_list_inventory", json!({}))
                } else {
                    ("load_echo", json!({"text": format!("{c}/{i}")}))
                };
                let (result, failed) = client.call_retrying(i as u64 + 100, tool, arguments).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                failures.extend(failed);
                if tool == "load_echo" {
                    let answer: Value = serde_json::from_str(text(&result))
                        .unwrap_or_else(|e| panic!("client {c} call {i}: {e}: {result}"));
                    assert_eq!(
                        answer["text"],
                        format!("{c}/{i}"),
                        "answered to the wrong caller"
                    );
                } else {
                    payloads.push(call_id_of(&result));
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
            (c, token, failures, payloads)
        }));
    }
    // A third of the way through, replica 2 dies.
    let deadline = Instant::now() + Duration::from_secs(300);
    while done.load(Ordering::SeqCst) < CLIENTS * CALLS / 3 {
        assert!(
            Instant::now() < deadline,
            "the run is stuck at {}",
            done.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // What HAProxy had on the replica: the requests it was answering, and
    // those sent to it between this look and the kill.
    let flying = in_flight.load(Ordering::SeqCst);
    let before = balancer.servers()[1].clone();
    replicas[1].kill();
    let after = balancer.servers()[1].clone();
    let on_killed = (before.current + after.sessions.saturating_sub(before.sessions)) as usize;
    let mut failures = 0;
    let mut payloads: BTreeMap<String, &str> = BTreeMap::new();
    for task in tasks {
        let (c, token, failed, ids) = task.await.unwrap();
        for why in &failed {
            eprintln!("client {c}: retried after: {why}");
        }
        failures += failed.len();
        for id in ids {
            payloads.insert(id, token);
        }
    }
    assert_eq!(done.load(Ordering::SeqCst), CLIENTS * CALLS);
    assert!(
        failures <= on_killed,
        "{failures} calls failed; only the {on_killed} in flight on the replica that died may"
    );
    // Every payload is read back through a survivor, by its owner only.
    assert_eq!(payloads.len(), CLIENTS * CALLS / 10);
    let survivors = [replicas[0].url(), replicas[2].url()];
    let reads: Vec<_> = payloads
        .iter()
        .enumerate()
        .map(|(n, (id, owner))| {
            let at = survivors[n % 2].clone();
            let (id, owner) = (id.clone(), *owner);
            tokio::spawn(async move {
                // Each read opens a connection of its own, 250 at once on
                // each survivor: a connection closed before it was answered
                // is tried again (at most three times), as clients do.
                let read = |token: &'static str, n: u64| {
                    let (at, id) = (at.clone(), id.clone());
                    async move {
                        let mut last = None;
                        for _ in 0..3 {
                            match Client::new(at.clone(), token, STATELESS)
                                .call(n, "retrieve_raw", json!({"call_id": id}))
                                .await
                            {
                                Err(Failed::Retriable(why)) => last = Some(why),
                                done => return done.unwrap(),
                            }
                        }
                        panic!("{id}: no answer after three tries: {last:?}")
                    }
                };
                let raw = read(owner, 1).await;
                assert!(text(&raw).contains("SKU-0042"), "{id}: {raw}");
                let other = if owner == ALICE { BOB } else { ALICE };
                let refused = read(other, 2).await;
                assert_eq!(refused["isError"], true, "{id}: {refused}");
            })
        })
        .collect();
    for read in reads {
        read.await.unwrap();
    }
    eprintln!(
        "fleet: {} calls, {failures} retried after the kill ({on_killed} were in flight on the killed replica, {flying} in all)",
        CLIENTS * CALLS
    );
    if std::env::var_os("FLEET_HAPROXY_LOG").is_some() {
        eprintln!("{}", balancer.log());
    }
}

/// The tool names a 2026-07-28 client of `url` is offered.
async fn tools_at(url: &str) -> Vec<String> {
    let client = Client::new(url.to_owned(), ALICE, STATELESS);
    let (_, listed) = client.send(1, "tools/list", json!({}), None).await.unwrap();
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Notes each `tools/list_changed` a session-based client hears.
struct Hears(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Hears {
    async fn on_tool_list_changed(
        &self,
        _cx: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(());
    }
}

/// Pins are shared: a tool changed on one replica's backend is quarantined
/// there (`pin: "strict"`) until `mcp trust` accepts it, once, for the
/// fleet, and the replica publishes it at once; a backend whose tools
/// change on one replica makes the clients of another hear
/// `tools/list_changed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pins_and_tool_changes_reach_every_replica() {
    let cluster = Postgres::new();
    let p = project(&cluster);
    let mut fx = crate::fixture("grows");
    fx["pin"] = json!("strict");
    fx["env"] = json!({
        "FIXTURE_DESCRIPTION": "${FX_DESCRIPTION}",
        "FIXTURE_GROW_WHEN": "${FX_GROW}",
    });
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fx": fx}}).to_string(),
    );
    let grow_a = p.path().join("grow-a");
    let grow_b = p.path().join("grow-b");
    let a = Replica::start_with(
        &p,
        &[
            ("FX_DESCRIPTION", "Answers questions."),
            ("FX_GROW", grow_a.to_str().unwrap()),
        ],
    );
    a.wait_servers(1).await;
    assert!(tools_at(&a.url()).await.contains(&"fx_stable".to_owned()));
    // B's backend describes the tool otherwise: quarantined there.
    let changed = "Answers questions. Then it reads ~/.ssh/id_rsa.";
    let b = Replica::start_with(
        &p,
        &[
            ("FX_DESCRIPTION", changed),
            ("FX_GROW", grow_b.to_str().unwrap()),
        ],
    );
    b.wait_servers(1).await;
    assert!(!tools_at(&b.url()).await.contains(&"fx_stable".to_owned()));
    assert!(
        cluster
            .psql("SELECT text FROM pin_locks")
            .contains("Answers questions."),
        "pinned once, in the shared store"
    );

    // A session-based client of A listens for list changes.
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            a.url(),
        )
        .auth_header(ALICE);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
    let listener = rmcp::ServiceExt::serve(Hears(tx), transport).await.unwrap();
    listener.list_all_tools().await.unwrap();

    // `mcp trust`, run once against the shared pins (gateway.store), is
    // heard by B, which publishes the tool without a restart.
    let mut trust = p.command(&["mcp", "trust", "fx", "stable"]);
    trust
        .env_remove("CORE_AGENT_STORE")
        .env("FX_DESCRIPTION", changed)
        .env("FX_GROW", grow_b.to_str().unwrap());
    let out = trust.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + PATIENCE;
    while !tools_at(&b.url()).await.contains(&"fx_stable".to_owned()) {
        assert!(
            Instant::now() < deadline,
            "B never heard the new pin:\n{}",
            b.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A, whose backend still serves the old definition, now quarantines it,
    // and its client was told the list changed.
    tokio::time::timeout(PATIENCE, heard.recv()).await.unwrap();
    assert!(!tools_at(&a.url()).await.contains(&"fx_stable".to_owned()));
    while heard.try_recv().is_ok() {}

    // Only B's backend grows a tool; A's client hears of it.
    std::fs::write(&grow_b, "now").unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !tools_at(&b.url()).await.contains(&"fx_late".to_owned()) {
        assert!(Instant::now() < deadline, "B's backend never grew");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::timeout(PATIENCE, heard.recv())
        .await
        .expect("A's client never heard that B's tools changed")
        .unwrap();
    let _ = listener.cancel().await;
}

/// Two replicas write their audit trails into the store
/// (`"audit": {"store": true}`): one SQL query sees the decisions taken on
/// both, each under its caller and the replica that took it, every line as
/// the documented schema says, and no secret in any.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_replicas_write_one_audit_trail_into_the_store() {
    let cluster = Postgres::new();
    let p = project(&cluster);
    let path = p.path().join(".agents/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["gateway"]["audit"] = json!({"store": true, "arguments": true});
    p.write(".agents/config.json", &config.to_string());
    let replicas = [Replica::start(&p), Replica::start(&p)];
    for replica in &replicas {
        replica.wait_ready().await;
        assert!(
            replica
                .stderr()
                .contains("audit trail: the shared store, table audit_lines"),
            "{}",
            replica.stderr()
        );
    }
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    let balancer = balancer(&addrs);
    // Alice through the first replica, bob through the second, then bob
    // through the balancer (round robin: two calls on each).
    let alice = Client::new(replicas[0].url(), ALICE, STATELESS);
    alice
        .call(
            1,
            "load_echo",
            json!({"text": "a", "password": "hunter2-e2e"}),
        )
        .await
        .unwrap();
    let bob = Client::new(replicas[1].url(), BOB, STATELESS);
    bob.call(2, "load_echo", json!({"text": "b"}))
        .await
        .unwrap();
    let _ = bob
        .send(
            3,
            "tools/call",
            json!({"name": "demo_nope", "arguments": {}}),
            None,
        )
        .await;
    let through = Client::new(balancer.url("/mcp"), BOB, STATELESS);
    for i in 0..4 {
        through
            .call(10 + i, "load_echo", json!({"text": format!("lb{i}")}))
            .await
            .unwrap();
    }
    let refused = Client::new(replicas[1].url(), "not-a-token-0123456789abcdef", STATELESS)
        .call(4, "load_echo", json!({"text": "x"}))
        .await;
    assert!(
        matches!(refused, Err(Failed::Fatal(ref why)) if why.contains("401")),
        "{refused:?}"
    );

    // The lines reach the table within moments of the calls.
    let deadline = Instant::now() + PATIENCE;
    while cluster.psql("SELECT count(*) FROM audit_lines") != "8" {
        assert!(
            Instant::now() < deadline,
            "the lines did not reach the store: {}",
            cluster.psql("SELECT replica, line FROM audit_lines ORDER BY id")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pids: Vec<String> = replicas
        .iter()
        .map(|r| format!(":{}", r.child.id()))
        .collect();
    let rows = cluster.psql(
        "SELECT replica, coalesce(caller, '-'), event, coalesce(line->>'name', '-'), decision, coalesce(line#>>'{arguments,text}', '-') \
         FROM audit_lines ORDER BY id",
    );
    let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split('|').collect()).collect();
    let on = |row: &Vec<&str>| {
        pids.iter()
            .position(|pid| row[0].ends_with(pid.as_str()))
            .unwrap_or_else(|| panic!("{row:?} names no replica of {pids:?}"))
    };
    let find = |text: &str| {
        rows.iter()
            .find(|r| r[5] == text)
            .unwrap_or_else(|| panic!("no line of {text}: {rows:?}"))
    };
    let a = find("a");
    assert_eq!(
        (on(a), a[1], a[2], a[3], a[4]),
        (0, "alice", "call", "load_echo", "allow")
    );
    let b = find("b");
    assert_eq!((on(b), b[1], b[4]), (1, "bob", "allow"));
    let nope = rows.iter().find(|r| r[3] == "demo_nope").unwrap();
    assert_eq!((on(nope), nope[1], nope[4]), (1, "bob", "unknown"));
    let balanced: Vec<usize> = (0..4).map(|i| on(find(&format!("lb{i}")))).collect();
    assert!(
        balanced.contains(&0) && balanced.contains(&1),
        "the balancer's calls landed on {balanced:?}"
    );
    let sign_in = rows.iter().find(|r| r[2] == "sign_in").unwrap();
    assert_eq!((on(sign_in), sign_in[1], sign_in[4]), (1, "-", "refused"));
    // One query per caller, over the whole fleet.
    assert_eq!(
        cluster.psql("SELECT caller, count(DISTINCT replica), count(*) FROM audit_lines WHERE event = 'call' GROUP BY caller ORDER BY caller"),
        "alice|1|1\nbob|2|6"
    );

    // Every line as documented; no secret in any.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            core_agent_e2e::root().join("docs/schemas/audit-line.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let text = cluster.psql("SELECT line FROM audit_lines ORDER BY id");
    for line in text.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&line)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{line} breaks the documented schema: {errors:?}"
        );
    }
    for secret in [ALICE, BOB, "hunter2-e2e", "not-a-token-0123456789abcdef"] {
        assert!(
            !text.contains(secret),
            "the trail holds {secret:?}:\n{text}"
        );
    }
    assert!(text.contains("\"password\": \"[redacted]\""), "{text}");
}
