//! The audit trail: one trail from two replicas, and a database away.

use super::*;

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
