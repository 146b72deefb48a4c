//! Sessions: the gate on host tools, owners, and the digest's raw payloads.

use super::*;

#[tokio::test]
async fn wait_and_verify_asks_once_for_every_attempt() {
    let prompter = std::sync::Arc::new(CountingPrompter::default());
    let session = SessionOptions::default().with_prompter(prompter.clone());
    let host = start_with(vec![demo("demo")], HostOptions::default(), session).await;
    let outcome = host
        .call(
            "wait_and_verify",
            args(json!({
                "tool": "demo_divide",
                "arguments": {"a": 1, "b": 4},
                "until": {"contains": "never"},
                "max_attempts": 3,
                "interval_ms": 0
            })),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    assert_eq!(outcome.is_error, Some(true));
    assert!(
        text(&outcome).contains("\"attempts\":3"),
        "{}",
        text(&outcome)
    );
    assert_eq!(
        prompter.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one ask for three attempts"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn retrieve_raw_is_gated_like_a_read_only_tool() {
    let prompter = std::sync::Arc::new(CountingPrompter::default());
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::new());
    let options = HostOptions::default().with_digest(Some(DigestOptions::new(store)));
    let session = SessionOptions::default()
        .with_prompter(prompter.clone())
        .with_id(Some("s".into()));
    let host = start_with(vec![demo("demo")], options, session).await;
    let listed = host
        .call("demo_list_inventory", JsonObject::new(), TrustLevel::Public)
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    let asks = prompter.0.load(std::sync::atomic::Ordering::SeqCst);
    let raw = host
        .call(
            "retrieve_raw",
            args(json!({"call_id": envelope["call_id"], "pointer": "/total"})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_eq!(text(&raw), "200");
    assert_eq!(
        prompter.0.load(std::sync::atomic::Ordering::SeqCst),
        asks + 1,
        "retrieve_raw went through the gate, which asked"
    );
    host.shutdown().await;
}

/// A session's calls can run on any runtime thread (the gateway spawns them).
#[tokio::test]
async fn calls_are_send_and_sessions_share_one_host() {
    fn spawnable<T: Send>(_: &T) {}
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let a = host.host.session(approving());
    let mut public = approving();
    public.trust_level = TrustLevel::Public;
    let b = host.host.session(public);
    {
        let call = a.call("demo_divide", args(json!({"a": 1, "b": 2})));
        spawnable(&call);
    }
    let (ra, rb) = tokio::join!(
        tokio::spawn(async move { a.call("demo_divide", args(json!({"a": 1, "b": 2}))).await }),
        tokio::spawn(async move { b.call("demo_divide", args(json!({"a": 3, "b": 4}))).await }),
    );
    assert_eq!(text(&ra.unwrap().unwrap()), "0.5");
    assert_eq!(text(&rb.unwrap().unwrap()), "0.75");
    host.shutdown().await;
}

/// A payload is readable from the session that produced it and from the
/// other sessions of its owner (a gateway token, a later run with the same
/// `--session-db`), never from another owner's or an anonymous session.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn retrieve_raw_reads_the_owners_other_sessions_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let digest =
        |store: std::sync::Arc<dyn core_agent_digest::Store>| Some(DigestOptions::new(store));
    let owned = |owner: Option<&str>| approving().with_owner(owner.map(str::to_owned));
    let call_id = {
        let store = std::sync::Arc::new(core_agent_digest::SqliteStore::open(&db).unwrap());
        let options = HostOptions::default().with_digest(digest(store));
        let host = start(vec![demo("demo")], options).await;
        let first = host.host.session(owned(Some("bot")));
        let listed = first
            .call("demo_list_inventory", JsonObject::new())
            .await
            .unwrap();
        let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
        host.shutdown().await;
        envelope["call_id"].as_str().unwrap().to_owned()
    };
    // A new run on the same database: the owner's new session reads it.
    let store = std::sync::Arc::new(core_agent_digest::SqliteStore::open(&db).unwrap());
    let options = HostOptions::default().with_digest(digest(store));
    let host = start(vec![demo("demo")], options).await;
    let pointer = args(json!({"call_id": call_id, "pointer": "/total"}));
    let again = host.host.session(owned(Some("bot")));
    let raw = again.call("retrieve_raw", pointer.clone()).await.unwrap();
    assert_eq!(text(&raw), "200");
    for other in [owned(Some("me")), owned(None)] {
        let err = host
            .host
            .session(other)
            .call("retrieve_raw", pointer.clone())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no raw payload"), "{err}");
    }
    host.shutdown().await;
}

/// Host options that digest with the default settings into `store`.
fn digesting_into(store: std::sync::Arc<core_agent_digest::MemoryStore>) -> HostOptions {
    HostOptions::default().with_digest(Some(DigestOptions::new(store)))
}

/// A session that stored nothing leaves no owner entry in the host once
/// dropped (sessions that come and go do not grow it); one whose call was
/// digested into an in-memory store keeps its owner, and its owner's next
/// session reads it.
#[tokio::test]
async fn a_dropped_session_that_stored_nothing_leaves_no_owner() {
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::new());
    let host = start(vec![demo("demo")], digesting_into(store.clone())).await;
    let owners = host.host.owners().unwrap();
    let owned = |id: &str| {
        approving()
            .with_owner(Some("bot".to_owned()))
            .with_id(Some(id.to_owned()))
    };
    let idle = host.host.session(owned("session-idle"));
    let small = idle
        .call("demo_divide", args(json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_eq!(text(&small), "0.5", "under the threshold: nothing stored");
    assert_eq!(owners.owner("session-idle").as_deref(), Some("bot"));
    drop(idle);
    assert_eq!(owners.owner("session-idle"), None);

    let busy = host.host.session(owned("session-busy"));
    let listed = busy
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    drop(busy);
    assert_eq!(owners.owner("session-busy").as_deref(), Some("bot"));
    assert_eq!(owners.held(), 1, "only the busy session's owner");
    let later = host.host.session(owned("session-later"));
    let raw = later
        .call(
            "retrieve_raw",
            args(json!({"call_id": envelope["call_id"], "pointer": "/total"})),
        )
        .await
        .unwrap();
    assert_eq!(text(&raw), "200");
    drop(later);
    host.shutdown().await;
}

/// A payload the in-memory store dropped to stay under its budget: get
/// says so, with the figures, and what keeps every payload.
#[tokio::test]
async fn retrieve_raw_of_a_dropped_payload_says_it_was_dropped_to_bound_memory() {
    use core_agent_digest::Store;
    let budget = 1024 * 1024;
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::with_budget(budget));
    let host = start(vec![demo("demo")], digesting_into(store.clone())).await;
    let session = host.host.session(approving());
    let listed = session
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&listed)).unwrap();
    let call_id = envelope["call_id"].as_str().unwrap().to_owned();
    // Another caller's big payload fills the budget: the older one goes.
    store
        .put(core_agent_digest::RawRecord {
            call_id: "call-big".to_owned(),
            session_id: "other".to_owned(),
            server: "demo".to_owned(),
            tool: "list_inventory".to_owned(),
            created_ms: 0,
            payload: "x".repeat(budget as usize - 100),
        })
        .unwrap();
    assert_eq!(store.get(&call_id).unwrap(), None);
    let err = session
        .call("retrieve_raw", args(json!({"call_id": call_id})))
        .await
        .unwrap_err()
        .to_string();
    for said in [
        "no raw payload is stored",
        "dropped its 1 oldest payloads",
        "budget of 1048576 bytes",
        "a session database keeps every payload",
    ] {
        assert!(err.contains(said), "{said}: {err}");
    }
    drop(session);
    host.shutdown().await;
}

