//! What the gateway costs per call: an rmcp client calling the demo server
//! through an in-process [`Gateway`], over stdio (a tokio duplex pipe, as
//! `serve_io` would get a child's pipes) and over streamable HTTP
//! (`serve_http` on 127.0.0.1:0, an rmcp streamable HTTP client on a pooled
//! reqwest client), beside the same client calling the server directly.
//! Run with `cargo xtask bench gateway`, which prints the ratios and the
//! targets; every path is measured in the same run.
//!
//! The server is the demo server, served by this very binary when started
//! with `--serve-demo` (as the host bench does), so the bench needs no other
//! build. The call is `divide {a: 1, b: 4}` (read-only, a tiny argument and
//! answer: the cheapest echo the demo has). The paths:
//!
//! - `bare`: rmcp's client on the child's stdout and stdin, nothing else;
//! - `host`: `Session::call` of the [`Host`] the gateway serves (catalog,
//!   trust, gate, dispatch, digest), to split the cost;
//! - `hop`: the same rmcp client and the demo server both in this process,
//!   over a duplex pipe: what one more MCP hop costs by itself, which is
//!   what the gateway adds to the host path (`stdio` ≈ `host` + `hop`);
//! - `stdio`: an rmcp client speaking to `Gateway::serve_io` over a duplex
//!   pipe: the host path plus one more MCP hop;
//! - `http`: an rmcp client on `Gateway::serve_http`: the host path plus
//!   MCP over streamable HTTP (bearer token checked on every request), in
//!   a session (protocol 2025-11-25);
//! - `stateless`: the same over protocol 2026-07-28, with no session (each
//!   request carries its metadata, and the gateway opens a host session
//!   per request);
//! - `jwt`: the `http` path with a signed-in caller: an RS256 access token
//!   (2048-bit key) validated on every request against the keys of an
//!   identity provider served in this process (`gateway.oauth`), beside the
//!   static token of `http` on the same listener;
//! - `telemetry`: `stdio` with tracing and metrics on: a second gateway
//!   over the same host, with `Metrics` and a span per request, serving on
//!   a runtime of its own whose threads (with the `otel` feature, as
//!   `cargo xtask bench gateway` builds it) export the spans and metrics
//!   over OTLP to a sink in this process;
//! - `untraced`: the same topology with them off (a third gateway on a
//!   runtime of its own, no subscriber): what `telemetry` is compared
//!   with, so the hop between runtimes is not counted as telemetry.
//!
//! `gateway_auth` times the check alone: a static token
//! ([`Auth::caller`]) and a JWT ([`ResourceServer::authenticate`]: header,
//! key lookup, RS256 signature, claims, trust rules).
//!
//! The host has the digest on at its default threshold (as `core-agent
//! serve` runs), and the gate allows `mcp:bench_*` by pattern in mode `ask`
//! (a call that asked would be refused and fail the bench).
//!
//! Groups: `gateway_sequential` (one call at a time) and
//! `gateway_concurrent` (4 in flight, kept full by `buffer_unordered`); one
//! iteration is one call. `gateway_context`: a `resources/read` of the
//! demo's summary and a `prompts/get` of its `restock`, one at a time,
//! from the server itself (`*_bare`) and through the gateway over stdio and
//! HTTP. Then (under `cargo bench` only) the paths again,
//! taking turns every 50 calls so a change in the machine's load hits them
//! alike, every call's latency kept (2000 calls per path and mode), and 100
//! HTTP sessions × 50 calls each, all sessions connected first and started
//! together: total time and per-call percentiles. Both are written to
//! `<criterion>/gateway_interleaved.tsv` for `cargo xtask bench gateway`.

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
use core_agent_gateway::{
    Auth, Budget, Caller, DefaultTrust, Gateway, GatewayOptions, HttpOptions, Limit, OAuthConfig,
    RateLimits, ResourceServer, Token,
};
use core_agent_host::demo::SUMMARY_URI;
use core_agent_host::{DigestOptions, Host, HostOptions, Session, SessionOptions};
use core_agent_mcp_config::{
    Config, Dialect, Scope, ServerEntry, ServerSpec, StdioSpec, Transport, TrustLevel,
};
use core_agent_permissions::{Pattern, PermissionsConfig};
use criterion::{BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, GetPromptRequestParams, JsonObject,
    ReadResourceRequestParams,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio::runtime::Runtime;

/// The argument that makes this binary serve the demo server on stdio.
const SERVE: &str = "--serve-demo";
/// The server's key in the host's config (its tools are `bench_<tool>`).
const SERVER: &str = "bench";
/// Calls in flight in the concurrent group.
const IN_FLIGHT: usize = 4;
/// The HTTP listener's token.
const TOKEN: &str = "gateway-bench-token-0123456789abcdef";
/// A second token whose calls go through the rate limiter (limits it never reaches).
const LIMITED_TOKEN: &str = "gateway-bench-limited-0123456789abcdef";
/// The load run: sessions, and calls each makes.
const SESSIONS: usize = 100;
const SESSION_CALLS: usize = 50;

fn main() {
    if std::env::args().any(|a| a == SERVE) {
        serve();
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    redaction(&mut c);
    calls(&mut c);
    c.final_summary();
}

/// What scanning a call's 64 KiB result for secrets costs at the exits
/// (`gateway_redact`): the text of a result (JSON records, no secret in
/// it: the common case) through a redactor of 8 secrets (`scanned`) and
/// through one of none (`unscanned`, a call whose config has no secret).
/// `cargo xtask bench gateway` prints the p50 of each and what the scan adds.
fn redaction(c: &mut Criterion) {
    let secrets: Vec<(String, String)> = (0..8)
        .map(|i| {
            (
                format!("SECRET_{i}"),
                format!("ghp_{i}xY7secret-value-{i}{i}"),
            )
        })
        .collect();
    let scanned = core_agent_mcp_config::Redactor::new(secrets);
    let unscanned = core_agent_mcp_config::Redactor::default();
    let record = "{\"sku\": 12345, \"name\": \"Widget, large\", \"price\": 9.99, \"tags\": [\"a\", \"b\"]}\n";
    let text = record.repeat(64 * 1024 / record.len() + 1)[..64 * 1024].to_owned();
    let result = CallToolResult::success(vec![ContentBlock::text(text)]);
    let mut g = c.benchmark_group("gateway_redact");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Bytes(64 * 1024));
    for (name, redactor) in [("unscanned", &unscanned), ("scanned", &scanned)] {
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let mut changed = 0;
                for block in &black_box(&result).content {
                    if let ContentBlock::Text(t) = block
                        && matches!(redactor.redact(&t.text), std::borrow::Cow::Owned(_))
                    {
                        changed += 1;
                    }
                }
                black_box(changed)
            })
        });
    }
    g.finish();
}

