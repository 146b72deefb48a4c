//! Backends that act for each user: `auth.token_exchange` against a real
//! authorization server (npm `oidc-provider` with the RFC 8693 grant
//! registered, `tests/fixture/oidc_provider.mjs`) and a backend that checks
//! every bearer token it gets (`tests/fixture/tx_backend.mjs`). Two users
//! signed in to the gateway each reach the backend with their own exchanged
//! token (their `sub`, the backend's audience), exchanged once for several
//! calls; the backend never sees a client's token; a refused exchange, a
//! wrong client secret and a caller with a static token each get a clear
//! tool error, and no token is ever logged.

use std::process::Command;
use std::time::{Duration, Instant};

use core_agent_e2e::{Project, deps, hermetic, node, root};
use serde_json::{Value, json};

use crate::gateway_oauth::{Idp, Proc, TOKEN, claims, free_port, gateway_with, http};

/// The operator's own token for the backend (the shared connection's).
const SERVICE: &str = "tx-backend-service-token-0123456789";
/// The gateway's client secret at the authorization server.
const SECRET: &str = "gateway-exchange-secret";

/// The backend, which trusts `issuer`'s tokens for its own URL.
fn backend(issuer: &str) -> (Proc, String) {
    let mut cmd = Command::new(node());
    hermetic(&mut cmd)
        .arg(root().join("tests/fixture/tx_backend.mjs"))
        .env("NODE_MODULES", deps().join("npm/node_modules"))
        .env("ISSUER", issuer)
        .env("SERVICE_TOKEN", SERVICE);
    Proc::start(cmd, "tx backend", |line| {
        serde_json::from_str::<Value>(line).ok()?["url"]
            .as_str()
            .map(str::to_owned)
    })
}

/// `tickets` exchanges at the issuer (found from its metadata) with the
/// right secret; `tickets_bad` at the token endpoint with a wrong one.
fn project(issuer: &str, audience: &str, backend: &str) -> Project {
    let p = Project::empty();
    let exchange = |secret: &str, endpoint: Value| {
        let mut x = json!({"client_id": "gateway-exchange", "client_secret": secret, "scopes": ["tickets:read"]});
        for (k, v) in endpoint.as_object().unwrap() {
            x[k] = v.clone();
        }
        json!({"url": backend, "headers": {"Authorization": "Bearer ${env:TX_SERVICE_TOKEN}"},
               "auth": {"token_exchange": x}})
    };
    p.write(
        ".agents/mcp.json",
        &json!({"mcpServers": {
            "tickets": exchange("${env:TX_SECRET}", json!({"issuer": issuer})),
            "tickets_bad": exchange("not-the-secret", json!({"token_endpoint": format!("{issuer}/token")})),
        }})
        .to_string(),
    );
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"mode": "ask", "allow": ["mcp:tickets_*"]},
            "gateway": {"oauth": {
                "issuer": issuer, "audience": audience, "leeway_secs": 5,
                "required_scopes": ["mcp:tools"],
                "trust": [{"claim": "groups", "value": "eng", "level": "user"}],
                "default": "public"
            }}
        })
        .to_string(),
    );
    p
}

/// One JSON-RPC request to the gateway as `authorization`: the answer's
/// session id and its JSON-RPC message (from a JSON or an SSE body).
async fn rpc(
    url: &str,
    authorization: &str,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Value) {
    // One client for every request, so the times measured are the calls'.
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let mut r = CLIENT
        .get_or_init(http)
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", authorization)
        .body(body.to_string());
    if let Some(id) = session {
        r = r
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = r.send().await.unwrap();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "HTTP {status}: {text}");
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or(Value::Null);
    (id, message)
}

