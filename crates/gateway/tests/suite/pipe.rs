//! The gateway over an in-memory pipe, with an rmcp client on the other
//! end and the demo server (a real stdio child) behind the host.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use core_agent_gateway::{Caller, Gateway, GatewayOptions};
use core_agent_host::{DigestOptions, Host, HostOptions};
use core_agent_mcp_config::{Config, TrustLevel};
use core_agent_permissions::{Mode, Pattern, PermissionsConfig};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::common::demo_entry;

/// A client that answers every approval with `answer`, counting the asks.
#[derive(Clone)]
struct Client {
    answer: &'static str,
    asked: Arc<AtomicUsize>,
    elicits: bool,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicits {
            capabilities = ClientCapabilities::builder().enable_elicitation().build();
        }
        ClientConfig::new(capabilities, Implementation::new("pipe-test", "1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        assert!(message.contains("demo_add_note"), "{message}");
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["required"], json!(["answer"]), "{schema}");
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"answer": self.answer})))
    }
}

struct Setup {
    host: Arc<Host>,
    client: RunningService<RoleClient, Client>,
    asked: Arc<AtomicUsize>,
}

/// The demo server behind a host in `ask` mode with `allow` patterns,
/// served to a client of `level` over a pipe.
async fn setup(level: TrustLevel, allow: &[&str], answer: &'static str, elicits: bool) -> Setup {
    let host = start_host(allow, Arc::new(core_agent_digest::MemoryStore::new())).await;
    let (client, asked, _) = connect(&host, level, answer, elicits).await;
    Setup {
        host,
        client,
        asked,
    }
}

/// The demo server behind a host in `ask` mode with `allow` patterns,
/// keeping raw payloads in `store`.
async fn start_host(allow: &[&str], store: Arc<dyn core_agent_digest::Store>) -> Arc<Host> {
    let config = Config::default().with_servers(vec![demo_entry()]);
    let permissions = PermissionsConfig::default()
        .with_mode(Mode::Ask)
        .with_allow(
            allow
                .iter()
                .map(|p| Pattern::parse(p, Path::new("config.json")).unwrap())
                .collect(),
        );
    let options = HostOptions::default()
        .with_permissions(permissions)
        .with_digest(Some(DigestOptions::new(store)));
    let env: BTreeMap<String, String> = BTreeMap::new();
    Arc::new(Host::start(&config, &env, options, &|_, _| {}).await)
}

/// A gateway session over a pipe to `host`, for a client of `level` named
/// `pipe`: the client, its ask count, and the gateway's end (done when the
/// session ends).
async fn connect(
    host: &Arc<Host>,
    level: TrustLevel,
    answer: &'static str,
    elicits: bool,
) -> (
    RunningService<RoleClient, Client>,
    Arc<AtomicUsize>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let gateway = Gateway::new(host.clone(), GatewayOptions::default());
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let caller = Caller::new("pipe", level);
    let served = tokio::spawn(async move { gateway.serve_io(ours, caller).await });
    let asked = Arc::new(AtomicUsize::new(0));
    let client = Client {
        answer,
        asked: asked.clone(),
        elicits,
    }
    .serve(theirs)
    .await
    .unwrap();
    (client, asked, served)
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn tools_carry_our_names_classes_and_the_built_ins() {
    let s = setup(TrustLevel::Creator, &["mcp:demo_*"], "no", true).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let mut seen: Vec<(String, Option<bool>)> = tools
        .iter()
        .map(|t| {
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint);
            (t.name.to_string(), read_only)
        })
        .collect();
    seen.sort();
    let want: Vec<(String, Option<bool>)> = [
        ("demo_add_note", false),
        ("demo_divide", true),
        ("demo_list_inventory", true),
        ("demo_lookup_item", true),
        ("record_plan", false),
        ("retrieve_raw", true),
        ("wait_and_verify", false),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_owned(), Some(r)))
    .collect();
    assert_eq!(seen, want);
    let result = s
        .client
        .call_tool(call("demo_divide", json!({"a": 1, "b": 4})))
        .await
        .unwrap();
    assert_eq!(text(&result), "0.25");
    s.client.cancel().await.unwrap();
    s.host.shutdown().await;
}