/// The demo server on stdin/stdout, as `examples/gateway_demo_server` runs it.
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

fn divide() -> JsonObject {
    json!({"a": 1, "b": 4}).as_object().cloned().unwrap()
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

/// A host with one stdio server (this binary, serving the demo server), the
/// digest on, and the gate allowing its tools by pattern.
async fn host() -> Arc<Host> {
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
        .with_digest(Some(DigestOptions::new(Arc::new(MemoryStore::new()))));
    let env: BTreeMap<String, String> = BTreeMap::new();
    Arc::new(Host::start(&config, &env, options, &|_, _| {}).await)
}

/// A bare rmcp client on another instance of the same server.
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

/// An rmcp client of `gateway` over a duplex pipe (`serve_io` on the other end).
async fn stdio_client(gateway: &Gateway) -> RunningService<RoleClient, ()> {
    let (client_end, gateway_end) = tokio::io::duplex(1 << 16);
    let gateway = gateway.clone();
    tokio::spawn(async move {
        let caller = Caller::new("bench", TrustLevel::Creator);
        let _ = gateway.serve_io(gateway_end, caller).await;
    });
    ().serve(client_end).await.unwrap()
}

/// An rmcp client of the demo server in this process, over a duplex pipe.
async fn hop_client() -> RunningService<RoleClient, ()> {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(server) = core_agent_host::demo::DemoServer::new()
            .serve(server_end)
            .await
        {
            let _ = server.waiting().await;
        }
    });
    ().serve(client_end).await.unwrap()
}

