//! `core-agent serve --http` for clients of protocol 2026-07-28, which have
//! no sessions: `server/discover` and every request without one, caching
//! hints on the lists, and `subscriptions/listen` streaming the list
//! changes a client asked for (and only those), tagged with its
//! subscription; with the reference server (`ref-server`) behind it, whose
//! `test_trigger_*` tools make it announce changes. Older clients keep
//! their sessions.

use std::time::{Duration, Instant};

use core_agent_e2e::{Project, bin};
use serde_json::{Value, json};

use crate::gateway_clients::{HttpGateway, TOKEN};

const REVISION: &str = "2026-07-28";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

fn project() -> Project {
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"ref": {"transport": "stdio", "command": bin("ref-server"), "args": ["stdio"]}},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "yolo"}}).to_string(),
    );
    p
}

fn meta() -> Value {
    meta_declaring(json!({}))
}

/// The request metadata of a client that declares `capabilities`.
fn meta_declaring(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
    })
}

/// A 2026-07-28 client of the gateway, with a bearer token.
pub(crate) struct Client {
    url: String,
    token: String,
    http: reqwest::Client,
    /// What it declares it answers (`clientCapabilities`).
    capabilities: Value,
}

impl Client {
    pub(crate) fn new(url: &str) -> Client {
        Client::with_token(url, TOKEN)
    }

    pub(crate) fn with_token(url: &str, token: &str) -> Client {
        Client {
            url: url.to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            capabilities: json!({}),
        }
    }

    /// The same client, declaring `capabilities` on each request.
    fn declaring(mut self, capabilities: Value) -> Client {
        self.capabilities = capabilities;
        self
    }

    /// POSTs `method` with `params` (and the request metadata) as a
    /// 2026-07-28 client: no session, the standard headers.
    pub(crate) async fn post(&self, id: u64, method: &str, mut params: Value) -> reqwest::Response {
        params["_meta"] = meta_declaring(self.capabilities.clone());
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", REVISION)
            .header("mcp-method", method);
        if let Some(name) = params
            .get("name")
            .or_else(|| params.get("uri"))
            .and_then(Value::as_str)
        {
            request = request.header("mcp-name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        tokio::time::timeout(
            Duration::from_secs(30),
            request.body(body.to_string()).send(),
        )
        .await
        .expect("no answer within 30 s")
        .unwrap()
    }

    /// The result of `method`, with no session id on the answer.
    pub(crate) async fn result(&self, method: &str, params: Value) -> Value {
        let response = self.post(7, method, params).await;
        assert_eq!(response.status(), 200, "{method}");
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "{method}: a 2026-07-28 client got a session"
        );
        let mut frames = Frames::new(response);
        loop {
            let frame = frames.next(Duration::from_secs(30)).await;
            let frame = frame.unwrap_or_else(|| panic!("{method}: the answer ended"));
            if frame.get("id") == Some(&json!(7)) {
                return frame
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("{method}: {frame}"));
            }
        }
    }

    /// The tool names, once the backend's are listed.
    async fn tools_when_ready(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let listed = self.result("tools/list", json!({})).await;
            let names: Vec<&str> = listed["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
            if names.contains(&"ref_test_trigger_tool_change") {
                return listed;
            }
            assert!(
                Instant::now() < deadline,
                "ref's tools never came: {names:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The JSON-RPC messages of an answer, JSON or server-sent events.
struct Frames {
    response: reqwest::Response,
    sse: bool,
    buffer: String,
    ready: Vec<Value>,
}

impl Frames {
    fn new(response: reqwest::Response) -> Frames {
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        Frames {
            response,
            sse,
            buffer: String::new(),
            ready: Vec::new(),
        }
    }

    /// The next message within `wait`; `None` when the answer ended or
    /// nothing came in time.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if !self.ready.is_empty() {
                return Some(self.ready.remove(0));
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            if !self.sse {
                continue;
            }
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data) {
                    self.ready.push(message);
                }
            }
        }
    }

    /// Every message that comes within `wait`.
    async fn drain(&mut self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut all = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(m) => all.push(m),
                None => break,
            }
        }
        all
    }
}

