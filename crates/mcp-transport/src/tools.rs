//! A server's tools: listed page by page, the newest listing kept, and
//! listed again after `tools/list_changed`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::Tool;

/// The tools a server listed, whether the list was cut at `max_pages`, and
/// how long the server said it stays fresh (`ttlMs`, the shortest of its
/// pages'; `None` when a page said nothing: fresh until it says it changed).
pub(crate) type Listed = (Vec<Tool>, bool, Option<Duration>);

/// Lists the server's tools, following at most `max_pages` pages.
pub(crate) async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
    max_pages: usize,
) -> std::result::Result<Listed, rmcp::ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    let mut fresh: Option<Option<Duration>> = None;
    for _ in 0..max_pages.max(1) {
        let page = peer
            .list_tools(Some(
                rmcp::model::PaginatedRequestParams::default().with_cursor(cursor),
            ))
            .await?;
        fresh = Some(shortest(fresh, page.ttl_ms));
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((tools, false, freshness(fresh.flatten(), notifies(peer)))),
        }
    }
    Ok((tools, true, freshness(fresh.flatten(), notifies(peer))))
}

/// Whether the server declared it tells when its tools change.
fn notifies(peer: &rmcp::Peer<RoleClient>) -> bool {
    peer.peer_info().and_then(|info| {
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
    }) == Some(true)
}

/// How long a list stays fresh: the `ttlMs` its server gave, except that 0
/// from a server that `notifies` of changes (it declared `listChanged`),
/// which SDKs send when the server set none, means until it says so.
pub(crate) fn freshness(ttl: Option<Duration>, notifies: bool) -> Option<Duration> {
    ttl.filter(|ttl| !(notifies && ttl.is_zero()))
}

/// The freshness of pages so far (`None` before the first) with one more
/// page's `ttlMs`: the shortest, and none once any page gave none.
pub(crate) fn shortest(so_far: Option<Option<Duration>>, ttl_ms: Option<u64>) -> Option<Duration> {
    let page = ttl_ms.map(Duration::from_millis);
    match so_far {
        None => page,
        Some(so_far) => so_far.zip(page).map(|(a, b)| a.min(b)),
    }
}

/// Re-lists after `tools/list_changed` begin at least this far apart: a
/// server that announces a change after every listing (or floods the
/// notification) costs a few listings a second, not one per notification.
const MIN_RELIST_INTERVAL: Duration = Duration::from_millis(500);

/// A server's current tool list. Listings can overlap (the first
/// `tools/list` with a re-list after `tools/list_changed`), and the one that
/// *began* last is the newest: a listing that began before a notification
/// never replaces one that began after it.
///
/// Re-lists are coalesced: one re-lister per connection at a time, and every
/// notification that arrives while it runs or waits is answered by its next
/// listing.
#[derive(Debug)]
pub(crate) struct ToolState {
    /// How many `tools/list_changed` notifications have arrived.
    notified: AtomicU64,
    current: RwLock<Listing>,
    /// Bumped whenever any server of the set keeps a new listing.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// When the last re-list began.
    last_relist: Mutex<Option<Instant>>,
    /// The server said its tools changed since the last listing kept: the
    /// next one is told as a change even when it finds the same tools.
    said_changed: AtomicBool,
}

#[derive(Debug, Default)]
struct Listing {
    /// `notified` when this listing began.
    since: u64,
    tools: Vec<Tool>,
    /// The list was cut at `max_pages`.
    truncated: bool,
    /// Until when the server said the list stays fresh (`ttlMs`); `None`:
    /// until it says it changed.
    fresh_until: Option<Instant>,
    /// A listing was kept (the first one is a change even when empty).
    kept: bool,
}

impl ToolState {
    /// An empty state that reports changes on `changed`.
    pub(crate) fn new(changed: Arc<tokio::sync::watch::Sender<u64>>) -> ToolState {
        ToolState {
            notified: AtomicU64::new(0),
            current: RwLock::new(Listing::default()),
            changed,
            last_relist: Mutex::new(None),
            said_changed: AtomicBool::new(false),
        }
    }

    /// Claims the one re-lister slot of a connection; false when a
    /// re-lister already runs (it will see the newer generation and list
    /// again).
    fn claim_relister(slot: &AtomicBool) -> bool {
        !slot.swap(true, Ordering::SeqCst)
    }

