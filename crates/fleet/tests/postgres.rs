//! The fleet's state on a real PostgreSQL (a throwaway cluster per test).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use core_agent_digest::{DigestEvent, Entry, Error as DigestError, Method, RawRecord, Store};
use core_agent_e2e::Postgres as Cluster;
use core_agent_fleet::{Error, Options, Postgres, SCHEMA_VERSION};
use core_agent_gateway::{AuditLog, AuditSettings, AuditSink, AuditTarget, Fleet, SharedSession};
use core_agent_host::{Fact, SessionMemory};
use core_agent_mcp_config::TrustLevel;

fn record(call_id: &str, session: &str, payload: String) -> RawRecord {
    RawRecord {
        call_id: call_id.to_owned(),
        session_id: session.to_owned(),
        server: "demo".to_owned(),
        tool: "list".to_owned(),
        created_ms: 7,
        payload,
    }
}

async fn connect(cluster: &Cluster) -> Postgres {
    Postgres::connect(&cluster.url(), Options::default())
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_owners_and_telemetry_round_trip_in_chunks() {
    let cluster = Cluster::new();
    let db = connect(&cluster).await;
    // Three chunks and a bit, with multi-byte characters across the chunk edges.
    let payload: String = "aé€😀".repeat(300_000);
    db.put(record("c1", "s1", payload.clone())).unwrap();
    let back = db.get("c1").unwrap().expect("stored");
    assert_eq!(back.payload.len(), payload.len());
    assert!(back.payload == payload);
    assert_eq!(back.session_id, "s1");
    assert_eq!(back.created_ms, 7);
    assert!(db.get("missing").unwrap().is_none());
    // Nothing is replaced.
    let again = db.put(record("c1", "s1", "other".into()));
    assert!(matches!(again, Err(DigestError::Duplicate { call_id }) if call_id == "c1"));
    assert!(db.get("c1").unwrap().unwrap().payload == payload);
    // The first owner stands.
    db.append(Entry::Owner {
        session: "s1",
        owner: "alice",
    })
    .unwrap();
    db.append(Entry::Owner {
        session: "s1",
        owner: "bob",
    })
    .unwrap();
    assert_eq!(
        db.session_record("s1").unwrap().unwrap().owner.as_deref(),
        Some("alice")
    );
    // Telemetry adds up, per session, in order.
    db.record("s1", &DigestEvent::new(Method::StructuralJson, 9000, 900))
        .unwrap();
    db.record("s2", &DigestEvent::new(Method::StructuralJson, 5000, 1000))
        .unwrap();
    db.record("s1", &DigestEvent::new(Method::StructuralJson, 1000, 100))
        .unwrap();
    assert_eq!(
        db.usage("s1").unwrap().digest_methods.bytes_saved["structural_json"],
        9000
    );
    assert_eq!(db.sessions().unwrap(), ["s1", "s2"]);
    let records = db.session_records().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].owner.as_deref(), Some("alice"));
    assert!(db.may_hold_payloads("s1").unwrap());
    assert!(!db.may_hold_payloads("s2").unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_payloads_answers_plans_sessions_and_the_secret() {
    let cluster = Cluster::new();
    let one = connect(&cluster).await;
    let two = connect(&cluster).await;
    assert_eq!(one.secret(), two.secret(), "one secret for the fleet");
    assert_ne!(one.secret(), [0u8; 32]);
    one.put(record("c1", "s1", "[1, 2, 3]".into())).unwrap();
    assert_eq!(two.get("c1").unwrap().unwrap().payload, "[1, 2, 3]");
    one.remember("s1", Fact::Always("git_commit")).unwrap();
    one.remember("s1", Fact::Plan("first")).unwrap();
    two.remember("s1", Fact::Plan("second")).unwrap();
    let recalled = two.recall("s1").unwrap();
    assert_eq!(recalled.always, ["git_commit"]);
    assert_eq!(recalled.plan.as_deref(), Some("second"));
    assert!(one.recall("s2").unwrap().always.is_empty());
    let session = SharedSession::new(
        "oauth:issuer#alice",
        "alice@example.com",
        TrustLevel::User,
        serde_json::json!({"protocolVersion": "2025-11-25"}),
    );
    one.open("m1", &session).await.unwrap();
    let found = two.find("m1").await.unwrap().expect("shared");
    assert_eq!(found, session);
    tokio::time::sleep(Duration::from_millis(5)).await;
    two.touch("m1", 3).await.unwrap();
    one.touch("m1", 2).await.unwrap();
    let used = one.find("m1").await.unwrap().unwrap();
    assert!(used.used_ms > session.used_ms);
    assert_eq!(used.calls, 5, "each replica adds its calls");
    let listed = two.list(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].0.as_str(), listed[0].1.calls), ("m1", 5));
    two.close("m1").await.unwrap();
    assert!(one.find("m1").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_twice_and_concurrently_without_harm() {
    let cluster = Cluster::new();
    let url = cluster.url();
    let starts = (0..6).map(|_| {
        let url = url.clone();
        tokio::spawn(async move { Postgres::connect(&url, Options::default()).await })
    });
    let mut secrets = Vec::new();
    for start in starts {
        let db = start.await.unwrap().expect("every replica starts");
        secrets.push(db.secret());
        assert_eq!(db.schema_version().await.unwrap(), SCHEMA_VERSION);
    }
    secrets.dedup();
    assert_eq!(secrets.len(), 1);
    let versions = cluster.psql("SELECT count(*) FROM core_agent_schema");
    assert_eq!(versions.trim(), SCHEMA_VERSION.to_string());
    // And once more, on a migrated database.
    connect(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_release_is_refused_and_left_alone() {
    let cluster = Cluster::new();
    connect(&cluster).await;
    let newer = SCHEMA_VERSION + 1;
    cluster.psql(&format!(
        "INSERT INTO core_agent_schema VALUES ({newer}, 0, 'core-agent 9.9.9')"
    ));
    let before = cluster.psql("SELECT count(*) FROM fleet_secrets");
    let err = Postgres::connect(&cluster.url(), Options::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::NewerSchema { found, known, .. } if found == newer && known == SCHEMA_VERSION)
    );
    let text = err.to_string();
    assert!(text.contains(&format!("schema version {newer}")), "{text}");
    assert!(text.contains("upgrade core-agent"), "{text}");
    assert_eq!(cluster.psql("SELECT count(*) FROM fleet_secrets"), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_named_without_its_password() {
    let port = core_agent_e2e::ReservedPort::new();
    let url = format!("postgres://core:s3cret@127.0.0.1:{}/core", port.port());
    let err = Postgres::connect(
        &url,
        Options::default().with_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Unreachable { .. }), "{text}");
    assert!(
        text.contains(&format!(
            "postgres://core:***@127.0.0.1:{}/core",
            port.port()
        )),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    let err = Postgres::connect("mysql://x", Options::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadUrl { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_and_comes_back_is_survived() {
    let mut cluster = Cluster::new();
    let db = Arc::new(
        Postgres::connect(
            &cluster.url(),
            Options::default().with_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap(),
    );
    db.put(record("c1", "s1", "before".into())).unwrap();
    cluster.stop();
    let err = db.get("c1").unwrap_err().to_string();
    assert!(err.contains("127.0.0.1"), "{err}");
    assert!(db.remember("s1", Fact::Always("x")).is_err());
    cluster.start();
    // The pool drops the dead connections and opens new ones.
    let mut back = None;
    for _ in 0..20 {
        if let Ok(found) = db.get("c1") {
            back = found;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(back.expect("read again").payload, "before");
    db.put(record("c2", "s1", "after".into())).unwrap();
    assert_eq!(db.get("c2").unwrap().unwrap().payload, "after");
}

#[test]
fn the_synchronous_traits_work_outside_any_runtime_and_on_a_current_thread_one() {
    let cluster = Cluster::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = runtime.block_on(connect(&cluster));
    db.put(record("c1", "s1", "x".into())).unwrap();
    runtime.block_on(async {
        // Inside a current-thread runtime the call blocks it, and still ends.
        assert_eq!(db.get("c1").unwrap().unwrap().payload, "x");
    });
    assert_eq!(db.get("c1").unwrap().unwrap().payload, "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_are_shared_compare_and_swap_and_told_to_the_other_replicas() {
    use core_agent_fleet::Notice;
    use core_agent_host::PinStore;
    let cluster = Cluster::new();
    let one = connect(&cluster).await;
    let two = connect(&cluster).await;
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let _listening = two.listen(move |notice| {
        let _ = tx.send(notice);
    });
    // The listener is up once a notice from elsewhere arrives.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        one.announce_tools_changed().await.unwrap();
        if let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_millis(200), heard.recv()).await
        {
            assert_eq!(notice, Notice::ToolsChanged);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never heard");
    }
    while heard.try_recv().is_ok() {}
    assert_eq!(one.load().unwrap(), None);
    assert!(one.store("first", None).unwrap());
    assert!(!two.store("lost", None).unwrap(), "the lock exists now");
    let (text, version) = two.load().unwrap().unwrap();
    assert_eq!(text, "first");
    assert!(two.store("second", Some(version)).unwrap());
    assert!(
        !one.store("stale", Some(version)).unwrap(),
        "a stale version loses"
    );
    assert_eq!(one.load().unwrap().unwrap().0, "second");
    // Two hears what one wrote; one's own writes are not told back to it.
    let notice = tokio::time::timeout(Duration::from_secs(5), heard.recv())
        .await
        .unwrap();
    assert_eq!(notice, Some(Notice::PinsChanged));
    // A lost listening connection comes back, saying it missed things.
    cluster
        .psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'");
    let notice = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match heard.recv().await {
                Some(Notice::Missed) => return Notice::Missed,
                Some(_) => continue,
                None => panic!("the listener stopped"),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(notice, Notice::Missed);
}

/// The audit trail of a replica, into the database.
fn audit_log(db: &Postgres) -> AuditLog {
    AuditLog::open(
        &AuditSettings::new(AuditTarget::Sink(Arc::new(db.clone()))),
        vec!["sekrit-gateway-token".to_owned()],
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_write_one_audit_trail_in_order_per_writer() {
    let cluster = Cluster::new();
    let one = Postgres::connect(&cluster.url(), Options::default().with_replica("one"))
        .await
        .unwrap();
    let two = Postgres::connect(&cluster.url(), Options::default().with_replica("two"))
        .await
        .unwrap();
    assert_eq!(one.replica(), "one");
    // Both replicas write at once, from threads of their own.
    let writers: Vec<_> = [one.clone(), two.clone()]
        .into_iter()
        .map(|db| {
            std::thread::spawn(move || {
                let log = audit_log(&db);
                for i in 0..3000_u16 {
                    log.sign_in_refused(None, i, "a wrong token: sekrit-gateway-token");
                }
                assert!(log.flush(Duration::from_secs(30)));
                assert_eq!(log.dropped(), 0);
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    for replica in ["one", "two"] {
        let statuses = cluster.psql(&format!(
            "SELECT line->>'status' FROM audit_lines WHERE replica = '{replica}' ORDER BY id"
        ));
        let statuses: Vec<u16> = statuses.lines().map(|s| s.parse().unwrap()).collect();
        assert_eq!(statuses, (0..3000).collect::<Vec<_>>(), "{replica}");
    }
    assert_eq!(
        cluster.psql("SELECT count(*) FROM audit_lines WHERE line::text LIKE '%sekrit%'"),
        "0"
    );
    // A call's line: the columns a query filters on are taken from it.
    let line = serde_json::json!({
        "v": 1, "time": "2026-12-02T11:20:00.123Z", "event": "call",
        "caller": {"name": "alice@example.com", "trust_level": "user",
                   "identity": {"issuer": "https://idp", "subject": "u-42", "email": "alice@example.com", "name": null}},
        "session": "session-01", "kind": "tool", "name": "demo_divide", "server": "demo",
        "decision": "deny", "reason": "deny mcp:demo_*", "outcome": "failed",
        "duration_ms": 0.5, "result_bytes": null, "digest": null
    });
    AuditSink::write_lines(&two, &[line.to_string()]).unwrap();
    assert_eq!(
        cluster.psql(
            "SELECT replica, event, kind, caller, subject, session, decision, \
             to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), line->>'name' \
             FROM audit_lines WHERE event = 'call'"
        ),
        "two|call|tool|alice@example.com|u-42|session-01|deny|2026-12-02 11:20:00.123|demo_divide"
    );
    // A line that is not JSON is refused at once, not retried.
    let started = std::time::Instant::now();
    let err = AuditSink::write_lines(&one, &["not json".to_owned()]).unwrap_err();
    assert!(err.to_string().contains("json"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(200));

    // What one replica writes in a second, lines of a call's size.
    let log = audit_log(&one);
    let reason = "x".repeat(400);
    let lines = 10_000;
    let started = std::time::Instant::now();
    for _ in 0..lines {
        log.sign_in_refused(None, 401, &reason);
    }
    let made = started.elapsed();
    assert!(log.flush(Duration::from_secs(60)));
    let written = started.elapsed();
    eprintln!(
        "audit trail into PostgreSQL: {lines} lines of {} bytes made in {made:?}, in the table after {written:?}: {:.0} lines/s",
        reason.len() + 110,
        f64::from(lines) / written.as_secs_f64()
    );
    assert_eq!(log.dropped(), 0);
    // And what the database takes, in full batches of a call's lines.
    let batch: Vec<String> = (0..1000).map(|_| line.to_string()).collect();
    let started = std::time::Instant::now();
    for _ in 0..20 {
        AuditSink::write_lines(&one, &batch).unwrap();
    }
    eprintln!(
        "audit trail into PostgreSQL: 20 batches of 1000 lines of {} bytes in {:?}: {:.0} lines/s",
        line.to_string().len(),
        started.elapsed(),
        20_000.0 / started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_away_costs_audit_lines_counted_never_a_wait() {
    let mut cluster = Cluster::new();
    let db = Postgres::connect(
        &cluster.url(),
        Options::default()
            .with_timeout(Duration::from_secs(1))
            .with_replica("r"),
    )
    .await
    .unwrap();
    let log = audit_log(&db);
    log.sign_in_refused(None, 1, "before");
    assert!(log.flush(Duration::from_secs(5)));
    cluster.stop();
    let started = std::time::Instant::now();
    for _ in 0..500 {
        log.sign_in_refused(None, 2, "while away");
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "making lines waited for the database: {:?}",
        started.elapsed()
    );
    // Each batch is tried for a second and a bit, then given up.
    assert!(log.flush(Duration::from_secs(30)));
    assert_eq!(log.dropped(), 500);
    cluster.start();
    log.sign_in_refused(None, 3, "after");
    assert!(log.flush(Duration::from_secs(30)));
    assert_eq!(
        cluster.psql("SELECT line->>'status', coalesce(line->>'dropped_before', '-') FROM audit_lines ORDER BY id"),
        "1|-\n3|500"
    );
}
