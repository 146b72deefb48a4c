//! Pins: shared, compare-and-swap, and told to the other replicas.

use super::*;

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