    /// How long the next re-list has to wait to keep the minimum interval,
    /// and marks it as begun at the end of that wait.
    fn pace(&self) -> Duration {
        let now = Instant::now();
        let Ok(mut last) = self.last_relist.lock() else {
            return Duration::ZERO;
        };
        let start = match *last {
            Some(previous) => (previous + MIN_RELIST_INTERVAL).max(now),
            None => now,
        };
        *last = Some(start);
        start - now
    }

    /// Ends a re-lister that has answered generation `since`. True when a
    /// notification arrived meanwhile and this re-lister must go on (it
    /// kept or took back `slot`).
    fn finish_relister(&self, slot: &AtomicBool, since: u64) -> bool {
        if self.begin() > since {
            return true;
        }
        slot.store(false, Ordering::SeqCst);
        // A notification that came between the check and the release saw
        // the slot taken and left its re-list to us.
        self.begin() > since && ToolState::claim_relister(slot)
    }

    /// The generation a listing that begins now reflects.
    pub(crate) fn begin(&self) -> u64 {
        self.notified.load(Ordering::SeqCst)
    }

    /// Counts a `tools/list_changed`; the re-list that follows reflects it.
    fn notify(&self) -> u64 {
        self.notified.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Keeps a listing that began at generation `since`, unless a listing
    /// that began later is already kept; tells of a change when the server
    /// said its tools changed, or when the list differs from the one kept
    /// (a re-list because the old one went stale usually finds the same
    /// tools, and tells nothing).
    pub(crate) fn store(&self, since: u64, (tools, truncated, fresh_for): Listed) {
        let began = Instant::now();
        if let Ok(mut current) = self.current.write()
            && since >= current.since
        {
            let said = self.said_changed.swap(false, Ordering::SeqCst);
            let changed =
                said || !current.kept || current.truncated != truncated || current.tools != tools;
            *current = Listing {
                since,
                tools,
                truncated,
                fresh_until: fresh_for.and_then(|ttl| began.checked_add(ttl)),
                kept: true,
            };
            drop(current);
            if changed {
                self.changed.send_modify(|v| *v += 1);
            }
        }
    }

    /// Whether the kept listing is past the freshness its server gave it
    /// ([`freshness`]), so it is to be listed again.
    pub(crate) fn stale(&self) -> bool {
        self.current
            .read()
            .ok()
            .and_then(|c| c.fresh_until)
            .is_some_and(|until| Instant::now() >= until)
    }

    /// The tools of the newest listing.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        self.current
            .read()
            .map(|c| c.tools.clone())
            .unwrap_or_default()
    }

    /// Whether the newest listing was cut at `max_pages`.
    pub(crate) fn truncated(&self) -> bool {
        self.current.read().map(|c| c.truncated).unwrap_or(false)
    }
}

/// Answers a `tools/list_changed` on a connection (or a listing gone
/// stale): counts it and, unless the connection's re-lister (`slot`)
/// already runs, starts one on `peer`.
pub(crate) fn list_changed(
    tools: &Arc<ToolState>,
    slot: &Arc<AtomicBool>,
    server: &str,
    max_pages: usize,
    timeout: Duration,
    peer: rmcp::Peer<RoleClient>,
    said: bool,
) {
    if said {
        tools.said_changed.store(true, Ordering::SeqCst);
    }
    tools.notify();
    if !ToolState::claim_relister(slot) {
        return;
    }
    let relister = Relister {
        tools: tools.clone(),
        slot: slot.clone(),
        server: server.to_owned(),
        max_pages,
        timeout,
    };
    tokio::spawn(async move { relister.run(&peer).await });
}

/// The one re-lister of a connection: lists, paced by
/// [`MIN_RELIST_INTERVAL`], until no `tools/list_changed` is left unanswered
/// or the connection ends. A listing that takes longer than `timeout`
/// counts as failed, so one unanswered `tools/list` never holds the slot.
struct Relister {
    tools: Arc<ToolState>,
    slot: Arc<AtomicBool>,
    server: String,
    max_pages: usize,
    timeout: Duration,
}

