//! The gateway over streamable HTTP on a loopback port, driven with raw
//! requests: the caps on open sessions (the session idle the longest makes
//! room, one with a call in flight never does), the idle timeout, and the
//! throttle on repeated failed authentication.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use core_agent_gateway::{Auth, Gateway, GatewayOptions, HttpOptions, Token};
use core_agent_host::{Host, HostOptions};
use core_agent_mcp_config::{Config, TrustLevel};
use core_agent_permissions::{Mode, PermissionsConfig};
use serde_json::{Value, json};

use super::common::demo_entry;

const A: &str = "token-a-0123456789abcdef";
const B: &str = "token-b-0123456789abcdef";
const PROTOCOL: &str = "2025-06-18";

/// A gateway listening on 127.0.0.1 with tokens `a` and `b`, its HTTP
/// options set by `tune`; with the demo server behind it (in `ask` mode,
/// so that a call waits for its approval) when `demo`.
struct Served {
    addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    _host: Arc<Host>,
}

async fn serve(demo: bool, tune: impl FnOnce(&mut HttpOptions)) -> Served {
    let mut config = Config::default();
    if demo {
        config.servers.push(demo_entry());
    }
    let options =
        HostOptions::default().with_permissions(PermissionsConfig::default().with_mode(Mode::Ask));
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Arc::new(Host::start(&config, &env, options, &|_, _| {}).await);
    let gateway = Gateway::new(host.clone(), GatewayOptions::default());
    let token = |name: &str, secret: &str| Token {
        name: name.to_owned(),
        secret: secret.to_owned(),
        trust_level: TrustLevel::Creator,
    };
    let mut options = HttpOptions::new(Auth::Tokens(vec![token("a", A), token("b", B)]));
    tune(&mut options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        gateway
            .serve_http(listener, options, shutdown, Duration::from_secs(1))
            .await
    });
    Served {
        addr,
        _stop: stop,
        _host: host,
    }
}

impl Served {
    async fn post(&self, token: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
        let mut request = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(format!("http://{}/mcp", self.addr))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        tokio::time::timeout(Duration::from_secs(30), request.send())
            .await
            .expect("no answer")
            .unwrap()
    }

