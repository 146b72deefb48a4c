//! What the replicas of one gateway share, so that a load balancer may send
//! any request to any of them: the MCP sessions clients opened (restored on
//! a replica that never saw them, for their owner only) and the secret
//! relayed states are sealed with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::BoxFuture;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

/// Why a [`Fleet`] could not answer (its database is away, say).
pub type FleetError = Box<dyn std::error::Error + Send + Sync>;

/// An MCP session as the replicas share it: who opened it and the client's
/// `initialize`, which a replica that never saw the session replays to
/// continue it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SharedSession {
    /// What owns it: the token's name, or `oauth:<issuer>#<sub>`.
    pub owner: String,
    /// The caller's name, as `/sessions` shows it.
    pub caller: String,
    /// The trust level it was opened at.
    pub trust_level: TrustLevel,
    /// When it was opened, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// When a replica last served it, in milliseconds since the Unix epoch
    /// (kept to within 5 s).
    pub used_ms: u64,
    /// Tool calls it made, on every replica (each replica adds its own
    /// when it marks the session used, at most every 5 s, so the calls of
    /// the last seconds before the session went quiet may be missing).
    pub calls: u64,
    /// The client's `initialize` parameters, as JSON.
    pub initialize: serde_json::Value,
}

impl SharedSession {
    /// A session `owner` opened now, with these `initialize` parameters.
    pub fn new(
        owner: impl Into<String>,
        caller: impl Into<String>,
        trust_level: TrustLevel,
        initialize: serde_json::Value,
    ) -> SharedSession {
        let now = now_ms();
        SharedSession {
            owner: owner.into(),
            caller: caller.into(),
            trust_level,
            started_ms: now,
            used_ms: now,
            calls: 0,
            initialize,
        }
    }
}

/// What the replicas of one gateway share ([`crate::GatewayOptions::with_fleet`]):
/// a replica records each MCP session it opens, looks up a session it does
/// not hold before answering 404, marks sessions used, and forgets one its
/// client closed (HTTP `DELETE`). A session idle for longer than the idle
/// timeout is not continued, whichever replica saw it last.
///
/// Every replica also seals the `requestState` of a backend's question
/// relayed to a 2026-07-28 client with [`Fleet::secret`], so that the
/// client's retry may reach another replica.
pub trait Fleet: Send + Sync + std::fmt::Debug {
    /// The secret relayed states are sealed with: the same for every
    /// replica, and never shown.
    fn secret(&self) -> [u8; 32];
    /// Records session `id` (opened now, or continued here).
    fn open<'a>(
        &'a self,
        id: &'a str,
        session: &'a SharedSession,
    ) -> BoxFuture<'a, Result<(), FleetError>>;
    /// Session `id`, unless it is unknown or was closed.
    fn find<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SharedSession>, FleetError>>;
    /// Marks session `id` used now, and adds `calls` to its calls.
    fn touch<'a>(&'a self, id: &'a str, calls: u64) -> BoxFuture<'a, Result<(), FleetError>>;
    /// The sessions used most recently, at most `limit`, newest first.
    fn list(&self, limit: usize)
    -> BoxFuture<'_, Result<Vec<(String, SharedSession)>, FleetError>>;
    /// Forgets session `id`: its client closed it.
    fn close<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), FleetError>>;
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How often a replica marks a session it serves used in the shared store,
/// at most: a session's calls there are counted to within this much of its
/// last use.
const TOUCH_EVERY: Duration = Duration::from_secs(5);

/// Sessions whose last mark a replica remembers, at most.
const TOUCHED_KEPT: usize = 4096;

/// rmcp's session store over a [`Fleet`]: what rmcp persists after a
/// handshake is recorded with the caller who opened it, and a restore
/// finds only a live session (the guard checked its owner first).
pub(crate) struct Sessions {
    fleet: Arc<dyn Fleet>,
    idle: Duration,
    /// When each session was last marked used from here, and how many of
    /// its calls here were counted then.
    touched: Mutex<HashMap<String, (Instant, u64)>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(fleet: Arc<dyn Fleet>, idle: Duration) -> Sessions {
        Sessions {
            fleet,
            idle,
            touched: Mutex::default(),
        }
    }

