//! Calls through HAProxy to a fleet: one and three `core-agent serve
//! --http` replicas sharing one PostgreSQL database, beside one replica
//! keeping its state in SQLite (`--session-db`), all behind the same
//! `deploy/haproxy.cfg` (round robin) and measured in the same run. Run
//! with `cargo xtask bench fleet`, which builds the release binaries this
//! needs (`core-agent`, `fixture-server`) and prints the ratios.
//!
//! A plain binary (`harness = false`, no criterion: a fixed-duration load
//! of many clients does not fit `iter_custom`). The setups:
//!
//! - `pg1`: one replica, `gateway.store` on PostgreSQL;
//! - `pg3`: three replicas on one PostgreSQL database (another database of
//!   the same cluster), HAProxy going round robin over them;
//! - `sqlite1`: one replica with `--session-db` (a SQLite file), no store.
//!
//! Each replica serves the e2e fixture's `load` backend (`echo`) and the
//! demo server (`list_inventory`, 200 items, digested: its raw payload and
//! a digest event go to the store), each taking [`CLIENTS`] calls in flight
//! (`limits.max_concurrent_calls`), so no setup waits on its backends. [`CLIENTS`] clients, half session-based
//! (2025-11-25: a session opened once, kept across the rounds) and half
//! sessionless (2026-07-28: every request stands alone), each on its own
//! keep-alive connection, make one call after another: `load_echo` with a
//! text of their own (the answer is checked), and every [`DIGEST_EVERY`]th
//! call `demo_list_inventory` (its digest's `call_id` is checked).
//!
//! Each setup is warmed up first, then the setups take turns: [`ROUNDS`]
//! rounds of a phase of `FLEET_BENCH_SECONDS` (default 5) per setup, the
//! order rotating each round, so a change in the machine's load hits them
//! alike. Every call's latency is kept. The result, one line per setup,
//! goes to `<criterion>/fleet_load.tsv` for `cargo xtask bench fleet`:
//! `setup calls digested errors elapsed_ns p50_ns p99_ns digest_p50_ns
//! digest_p99_ns`.
//!
//! The cluster runs with `fsync` on (the test fixture turns it off), as
//! SQLite's WAL syncs its commits: both stores pay for durable writes.
//! Everything runs on this machine: the replicas, their backends, the
//! database, HAProxy and the clients share its cores, so three replicas
//! only measure what sharing the store costs, not how a fleet scales.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout,
    clippy::panic
)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{Haproxy, Postgres as Cluster, Project, bin, processes_mentioning};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// The gateway's token for every client.
const TOKEN: &str = "fleet-bench-token-0123456789abcdef";
/// Clients per setup, half of them session-based.
const CLIENTS: usize = 32;
/// One call in this many is digested (`demo_list_inventory`).
const DIGEST_EVERY: u64 = 10;
/// Measured rounds; each gives every setup one phase.
const ROUNDS: usize = 4;
/// The warm-up of each setup, before the rounds.
const WARM_UP: Duration = Duration::from_secs(3);
const SESSIONS: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";
const PATIENCE: Duration = Duration::from_secs(60);

fn main() {
    // `cargo test --benches` runs this without `--bench`: nothing to test
    // here, and the release binaries it needs may not be built.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("fleet: a load run; `cargo xtask bench fleet` runs it");
        return;
    }
    let seconds: u64 = std::env::var("FLEET_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lines = rt.block_on(run(Duration::from_secs(seconds)));
    let table = lines.join("\n") + "\n";
    let dir = criterion_home();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fleet_load.tsv"), &table).unwrap();
    eprint!(
        "fleet (setup calls digested errors elapsed_ns p50_ns p99_ns digest_p50_ns digest_p99_ns):\n{table}"
    );
}