impl Relister {
    async fn run(&self, peer: &rmcp::Peer<RoleClient>) {
        loop {
            tokio::time::sleep(self.tools.pace()).await;
            let since = self.tools.begin();
            let listing = list_tools(peer, self.max_pages);
            match tokio::time::timeout(self.timeout, listing).await {
                Ok(Ok(listed)) => self.tools.store(since, listed),
                // The connection ended: nothing left to re-list on it.
                Ok(Err(rmcp::ServiceError::TransportClosed)) => {
                    self.slot.store(false, Ordering::SeqCst);
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(server = %self.server, "re-listing tools after list_changed failed: {e}")
                }
                Err(_) => tracing::warn!(
                    server = %self.server,
                    "re-listing tools after list_changed got no answer within {:?}",
                    self.timeout
                ),
            }
            if !self.tools.finish_relister(&self.slot, since) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ToolState {
        ToolState::new(Arc::new(tokio::sync::watch::channel(0).0))
    }

    #[test]
    fn one_relister_at_a_time_and_it_goes_on_while_notifications_arrive() {
        let s = state();
        let slot = AtomicBool::new(false);
        s.notify();
        assert!(ToolState::claim_relister(&slot));
        // A second notification while it runs: no second re-lister.
        s.notify();
        assert!(!ToolState::claim_relister(&slot));
        // It answered generation 1 but 2 arrived: it goes on.
        assert!(s.finish_relister(&slot, 1));
        assert!(!s.finish_relister(&slot, 2));
        // Released: the next notification gets a new re-lister.
        s.notify();
        assert!(ToolState::claim_relister(&slot));
        // Another connection's slot (after a restart) is its own.
        let next = AtomicBool::new(false);
        assert!(ToolState::claim_relister(&next));
    }

    fn tool(name: &str) -> Tool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
            .unwrap()
    }

    #[test]
    fn a_listing_is_a_change_when_it_differs_or_the_server_said_so() {
        let (tx, rx) = tokio::sync::watch::channel(0);
        let s = ToolState::new(Arc::new(tx));
        // The first listing is a change even when empty.
        s.store(0, (vec![], false, None));
        assert_eq!(*rx.borrow(), 1);
        // The same tools again, listed because they went stale: no change.
        s.store(0, (vec![], false, None));
        assert_eq!(*rx.borrow(), 1);
        s.store(0, (vec![tool("a")], false, None));
        assert_eq!(*rx.borrow(), 2);
        // The server said they changed: told, even when they are the same.
        s.said_changed.store(true, Ordering::SeqCst);
        s.store(0, (vec![tool("a")], false, None));
        assert_eq!(*rx.borrow(), 3);
        s.store(0, (vec![tool("a")], true, None));
        assert_eq!(*rx.borrow(), 4, "cut at max_pages is a change");
    }

    #[test]
    fn a_listing_goes_stale_only_after_the_freshness_its_server_gave() {
        let s = state();
        s.store(0, (vec![], false, None));
        assert!(
            !s.stale(),
            "no ttlMs: fresh until the server says it changed"
        );
        s.store(0, (vec![], false, Some(Duration::from_secs(3600))));
        assert!(!s.stale());
        s.store(0, (vec![], false, Some(Duration::ZERO)));
        assert!(s.stale(), "ttlMs 0: stale at once");
    }

    #[test]
    fn a_zero_ttl_from_a_server_that_tells_of_changes_waits_for_its_word() {
        let zero = Some(Duration::ZERO);
        assert_eq!(freshness(zero, false), zero);
        assert_eq!(freshness(zero, true), None);
        let given = Some(Duration::from_millis(5));
        assert_eq!(freshness(given, true), given, "a freshness it gave holds");
        assert_eq!(freshness(None, false), None);
    }

    #[test]
    fn the_freshness_of_pages_is_the_shortest_and_none_once_a_page_gave_none() {
        let ms = Duration::from_millis;
        assert_eq!(shortest(None, Some(500)), Some(ms(500)));
        assert_eq!(shortest(Some(Some(ms(500))), Some(200)), Some(ms(200)));
        assert_eq!(shortest(Some(Some(ms(500))), None), None);
        assert_eq!(shortest(Some(None), Some(200)), None);
        assert_eq!(shortest(None, None), None);
    }

    #[test]
    fn re_lists_are_paced_by_the_minimum_interval() {
        let s = state();
        assert_eq!(s.pace(), Duration::ZERO, "the first re-list begins at once");
        let second = s.pace();
        assert!(
            second > MIN_RELIST_INTERVAL - Duration::from_millis(50)
                && second <= MIN_RELIST_INTERVAL,
            "{second:?}"
        );
        // A third, asked for at once, waits one more interval after the second.
        let third = s.pace();
        assert!(
            third > second + MIN_RELIST_INTERVAL - Duration::from_millis(50),
            "{third:?}"
        );
    }
}