    /// Session `id` when it is live: known, and used within the idle timeout.
    pub(crate) async fn live(&self, id: &str) -> Result<Option<SharedSession>, FleetError> {
        let found = self.fleet.find(id).await?;
        let idle = u64::try_from(self.idle.as_millis()).unwrap_or(u64::MAX);
        Ok(found.filter(|s| now_ms().saturating_sub(s.used_ms) <= idle))
    }

    /// Marks `id` used, with the calls it made here since (`calls` tells
    /// how many it made here in all), at most once per [`TOUCH_EVERY`] (or
    /// a quarter of the idle timeout, when shorter) from this replica, off
    /// the request's path.
    pub(crate) fn touch(&self, id: &str, calls: impl FnOnce() -> u64) {
        let now = Instant::now();
        let every = (self.idle / 4).clamp(Duration::from_secs(1), TOUCH_EVERY);
        let added = {
            let mut touched = self.touched.lock().unwrap_or_else(PoisonError::into_inner);
            let counted = match touched.get(id) {
                Some((at, _)) if now.duration_since(*at) < every => return,
                Some((_, counted)) => *counted,
                None => 0,
            };
            // Bounded: entries older than the idle timeout go first, and
            // all of them if that is not enough (they only save writes).
            if touched.len() >= TOUCHED_KEPT {
                let idle = self.idle;
                touched.retain(|_, (at, _)| now.duration_since(*at) < idle);
                if touched.len() >= TOUCHED_KEPT {
                    touched.clear();
                }
            }
            let calls = calls();
            touched.insert(id.to_owned(), (now, calls.max(counted)));
            calls.saturating_sub(counted)
        };
        let fleet = self.fleet.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = fleet.touch(&id, added).await {
                tracing::warn!("cannot mark session {id} used in the shared store: {e}");
            }
        });
    }

    /// The sessions used most recently, newest first.
    pub(crate) async fn list(
        &self,
        limit: usize,
    ) -> Result<Vec<(String, SharedSession)>, FleetError> {
        self.fleet.list(limit).await
    }

    /// Forgets `id` everywhere (its client closed it).
    pub(crate) async fn close(&self, id: &str) {
        if let Ok(mut touched) = self.touched.lock() {
            touched.remove(id);
        }
        if let Err(e) = self.fleet.close(id).await {
            tracing::warn!("cannot forget session {id} in the shared store: {e}");
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for Sessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(shared) = self.live(session_id).await? else {
            return Ok(None);
        };
        let params = serde_json::from_value(shared.initialize)?;
        Ok(Some(SessionState::new(params)))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        // Called inside the `initialize` request, where the guard said who opens it.
        let Ok(opening) = crate::limits::OPENING.try_with(Clone::clone) else {
            return Ok(());
        };
        let caller = &opening.caller;
        let session = SharedSession::new(
            caller.owner(),
            caller.name.clone(),
            caller.trust_level,
            serde_json::to_value(&state.initialize_params)?,
        );
        self.fleet.open(session_id, &session).await
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.close(session_id).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet that counts the marks it is asked for.
    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Fleet for Counting {
        fn secret(&self) -> [u8; 32] {
            [0; 32]
        }
        fn open<'a>(
            &'a self,
            _: &'a str,
            _: &'a SharedSession,
        ) -> BoxFuture<'a, Result<(), FleetError>> {
            Box::pin(async { Ok(()) })
        }
        fn find<'a>(
            &'a self,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Option<SharedSession>, FleetError>> {
            Box::pin(async { Ok(None) })
        }
        fn touch<'a>(&'a self, _: &'a str, _: u64) -> BoxFuture<'a, Result<(), FleetError>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
        fn list(
            &self,
            _: usize,
        ) -> BoxFuture<'_, Result<Vec<(String, SharedSession)>, FleetError>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn close<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), FleetError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn marks_are_throttled_per_session_and_what_is_remembered_stays_bounded() {
        let fleet = Arc::new(Counting::default());
        let sessions = Sessions::new(fleet.clone(), Duration::from_secs(1800));
        sessions.touch("a", || 1);
        sessions.touch("a", || 2);
        tokio::task::yield_now().await;
        assert_eq!(
            fleet.0.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "once per 5 s"
        );
        for n in 0..3 * TOUCHED_KEPT {
            sessions.touch(&format!("s{n}"), || 0);
        }
        let kept = sessions.touched.lock().unwrap().len();
        assert!(kept <= TOUCHED_KEPT, "{kept} sessions remembered");
    }
}