async fn run(phase: Duration) -> Vec<String> {
    // Durable commits, as in production (the fixture trades them away).
    let cluster = Cluster::with_settings(&[("fsync", "on"), ("full_page_writes", "on")]);
    let one = cluster.create_database("fleet_one");
    let three = cluster.create_database("fleet_three");
    let sqlite_dir = tempfile::tempdir().unwrap();
    let db = sqlite_dir.path().join("sessions.db");

    let mut setups = vec![
        Setup::start("pg1", project(Some(&one)), 1, None).await,
        Setup::start("pg3", project(Some(&three)), 3, None).await,
        Setup::start("sqlite1", project(None), 1, Some(db)).await,
    ];
    for setup in &mut setups {
        setup.open_sessions().await;
        let warm = setup.phase(WARM_UP).await;
        assert_eq!(
            warm.errors, 0,
            "{}: calls failed in the warm-up: {:?}",
            setup.name, warm.first_error
        );
        eprintln!(
            "fleet: {} warmed up: {} calls in {:.1} s",
            setup.name,
            warm.calls(),
            warm.elapsed.as_secs_f64()
        );
    }
    let mut totals: Vec<Phase> = setups.iter().map(|_| Phase::default()).collect();
    for round in 0..ROUNDS {
        for k in 0..setups.len() {
            let i = (round + k) % setups.len();
            let measured = setups[i].phase(phase).await;
            eprintln!(
                "fleet: round {} {}: {} calls in {:.1} s ({:.0}/s), {} errors",
                round + 1,
                setups[i].name,
                measured.calls(),
                measured.elapsed.as_secs_f64(),
                measured.calls() as f64 / measured.elapsed.as_secs_f64(),
                measured.errors
            );
            totals[i].add(measured);
        }
    }
    let mut lines = Vec::new();
    for (setup, total) in setups.iter().zip(&mut totals) {
        if let Some(e) = &total.first_error {
            eprintln!("fleet: {}: first error: {e}", setup.name);
        }
        total.echo.sort_unstable();
        total.digest.sort_unstable();
        let mut all = [total.echo.clone(), total.digest.clone()].concat();
        all.sort_unstable();
        lines.push(format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            setup.name,
            total.calls(),
            total.digest.len(),
            total.errors,
            total.elapsed.as_nanos(),
            quantile(&all, 0.5),
            quantile(&all, 0.99),
            quantile(&total.digest, 0.5),
            quantile(&total.digest, 0.99),
        ));
    }
    for setup in setups {
        setup.stop();
    }
    drop(cluster);
    lines
}

/// The `p`-quantile of sorted `times`, in nanoseconds (0 when empty).
fn quantile(times: &[Duration], p: f64) -> u128 {
    if times.is_empty() {
        return 0;
    }
    times[((times.len() - 1) as f64 * p).round() as usize].as_nanos()
}

/// A project serving the `load` fixture and the demo, its state in
/// PostgreSQL at `store` (`gateway.store`) or, without one, wherever the
/// replica's flags say.
fn project(store: Option<&str>) -> Project {
    let p = Project::new(&json!({
        "version": 1,
        // The default (4 calls in flight per server) would queue the
        // clients at each replica's backends, so three replicas would win
        // by their backends' slots alone.
        "limits": {"max_concurrent_calls": CLIENTS},
        "servers": {
            "load": {"transport": "stdio", "command": bin("fixture-server"), "args": ["load"]},
            "demo": {"transport": "stdio", "command": bin("core-agent"), "args": ["demo-server"]},
        },
    }));
    let mut gateway =
        json!({"tokens": {"bench": {"env": "BENCH_TOKEN", "trust_level": "creator"}}});
    if let Some(url) = store {
        gateway["store"] = json!("${FLEET_STORE}");
        p.write(".env", &format!("FLEET_STORE={url}\n"));
    }
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {
                "mode": "ask",
                "allow": ["mcp:load_*", "mcp:demo_list_inventory"],
            },
            "gateway": gateway,
        })
        .to_string(),
    );
    p
}

