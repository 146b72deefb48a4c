//! What the replicas share: payloads, owners, telemetry, answers, plans, MCP
//! sessions and the secret.

use super::*;

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
