//! One caller cannot crowd out another (issue 29, section 4), against the
//! real `core-agent serve --http` with two static tokens: the creator's
//! (`CORE_AGENT_GATEWAY_TOKEN`) and a `public` one from `gateway.tokens`
//! (per-owner payload shares are tested in `core-agent-digest`'s store).
//! Public sessions at the session cap never close the creator's;
//! a public caller past its calls per minute gets 429 with `Retry-After`,
//! however many sessions it opens, while the creator goes on; `/metrics`
//! and the audit trail count the refusals.

use std::time::{Duration, Instant};

use core_agent_e2e::{Project, bin};
use serde_json::{Value, json};

use crate::gateway_clients::{HttpGateway, TOKEN};

const PUBLIC_TOKEN: &str = "e2e-public-token-0123456789abcdef";
const PROTOCOL: &str = "2025-06-18";

/// The `job` fixture (`job_status {entries}`: a JSON status history of
/// about 160 bytes an entry, digested) and `gateway` as given.
fn project(gateway: Value) -> Project {
    let p = Project::new(&json!({"version": 1, "servers": {"job": {
        "transport": "stdio", "command": bin("fixture-server"), "args": ["job"]
    }}}));
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"mode": "allowlist", "allow": ["mcp:job_*", "builtin:retrieve_raw"]},
            "gateway": gateway,
        })
        .to_string(),
    );
    p
}

/// Raw MCP over HTTP, with sessions (2025-06-18).
struct Raw {
    url: String,
    http: reqwest::Client,
}

/// One answer: its HTTP status, `Retry-After`, and the JSON-RPC message
/// that answers the request (or the error body).
struct Answer {
    status: u16,
    retry_after: Option<u64>,
    body: Value,
}