/// One `core-agent serve --http 127.0.0.1:0`, its process group killed
/// when dropped.
struct Replica {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Replica {
    fn start(project: &Project, session_db: Option<&PathBuf>) -> Replica {
        let mut cmd = project.command(&["serve", "--http", "127.0.0.1:0"]);
        if let Some(db) = session_db {
            cmd.arg("--session-db").arg(db);
        }
        cmd.env("BENCH_TOKEN", TOKEN)
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
                let mut kept = sink.lock().unwrap();
                if kept.len() < 1 << 16 {
                    kept.push_str(&line);
                }
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
        }
    }

    /// Waits until both backends are connected.
    async fn wait_ready(&self, http: &reqwest::Client) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let health: Value = async {
                let text = http
                    .get(format!("http://{}/health", self.addr))
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
            if servers.len() == 2 && servers.iter().all(|s| s["status"] == "connected") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the backends did not connect: {health:#}\n{}",
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A setup: its replicas, HAProxy in front of them, and its clients.
struct Setup {
    name: &'static str,
    project: Project,
    replicas: Vec<Replica>,
    haproxy: Haproxy,
    clients: Vec<Client>,
}

impl Setup {
    async fn start(
        name: &'static str,
        project: Project,
        replicas: usize,
        session_db: Option<PathBuf>,
    ) -> Setup {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        // One replica first: the migrations ran once it listens.
        let mut started = vec![Replica::start(&project, session_db.as_ref())];
        for _ in 1..replicas {
            started.push(Replica::start(&project, session_db.as_ref()));
        }
        for replica in &started {
            replica.wait_ready(&http).await;
        }
        let addrs: Vec<SocketAddr> = started.iter().map(|r| r.addr).collect();
        // deploy/haproxy.cfg's check interval (the fixture's 200 ms would
        // add its probes to the load).
        let haproxy = Haproxy::builder(&addrs)
            .check_interval(Duration::from_secs(2))
            .start();
        let deadline = Instant::now() + PATIENCE;
        while !haproxy.servers().iter().all(|s| s.is_up()) {
            assert!(Instant::now() < deadline, "HAProxy never saw {name} up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let url = haproxy.url("/mcp");
        let clients = (0..CLIENTS)
            .map(|c| {
                let protocol = if c % 2 == 0 { SESSIONS } else { STATELESS };
                Client::new(url.clone(), protocol, c)
            })
            .collect();
        Setup {
            name,
            project,
            replicas: started,
            haproxy,
            clients,
        }
    }

    async fn open_sessions(&mut self) {
        for client in &mut self.clients {
            if client.protocol == SESSIONS {
                client
                    .open()
                    .await
                    .unwrap_or_else(|e| panic!("{}: a session did not open: {e}", self.name));
            }
        }
    }

    /// Every client calls until `length` is over; what they measured.
    async fn phase(&mut self, length: Duration) -> Phase {
        let start = Instant::now();
        let deadline = start + length;
        let results = futures::future::join_all(
            self.clients
                .iter_mut()
                .map(|client| client.calls_until(deadline)),
        )
        .await;
        let mut phase = Phase {
            elapsed: start.elapsed(),
            ..Phase::default()
        };
        for result in results {
            phase.add(result);
        }
        phase
    }

    fn stop(self) {
        let Setup {
            name: _,
            project,
            replicas,
            haproxy,
            clients,
        } = self;
        drop(clients);
        drop(haproxy);
        drop(replicas);
        // Their backends end when their stdin closes; none may outlive the run.
        let dir = project.path().display().to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = processes_mentioning(&dir);
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

/// What a phase measured.
#[derive(Default)]
struct Phase {
    echo: Vec<Duration>,
    digest: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    elapsed: Duration,
}

impl Phase {
    fn calls(&self) -> usize {
        self.echo.len() + self.digest.len()
    }

    fn add(&mut self, other: Phase) {
        self.echo.extend(other.echo);
        self.digest.extend(other.digest);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.elapsed += other.elapsed;
    }
}

/// A client of the fleet, with its own connection: session-based
/// (2025-11-25) or sessionless (2026-07-28).
struct Client {
    http: reqwest::Client,
    url: String,
    protocol: &'static str,
    session: Option<String>,
    /// Which client, in the texts it sends.
    n: usize,
    /// Calls made so far, the next request id.
    calls: u64,
}

impl Client {
    fn new(url: String, protocol: &'static str, n: usize) -> Client {
        Client {
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap(),
            url,
            protocol,
            session: None,
            n,
            calls: 0,
        }
    }

    async fn open(&mut self) -> Result<(), String> {
        let init = json!({"protocolVersion": SESSIONS, "capabilities": {},
            "clientInfo": {"name": "fleet-bench", "version": "0"}});
        let (session, _) = self.send(0, "initialize", init).await?;
        self.session = session;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let status = self
            .request(&note, None)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .status();
        match status.as_u16() {
            202 => Ok(()),
            s => Err(format!("initialized: HTTP {s}")),
        }
    }

    fn request(&self, body: &Value, method: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(TOKEN)
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

    /// Sends request `id`; its answer's session id and result.
    async fn send(
        &self,
        id: u64,
        method: &str,
        mut params: Value,
    ) -> Result<(Option<String>, Value), String> {
        if self.protocol == STATELESS {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "fleet-bench", "version": "0"},
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut response = self
            .request(&body, Some(method))
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let status = response.status().as_u16();
        if status != 200 {
            let text = response.text().await.unwrap_or_default();
            return Err(format!("{method}: HTTP {status}: {text}"));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/json"));
        if json {
            let frame: Value = serde_json::from_str(
                &response
                    .text()
                    .await
                    .map_err(|e| format!("{method}: {e}"))?,
            )
            .map_err(|e| format!("{method}: {e}"))?;
            return match frame.get("result") {
                Some(result) => Ok((session, result.clone())),
                None => Err(format!("{method}: {frame}")),
            };
        }
        let mut buffer = String::new();
        loop {
            let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| format!("{method}: {e}"))?
            else {
                return Err(format!("{method}: the answer ended without a result"));
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
                if frame["id"] == json!(id) {
                    return match frame.get("result") {
                        Some(result) => Ok((session, result.clone())),
                        None => Err(format!("{method}: {frame}")),
                    };
                }
            }
        }
    }

    /// One call, checked: an echo of a text of its own, or a digested
    /// listing. Whether it was the digested one.
    async fn call(&mut self) -> Result<bool, String> {
        self.calls += 1;
        let id = self.calls;
        let digested = id.is_multiple_of(DIGEST_EVERY);
        let expected = format!("{}/{id}", self.n);
        let params = if digested {
            json!({"name": "demo_list_inventory", "arguments": {}})
        } else {
            json!({"name": "load_echo", "arguments": {"text": expected}})
        };
        let (_, result) = self.send(id, "tools/call", params).await?;
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        if result["isError"] == true {
            return Err(format!("the call failed: {result}"));
        }
        let answer: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
        if digested {
            if answer["call_id"].as_str().is_none() {
                return Err(format!("not digested: {text:.200}"));
            }
        } else if answer["text"] != expected.as_str() {
            return Err(format!("answered {text}, not {expected}"));
        }
        Ok(digested)
    }

    /// Calls one after the other until `deadline`.
    async fn calls_until(&mut self, deadline: Instant) -> Phase {
        let mut phase = Phase::default();
        while Instant::now() < deadline {
            let start = Instant::now();
            match self.call().await {
                Ok(true) => phase.digest.push(start.elapsed()),
                Ok(false) => phase.echo.push(start.elapsed()),
                Err(e) => {
                    phase.errors += 1;
                    phase.first_error.get_or_insert(e);
                }
            }
        }
        phase
    }
}

/// Where criterion writes its estimates: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else `criterion` in the target directory
/// this binary was built in (`<target>/release/deps/fleet-…`).
fn criterion_home() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().join("criterion")
}