/// Keeps what an observer is told, as plain values.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<Value>>);

impl core_agent_host::Observer for Recorder {
    fn observe(&self, call: &core_agent_host::CallRecord<'_>) {
        self.0.lock().unwrap().push(json!({
            "session": call.session,
            "owner": call.owner,
            "kind": call.kind.as_str(),
            "name": call.name,
            "server": call.server,
            "arguments": call.arguments,
            "verdict": call.verdict.as_str(),
            "ran": call.verdict.ran(),
            "outcome": call.outcome.as_str(),
            "error": call.error.map(ToString::to_string),
            "bytes": call.result_bytes,
            "digest": call.digested.map(|d| json!([d.method, d.raw_bytes > d.digest_bytes])),
        }));
    }
}

/// Each call a session decides is told once, with the verdict, the rule's
/// outcome, its size and what the digest did, refusals included.
#[tokio::test]
async fn an_observer_is_told_every_call_and_its_verdict() {
    let store = std::sync::Arc::new(core_agent_digest::MemoryStore::new());
    let recorder = std::sync::Arc::new(Recorder::default());
    let host = start(vec![demo("demo")], digesting_into(store)).await;
    let session = |level| {
        let observer: std::sync::Arc<dyn core_agent_host::Observer> = recorder.clone();
        let mut options = approving()
            .with_id(Some(format!("s-{level:?}").to_lowercase()))
            .with_observer(Some(observer));
        options.trust_level = level;
        host.host.session(options)
    };
    let creator = session(TrustLevel::Creator);
    creator
        .call("demo_divide", args(json!({"a": 1, "b": 0})))
        .await
        .unwrap();
    creator
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    creator
        .call("demo_nope", JsonObject::new())
        .await
        .unwrap_err();
    let outcomes = creator
        .call_batch(vec![core_agent_host::CallRequest {
            name: "demo_divide".into(),
            arguments: args(json!({"a": 1, "b": 2})),
        }])
        .await;
    assert!(outcomes[0].result.is_ok());
    let told = recorder.0.lock().unwrap().clone();
    let pick = |i: usize, keys: &[&str]| -> Value {
        keys.iter()
            .map(|k| (k.to_string(), told[i][*k].clone()))
            .collect()
    };
    assert_eq!(told.len(), 4, "{told:#?}");
    assert_eq!(
        pick(
            0,
            &[
                "session",
                "kind",
                "name",
                "server",
                "arguments",
                "verdict",
                "outcome"
            ]
        ),
        json!({"session": "s-creator", "kind": "tool", "name": "demo_divide", "server": "demo",
               "arguments": {"a": 1, "b": 0}, "verdict": "ask", "outcome": "tool_error"})
    );
    assert_eq!(told[1]["outcome"], "ok");
    assert_eq!(
        told[1]["digest"][1], true,
        "the inventory is digested: {}",
        told[1]
    );
    assert!(told[1]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        pick(2, &["verdict", "ran", "outcome", "server", "bytes"]),
        json!({"verdict": "unknown", "ran": false, "outcome": "failed", "server": null, "bytes": null})
    );
    assert_eq!(told[3]["name"], "demo_divide", "batches are told too");
    assert_eq!(told[3]["outcome"], "ok");
    host.shutdown().await;
}