fn method(m: &Value) -> &str {
    m["method"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_needs_no_session_and_its_lists_carry_caching_hints() {
    let p = project();
    let gateway = HttpGateway::start(&p);
    let client = Client::new(&gateway.url);

    let discovered = client.result("server/discover", json!({})).await;
    assert!(
        discovered["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(REVISION)),
        "{discovered}"
    );
    assert_eq!(discovered["resultType"], "complete", "{discovered}");

    let tools = client.tools_when_ready().await;
    for (method, params) in [
        ("tools/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
    ] {
        let listed = if method == "tools/list" {
            tools.clone()
        } else {
            client.result(method, params).await
        };
        assert_eq!(listed["resultType"], "complete", "{method}: {listed}");
        // The catalog may change at any moment (a backend tells after the
        // fact): fresh for no time, and for this caller only.
        assert_eq!(listed["ttlMs"], 0, "{method}: {listed}");
        assert_eq!(listed["cacheScope"], "private", "{method}: {listed}");
    }

    // A backend tool's `x-mcp-header` parameter must come as its header too.
    let call = json!({"name": "ref_test_custom_header", "arguments": {"value": "Hello"}});
    let unmirrored = client.post(8, "tools/call", call.clone()).await;
    assert_eq!(unmirrored.status(), 400);
    let refused: Value = serde_json::from_str(&unmirrored.text().await.unwrap()).unwrap();
    assert_eq!(refused["error"]["code"], -32020, "{refused}");
    let mut request = call;
    request["_meta"] = meta();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": request});
    let mirrored = client
        .http
        .post(&client.url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", REVISION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "ref_test_custom_header")
        .header("mcp-param-value", "Hello")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(mirrored.status(), 200);
    let answer = Frames::new(mirrored)
        .next(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "Hello", "{answer}");

    // A read keeps the backend's freshness but is never public.
    let read = client
        .result(
            "resources/read",
            json!({"uri": "core-agent://ref/test://static-text"}),
        )
        .await;
    assert_eq!(
        read["contents"][0]["text"], "This is the content of the static text resource.",
        "{read}"
    );
    assert_eq!(read["ttlMs"], 30_000, "{read}");
    assert_eq!(read["cacheScope"], "private", "{read}");

    // A client of 2025-11-25 still opens a session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "old", "version": "0"}}});
    let response = client
        .http
        .post(&client.url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_some());
    assert_eq!(gateway.stop(), 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_the_list_changes_a_client_asked_for_and_no_others() {
    let p = project();
    let gateway = HttpGateway::start(&p);
    let client = Client::new(&gateway.url);
    client.tools_when_ready().await;

    let mut tools = Frames::new(
        client
            .post(
                101,
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true}}),
            )
            .await,
    );
    let mut prompts = Frames::new(
        client
            .post(
                102,
                "subscriptions/listen",
                json!({"notifications": {"promptsListChanged": true}}),
            )
            .await,
    );
    for (frames, id) in [(&mut tools, 101), (&mut prompts, 102)] {
        let ack = frames.next(Duration::from_secs(10)).await.expect("no ack");
        assert_eq!(
            method(&ack),
            "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], id, "{ack}");
    }

    // The backend says its tools changed: the gateway re-lists, and the
    // tools listener hears of it.
    let done = client
        .result(
            "tools/call",
            json!({"name": "ref_test_trigger_tool_change", "arguments": {}}),
        )
        .await;
    assert_ne!(done["isError"], true, "{done}");
    let heard = tools.next(Duration::from_secs(10)).await.expect("not told");
    assert_eq!(
        method(&heard),
        "notifications/tools/list_changed",
        "{heard}"
    );
    assert_eq!(heard["params"]["_meta"][SUBSCRIPTION_ID], 101, "{heard}");

    // The backend says its prompts changed: only the prompts listener hears.
    let done = client
        .result(
            "tools/call",
            json!({"name": "ref_test_trigger_prompt_change", "arguments": {}}),
        )
        .await;
    assert_ne!(done["isError"], true, "{done}");
    let heard = prompts.drain(Duration::from_secs(3)).await;
    let methods: Vec<&str> = heard.iter().map(method).collect();
    assert_eq!(
        methods,
        ["notifications/prompts/list_changed"],
        "the prompts listener asked for prompt changes only: {heard:?}"
    );
    assert_eq!(heard[0]["params"]["_meta"][SUBSCRIPTION_ID], 102);
    let more = tools.drain(Duration::from_millis(500)).await;
    assert!(
        more.iter()
            .all(|m| method(m) != "notifications/prompts/list_changed"),
        "the tools listener heard of prompts: {more:?}"
    );
    drop((tools, prompts));
    assert_eq!(gateway.stop(), 130);
}

/// The first JSON-RPC message answering request `id` in `response`.
async fn answer_to(response: reqwest::Response, id: u64) -> Value {
    let mut frames = Frames::new(response);
    loop {
        let frame = frames.next(Duration::from_secs(30)).await;
        let frame = frame.unwrap_or_else(|| panic!("the answer to {id} ended"));
        if frame.get("id") == Some(&json!(id)) {
            return frame;
        }
    }
}

/// A backend's sampling request reaches a client without a session only
/// when the session's gate allows `sampling:<server>` by a rule: the
/// client cannot be asked in the middle of the request, so in `ask` mode
/// without the rule it is refused, naming the rule that would allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_sampling_reaches_a_client_without_a_session_only_when_the_gate_allows_it() {
    let call = json!({"name": "ref_test_input_required_result_sampling", "arguments": {}});
    let sampling = json!({"sampling": {}});
    for allow in [json!(["mcp:ref_*"]), json!(["mcp:ref_*", "sampling:ref"])] {
        let p = project();
        p.write(
            ".agents/config.json",
            &json!({"permissions": {"mode": "ask", "allow": allow}}).to_string(),
        );
        let gateway = HttpGateway::start(&p);
        let client = Client::new(&gateway.url).declaring(sampling.clone());
        client.tools_when_ready().await;
        let response = client.post(11, "tools/call", call.clone()).await;
        let answer = answer_to(response, 11).await;
        if allow.as_array().unwrap().len() == 1 {
            // Not allowed: the backend's request never reaches the client.
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("\"sampling:ref\"") && message.contains("permissions.allow"),
                "{answer}"
            );
            assert!(answer.get("result").is_none(), "{answer}");
        } else {
            // Allowed: the client is asked, and its answer reaches the
            // backend on the retry.
            let asked = &answer["result"];
            assert_eq!(asked["resultType"], "input_required", "{answer}");
            assert_eq!(
                asked["inputRequests"]["capital_question"]["method"], "sampling/createMessage",
                "{answer}"
            );
            let mut retry = call.clone();
            retry["inputResponses"] = json!({"capital_question": {
                "role": "assistant", "model": "e2e",
                "content": {"type": "text", "text": "Paris"}}});
            retry["requestState"] = asked["requestState"].clone();
            let done = client.result("tools/call", retry).await;
            assert_eq!(
                done["content"][0]["text"], "The model said: \"Paris\"",
                "{done}"
            );
        }
        assert_eq!(gateway.stop(), 130);
    }
}

/// The names in a list result's `key` array.
fn names(listed: &Value, key: &str) -> Vec<String> {
    listed[key]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A backend's lists are kept as long as their `ttlMs` says, and listed
/// again once it passed: the reference server adds a tool and a prompt at
/// every listing without saying so, so only a re-list shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_lists_are_listed_again_once_their_ttl_passed_and_not_before() {
    const TTL: Duration = Duration::from_millis(3000);
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"ref": {"transport": "stdio", "command": bin("ref-server"), "args": ["stdio"],
            "env": {"REF_SERVER_CHURN_TTL_MS": TTL.as_millis().to_string()}}},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "yolo"}}).to_string(),
    );
    let gateway = HttpGateway::start(&p);
    let client = Client::new(&gateway.url);

    // The handshake's listing was the first: within its freshness, lists
    // are served from what it gave.
    let first = names(&client.tools_when_ready().await, "tools");
    let prompts = names(&client.result("prompts/list", json!({})).await, "prompts");
    let listed_at = Instant::now();
    assert!(first.contains(&"ref_test_listed_1".to_owned()), "{first:?}");
    assert!(
        prompts.contains(&"ref_test_listed_1".to_owned()),
        "{prompts:?}"
    );
    let again = names(&client.result("tools/list", json!({})).await, "tools");
    let prompts_again = names(&client.result("prompts/list", json!({})).await, "prompts");
    assert!(listed_at.elapsed() < TTL, "too slow to check the freshness");
    assert_eq!(again, first, "listed again while fresh");
    assert_eq!(prompts_again, prompts, "listed again while fresh");

    // Past it, the next listing asks the backend again.
    tokio::time::sleep(TTL).await;
    let prompts = names(&client.result("prompts/list", json!({})).await, "prompts");
    assert!(
        prompts.contains(&"ref_test_listed_2".to_owned()),
        "{prompts:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Tools are listed again in the background; the client hears of
        // the change and lists again.
        let tools = names(&client.result("tools/list", json!({})).await, "tools");
        if tools.contains(&"ref_test_listed_2".to_owned()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stale tools were never listed again: {tools:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(gateway.stop(), 130);
}
