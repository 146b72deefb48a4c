//! The database itself: migrations, a newer schema, an unreachable or vanishing
//! server, and the synchronous traits outside a runtime.

use super::*;

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
