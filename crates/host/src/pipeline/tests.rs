//! Each step of the call pipeline on its own, without a server: resolve,
//! trust, gate (with a scripted prompter), the three together as a session
//! admits a call, and the shaping of a result (digest, then cap). The
//! end-to-end tests run the same pipeline against real servers.

use std::collections::VecDeque;
use std::path::Path;

use core_agent_digest::{MemoryStore, Settings, Store};
use core_agent_mcp_config::{ServerSpec, StdioSpec, Transport};
use core_agent_permissions::Pattern;

use super::*;
use crate::DigestWrap;
use crate::host::{Host, Published};
use crate::session::Session;
use crate::tools::{self, BUILTINS};
use crate::{DigestOptions, Error, HostOptions, SessionOptions};
use core_agent_mcp_config::{BuiltinTools, Config, TrustLevel};
use core_agent_mcp_policy::{Annotations, Catalog, DiscoveredTool, ServerTools, Warning};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use core_agent_permissions::{Answer, Gate, MCP, Mode, PermissionsConfig, Prompter, Request};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The gate step's result, without its verdict (see
/// `the_gate_step_says_which_rule_decided`).
async fn gate(
    gate_: &RwLock<Gate>,
    prompter: &dyn Prompter,
    request: Request<'_>,
) -> crate::Result<()> {
    super::gate(gate_, prompter, request).await.1
}

fn spec() -> ServerSpec {
    ServerSpec::new(Transport::Stdio(StdioSpec {
        command: "mcp-server".to_owned(),
        args: Vec::new(),
        env: BTreeMap::new(),
    }))
}

/// A tool that says it is read-only and closed-world (open to every
/// level), or one that says nothing but `destructiveHint` (creator only).
fn tool(name: &str, read_only: bool) -> DiscoveredTool {
    DiscoveredTool::new(
        name.to_owned(),
        format!("The {name} tool."),
        json!({"type": "object"}),
    )
    .with_annotations(Annotations {
        read_only_hint: Some(read_only),
        destructive_hint: Some(!read_only),
        idempotent_hint: None,
        open_world_hint: Some(false),
    })
}

/// What the fixtures publish: server `fs` (read_file, write_file, delete)
/// and server `record` with a tool `plan`, whose name `record_plan` is a
/// host tool's; every route allows a result of `max_result_bytes`.
fn published() -> Published {
    let fs = [
        tool("read_file", true),
        tool("write_file", false),
        tool("delete", false),
    ];
    let record = [tool("plan", true)];
    let (fs_spec, record_spec) = (spec(), spec());
    let catalog = Catalog::builder().with_reserved(BUILTINS).build([
        ServerTools {
            name: "fs",
            spec: &fs_spec,
            tools: &fs,
        },
        ServerTools {
            name: "record",
            spec: &record_spec,
            tools: &record,
        },
    ]);
    Published::new(catalog, |e| {
        Some(ToolRoute {
            server: usize::from(e.server == "record"),
            server_name: e.server.clone(),
            tool: e.tool.clone(),
            read_only: e.read_only,
            trust_levels: e.trust_levels.clone(),
            timeout: Duration::from_secs(30),
            max_result_bytes: 131_072,
            digest: true,
        })
    })
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments are an object, not {other}"),
    }
}

fn route_of(route: &Route) -> &ToolRoute {
    match route {
        Route::Mcp(route) => route,
        Route::Host(tool) => panic!("a host tool: {}", tool.name),
    }
}

// --- resolve ---