impl Raw {
    fn new(url: &str) -> Raw {
        Raw {
            url: url.to_owned(),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    async fn post(&self, token: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        tokio::time::timeout(Duration::from_secs(60), request.send())
            .await
            .expect("no answer within 60 s")
            .unwrap()
    }

    /// Opens a session for `token`: its id, or the refusal's status and body.
    async fn open(&self, token: &str) -> Result<String, (u16, String)> {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "abuse", "version": "0"},
        }});
        let response = self.post(token, None, &init).await;
        let status = response.status().as_u16();
        let id = response
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        let Some(id) = id.filter(|_| status == 200) else {
            return Err((status, body));
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self.post(token, Some(&id), &initialized).await;
        assert_eq!(response.status(), 202);
        Ok(id)
    }

    /// Sends `method` with `params` as request 7 on `session`.
    async fn request(&self, token: &str, session: &str, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let response = self.post(token, Some(session), &body).await;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().parse().unwrap());
        let text = response.text().await.unwrap();
        let body = if status == 200 {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == 7)
                .unwrap_or_else(|| panic!("{method}: no answer in {text:.500}"))
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Answer {
            status,
            retry_after,
            body,
        }
    }

    /// Calls tool `name`; the answer.
    async fn call(&self, token: &str, session: &str, name: &str, arguments: Value) -> Answer {
        self.request(
            token,
            session,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    /// Waits until `job_job_status` is listed (the backend is up).
    async fn wait_for_tools(&self, token: &str, session: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = self.request(token, session, "tools/list", json!({})).await;
            if listed.body.to_string().contains("job_job_status") {
                return;
            }
            assert!(Instant::now() < deadline, "no job tool: {}", listed.body);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn get(&self, path: &str) -> String {
        let url = self.url.replace("/mcp", path);
        let response = self.http.get(url).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.text().await.unwrap()
    }
}

fn start(p: &Project) -> HttpGateway {
    HttpGateway::start_with(p, &[], &[("E2E_PUBLIC_TOKEN", PUBLIC_TOKEN)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_sessions_at_the_session_cap_never_close_the_creators() {
    let p = project(json!({
        "max_sessions": 3,
        "tokens": {
            "bot": {"env": "E2E_PUBLIC_TOKEN", "trust_level": "public"},
        },
    }));
    let gateway = start(&p);
    let raw = Raw::new(&gateway.url);
    let me = raw.open(TOKEN).await.unwrap();
    raw.wait_for_tools(TOKEN, &me).await;
    // Three public sessions: the third finds the creator's idle the
    // longest, and is refused instead of closing it.
    let one = raw.open(PUBLIC_TOKEN).await.unwrap();
    let _two = raw.open(PUBLIC_TOKEN).await.unwrap();
    // A public caller at the cap closes its own oldest idle session.
    let three = raw.open(PUBLIC_TOKEN).await.unwrap();
    let listed = raw
        .request(PUBLIC_TOKEN, &one, "tools/list", json!({}))
        .await;
    assert_eq!(listed.status, 404, "its own oldest was closed");
    let _ = three;
    // The creator's session is still there.
    let listed = raw.request(TOKEN, &me, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(listed.body.to_string().contains("job_job_status"));
    // Another caller with no session of its own to close is refused, with
    // words that say why; the creator's session stays.
    gateway.stop();
    let p = project(json!({
        "max_sessions": 3,
        "tokens": {
            "a": {"env": "E2E_PUBLIC_TOKEN", "trust_level": "public"},
            "b": {"env": "E2E_PUBLIC_TOKEN_B", "trust_level": "public"},
            "c": {"env": "E2E_PUBLIC_TOKEN_C", "trust_level": "public"},
        },
    }));
    let b = "e2e-public-token-b-0123456789abcdef";
    let c = "e2e-public-token-c-0123456789abcdef";
    let gateway = HttpGateway::start_with(
        &p,
        &[],
        &[
            ("E2E_PUBLIC_TOKEN", PUBLIC_TOKEN),
            ("E2E_PUBLIC_TOKEN_B", b),
            ("E2E_PUBLIC_TOKEN_C", c),
        ],
    );
    let raw = Raw::new(&gateway.url);
    let me = raw.open(TOKEN).await.unwrap();
    raw.open(PUBLIC_TOKEN).await.unwrap();
    raw.open(b).await.unwrap();
    let (status, body) = raw.open(c).await.unwrap_err();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("none of them is yours to close"), "{body}");
    let listed = raw.request(TOKEN, &me, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "the creator's session was closed");
    assert_eq!(gateway.stop(), 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_caller_past_its_calls_per_minute_gets_429_in_any_session_and_the_creator_goes_on()
{
    let p = project(json!({
        "rate_limits": {"public": {"calls_per_minute": 5}},
        "tokens": {"bot": {"env": "E2E_PUBLIC_TOKEN", "trust_level": "public"}},
        "audit": {"path": "audit.jsonl"},
    }));
    let gateway = start(&p);
    let raw = Raw::new(&gateway.url);
    let me = raw.open(TOKEN).await.unwrap();
    raw.wait_for_tools(TOKEN, &me).await;
    let small = json!({"entries": 1});
    let bot = raw.open(PUBLIC_TOKEN).await.unwrap();
    for i in 0..5 {
        let answer = raw
            .call(PUBLIC_TOKEN, &bot, "job_job_status", small.clone())
            .await;
        assert_eq!(answer.status, 200, "call {i}: {}", answer.body);
    }
    let refused = raw
        .call(PUBLIC_TOKEN, &bot, "job_job_status", small.clone())
        .await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    let wait = refused.retry_after.expect("Retry-After");
    assert!((1..=12).contains(&wait), "{wait}");
    assert_eq!(
        refused.body["limit"], "calls_per_minute",
        "{}",
        refused.body
    );
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("calls_per_minute"),
        "{}",
        refused.body
    );
    // Other requests are not calls: listing still works.
    let listed = raw
        .request(PUBLIC_TOKEN, &bot, "tools/list", json!({}))
        .await;
    assert_eq!(listed.status, 200);
    // A new session resets nothing.
    let again = raw.open(PUBLIC_TOKEN).await.unwrap();
    let refused = raw
        .call(PUBLIC_TOKEN, &again, "job_job_status", small.clone())
        .await;
    assert_eq!(refused.status, 429, "a new session reset the limit");
    // The creator is not limited by the public caller's spending, nor by default.
    for _ in 0..10 {
        let answer = raw.call(TOKEN, &me, "job_job_status", small.clone()).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.body["result"].is_object(), "{}", answer.body);
    }
    let metrics = raw.get("/metrics").await;
    assert!(
        metrics.contains("core_agent_rate_limited_total{limit=\"calls_per_minute\"} 2"),
        "{metrics}"
    );
    assert_eq!(gateway.stop(), 130);
    let audit = std::fs::read_to_string(p.path().join(".agents/audit.jsonl")).unwrap();
    let limited: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["event"] == "rate_limit")
        .collect();
    assert_eq!(limited.len(), 2, "{audit}");
    assert_eq!(limited[0]["caller"]["name"], "bot");
    assert_eq!(limited[0]["caller"]["trust_level"], "public");
    assert_eq!(limited[0]["status"], 429);
    assert_eq!(limited[0]["limit"], "calls_per_minute");
    assert!(!audit.contains(PUBLIC_TOKEN) && !audit.contains(TOKEN));
}
