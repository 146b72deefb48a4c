//! `core-agent serve --http` against an abusive client, over raw TCP and
//! reqwest on loopback: half-sent request heads (slowloris) and more
//! connections than the caps, foreign `Origin`s, malformed bodies, a
//! request id reused while in flight, `DELETE` as the official Python SDK
//! expects it, and a guesser of tokens, throttled on its address while
//! another address still signs in.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use core_agent_e2e::{Project, hermetic, python};
use serde_json::{Value, json};

use crate::fixture;
use crate::gateway_clients::{HttpGateway, TOKEN};

/// A gateway with the fixture's `ok` server (`f_sleep`, `f_echo`), every
/// call allowed, and `gateway` as config.json's gateway section.
fn project(gateway: Value) -> Project {
    let p = Project::new(&json!({"version": 1, "servers": {"f": fixture("ok")}}));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "yolo"}, "gateway": gateway}).to_string(),
    );
    p
}

fn addr(gateway: &HttpGateway) -> SocketAddr {
    let rest = gateway.url.trim_start_matches("http://");
    rest.trim_end_matches("/mcp").parse().unwrap()
}

/// A client whose connections come from `local` (127.0.0.2 is loopback
/// too, and another address to the gateway).
fn client_from(local: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .local_address(IpAddr::from(local))
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}"#;

/// POSTs `body` to `/mcp` with `token`, `session` and more headers.
async fn post(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.body(body.to_owned()).send().await.unwrap()
}

/// Opens a session (initialize, then initialized) and returns its id.
async fn session(client: &reqwest::Client, url: &str) -> String {
    let response = post(client, url, TOKEN, None, &[], INITIALIZE).await;
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let response = post(client, url, TOKEN, Some(&id), &[], initialized).await;
    assert_eq!(response.status(), 202);
    id
}

/// The JSON-RPC message with `id` in an answer (JSON, or SSE frames).
async fn answer(response: reqwest::Response, id: &Value) -> Value {
    let text = response.text().await.unwrap();
    let candidates = std::iter::once(text.as_str()).chain(
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim),
    );
    candidates
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .find(|m| &m["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id} in {text}"))
}