#[test]
fn resolve_gives_the_published_route_itself() {
    let published = published();
    let route = resolve(
        &published,
        "fs_read_file",
        TrustLevel::Creator,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap();
    let Route::Mcp(route) = route else {
        panic!("a server's tool")
    };
    assert_eq!(
        (
            route.server_name.as_str(),
            route.tool.as_str(),
            route.read_only
        ),
        ("fs", "read_file", true)
    );
    assert!(
        Arc::ptr_eq(&route, &published.routes["fs_read_file"]),
        "the route is shared, not copied"
    );
}

#[test]
fn a_name_longer_than_mcp_allows_is_refused_first_and_shown_cut() {
    let published = published();
    let long = format!("fs_read_file{}", "x".repeat(1 << 20));
    let err = resolve(
        &published,
        &long,
        TrustLevel::Creator,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownTool { suggestions, .. } if suggestions.is_empty()),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.len() < 400, "{} bytes", text.len());
    assert!(text.contains("… (1.0 MiB, sha256:"), "{text}");
}

#[test]
fn resolve_suggests_names_for_an_unknown_tool() {
    let published = published();
    let unknown = |name: &str, level: TrustLevel| match resolve(
        &published,
        name,
        level,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap_err()
    {
        Error::UnknownTool { name, suggestions } => (name, suggestions),
        other => panic!("{other}"),
    };
    // The namespace left out: the tool's own name finds it.
    assert_eq!(
        unknown("read_file", TrustLevel::Creator),
        ("read_file".to_owned(), vec!["fs_read_file".to_owned()])
    );
    // A near spelling.
    assert_eq!(
        unknown("fs_reed_file", TrustLevel::Creator).1,
        ["fs_read_file"]
    );
    // Only what the caller may see is suggested: `fs_delete` is creator-only.
    assert_eq!(unknown("fs_delet", TrustLevel::Creator).1, ["fs_delete"]);
    assert!(unknown("fs_delet", TrustLevel::Public).1.is_empty());
    // Nothing close: the error says how to list the tools.
    let err = resolve(
        &published,
        "zzz",
        TrustLevel::Creator,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no tool named `zzz`; list the tools with tools/list"
    );
}

#[test]
fn host_tool_names_are_reserved_for_the_host_tools() {
    let published = published();
    // The server tool that would have been `record_plan` is published
    // under another name, and still resolves to its server.
    let renamed = published
        .catalog
        .entries()
        .iter()
        .find(|e| e.server == "record" && e.tool == "plan")
        .map(|e| e.name.clone())
        .unwrap();
    assert_ne!(renamed, tools::RECORD_PLAN);
    let route = resolve(
        &published,
        &renamed,
        TrustLevel::Creator,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap();
    assert_eq!(route_of(&route).server_name, "record");
    // The reserved name is the host's, at every level.
    for level in TrustLevel::ALL {
        let route = resolve(
            &published,
            tools::RECORD_PLAN,
            level,
            false,
            None,
            &Warning::to_string,
        )
        .unwrap();
        assert!(matches!(route, Route::Host(t) if t.name == tools::RECORD_PLAN));
    }
    assert!(matches!(
        resolve(&published, tools::WAIT_AND_VERIFY, TrustLevel::Public, false, None, &Warning::to_string),
        Ok(Route::Host(t)) if t.name == tools::WAIT_AND_VERIFY
    ));
    // `retrieve_raw` exists only while the digest is on.
    assert!(matches!(
        resolve(&published, tools::RETRIEVE_RAW, TrustLevel::Creator, true, None, &Warning::to_string),
        Ok(Route::Host(t)) if t.name == tools::RETRIEVE_RAW
    ));
    assert!(matches!(
        resolve(
            &published,
            tools::RETRIEVE_RAW,
            TrustLevel::Creator,
            false,
            None,
            &Warning::to_string
        ),
        Err(Error::UnknownTool { .. })
    ));
    // The survey tools exist only while they are on; a server's `grep` is
    // always namespaced, so it never takes their names.
    let open = BuiltinTools::default();
    for name in [
        tools::LIST_DIR,
        tools::GLOB,
        tools::GREP,
        tools::READ_MANY_FILES,
    ] {
        assert!(matches!(
            resolve(&published, name, TrustLevel::Public, false, Some(&open), &Warning::to_string),
            Ok(Route::Host(t)) if t.name == name && t.survey().is_some()
        ));
        assert!(matches!(
            resolve(
                &published,
                name,
                TrustLevel::Public,
                true,
                None,
                &Warning::to_string
            ),
            Err(Error::UnknownTool { .. })
        ));
    }
}

// --- trust ---

#[test]
fn the_trust_step_follows_the_levels_policy_gave_the_tool() {
    let published = published();
    let delete = resolve(
        &published,
        "fs_delete",
        TrustLevel::Public,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap();
    assert_eq!(route_of(&delete).trust_levels, [TrustLevel::Creator]);
    assert!(trust(&delete, "fs_delete", TrustLevel::Creator, None).is_ok());
    for level in [TrustLevel::Agent, TrustLevel::User, TrustLevel::Public] {
        let err = trust(&delete, "fs_delete", level, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "`fs_delete` is not available at trust level `{}`; it allows `creator`",
                level.as_str()
            )
        );
    }
    let read = resolve(
        &published,
        "fs_read_file",
        TrustLevel::Public,
        false,
        None,
        &Warning::to_string,
    )
    .unwrap();
    for level in TrustLevel::ALL {
        assert!(
            trust(&read, "fs_read_file", level, None).is_ok(),
            "{level:?}"
        );
    }
}

/// The reserved name `builtin` narrows the survey tools: one left out is
/// unknown, the others allow the levels it gives them.
#[test]
fn the_builtin_entry_narrows_the_survey_tools_and_their_levels() {
    let published = published();
    let access = BuiltinTools {
        tools: vec!["grep".into(), "glob".into()],
        allowed_trust_levels: Some(vec![TrustLevel::Creator, TrustLevel::Agent]),
        tool_policies: [("glob".to_owned(), vec![TrustLevel::Public])].into(),
        ..BuiltinTools::default()
    };
    let err = resolve(
        &published,
        "list_dir",
        TrustLevel::Creator,
        false,
        Some(&access),
        &Warning::to_string,
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnknownTool { .. }), "{err}");
    let grep = resolve(
        &published,
        "grep",
        TrustLevel::User,
        false,
        Some(&access),
        &Warning::to_string,
    )
    .unwrap();
    assert!(trust(&grep, "grep", TrustLevel::Agent, Some(&access)).is_ok());
    let err = trust(&grep, "grep", TrustLevel::User, Some(&access)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`grep` is not available at trust level `user`; it allows `creator`, `agent`"
    );
    let glob = resolve(
        &published,
        "glob",
        TrustLevel::Public,
        false,
        Some(&access),
        &Warning::to_string,
    )
    .unwrap();
    assert!(trust(&glob, "glob", TrustLevel::Public, Some(&access)).is_ok());
    assert!(trust(&glob, "glob", TrustLevel::Creator, Some(&access)).is_err());
}

// --- gate ---

/// A prompter that gives the scripted answers in turn (then `No`) and
/// keeps what it was asked.
#[derive(Default)]
struct Script {
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<(String, String)>>,
}

impl Script {
    fn answering(answers: &[Answer]) -> Arc<Script> {
        Arc::new(Script {
            answers: Mutex::new(answers.iter().copied().collect()),
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<(String, String)> {
        self.asked.lock().unwrap().clone()
    }
}

impl Prompter for Script {
    fn ask<'a>(&'a self, tool: &'a str, detail: &'a str) -> core_agent_permissions::AskFuture<'a> {
        self.asked
            .lock()
            .unwrap()
            .push((tool.to_owned(), detail.to_owned()));
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::No);
        Box::pin(std::future::ready(answer))
    }
}

/// A session's gate in `mode`, with `allow` and `deny` patterns.
fn gate_of(mode: Mode, allow: &[&str], deny: &[&str]) -> RwLock<Gate> {
    let patterns = |raw: &[&str]| {
        raw.iter()
            .map(|p| Pattern::parse(p, Path::new(".agents/config.json")).unwrap())
            .collect()
    };
    RwLock::new(Gate::new(
        PermissionsConfig::default()
            .with_mode(mode)
            .with_allow(patterns(allow))
            .with_deny(patterns(deny)),
        None,
    ))
}

fn request<'a>(name: &'a str, arguments: &'a JsonObject) -> Request<'a> {
    Request {
        namespace: MCP,
        name,
        arguments,
        read_only: false,
    }
}

#[tokio::test]
async fn the_gate_allows_and_denies_by_pattern_without_asking() {
    let prompter = Script::answering(&[]);
    let gate_ = gate_of(Mode::Ask, &["mcp:fs_*"], &["mcp:fs_delete"]);
    let arguments = args(json!({"path": "/tmp/x"}));
    assert!(
        gate(
            &gate_,
            prompter.as_ref(),
            request("fs_write_file", &arguments)
        )
        .await
        .is_ok()
    );
    let err = gate(&gate_, prompter.as_ref(), request("fs_delete", &arguments))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Denied { name, unanswered_ask: false, .. } if name == "fs_delete"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "permission denied: `fs_delete` is denied by `mcp:fs_delete` in .agents/config.json; remove that pattern from permissions.deny to allow it"
    );
    // Allowlist mode refuses what no pattern allows, without asking either.
    let allowlist = gate_of(Mode::Allowlist, &[], &[]);
    let err = gate(
        &allowlist,
        prompter.as_ref(),
        request("fs_read_file", &arguments),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Denied {
                unanswered_ask: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(prompter.asked().is_empty());
}

#[tokio::test]
async fn an_ask_answered_yes_runs_this_call_only() {
    let prompter = Script::answering(&[Answer::Yes]);
    let gate_ = gate_of(Mode::Ask, &[], &[]);
    let arguments = args(json!({"path": "/tmp/x"}));
    assert!(
        gate(
            &gate_,
            prompter.as_ref(),
            request("fs_write_file", &arguments)
        )
        .await
        .is_ok()
    );
    // The prompter saw the tool and `<name> <json-args>`.
    assert_eq!(
        prompter.asked(),
        [(
            "fs_write_file".to_owned(),
            r#"fs_write_file {"path":"/tmp/x"}"#.to_owned()
        )]
    );
    // The next call is asked about again (and the script now says no).
    assert!(
        gate(
            &gate_,
            prompter.as_ref(),
            request("fs_write_file", &arguments)
        )
        .await
        .is_err()
    );
    assert_eq!(prompter.asked().len(), 2);
}

#[tokio::test]
async fn an_ask_answered_no_is_refused_with_how_to_allow_it() {
    let prompter = Script::answering(&[Answer::No]);
    let gate_ = gate_of(Mode::Ask, &[], &[]);
    let arguments = args(json!({}));
    let err = gate(
        &gate_,
        prompter.as_ref(),
        request("fs_write_file", &arguments),
    )
    .await
    .unwrap_err();
    let Error::Denied {
        name,
        reason,
        advice,
        unanswered_ask,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(name, "fs_write_file");
    assert!(unanswered_ask);
    assert_eq!(
        reason,
        "`fs_write_file` needs approval (permissions.mode is \"ask\") and was not approved"
    );
    assert_eq!(
        advice,
        "approve it when asked, or add \"mcp:fs_write_file\" to permissions.allow in the project's config.json"
    );
}

#[tokio::test]
async fn always_allows_the_tool_for_the_rest_of_the_session() {
    let prompter = Script::answering(&[Answer::Always]);
    let gate_ = gate_of(Mode::Ask, &[], &[]);
    let arguments = args(json!({}));
    for _ in 0..3 {
        assert!(
            gate(
                &gate_,
                prompter.as_ref(),
                request("fs_write_file", &arguments)
            )
            .await
            .is_ok()
        );
    }
    assert_eq!(prompter.asked().len(), 1, "asked once, then remembered");
    // Only that tool: another one is asked about (and refused by the script).
    assert!(
        gate(&gate_, prompter.as_ref(), request("fs_delete", &arguments))
            .await
            .is_err()
    );
    assert_eq!(prompter.asked().len(), 2);
}

#[tokio::test]
async fn an_answer_kept_in_the_memory_reaches_a_sibling_gate_before_it_asks() {
    use crate::memory::{Fact, InMemory, SessionMemory};
    use crate::observe::Verdict;
    use crate::pipeline::{Remembering, gate_remembering};
    use core_agent_permissions::Rule;
    let memory = InMemory::default();
    let remembering = Some(Remembering {
        memory: &memory,
        session: "s1",
    });
    let arguments = args(json!({}));
    // Two processes continue session s1, each with its own gate.
    let here = gate_of(Mode::Ask, &[], &[]);
    let there = gate_of(Mode::Ask, &[], &[]);
    let answers_always = Script::answering(&[Answer::Always]);
    let (verdict, allowed) = gate_remembering(
        &here,
        answers_always.as_ref(),
        request("fs_write_file", &arguments),
        remembering,
    )
    .await;
    assert!(allowed.is_ok());
    assert_eq!(
        verdict,
        Verdict::Asked {
            answer: Answer::Always
        }
    );
    assert_eq!(memory.recall("s1").unwrap().always, ["fs_write_file"]);
    // The sibling is not asked: it recalls the answer first.
    let refuses = Script::answering(&[]);
    let (verdict, allowed) = gate_remembering(
        &there,
        refuses.as_ref(),
        request("fs_write_file", &arguments),
        remembering,
    )
    .await;
    assert!(allowed.is_ok());
    assert_eq!(
        verdict,
        Verdict::Allowed {
            rule: Some(Rule::Always)
        }
    );
    assert!(refuses.asked().is_empty());
    // Another session's answers are its own.
    let (_, allowed) = gate_remembering(
        &gate_of(Mode::Ask, &[], &[]),
        refuses.as_ref(),
        request("fs_write_file", &arguments),
        Some(Remembering {
            memory: &memory,
            session: "s2",
        }),
    )
    .await;
    assert!(allowed.is_err());
    assert_eq!(refuses.asked().len(), 1);
    // A plan recorded by one process lifts plan-first in the other.
    memory.remember("s3", Fact::Plan("the plan")).unwrap();
    let planless = RwLock::new(Gate::new(
        PermissionsConfig::default()
            .with_mode(Mode::Allowlist)
            .with_require_plan_artifact(true),
        None,
    ));
    assert!(
        gate_remembering(
            &planless,
            refuses.as_ref(),
            request("fs_write_file", &arguments),
            None
        )
        .await
        .1
        .is_err(),
        "plan-first refuses without a plan"
    );
    let (verdict, _) = gate_remembering(
        &planless,
        refuses.as_ref(),
        request("fs_write_file", &arguments),
        Some(Remembering {
            memory: &memory,
            session: "s3",
        }),
    )
    .await;
    assert_ne!(
        verdict,
        Verdict::Denied {
            rule: Rule::PlanFirst
        }
    );
}

// --- resolve → trust → gate, as a session admits a call ---

/// A session of a host with no servers, whose asks `prompter` answers.
async fn session(prompter: Arc<Script>, digest: bool) -> (Arc<Host>, Session) {
    let options = HostOptions {
        digest: digest.then(|| DigestOptions {
            settings: Settings::default(),
            store: Arc::new(MemoryStore::new()),
            llm: None,
        }),
        ..HostOptions::default()
    };
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Arc::new(Host::start(&Config::default(), &env, options, &|_, _| {}).await);
    let session = host.session(SessionOptions {
        trust_level: TrustLevel::Public,
        mode: Some(Mode::Ask),
        prompter,
        ..SessionOptions::default()
    });
    (host, session)
}

#[tokio::test]
async fn admit_asks_only_about_calls_that_resolve_and_pass_trust() {
    let prompter = Script::answering(&[Answer::Yes, Answer::Yes]);
    let (_host, session) = session(prompter.clone(), true).await;
    let published = published();
    let arguments = args(json!({"path": "/x"}));
    let level = session.trust_level();
    // Unknown, then restricted: refused before the gate.
    assert!(matches!(
        session
            .admit(&published, "fs_nope", &arguments, level)
            .await,
        Err(Error::UnknownTool { .. })
    ));
    assert!(matches!(
        session
            .admit(&published, "fs_delete", &arguments, level)
            .await,
        Err(Error::Restricted { .. })
    ));
    // `record_plan` is not gated; `retrieve_raw` is, under `builtin:`.
    assert!(matches!(
        session
            .admit(&published, tools::RECORD_PLAN, &arguments, level)
            .await,
        Ok(Route::Host(_))
    ));
    assert!(prompter.asked().is_empty());
    assert!(matches!(
        session
            .admit(&published, tools::RETRIEVE_RAW, &arguments, level)
            .await,
        Ok(Route::Host(_))
    ));
    let route = session
        .admit(&published, "fs_read_file", &arguments, level)
        .await
        .unwrap();
    assert_eq!(route_of(&route).tool, "read_file");
    let asked: Vec<String> = prompter.asked().into_iter().map(|(t, _)| t).collect();
    assert_eq!(asked, [tools::RETRIEVE_RAW, "fs_read_file"]);
}

// --- shaping: the digest, then the cap ---

/// A route of the fixture server with `digest` and `max_result_bytes`.
fn shaped_route(digest: bool, max_result_bytes: usize) -> ToolRoute {
    ToolRoute {
        server: 0,
        server_name: "fs".to_owned(),
        tool: "read_file".to_owned(),
        read_only: true,
        trust_levels: TrustLevel::ALL.to_vec(),
        timeout: Duration::from_secs(30),
        max_result_bytes,
        digest,
    }
}

/// A wrap that digests prose over 1000 bytes to its first 500.
fn wrap(store: &Arc<MemoryStore>) -> DigestWrap {
    let settings = Settings::default()
        .with_threshold(1000)
        .with_passthrough_max(500);
    DigestWrap::new(settings, store.clone(), "session-test")
}

fn prose() -> String {
    "A line of prose that is not JSON.\n".repeat(300)
}

fn first_text(result: &CallToolResult) -> &str {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map_or("", |t| t.text.as_str())
}

fn envelope(result: &CallToolResult) -> Option<Value> {
    serde_json::from_str::<Value>(first_text(result))
        .ok()
        .filter(|v| v.get("call_id").is_some())
}

#[tokio::test]
async fn shaping_digests_only_where_the_route_says_so() {
    let store = Arc::new(MemoryStore::new());
    let wrap = wrap(&store);
    let raw = CallToolResult::success(vec![ContentBlock::text(prose())]);
    // Digested: the envelope replaces the text; the payload is stored whole.
    let shaped = shape(raw.clone(), Some(&wrap), &shaped_route(true, 131_072)).await;
    let envelope = envelope(&shaped).expect("an envelope");
    assert_eq!(envelope["method"], "passthrough");
    assert_eq!(envelope["raw_bytes"], prose().len());
    let call_id = envelope["call_id"].as_str().unwrap();
    let record = store.get(call_id).unwrap().unwrap();
    assert_eq!(
        (record.payload, record.server, record.tool),
        (prose(), "fs".to_owned(), "read_file".to_owned())
    );
    // The route's server opted out (`agentic_never`), or the session has
    // no digest: as the server sent it.
    assert_eq!(
        shape(raw.clone(), Some(&wrap), &shaped_route(false, 131_072)).await,
        raw
    );
    assert_eq!(
        shape(raw.clone(), None, &shaped_route(true, 131_072)).await,
        raw
    );
    // Under the threshold: untouched, and nothing stored.
    let small = CallToolResult::success(vec![ContentBlock::text("short")]);
    let store = Arc::new(MemoryStore::new());
    let wrap = DigestWrap::new(Settings::default(), store.clone(), "s");
    assert_eq!(
        shape(small.clone(), Some(&wrap), &shaped_route(true, 131_072)).await,
        small
    );
    assert_eq!(store.usage("s").unwrap(), Default::default());
}

#[tokio::test]
async fn shaping_caps_what_the_digest_left() {
    let store = Arc::new(MemoryStore::new());
    let wrap = wrap(&store);
    let raw = CallToolResult::success(vec![ContentBlock::text(prose())]);
    let len = |r: &CallToolResult| serde_json::to_vec(r).unwrap().len();
    // A cap under the raw result but over its digest: the digest is whole,
    // as the cap came after it, and the store has the raw payload uncut.
    let cap = 2_000;
    assert!(len(&raw) > cap);
    let shaped = shape(raw.clone(), Some(&wrap), &shaped_route(true, cap)).await;
    assert_eq!(shaped.content.len(), 1, "no cap marker: {shaped:?}");
    let call_id = envelope(&shaped).unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(store.get(&call_id).unwrap().unwrap().payload, prose());
    // Without the digest the same cap cuts the raw result.
    let cut = shape(raw.clone(), Some(&wrap), &shaped_route(false, cap)).await;
    assert!(len(&cut) <= cap);
    assert!(prose().starts_with(first_text(&cut)));
    let marker = cut.content.last().and_then(|c| c.as_text()).unwrap();
    assert!(marker.text.contains("bytes of text cut"), "{}", marker.text);
    // A cap under the digest itself: the digest is cut shorter to fit, and
    // the synthetic response is whole.
    let tight = shape(raw, Some(&wrap), &shaped_route(true, 400)).await;
    assert!(len(&tight) <= 400, "{}", len(&tight));
    assert_eq!(tight.content.len(), 1, "no cap marker: {tight:?}");
    let envelope = envelope(&tight).expect("a whole envelope");
    assert_eq!(envelope["method"], "passthrough");
    let call_id = envelope["call_id"].as_str().unwrap();
    assert_eq!(store.get(call_id).unwrap().unwrap().payload, prose());
}

/// A 600 KB job whose `status` holds its history, as one JSON text.
fn job_status(entries: usize) -> String {
    let history: Vec<Value> = (0..entries)
        .map(|i| json!({"at": i, "state": "running", "message": format!("step {i}: {}", "progress ".repeat(10))}))
        .collect();
    json!({"id": "job-1", "status": {"state": "running", "history": history}}).to_string()
}

#[tokio::test]
async fn the_envelope_is_never_cut_by_the_cap() {
    let store = Arc::new(MemoryStore::new());
    let wrap = DigestWrap::new(Settings::default(), store.clone(), "s")
        .with_note(Some("kept until the end of the run".to_owned()));
    let payload = job_status(5_000);
    assert!(payload.len() > 600_000);
    let image = ContentBlock::image("A".repeat(20_000), "image/png");
    for (cap, with_image) in [
        (131_072, false),
        (8_000, false),
        (2_000, true),
        (1_000, false),
    ] {
        let mut content = vec![ContentBlock::text(payload.clone())];
        if with_image {
            content.push(image.clone());
        }
        let raw = CallToolResult::success(content);
        let shaped = shape(raw, Some(&wrap), &shaped_route(true, cap)).await;
        let len = serde_json::to_vec(&shaped).unwrap().len();
        assert!(len <= cap, "{len} > {cap}");
        let envelope = envelope(&shaped).unwrap_or_else(|| panic!("cut at {cap}: {shaped:?}"));
        let keys: Vec<&str> = envelope
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["digest", "raw_bytes", "method", "call_id", "note"]);
        assert_eq!(envelope["note"], "kept until the end of the run");
        assert_eq!(envelope["raw_bytes"], payload.len());
        let digest: Value = serde_json::from_str(envelope["digest"].as_str().unwrap()).unwrap();
        if cap >= 8_000 {
            assert_eq!(digest["status"]["state"], "running");
            assert_eq!(digest["id"], "job-1");
        }
        let call_id = envelope["call_id"].as_str().unwrap();
        assert_eq!(store.get(call_id).unwrap().unwrap().payload, payload);
        // The image after it is what the cap left out.
        assert_eq!(
            shaped.content.len(),
            if with_image { 2 } else { 1 },
            "{cap}"
        );
    }
}

/// JSON for the shaping property: identifier keys over histories, wide
/// objects, long strings, deep nesting.
fn big_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let key = prop_oneof![
        Just("status".to_owned()),
        Just("state".to_owned()),
        Just("job_id".to_owned()),
        Just("selfUrl".to_owned()),
        Just("name".to_owned()),
        Just("history".to_owned()),
        Just("data".to_owned()),
        "[a-z]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::from),
        "[ -~é\"\\\n]{0,30}".prop_map(Value::String),
        (1usize..40, "[a-z\"\n]{1,4}").prop_map(|(n, s)| Value::String(s.repeat(n * 150))),
    ];
    leaf.prop_recursive(10, 3_000, 60, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..60).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..40)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// For any JSON result over the threshold, under any cap from 1 KiB:
    /// the result fits the cap, its one block is a whole synthetic
    /// response whose structural digest parses, and its `call_id` gives the
    /// raw payload back whole from the store.
    #[test]
    fn any_json_result_comes_back_a_whole_envelope_within_the_cap(
        value in big_json(),
        cap in 1_024usize..70_000,
        pretty in proptest::prelude::any::<bool>(),
    ) {
        let payload = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
        let store = Arc::new(MemoryStore::new());
        let settings = Settings::default().with_threshold(200);
        let wrap = DigestWrap::new(settings, store.clone(), "s");
        let raw = CallToolResult::success(vec![ContentBlock::text(payload.clone())]);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let shaped = runtime.block_on(shape(raw, Some(&wrap), &shaped_route(true, cap)));
        let len = serde_json::to_vec(&shaped).unwrap().len();
        proptest::prop_assert!(len <= cap, "{} > {}", len, cap);
        if payload.len() < 200 {
            return Ok(());
        }
        proptest::prop_assert_eq!(shaped.content.len(), 1);
        let envelope = envelope(&shaped);
        proptest::prop_assert!(envelope.is_some(), "not a whole envelope: {}", first_text(&shaped));
        let envelope = envelope.unwrap();
        let digest = envelope["digest"].as_str().unwrap();
        if envelope["method"] == "structural_json" {
            proptest::prop_assert!(serde_json::from_str::<Value>(digest).is_ok(), "{}", digest);
        }
        proptest::prop_assert!(digest.len() <= Settings::default().passthrough_max + 100);
        let record = store.get(envelope["call_id"].as_str().unwrap()).unwrap().unwrap();
        proptest::prop_assert_eq!(record.payload, payload);
    }
}