#[tokio::test]
async fn an_ask_is_an_elicitation_and_always_is_remembered_for_the_session() {
    // Only the read-only tools are allowed: add_note is asked about.
    let s = setup(TrustLevel::Creator, &["mcp:demo_divide"], "always", true).await;
    for n in 1..=2 {
        let result = s
            .client
            .call_tool(call("demo_add_note", json!({"text": format!("n{n}")})))
            .await
            .unwrap();
        assert!(text(&result).starts_with("saved note #"), "{result:?}");
    }
    assert_eq!(s.asked.load(Ordering::SeqCst), 1, "always: asked once");
    s.client.cancel().await.unwrap();
    s.host.shutdown().await;
}

#[tokio::test]
async fn a_refused_ask_and_a_client_without_elicitation_get_tool_errors() {
    for (answer, elicits, asks, why) in [
        ("no", true, 1, "the answer was not yes"),
        ("yes", false, 0, "does not answer MCP elicitations"),
    ] {
        let s = setup(TrustLevel::Creator, &[], answer, elicits).await;
        let result = s
            .client
            .call_tool(call("demo_add_note", json!({"text": "x"})))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let message = text(&result);
        assert!(message.contains("mcp:demo_add_note"), "{message}");
        assert!(message.contains(why), "{message}");
        assert_eq!(s.asked.load(Ordering::SeqCst), asks);
        s.client.cancel().await.unwrap();
        s.host.shutdown().await;
    }
}

#[tokio::test]
async fn unknown_tools_are_protocol_errors_and_trust_levels_hide_tools() {
    let s = setup(TrustLevel::Public, &["mcp:demo_*"], "no", true).await;
    let err = s
        .client
        .call_tool(call("demo_divid", json!({})))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("demo_divide"),
        "suggests the close name: {message}"
    );
    s.client.cancel().await.unwrap();
    s.host.shutdown().await;
}

#[tokio::test]
async fn a_large_result_is_a_digest_whose_raw_payload_comes_back() {
    let s = setup(
        TrustLevel::Creator,
        &["mcp:demo_*", "builtin:retrieve_raw"],
        "no",
        true,
    )
    .await;
    let result = s
        .client
        .call_tool(call("demo_list_inventory", json!({})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&result)).unwrap();
    let call_id = envelope["call_id"].as_str().unwrap().to_owned();
    let raw_bytes = envelope["raw_bytes"].as_u64().unwrap();
    let digest = envelope["digest"].as_str().unwrap_or_default();
    assert!(digest.contains("items omitted"), "{envelope}");
    assert_eq!(envelope["method"], "structural_json");
    let raw = s
        .client
        .call_tool(call("retrieve_raw", json!({"call_id": call_id})))
        .await
        .unwrap();
    let raw = text(&raw);
    assert_eq!(raw.len() as u64, raw_bytes);
    assert!(serde_json::from_str::<Value>(&raw).is_ok());
    s.client.cancel().await.unwrap();
    s.host.shutdown().await;
}

/// Sessions that list tools and go away leave nothing behind: no payload in
/// the in-memory store, no owner entry in the host; a session whose call was
/// digested keeps its owner, so the same caller's later sessions still read
/// the payload.
#[tokio::test]
async fn sessions_that_list_tools_and_go_away_leave_nothing_in_the_store() {
    let store = Arc::new(core_agent_digest::MemoryStore::new());
    let host = start_host(&["mcp:demo_*", "builtin:retrieve_raw"], store.clone()).await;
    for _ in 0..20 {
        let (client, _, served) = connect(&host, TrustLevel::Creator, "no", true).await;
        assert!(!client.list_all_tools().await.unwrap().is_empty());
        client.cancel().await.unwrap();
        served.await.unwrap().unwrap();
    }
    let owners = host.owners().unwrap();
    assert_eq!(
        (store.held().unwrap(), owners.held()),
        (0, 0),
        "no payload, no owner"
    );
    let (client, _, served) = connect(&host, TrustLevel::Creator, "no", true).await;
    let listed = client
        .call_tool(call("demo_list_inventory", json!({})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    client.cancel().await.unwrap();
    served.await.unwrap().unwrap();
    assert_eq!(owners.held(), 1, "the digested session keeps its owner");
    let (client, _, served) = connect(&host, TrustLevel::Creator, "no", true).await;
    let raw = client
        .call_tool(call(
            "retrieve_raw",
            json!({"call_id": envelope["call_id"], "pointer": "/total"}),
        ))
        .await
        .unwrap();
    assert_eq!(text(&raw), "200");
    client.cancel().await.unwrap();
    served.await.unwrap().unwrap();
    host.shutdown().await;
}
