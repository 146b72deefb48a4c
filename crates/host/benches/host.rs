//! What the host costs per call: [`Session::call`] beside a bare rmcp client
//! calling the same stdio server, sequentially (a mutating tool) and with 4
//! calls in flight (a read-only tool), plus the catalog rebuild. Run with
//! `cargo xtask bench host`, which prints the ratios; the baseline is
//! `Peer::call_tool` on another instance of the same server, measured in the
//! same run.
//!
//! The server is the demo server (`divide` is read-only, `add_note`
//! mutates), served by this very binary when it is started with
//! `--serve-demo`, so the bench needs no other build. The paths:
//!
//! - `bare`: rmcp's client on the child's stdout and stdin, nothing else;
//! - `transport`: `Server::call_tool` of the host below (its stdout filter,
//!   call slots and timeout, without the session), to split the cost;
//! - `host`: `Session::call` of a [`Host`] started with that server, the
//!   digest off, the gate allowing `mcp:bench_*` by pattern (mode `ask`, so
//!   a call that asked would be refused and fail the bench);
//! - `host_digest`: the same with the digest on at its default threshold,
//!   under which these results stay (the realistic default).
//!
//! Groups: `host_sequential` (one `add_note` at a time) and
//! `host_concurrent` (`divide`, 4 in flight, kept full by
//! `buffer_unordered`); one iteration is one call, so the time per iteration
//! is the inverse of calls per second. `host_catalog`: `live_1x4` is
//! `Host::catalog` of the benched host (cached: built once, rebuilt only
//! when a server's tools change), `rebuild_20x64` is one rebuild,
//! `CatalogBuilder::build` (with the reserved names) over 20 servers × 64
//! synthetic tools.
//!
//! Criterion measures one path after another, so on a busy machine a change
//! in load lands on one path and not the next. After the criterion groups
//! (under `cargo bench` only), the same calls run again with the paths
//! taking turns every 50 calls, every call's latency kept: calls per second,
//! p50 and p99 per path, written to `<criterion>/host_interleaved.tsv`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use core_agent_digest::MemoryStore;
use core_agent_host::{DigestOptions, Host, HostOptions, Session, SessionOptions};
use core_agent_mcp_config::{
    Config, Dialect, Scope, ServerEntry, ServerSpec, StdioSpec, Transport, TrustLevel,
};
use core_agent_mcp_policy::{Annotations, Catalog, DiscoveredTool, ServerTools};
use core_agent_mcp_transport::model::{CallToolRequestParams, CallToolResult, JsonObject};
use core_agent_mcp_transport::{Server, Status};
use core_agent_permissions::{Pattern, PermissionsConfig};
use criterion::{BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use rmcp::ServiceExt;
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// The argument that makes this binary serve the demo server on stdio.
const SERVE: &str = "--serve-demo";
/// The server's key in the host's config (its tools are `bench_<tool>`).
const SERVER: &str = "bench";
/// Calls in flight in the concurrent group.
const IN_FLIGHT: usize = 4;
/// The transport path's call timeout (the host's default).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

fn main() {
    if std::env::args().any(|a| a == SERVE) {
        serve();
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    calls(&mut c);
    catalog(&mut c);
    c.final_summary();
}

/// The demo server on stdin/stdout, as `examples/demo_server` runs it.
fn serve() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Err(e) = rt.block_on(core_agent_host::demo::serve_stdio()) {
        eprintln!("bench server: {e}");
        std::process::exit(1);
    }
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

fn text(result: &CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// A host with one stdio server (this binary, serving the demo server)
/// and a session whose gate allows its tools by pattern.
async fn host(digest: bool) -> (Arc<Host>, Session) {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let entry = ServerEntry {
        name: SERVER.to_owned(),
        scope: Scope::Project,
        source: PathBuf::from(".agents/mcp.json"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(Transport::Stdio(StdioSpec {
            command: exe,
            args: vec![SERVE.to_owned()],
            env: BTreeMap::new(),
        })),
    };
    let config = Config::default().with_servers(vec![entry]);
    let permissions = PermissionsConfig::default().with_allow(vec![
        Pattern::parse("mcp:bench_*", Path::new(".agents/config.json")).unwrap(),
    ]);
    let options = HostOptions::default()
        .with_permissions(permissions)
        .with_digest(digest.then(|| DigestOptions::new(Arc::new(MemoryStore::new()))));
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Arc::new(Host::start(&config, &env, options, &|_, _| {}).await);
    for server in host.servers() {
        assert_eq!(
            server.status(),
            Status::Connected,
            "{}: {:?}",
            server.name(),
            server.error().map(ToString::to_string)
        );
    }
    let session = host.session(SessionOptions::new(TrustLevel::Creator));
    (host, session)
}

/// A bare rmcp client on a second instance of the same server: the child's
/// stdout and stdin handed to rmcp as they are.
async fn bare() -> (RunningService<RoleClient, ()>, tokio::process::Child) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .arg(SERVE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await.unwrap();
    (client, child)
}

/// A tool of the demo server, by its own name and the name the host
/// publishes it under.
#[derive(Clone, Copy)]
struct Tool {
    name: &'static str,
    namespaced: &'static str,
}

const ADD_NOTE: Tool = Tool {
    name: "add_note",
    namespaced: "bench_add_note",
};
const DIVIDE: Tool = Tool {
    name: "divide",
    namespaced: "bench_divide",
};

/// How a call reaches the server.
#[derive(Clone, Copy)]
enum Caller<'a> {
    /// `Peer::call_tool` of a bare rmcp client.
    Bare(&'a Peer<RoleClient>),
    /// `Server::call_tool` of the host's transport (stdout filter, call
    /// slots, timeout), without the session.
    Transport(&'a Server),
    /// `Session::call`: catalog, trust, gate, dispatch, digest, cap.
    Host(&'a Session),
}

impl Caller<'_> {
    async fn call(self, tool: Tool, arguments: JsonObject) -> CallToolResult {
        match self {
            Caller::Bare(peer) => {
                let params = CallToolRequestParams::new(tool.name).with_arguments(arguments);
                peer.call_tool(params).await.unwrap()
            }
            Caller::Transport(server) => server
                .call_tool(tool.name, arguments, CALL_TIMEOUT)
                .await
                .unwrap(),
            Caller::Host(session) => session.call(tool.namespaced, arguments).await.unwrap(),
        }
    }
}

/// Runs `iters` calls one at a time; the time they took.
fn one_at_a_time<F, Fut>(rt: &Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = CallToolResult>,
{
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(call().await);
        }
        start.elapsed()
    })
}

/// Runs `iters` calls with [`IN_FLIGHT`] in flight at all times; the time
/// they took.
fn in_flight<F, Fut>(rt: &Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = CallToolResult>,
{
    rt.block_on(async {
        let start = Instant::now();
        futures::stream::iter(0..iters)
            .map(|_| call())
            .buffer_unordered(IN_FLIGHT)
            .for_each(|result| {
                black_box(result);
                async {}
            })
            .await;
        start.elapsed()
    })
}

fn calls(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (plain_host, plain) = rt.block_on(host(false));
    let (digest_host, digested) = rt.block_on(host(true));
    let (client, mut child) = rt.block_on(bare());
    let peer = client.peer().clone();
    let server = plain_host.servers().next().unwrap();

    let note = args(json!({"text": "benchmark note"}));
    let divide = args(json!({"a": 1, "b": 4}));
    let callers = [
        ("bare", Caller::Bare(&peer)),
        ("transport", Caller::Transport(server)),
        ("host", Caller::Host(&plain)),
        ("host_digest", Caller::Host(&digested)),
    ];

    // Every path answers, and the same way, before anything is timed.
    rt.block_on(async {
        for (name, caller) in callers {
            let quarter = caller.call(DIVIDE, divide.clone()).await;
            assert_eq!(text(&quarter), "0.25", "{name}");
            let saved = caller.call(ADD_NOTE, note.clone()).await;
            assert!(
                text(&saved).starts_with("saved note #"),
                "{name}: {saved:?}"
            );
        }
    });

    let mut group = c.benchmark_group("host_sequential");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    for (name, caller) in callers {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| one_at_a_time(&rt, iters, || caller.call(ADD_NOTE, note.clone())))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("host_concurrent");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    for (name, caller) in callers {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| in_flight(&rt, iters, || caller.call(DIVIDE, divide.clone())))
        });
    }
    group.finish();

    // Criterion's test mode (`cargo test --benches`) runs each bench once;
    // the interleaved rounds run only under `cargo bench`.
    if std::env::args().any(|a| a == "--bench") {
        interleaved(&rt, &callers, &note, &divide);
    }

    // What `Session::call_batch` rebuilds before every batch, here: one
    // server of 4 tools, converted from rmcp's tools, then through policy.
    let mut group = c.benchmark_group("host_catalog");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    group.bench_function(BenchmarkId::from_parameter("live_1x4"), |b| {
        b.iter(|| black_box(plain_host.catalog()))
    });
    group.finish();

    rt.block_on(async {
        drop((plain, digested));
        plain_host.shutdown().await;
        digest_host.shutdown().await;
        drop(peer);
        let _ = client.cancel().await;
        let _ = child.wait().await;
    });
}

/// Rounds of the interleaved measurement, and calls per path per round.
const ROUNDS: usize = 100;
const CHUNK: usize = 50;

/// The same calls again with the paths taking turns every [`CHUNK`] calls
/// (each round starting with the next path), so a change in the machine's
/// load hits every path alike; every call's latency is kept. Prints the
/// table and writes it to `<criterion>/host_interleaved.tsv` for
/// `cargo xtask bench host`: `mode path calls mean_ns p50_ns p99_ns`.
fn interleaved(
    rt: &Runtime,
    callers: &[(&str, Caller<'_>)],
    note: &JsonObject,
    divide: &JsonObject,
) {
    let mut lines = Vec::new();
    for (mode, tool, arguments, flight) in [
        ("sequential", ADD_NOTE, note, 1),
        ("concurrent", DIVIDE, divide, IN_FLIGHT),
    ] {
        let mut latencies: Vec<Vec<Duration>> =
            vec![Vec::with_capacity(ROUNDS * CHUNK); callers.len()];
        let mut elapsed = vec![Duration::ZERO; callers.len()];
        rt.block_on(async {
            for round in 0..ROUNDS {
                for k in 0..callers.len() {
                    let i = (round + k) % callers.len();
                    let caller = callers[i].1;
                    let start = Instant::now();
                    let times: Vec<Duration> = futures::stream::iter(0..CHUNK)
                        .map(|_| async move {
                            let start = Instant::now();
                            black_box(caller.call(tool, arguments.clone()).await);
                            start.elapsed()
                        })
                        .buffer_unordered(flight)
                        .collect()
                        .await;
                    elapsed[i] += start.elapsed();
                    latencies[i].extend(times);
                }
            }
        });
        for (i, (name, _)) in callers.iter().enumerate() {
            let times = &mut latencies[i];
            times.sort_unstable();
            let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_nanos();
            let calls = times.len();
            let mean = elapsed[i].as_nanos() / calls as u128;
            lines.push(format!(
                "{mode}\t{name}\t{calls}\t{mean}\t{}\t{}",
                at(0.5),
                at(0.99)
            ));
        }
    }
    let table = lines.join("\n") + "\n";
    eprint!("interleaved (mode path calls mean_ns p50_ns p99_ns):\n{table}");
    let dir = criterion_home();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("host_interleaved.tsv"), table).unwrap();
}

/// Where criterion writes its estimates: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else `criterion` in the target directory
/// this binary was built in (`<target>/release/deps/host-…`).
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

/// 20 servers × 64 tools, each with a small schema and annotations, through
/// the catalog as the host builds it when tools change.
fn catalog(c: &mut Criterion) {
    const SERVERS: usize = 20;
    const TOOLS: usize = 64;
    let spec = ServerSpec::new(Transport::Stdio(StdioSpec {
        command: "mcp-server".to_owned(),
        args: Vec::new(),
        env: BTreeMap::new(),
    }));
    let names: Vec<String> = (0..SERVERS).map(|s| format!("server-{s:02}")).collect();
    let tools: Vec<Vec<DiscoveredTool>> = (0..SERVERS)
        .map(|s| {
            (0..TOOLS)
                .map(|t| {
                    DiscoveredTool::new(
                        format!("tool.{t:02}"),
                        format!("Tool {t} of server {s}: does one small thing and reports it."),
                        json!({
                            "type": "object",
                            "properties": {
                                "path": {"type": "string", "description": "Where to act."},
                                "limit": {"type": "integer", "minimum": 1}
                            },
                            "required": ["path"]
                        }),
                    )
                    .with_annotations(Annotations {
                        read_only_hint: Some(t % 2 == 0),
                        destructive_hint: Some(false),
                        idempotent_hint: Some(t % 3 == 0),
                        open_world_hint: Some(false),
                    })
                })
                .collect()
        })
        .collect();
    let reserved = ["record_plan", "wait_and_verify", "retrieve_raw"];
    let builder = Catalog::builder().with_reserved(reserved);
    let build = || {
        builder.build(names.iter().zip(&tools).map(|(name, tools)| ServerTools {
            name,
            spec: &spec,
            tools,
        }))
    };
    let built = build();
    assert_eq!(built.entries().len(), SERVERS * TOOLS);
    assert!(built.warnings().is_empty(), "{:?}", built.warnings());

    let mut group = c.benchmark_group("host_catalog");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function(
        BenchmarkId::from_parameter(format!("rebuild_{SERVERS}x{TOOLS}")),
        |b| b.iter(|| black_box(build())),
    );
    group.finish();
}