#[tokio::test]
async fn the_gate_step_says_which_rule_decided() {
    use crate::observe::Verdict;
    use core_agent_permissions::Rule;
    let prompter = Script::answering(&[Answer::No, Answer::Always]);
    let gate_ = gate_of(Mode::Ask, &["mcp:fs_read*"], &["mcp:fs_delete"]);
    let arguments = args(json!({}));
    let verdict = |name: &'static str| {
        let (gate_, prompter, arguments) = (&gate_, prompter.clone(), &arguments);
        async move {
            super::gate(gate_, prompter.as_ref(), request(name, arguments))
                .await
                .0
        }
    };
    assert_eq!(
        verdict("fs_read_file").await,
        Verdict::Allowed {
            rule: Some(Rule::Allow("mcp:fs_read*".into()))
        }
    );
    assert_eq!(
        verdict("fs_delete").await,
        Verdict::Denied {
            rule: Rule::Deny("mcp:fs_delete".into())
        }
    );
    assert_eq!(
        verdict("fs_write").await,
        Verdict::Asked { answer: Answer::No }
    );
    assert_eq!(
        verdict("fs_write").await,
        Verdict::Asked {
            answer: Answer::Always
        }
    );
    assert_eq!(
        verdict("fs_write").await,
        Verdict::Allowed {
            rule: Some(Rule::Always)
        }
    );
}