/// A session of `authorization` that sees `tickets_whoami`.
async fn session(url: &str, authorization: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "0"}}});
    let (id, _) = rpc(url, authorization, None, init).await;
    let id = id.expect("a session id");
    rpc(
        url,
        authorization,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, list) = rpc(
            url,
            authorization,
            Some(&id),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
        if list.to_string().contains("tickets_whoami") {
            return id;
        }
        assert!(Instant::now() < deadline, "no tickets_whoami: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Calls `tool` in `session`: whether it failed, and its text.
async fn call(url: &str, authorization: &str, session: &str, tool: &str) -> (bool, String) {
    let (_, answer) = rpc(
        url,
        authorization,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": {}}}),
    )
    .await;
    let result = &answer["result"];
    assert!(result.is_object(), "{answer}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (result["isError"] == true, text)
}

async fn get(url: &str) -> Value {
    let r = http().get(url).send().await.unwrap();
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

fn micros(d: Duration) -> u128 {
    d.as_micros()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_reaches_the_backend_with_their_own_exchanged_token_never_the_clients() {
    let idp = Idp::start();
    let (_backend, backend_url) = backend(&idp.issuer);
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let p = project(&idp.issuer, &audience, &backend_url);
    let gw = gateway_with(
        &p,
        port,
        &[("TX_SECRET", SECRET), ("TX_SERVICE_TOKEN", SERVICE)],
    );
    let iss = idp.issuer.clone();
    let token = |sub: &str| {
        let claims = claims(&iss, &audience, json!({"sub": sub}));
        let idp = &idp;
        async move { format!("Bearer {}", idp.sign("k1", None, claims).await) }
    };
    let users = ["alice", "bob"];
    let mut client_tokens = Vec::new();
    for user in users {
        let authorization = token(user).await;
        let session = session(&audience, &authorization).await;
        let mut took = Vec::new();
        for _ in 0..4 {
            let started = Instant::now();
            let (failed, text) = call(&audience, &authorization, &session, "tickets_whoami").await;
            took.push(started.elapsed());
            assert!(!failed, "{user}: {text}\n{}", gw.output());
            let seen: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(seen["sub"], user, "{seen}");
            assert_eq!(seen["aud"], backend_url.as_str(), "{seen}");
            assert_eq!(seen["act"]["sub"], "gateway-exchange", "{seen}");
            assert_eq!(seen["scope"], "tickets:read", "{seen}");
        }
        let cached: Vec<u128> = took[1..].iter().copied().map(micros).collect();
        eprintln!(
            "token exchange, {user}: first call (with the exchange) {} µs, cached calls {cached:?} µs",
            micros(took[0])
        );
        client_tokens.push(authorization.trim_start_matches("Bearer ").to_owned());
    }
    // One exchange per user for four calls each.
    let stats = get(&format!("{}/test/stats", idp.issuer)).await;
    assert_eq!(stats["exchanges"], json!({"alice": 1, "bob": 1}), "{stats}");
    // The backend saw the operator's token and the exchanged ones, never a client's.
    let seen = get(&backend_url.replace("/mcp", "/test/seen")).await;
    assert_eq!(seen["calls"], 8, "{seen}");
    let bearers: Vec<&str> = seen["bearers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(bearers.contains(&SERVICE), "{seen}");
    for t in &client_tokens {
        assert!(
            !bearers.contains(&t.as_str()),
            "the backend received a client's token"
        );
    }
    let exchanged: Vec<&str> = bearers.iter().copied().filter(|b| *b != SERVICE).collect();
    assert_eq!(
        exchanged
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        2,
        "one exchanged token per user: {exchanged:?}"
    );

    // carol's exchange is refused by the authorization server: invalid_grant.
    let carol = token("carol").await;
    let s = session(&audience, &carol).await;
    let (failed, text) = call(&audience, &carol, &s, "tickets_whoami").await;
    assert!(failed, "{text}");
    assert!(
        text.contains("was not sent")
            && text.contains("HTTP 400 invalid_grant")
            && text.contains("carol may not act"),
        "{text}"
    );
    // A wrong client secret: invalid_client, and what to check.
    let alice = token("alice").await;
    let s = session(&audience, &alice).await;
    let (failed, text) = call(&audience, &alice, &s, "tickets_bad_whoami").await;
    assert!(
        failed && text.contains("HTTP 401 invalid_client") && text.contains("client_secret"),
        "{text}"
    );
    // The operator's static token has no user to act for.
    let operator = format!("Bearer {TOKEN}");
    let s = session(&audience, &operator).await;
    let (failed, text) = call(&audience, &operator, &s, "tickets_whoami").await;
    assert!(
        failed && text.contains("did not sign in with the identity provider"),
        "{text}"
    );
    assert_eq!(
        get(&format!("{}/test/stats", idp.issuer)).await["exchanges"]["carol"],
        Value::Null
    );

    // No token in the gateway's log: neither the clients' nor the exchanged ones.
    let log = gw.output();
    assert!(log.contains("token exchange"), "{log}");
    for t in client_tokens
        .iter()
        .map(String::as_str)
        .chain(exchanged.iter().copied())
        .chain([SECRET, SERVICE])
    {
        assert!(!log.contains(t), "a token or secret in the log:\n{log}");
    }
}