/// Whether the server closed `stream` (EOF or reset) within `patience`,
/// reading whatever it sent.
fn closed_within(stream: &mut TcpStream, patience: Duration) -> (bool, String) {
    stream.set_read_timeout(Some(patience)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (true, String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (true, String::from_utf8_lossy(&got).into_owned());
            }
            Err(_) => return (false, String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_heads_are_closed_and_connections_past_the_cap_refused_while_others_are_served() {
    const PER_ADDRESS: usize = 20;
    let p = project(json!({
        "header_timeout_secs": 2,
        "max_connections": 100,
        "max_connections_per_address": PER_ADDRESS,
    }));
    let gateway = HttpGateway::start(&p);
    let address = addr(&gateway);
    // Slowloris: half a request head on every connection one address may hold.
    let mut slow: Vec<TcpStream> = (0..PER_ADDRESS)
        .map(|_| {
            let mut s = TcpStream::connect(address).unwrap();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // One more from that address is refused at once (503, then closed).
    let mut extra = TcpStream::connect(address).unwrap();
    let (closed, said) = closed_within(&mut extra, Duration::from_secs(5));
    assert!(
        closed,
        "a connection past the per-address cap was held open"
    );
    assert!(
        said.is_empty() || said.starts_with("HTTP/1.1 503"),
        "{said}"
    );
    // Another address is still served meanwhile.
    let other = client_from([127, 0, 0, 2]);
    let health = other
        .get(gateway.url.replace("/mcp", "/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // Every half head is closed once the header deadline passes (it never
    // was before: 900 stayed open for good).
    let closed = slow
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_secs(20)).0)
        .filter(|closed| *closed)
        .count();
    assert_eq!(closed, PER_ADDRESS, "half-sent heads still open");
    // Their places are free again: a whole request from the first address works.
    let response = post(
        &client_from([127, 0, 0, 1]),
        &gateway.url,
        TOKEN,
        None,
        &[],
        INITIALIZE,
    )
    .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_and_allowed_ones_pass() {
    let p = project(json!({"allowed_origins": ["https://tools.example.com"]}));
    let gateway = HttpGateway::start_with(&p, &["--allow-origin", "https://app.example.com"], &[]);
    let client = client_from([127, 0, 0, 1]);
    let status = |origin: Option<&'static str>| {
        let client = client.clone();
        let url = gateway.url.clone();
        async move {
            let headers: Vec<(&str, &str)> = origin.map(|o| ("origin", o)).into_iter().collect();
            post(&client, &url, TOKEN, None, &headers, INITIALIZE)
                .await
                .status()
                .as_u16()
        }
    };
    for foreign in [
        "https://evil.example",
        "null",
        "https://app.example.com.evil.example",
        "http://app.example.com",
    ] {
        assert_eq!(status(Some(foreign)).await, 403, "{foreign}");
    }
    for allowed in [
        "https://app.example.com",
        "https://tools.example.com",
        "http://localhost:5173",
        "http://127.0.0.1:8080",
    ] {
        assert_eq!(status(Some(allowed)).await, 200, "{allowed}");
    }
    // A client that is not a browser sends none.
    assert_eq!(status(None).await, 200);
    // The probes are guarded too.
    let health = client
        .get(gateway.url.replace("/mcp", "/health"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_malformed_body_gets_the_json_rpc_code_and_status_the_spec_names() {
    let p = project(json!({}));
    let gateway = HttpGateway::start(&p);
    let client = client_from([127, 0, 0, 1]);
    let id = session(&client, &gateway.url).await;
    // (body, HTTP status, JSON-RPC code); before: 415 for the first five,
    // -32601 for the arguments list, -32603 for the unknown resource.
    let table = [
        ("{\"jsonrpc\": \"2.0\", \"id\": 3, ", 400, -32700),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]",
            400,
            -32600,
        ),
        ("42", 400, -32600),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
            400,
            -32600,
        ),
        ("{\"id\":3,\"method\":\"ping\"}", 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"f_echo","arguments":[1,2]}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///no/such/resource"}}"#,
            200,
            -32002,
        ),
    ];
    for (body, status, code) in table {
        let response = post(&client, &gateway.url, TOKEN, Some(&id), &[], body).await;
        assert_eq!(response.status(), status, "{body}");
        let text = response.text().await.unwrap();
        let message = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .chain(std::iter::once(text.as_str()))
            .filter_map(|c| serde_json::from_str::<Value>(c).ok())
            .find(|m| m.get("error").is_some())
            .unwrap_or_else(|| panic!("{body}: no JSON-RPC error in {text}"));
        assert_eq!(message["error"]["code"], code, "{body}: {message}");
        assert_eq!(message["jsonrpc"], "2.0", "{body}: {message}");
    }
    // The session still works.
    let ping = r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#;
    let response = post(&client, &gateway.url, TOKEN, Some(&id), &[], ping).await;
    assert_eq!(response.status(), 200);
    let pong = answer(response, &json!(4)).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_reused_while_in_flight_is_refused_and_the_first_is_answered() {
    let p = project(json!({}));
    let gateway = HttpGateway::start(&p);
    let client = client_from([127, 0, 0, 1]);
    let session = session(&client, &gateway.url).await;
    // Wait for the backend's tools.
    for _ in 0..100 {
        let list = r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#;
        let listed = answer(
            post(&client, &gateway.url, TOKEN, Some(&session), &[], list).await,
            &json!("l"),
        )
        .await;
        if listed.to_string().contains("f_sleep") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let slow = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"f_sleep","arguments":{"ms":1500}}}"#;
    let first = {
        let client = client.clone();
        let url = gateway.url.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let response = post(&client, &url, TOKEN, Some(&session), &[], slow).await;
            answer(response, &json!(9)).await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    let second = post(&client, &gateway.url, TOKEN, Some(&session), &[], again).await;
    assert_eq!(second.status(), 400);
    let refused: Value = second.json().await.unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{refused}"
    );
    // The first gets its answer (before: still open after 70 s).
    let first = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the first request was left hanging")
        .unwrap();
    assert!(first.get("result").is_some(), "{first}");
    // Once answered, its id is free again.
    let response = post(&client, &gateway.url, TOKEN, Some(&session), &[], again).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_200_and_the_python_sdk_closes_without_a_failure() {
    let p = project(json!({}));
    let gateway = HttpGateway::start(&p);
    let client = client_from([127, 0, 0, 1]);
    let session = session(&client, &gateway.url).await;
    let response = client
        .delete(&gateway.url)
        .bearer_auth(TOKEN)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // The official Python SDK closes its session with DELETE; on 202 it
    // logged "Session termination failed: 202" at every close.
    let script = r#"
import logging, sys
import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

logging.basicConfig(level=logging.INFO, stream=sys.stderr)

async def main(url, token):
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
    print("closed")

anyio.run(main, sys.argv[1], sys.argv[2])
"#;
    let mut cmd = Command::new(python());
    hermetic(&mut cmd)
        .arg("-c")
        .arg(script)
        .arg(&gateway.url)
        .arg(TOKEN);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("closed"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("Session termination failed"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessing_address_is_throttled_even_with_the_right_token_and_another_still_signs_in() {
    let p = project(json!({}));
    let gateway = HttpGateway::start(&p);
    let guesser = client_from([127, 0, 0, 1]);
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    // 20 wrong tokens a minute are allowed, each a 401 that says invalid_token.
    for i in 0..20 {
        let token = format!("wrong-token-number-{i:04}-abcdefgh");
        let response = post(&guesser, &gateway.url, &token, None, &[], ping).await;
        assert_eq!(response.status(), 401, "guess {i}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    }
    // Then no token from that address is checked: the right one gets 429
    // too (before: 200, so guessing went on at ~2,000 a second).
    for token in [TOKEN, "wrong-token-number-9999-abcdefgh"] {
        let response = post(&guesser, &gateway.url, token, None, &[], INITIALIZE).await;
        assert_eq!(response.status(), 429);
        let wait: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
    // Another address signs in.
    let other = client_from([127, 0, 0, 2]);
    let response = post(&other, &gateway.url, TOKEN, None, &[], INITIALIZE).await;
    assert_eq!(response.status(), 200);
    // No token at all: 401 without an error code (RFC 6750 §3.1).
    let response = other
        .post(&gateway.url)
        .header("content-type", "application/json")
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap();
    assert!(!challenge.contains("error="), "{challenge}");
}