/// An identity provider in this process: its metadata and its one RS256
/// key, on 127.0.0.1:0; the issuer URL and an access token for `audience`.
async fn identity_provider(audience: &str) -> (String, String) {
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let key = KeyPair::generate(KeySize::Rsa2048).unwrap();
    let public = key.public_key();
    let jwks = json!({"keys": [{"kty": "RSA", "kid": "bench", "alg": "RS256", "use": "sig",
        "n": b64(public.modulus().big_endian_without_leading_zero()),
        "e": b64(public.exponent().big_endian_without_leading_zero())}]});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let metadata = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || async move { axum::Json(jwks) }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = json!({"alg": "RS256", "typ": "at+jwt", "kid": "bench"});
    let claims = json!({"iss": issuer, "aud": audience, "sub": "bench-user",
        "email": "bench@example.com", "scope": "mcp:tools", "groups": ["eng"],
        "iat": now, "exp": now + 24 * 3600});
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let mut signature = vec![0; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .unwrap();
    (issuer, format!("{input}.{}", b64(&signature)))
}

/// An rmcp streamable HTTP client of the gateway at `url`, on `http`.
async fn http_client(http: &reqwest::Client, url: &str) -> RunningService<RoleClient, ()> {
    http_client_as(http, url, TOKEN).await
}

/// The same with `token` as its bearer token.
async fn http_client_as(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    ().serve(transport).await.unwrap()
}

/// An rmcp streamable HTTP client of the gateway at `url` that speaks
/// 2026-07-28 (`server/discover`, no session: every request stands alone).
async fn stateless_client(http: &reqwest::Client, url: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    let lifecycle = rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::LATEST],
    };
    rmcp::service::serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .unwrap()
}

/// How a call reaches the server.
#[derive(Clone, Copy)]
enum Route<'a> {
    /// An rmcp client: of the server itself (`divide`) or of the gateway
    /// (`bench_divide`).
    Client(&'a Peer<RoleClient>, &'static str),
    /// `Session::call` of the host.
    Host(&'a Session),
}

impl Route<'_> {
    async fn call(self) -> CallToolResult {
        match self {
            Route::Client(peer, tool) => {
                let params = CallToolRequestParams::new(tool).with_arguments(divide());
                peer.call_tool(params).await.unwrap()
            }
            Route::Host(session) => session.call("bench_divide", divide()).await.unwrap(),
        }
    }
}

/// A `resources/read` or `prompts/get` through an rmcp client: of the
/// server itself, or of the gateway (under the gateway's names).
#[derive(Clone, Copy)]
enum Context<'a> {
    Read(&'a Peer<RoleClient>, &'static str),
    Prompt(&'a Peer<RoleClient>, &'static str),
}

impl Context<'_> {
    /// The bytes of text it got back.
    async fn call(self) -> usize {
        match self {
            Context::Read(peer, uri) => {
                let result = peer
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await
                    .unwrap();
                serde_json::to_string(&result.contents).unwrap().len()
            }
            Context::Prompt(peer, name) => {
                let mut params = GetPromptRequestParams::new(name);
                params.arguments = json!({"sku": "SKU-0042"}).as_object().cloned();
                let result = peer.get_prompt(params).await.unwrap();
                serde_json::to_string(&result.messages).unwrap().len()
            }
        }
    }
}