/// An observer that reads only counts and durations.
#[derive(Default)]
struct Counter(std::sync::Mutex<Vec<(Option<usize>, bool)>>);

impl core_agent_host::Observer for Counter {
    fn observe(&self, call: &core_agent_host::CallRecord<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((call.result_bytes, call.arguments.is_some()));
    }

    fn wants_payloads(&self) -> bool {
        false
    }
}

/// An observer that wants no payloads is told of every call, without the
/// arguments or the result's size (neither is copied or measured for it).
#[tokio::test]
async fn an_observer_without_payloads_gets_no_arguments_or_sizes() {
    let counter = std::sync::Arc::new(Counter::default());
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let observer: std::sync::Arc<dyn core_agent_host::Observer> = counter.clone();
    let session = host.host.session(approving().with_observer(Some(observer)));
    session
        .call("demo_divide", args(json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    session
        .call_batch(vec![core_agent_host::CallRequest {
            name: "demo_divide".into(),
            arguments: args(json!({"a": 1, "b": 4})),
        }])
        .await;
    assert_eq!(*counter.0.lock().unwrap(), [(None, false), (None, false)]);
    host.shutdown().await;
}

/// A store that tells which sessions it heard ended.
#[derive(Default)]
struct HearsEnds {
    inner: core_agent_digest::MemoryStore,
    ended: std::sync::Mutex<Vec<String>>,
}

impl core_agent_digest::Store for HearsEnds {
    fn append(&self, entry: core_agent_digest::Entry<'_>) -> core_agent_digest::Result<()> {
        self.inner.append(entry)
    }
    fn get(
        &self,
        call_id: &str,
    ) -> core_agent_digest::Result<Option<core_agent_digest::RawRecord>> {
        self.inner.get(call_id)
    }
    fn session_records(&self) -> core_agent_digest::Result<Vec<core_agent_digest::SessionRecord>> {
        self.inner.session_records()
    }
    fn ended(&self, session: &str) -> core_agent_digest::Result<()> {
        self.ended.lock().unwrap().push(session.to_owned());
        self.inner.ended(session)
    }
}

/// The store hears a session id ended when the last session under it goes
/// away, not before (its telemetry, which an in-memory store bounds by
/// ended sessions, carries the spend a live session's ceiling counts).
#[tokio::test]
async fn the_store_hears_a_session_ended_when_its_last_session_goes() {
    let store = std::sync::Arc::new(HearsEnds::default());
    let options = HostOptions::default().with_digest(Some(DigestOptions::new(store.clone())));
    let host = start(vec![demo("demo")], options).await;
    let owned = |owner: &str| {
        approving()
            .with_owner(Some(owner.to_owned()))
            .with_id(Some("session-shared".to_owned()))
    };
    let first = host.host.session(owned("bot"));
    let second = host.host.session(owned("bot"));
    first
        .call("demo_list_inventory", JsonObject::new())
        .await
        .unwrap();
    drop(first);
    // Another owner's session under the id gets no owner, and going away
    // does not end the id while the bot's session is open.
    let intruder = host.host.session(owned("intruder"));
    drop(intruder);
    assert!(
        store.ended.lock().unwrap().is_empty(),
        "another session still holds the id"
    );
    drop(second);
    assert_eq!(*store.ended.lock().unwrap(), ["session-shared"]);
    host.shutdown().await;
}