    /// Opens a session (one that answers elicitations when `elicits`); its id.
    async fn open(&self, token: &str, elicits: bool) -> String {
        let capabilities = if elicits {
            json!({"elicitation": {}})
        } else {
            json!({})
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"},
        }});
        let response = self.post(token, None, &init).await;
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        response.bytes().await.unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self.post(token, Some(&id), &initialized).await;
        assert_eq!(response.status(), 202);
        id
    }

    /// The status of a `tools/list` in session `id`.
    async fn list(&self, token: &str, id: &str) -> u16 {
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let response = self.post(token, Some(id), &list).await;
        let status = response.status().as_u16();
        response.bytes().await.unwrap();
        status
    }

    /// Starts `demo_add_note` in session `id`: the gate asks the client,
    /// which does not answer, so the call stays in flight while the
    /// returned response is open.
    async fn call_in_flight(&self, token: &str, id: &str) -> reqwest::Response {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "demo_add_note", "arguments": {"note": "waiting"},
        }});
        let mut response = self.post(token, Some(id), &call).await;
        assert_eq!(response.status(), 200);
        // The approval request reaches the client: the call is under way.
        let mut seen = String::new();
        while !seen.contains("elicitation/create") {
            let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
                .await
                .expect("the gate never asked")
                .unwrap()
                .expect("the answer ended before the gate asked");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        response
    }

    async fn health(&self) -> Value {
        let body = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!("http://{}/health", self.addr))
            .bearer_auth(A)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&body).unwrap()
    }

    async fn get_sessions(&self, token: &str) -> reqwest::Response {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!("http://{}/sessions", self.addr))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_idle_the_longest_makes_room_per_token_and_in_all() {
    let served = serve(false, |o| {
        o.max_sessions = 3;
        o.max_sessions_per_token = 2;
    })
    .await;
    let a1 = served.open(A, false).await;
    let a2 = served.open(A, false).await;
    // Token a's third session closes its first.
    let a3 = served.open(A, false).await;
    assert_eq!(served.list(A, &a1).await, 404);
    // a2, used now, is no longer the one idle the longest: a3 is.
    assert_eq!(served.list(A, &a2).await, 200);
    let b1 = served.open(B, false).await;
    // b2 is within b's cap but past the total: b's own session idle the
    // longest goes, never another token's (a3 is idle longer).
    let b2 = served.open(B, false).await;
    assert_eq!(served.list(B, &b1).await, 404);
    for (token, id) in [(A, &a2), (A, &a3), (B, &b2)] {
        assert_eq!(served.list(token, id).await, 200, "{id}");
    }
    let health = served.health().await;
    assert_eq!(
        health["sessions"],
        json!({"open": 3, "max": 3, "max_per_token": 2}),
        "{health}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_without_a_token_say_only_their_status() {
    let served = serve(true, |_| {}).await;
    let get = |path: &'static str, token: Option<&'static str>| {
        let addr = served.addr;
        async move {
            let client = reqwest::Client::builder().no_proxy().build().unwrap();
            let mut request = client.get(format!("http://{addr}{path}"));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value =
                serde_json::from_str(&response.text().await.unwrap()).unwrap();
            (status, body)
        }
    };
    // Before: /health told anyone the servers, sessions and warnings.
    assert_eq!(get("/health", None).await, (200, json!({"status": "ok"})));
    assert_eq!(
        get("/health", Some("a-wrong-token-0123456789")).await,
        (200, json!({"status": "ok"}))
    );
    let (status, detailed) = get("/health", Some(A)).await;
    assert_eq!(status, 200);
    assert!(detailed["sessions"].is_object(), "{detailed}");
    assert!(detailed["warnings"].is_array(), "{detailed}");
    let (status, ready) = get("/health/ready", None).await;
    assert_eq!((status, ready), (200, json!({"ready": true})));
    let (_, ready) = get("/health/ready", Some(B)).await;
    assert_eq!(ready["required"], json!([]), "{ready}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_call_in_flight_is_never_closed_to_make_room() {
    let served = serve(true, |o| {
        o.max_sessions = 2;
        o.max_sessions_per_token = 2;
    })
    .await;
    let busy = served.open(A, true).await;
    let _waiting = served.call_in_flight(A, &busy).await;
    let idle = served.open(A, true).await;
    // busy is older, but its call is in flight: idle goes.
    let newest = served.open(A, true).await;
    assert_eq!(served.list(A, &idle).await, 404);
    let _also_waiting = served.call_in_flight(A, &newest).await;
    // Both sessions are busy: a new one is refused, with when to retry.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }});
    let refused = served.post(B, None, &init).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    let body = refused.text().await.unwrap();
    assert!(
        body.contains("already holds 2 MCP sessions (gateway.max_sessions)")
            && body.contains("or raise gateway.max_sessions"),
        "{body}"
    );
    assert_eq!(served.health().await["sessions"]["open"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idle_timeout_is_a_setting() {
    let served = serve(false, |o| o.session_idle = Duration::from_millis(700)).await;
    let kept = served.open(A, false).await;
    let left = served.open(A, false).await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(served.list(A, &kept).await, 200);
    }
    assert_eq!(served.list(A, &left).await, 404, "idle for 1.2 s");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(served.list(A, &kept).await, 404);
    assert_eq!(served.health().await["sessions"]["open"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failed_authentication_gets_429_with_retry_after_until_the_window_ends() {
    let served = serve(false, |o| {
        o.auth_failures_allowed = 3;
        o.auth_failure_window = Duration::from_secs(2);
    })
    .await;
    let bad = "not-a-token-of-this-gateway";
    for _ in 0..3 {
        assert_eq!(served.get_sessions(bad).await.status(), 401);
    }
    let throttled = served.get_sessions(bad).await;
    assert_eq!(throttled.status(), 429);
    let wait: u64 = throttled.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    assert!(
        throttled
            .text()
            .await
            .unwrap()
            .contains("too many failed sign-ins from this address")
    );
    // While throttled no token from the address is checked, the right one
    // included: guessing stops instead of going on at full speed.
    assert_eq!(served.get_sessions(A).await.status(), 429);
    assert_eq!(served.get_sessions(bad).await.status(), 429);
    // The window over, a failure is a plain 401 again and the right token passes.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(served.get_sessions(bad).await.status(), 401);
    assert_eq!(served.get_sessions(A).await.status(), 200);
}