/// Runs `iters` calls, `flight` at a time; the time they took.
fn timed<F, Fut, T>(rt: &Runtime, iters: u64, flight: usize, call: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    rt.block_on(async {
        let start = Instant::now();
        futures::stream::iter(0..iters)
            .map(|_| call())
            .buffer_unordered(flight)
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
    let host = rt.block_on(host());
    let gateway = Gateway::new(host.clone(), GatewayOptions::default());
    let session = host.session(SessionOptions::new(TrustLevel::Creator));
    let (bare_client, mut child) = rt.block_on(bare());
    let stdio = rt.block_on(stdio_client(&gateway));
    let hop = rt.block_on(hop_client());
    let telemetry = Telemetry::start(&rt, host.clone());
    let traced = telemetry.rt.block_on(stdio_client(&telemetry.gateway));
    // The same gateway, telemetry off, on a runtime of its own too.
    let apart = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let untraced = apart.block_on(stdio_client(&Gateway::new(
        host.clone(),
        GatewayOptions::default(),
    )));

    // The HTTP listener, stopped at the end.
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let auth = Auth::Tokens(vec![
        Token {
            name: "bench".to_owned(),
            secret: TOKEN.to_owned(),
            trust_level: TrustLevel::Creator,
        },
        Token {
            name: "limited".to_owned(),
            secret: LIMITED_TOKEN.to_owned(),
            trust_level: TrustLevel::Creator,
        },
    ]);
    let rate_limits =
        RateLimits::default().with_token("limited", Budget::all(Limit::Max(u64::from(u32::MAX))));
    // Signed-in callers too: JWTs of a provider in this process, creators
    // whatever their claims.
    let (issuer, jwt) = rt.block_on(identity_provider(&url));
    let oauth = ResourceServer::new(
        OAuthConfig::new(&issuer, &url)
            .with_trust(Vec::new(), DefaultTrust::Level(TrustLevel::Creator)),
        &core_agent_mcp_config::ProcessEnv,
    )
    .unwrap();
    assert_eq!(rt.block_on(oauth.warm_up()), Ok(1));
    // One token and one address open every session of the run (the
    // 100-session group, each with its GET stream, and those before it):
    // past the default caps of 128 per token and per address, they would be
    // closed or refused, as `serve` does not on loopback either.
    let mut http_options = HttpOptions::new(auth.clone())
        .with_oauth(Some(oauth.clone()))
        .with_rate_limits(rate_limits)
        .with_max_sessions(4096)
        .with_max_sessions_per_token(4096);
    http_options.max_connections_per_address = http_options.max_connections;
    let server = rt.spawn({
        let gateway = gateway.clone();
        async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            gateway
                .serve_http(listener, http_options, shutdown, Duration::from_secs(5))
                .await
        }
    });
    // One pooled reqwest client for every HTTP session.
    let pool = reqwest::Client::builder().no_proxy().build().unwrap();
    let http = rt.block_on(http_client(&pool, &url));
    let stateless = rt.block_on(stateless_client(&pool, &url));
    let signed_in = rt.block_on(http_client_as(&pool, &url, &jwt));
    let limited = rt.block_on(http_client_as(&pool, &url, LIMITED_TOKEN));

    let bare_peer = bare_client.peer().clone();
    let stdio_peer = stdio.peer().clone();
    let http_peer = http.peer().clone();
    let hop_peer = hop.peer().clone();
    let stateless_peer = stateless.peer().clone();
    let jwt_peer = signed_in.peer().clone();
    let limited_peer = limited.peer().clone();
    let traced_peer = traced.peer().clone();
    let untraced_peer = untraced.peer().clone();
    let paths = [
        ("bare", Route::Client(&bare_peer, "divide")),
        ("host", Route::Host(&session)),
        ("hop", Route::Client(&hop_peer, "divide")),
        ("stdio", Route::Client(&stdio_peer, "bench_divide")),
        ("http", Route::Client(&http_peer, "bench_divide")),
        ("stateless", Route::Client(&stateless_peer, "bench_divide")),
        ("jwt", Route::Client(&jwt_peer, "bench_divide")),
        ("limited", Route::Client(&limited_peer, "bench_divide")),
        ("untraced", Route::Client(&untraced_peer, "bench_divide")),
        ("telemetry", Route::Client(&traced_peer, "bench_divide")),
    ];

    // Every path answers, and the same way, before anything is timed.
    rt.block_on(async {
        for (name, path) in paths {
            assert_eq!(text(&path.call().await), "0.25", "{name}");
        }
    });

    for (group, flight) in [("gateway_sequential", 1), ("gateway_concurrent", IN_FLIGHT)] {
        let mut g = c.benchmark_group(group);
        g.sample_size(30)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4))
            .throughput(Throughput::Elements(1));
        for (name, path) in paths {
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter_custom(|iters| timed(&rt, iters, flight, || path.call()))
            });
        }
        g.finish();
    }

    // The check alone: a static token beside a JWT (signature and claims).
    let static_header = format!("Bearer {TOKEN}");
    let jwt_header = format!("Bearer {jwt}");
    assert!(auth.caller(Some(&static_header)).is_some());
    assert!(rt.block_on(oauth.authenticate(Some(&jwt_header))).is_ok());
    let mut g = c.benchmark_group("gateway_auth");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::from_parameter("static"), |b| {
        b.iter(|| black_box(auth.caller(Some(black_box(&static_header)))))
    });
    g.bench_function(BenchmarkId::from_parameter("jwt"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(
                        oauth
                            .authenticate(Some(black_box(&jwt_header)))
                            .await
                            .is_ok(),
                    );
                }
                start.elapsed()
            })
        })
    });
    g.finish();

    // A resource read and a prompt through the gateway, beside the same
    // request to the server itself.
    let public = format!("core-agent://{SERVER}/{SUMMARY_URI}");
    let public: &'static str = Box::leak(public.into_boxed_str());
    let context = [
        ("read_bare", Context::Read(&bare_peer, SUMMARY_URI)),
        ("read_stdio", Context::Read(&stdio_peer, public)),
        ("read_http", Context::Read(&http_peer, public)),
        ("prompt_bare", Context::Prompt(&bare_peer, "restock")),
        (
            "prompt_stdio",
            Context::Prompt(&stdio_peer, "bench_restock"),
        ),
        ("prompt_http", Context::Prompt(&http_peer, "bench_restock")),
    ];
    rt.block_on(async {
        for (name, path) in context {
            assert!(path.call().await > 0, "{name}");
        }
    });
    let mut g = c.benchmark_group("gateway_context");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    for (name, path) in context {
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| timed(&rt, iters, 1, || path.call()))
        });
    }
    g.finish();

    // Criterion's test mode (`cargo test --benches`) runs each bench once;
    // the interleaved rounds and the load run only under `cargo bench`.
    if std::env::args().any(|a| a == "--bench") {
        let mut lines = interleaved(&rt, &paths);
        lines.push(sessions(&rt, &pool, &url));
        let table = lines.join("\n") + "\n";
        eprint!("gateway (mode path calls mean_ns p50_ns p99_ns):\n{table}");
        let dir = criterion_home();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("gateway_interleaved.tsv"), table).unwrap();
    }

    telemetry.rt.block_on(async {
        drop(traced_peer);
        let _ = traced.cancel().await;
    });
    telemetry.stop();
    apart.block_on(async {
        drop(untraced_peer);
        let _ = untraced.cancel().await;
    });
    apart.shutdown_timeout(Duration::from_secs(1));
    rt.block_on(async {
        drop((
            bare_peer,
            stdio_peer,
            http_peer,
            hop_peer,
            stateless_peer,
            jwt_peer,
        ));
        let _ = signed_in.cancel().await;
        let _ = stateless.cancel().await;
        let _ = hop.cancel().await;
        let _ = http.cancel().await;
        let _ = stdio.cancel().await;
        let _ = bare_client.cancel().await;
        let _ = stop.send(());
        let _ = server.await;
        drop(session);
        host.shutdown().await;
        let _ = child.wait().await;
    });
}

/// Rounds of the interleaved measurement, and calls per path per round.
const ROUNDS: usize = 40;
const CHUNK: usize = 50;

/// The `p`-quantile of sorted `times`, in nanoseconds.
fn quantile(times: &[Duration], p: f64) -> u128 {
    times[((times.len() - 1) as f64 * p).round() as usize].as_nanos()
}

/// The paths again, taking turns every [`CHUNK`] calls (each round starting
/// with the next path); one line per mode and path:
/// `mode path calls mean_ns p50_ns p99_ns`.
fn interleaved(rt: &Runtime, paths: &[(&str, Route<'_>)]) -> Vec<String> {
    let mut lines = Vec::new();
    for (mode, flight) in [("sequential", 1), ("concurrent", IN_FLIGHT)] {
        let mut latencies: Vec<Vec<Duration>> =
            vec![Vec::with_capacity(ROUNDS * CHUNK); paths.len()];
        let mut elapsed = vec![Duration::ZERO; paths.len()];
        rt.block_on(async {
            for round in 0..ROUNDS {
                for k in 0..paths.len() {
                    let i = (round + k) % paths.len();
                    let path = paths[i].1;
                    let start = Instant::now();
                    let times: Vec<Duration> = futures::stream::iter(0..CHUNK)
                        .map(|_| async move {
                            let start = Instant::now();
                            black_box(path.call().await);
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
        for (i, (name, _)) in paths.iter().enumerate() {
            let times = &mut latencies[i];
            times.sort_unstable();
            let calls = times.len();
            let mean = elapsed[i].as_nanos() / calls as u128;
            lines.push(format!(
                "{mode}\t{name}\t{calls}\t{mean}\t{}\t{}",
                quantile(times, 0.5),
                quantile(times, 0.99)
            ));
        }
    }
    lines
}

/// [`SESSIONS`] HTTP sessions, all connected first, then all making
/// [`SESSION_CALLS`] calls one after another, together; the line
/// `sessions http <calls> <total_ns> <p50_ns> <p99_ns>` (its "mean" column
/// is the whole run's time).
fn sessions(rt: &Runtime, pool: &reqwest::Client, url: &str) -> String {
    rt.block_on(async {
        let clients: Vec<RunningService<RoleClient, ()>> =
            futures::future::join_all((0..SESSIONS).map(|_| http_client(pool, url))).await;
        let start = Arc::new(tokio::sync::Barrier::new(SESSIONS + 1));
        let handles: Vec<_> = clients
            .iter()
            .map(|client| {
                let peer = client.peer().clone();
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    let mut times = Vec::with_capacity(SESSION_CALLS);
                    for _ in 0..SESSION_CALLS {
                        let begin = Instant::now();
                        let result = Route::Client(&peer, "bench_divide").call().await;
                        times.push(begin.elapsed());
                        assert_eq!(text(&result), "0.25");
                    }
                    times
                })
            })
            .collect();
        start.wait().await;
        let begin = Instant::now();
        let mut times = Vec::with_capacity(SESSIONS * SESSION_CALLS);
        for handle in handles {
            times.extend(handle.await.unwrap());
        }
        let total = begin.elapsed();
        for client in clients {
            let _ = client.cancel().await;
        }
        times.sort_unstable();
        format!(
            "sessions\thttp\t{}\t{}\t{}\t{}",
            times.len(),
            total.as_nanos(),
            quantile(&times, 0.5),
            quantile(&times, 0.99)
        )
    })
}

/// Where criterion writes its estimates: `$CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else `criterion` in the target directory
/// this binary was built in (`<target>/release/deps/gateway-…`).
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

/// The gateway with tracing and metrics on, on a runtime of its own.
struct Telemetry {
    rt: Runtime,
    gateway: Gateway,
    #[cfg(feature = "otel")]
    otel: core_agent_gateway::Otel,
}

impl Telemetry {
    /// With the `otel` feature: spans and metrics exported over OTLP to a
    /// sink that answers 200 on `rt`, by a subscriber set on this runtime's
    /// threads only (the other paths stay untraced).
    fn start(rt: &Runtime, host: Arc<Host>) -> Telemetry {
        let metrics = Arc::new(core_agent_gateway::Metrics::new());
        let gateway = Gateway::new(
            host,
            GatewayOptions::default()
                .with_metrics(Some(metrics.clone()))
                .with_tracing(true),
        );
        let builder = || {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.enable_all();
            b
        };
        #[cfg(feature = "otel")]
        {
            use tracing_subscriber::layer::SubscriberExt as _;
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap();
            let sink = format!("http://{}", listener.local_addr().unwrap());
            rt.spawn(async move {
                let ok = axum::Router::new().fallback(|| async { http::StatusCode::OK });
                let _ = axum::serve(listener, ok).await;
            });
            let otel = core_agent_gateway::Otel::to_endpoint(&sink).unwrap();
            otel.export_metrics(&metrics);
            let layer = otel.layer().unwrap();
            let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
            let rt = builder()
                .on_thread_start(move || {
                    // Kept for the thread's life.
                    std::mem::forget(tracing::dispatcher::set_default(&dispatch));
                })
                .build()
                .unwrap();
            Telemetry { rt, gateway, otel }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = rt;
            Telemetry {
                rt: builder().build().unwrap(),
                gateway,
            }
        }
    }

    fn stop(self) {
        #[cfg(feature = "otel")]
        self.otel.shutdown(Duration::from_secs(5));
        drop(self.gateway);
        self.rt.shutdown_timeout(Duration::from_secs(1));
    }
}
