//! What keeps `serve --http` bounded under many callers: a cap on open MCP
//! sessions, per token and in total, that closes the caller's own oldest
//! idle session to make room (never another caller's) (rmcp's [`LocalSessionManager`] holds the sessions; this wraps
//! it), and a throttle on repeated failed authentication from one address.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionManager,
};

tokio::task_local! {
    /// Who opens the session an `initialize` request creates: set by the
    /// HTTP guard around the request, read by [`BoundedSessions::create_session`]
    /// (rmcp calls it inside the request's own future).
    pub(crate) static OPENING: Opening;
}

/// The caller of an `initialize` request, and why its session was refused
/// (set by [`BoundedSessions`], read back by the guard to answer 503).
#[derive(Debug, Clone)]
pub(crate) struct Opening {
    pub(crate) owner: String,
    /// Who opens it (what a fleet records of the session).
    pub(crate) caller: crate::Caller,
    pub(crate) refused: Arc<OnceLock<Refusal>>,
}

impl Opening {
    pub(crate) fn new(caller: &crate::Caller) -> Opening {
        Opening {
            owner: caller.owner(),
            caller: caller.clone(),
            refused: Arc::default(),
        }
    }
}

/// Why no session could be opened: every session counted against the cap is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The token holds `max_sessions_per_token` sessions, each with a call in flight.
    Token(usize),
    /// The gateway holds `max_sessions` sessions, each with a call in flight.
    Total(usize),
    /// The gateway holds `max_sessions` sessions, and those idle belong to
    /// other callers: one caller's session is never closed for another's.
    Crowded(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Token(n) => write!(
                f,
                "this token already holds {n} MCP sessions (gateway.max_sessions_per_token), each with a call in flight; retry when one ends, close sessions you no longer use (HTTP DELETE), or raise gateway.max_sessions_per_token"
            ),
            Refusal::Total(n) => write!(
                f,
                "the gateway already holds {n} MCP sessions (gateway.max_sessions), each with a call in flight; retry when one ends, or raise gateway.max_sessions"
            ),
            Refusal::Crowded(n) => write!(
                f,
                "the gateway already holds {n} MCP sessions (gateway.max_sessions) and none of them is yours to close (another caller's session is never closed to make room); retry later, when sessions end or idle out, or raise gateway.max_sessions"
            ),
        }
    }
}

/// The error of [`BoundedSessions`]: rmcp's, or a refused new session.
#[derive(Debug)]
pub(crate) enum BoundedError {
    Local(LocalSessionManagerError),
    Refused(Refusal),
}

impl std::fmt::Display for BoundedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundedError::Local(e) => e.fmt(f),
            BoundedError::Refused(r) => r.fmt(f),
        }
    }
}

impl std::error::Error for BoundedError {}

impl From<LocalSessionManagerError> for BoundedError {
    fn from(e: LocalSessionManagerError) -> Self {
        BoundedError::Local(e)
    }
}

/// How many sessions may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    pub(crate) total: usize,
    pub(crate) per_token: usize,
}

/// One open session, as the caps see it.
#[derive(Debug)]
struct Entry {
    owner: String,
    /// Requests being answered (a POST's stream not yet ended, or the
    /// `initialize` exchange): a busy session is never closed to make room.
    busy: usize,
    /// When it was last used, as a tick of [`Table::clock`]: the smallest is
    /// the session idle the longest.
    used: u64,
}

/// Every open session.
#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<SessionId, Entry>,
    clock: u64,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Marks `id` used now, and `busy` more (or fewer) requests in flight.
    fn touch(&mut self, id: &SessionId, busy: isize) {
        let now = self.tick();
        if let Some(entry) = self.sessions.get_mut(id) {
            entry.used = now;
            entry.busy = entry.busy.saturating_add_signed(busy);
        }
    }

    /// Admits the new session `id` of `owner` (busy until its `initialize`
    /// is answered): the sessions to close first to make room, oldest idle
    /// first, already removed; or why it cannot be admitted (nothing changed).
    fn admit(
        &mut self,
        id: SessionId,
        owner: &str,
        caps: Caps,
    ) -> Result<Vec<(SessionId, String)>, Refusal> {
        let mut idle: Vec<(&SessionId, &Entry)> =
            self.sessions.iter().filter(|(_, e)| e.busy == 0).collect();
        idle.sort_by_key(|(_, e)| e.used);
        let mut victims: Vec<&SessionId> = Vec::new();
        let owned = self.sessions.values().filter(|e| e.owner == owner).count();
        let over = (owned + 1).saturating_sub(caps.per_token);
        victims.extend(
            idle.iter()
                .filter(|(_, e)| e.owner == owner)
                .take(over)
                .map(|(id, _)| *id),
        );
        if victims.len() < over {
            return Err(Refusal::Token(caps.per_token));
        }
        let over = (self.sessions.len() + 1 - victims.len()).saturating_sub(caps.total);
        // Only the caller's own sessions are closed to make room: another
        // identity's never are.
        let more: Vec<&SessionId> = idle
            .iter()
            .filter(|(_, e)| e.owner == owner)
            .map(|(id, _)| *id)
            .filter(|id| !victims.contains(id))
            .take(over)
            .collect();
        if more.len() < over {
            let others_idle = idle.iter().any(|(_, e)| e.owner != owner);
            return Err(if others_idle {
                Refusal::Crowded(caps.total)
            } else {
                Refusal::Total(caps.total)
            });
        }
        victims.extend(more);
        let victims: Vec<SessionId> = victims.into_iter().cloned().collect();
        let closed = victims
            .into_iter()
            .filter_map(|v| self.sessions.remove(&v).map(|e| (v, e.owner)))
            .collect();
        let used = self.tick();
        self.sessions.insert(
            id,
            Entry {
                owner: owner.to_owned(),
                busy: 1,
                used,
            },
        );
        Ok(closed)
    }
}

/// rmcp's [`LocalSessionManager`] with caps: a new session beyond
/// `max_sessions_per_token` or `max_sessions` closes the session of that
/// caller idle the longest, and is refused when every one of its sessions
/// has a call in flight, or the others belong to other callers. It also knows which token opened each session.
#[derive(Debug)]
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    caps: Caps,
    table: Arc<Mutex<Table>>,
}

impl BoundedSessions {
    pub(crate) fn new(inner: LocalSessionManager, caps: Caps) -> BoundedSessions {
        BoundedSessions {
            inner,
            caps,
            table: Arc::default(),
        }
    }

    pub(crate) fn caps(&self) -> Caps {
        self.caps
    }

    /// Open sessions now.
    pub(crate) fn open(&self) -> usize {
        self.table.lock().map(|t| t.sessions.len()).unwrap_or(0)
    }

    /// The name of the token that opened session `id`, while it is open.
    pub(crate) fn owner(&self, id: &str) -> Option<String> {
        let table = self.table.lock().ok()?;
        table.sessions.get(id).map(|e| e.owner.clone())
    }

    fn touch(&self, id: &SessionId, busy: isize) {
        if let Ok(mut table) = self.table.lock() {
            table.touch(id, busy);
        }
    }

    /// Counts a request of session `id` in flight until dropped.
    fn busy(&self, id: &SessionId) -> Busy {
        self.touch(id, 1);
        Busy {
            table: self.table.clone(),
            id: id.clone(),
        }
    }
}

/// A request of one session in flight; dropped when its answer stream ends
/// (or its client went away).
#[derive(Debug)]
struct Busy {
    table: Arc<Mutex<Table>>,
    id: SessionId,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut table) = self.table.lock() {
            table.touch(&self.id, -1);
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = BoundedError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let opening = OPENING.try_with(Opening::clone).ok();
        let owner = opening.as_ref().map_or("anonymous", |o| o.owner.as_str());
        let (id, transport) = self.inner.create_session().await?;
        let admitted = match self.table.lock() {
            Ok(mut table) => table.admit(id.clone(), owner, self.caps),
            Err(_) => Ok(Vec::new()),
        };
        match admitted {
            Ok(closed) => {
                for (victim, of) in closed {
                    tracing::warn!(
                        "closed the idle session {victim} of token `{of}` to make room for a new session of token `{owner}` (at most {} per token, {} in all: gateway.max_sessions_per_token, gateway.max_sessions)",
                        self.caps.per_token,
                        self.caps.total
                    );
                    self.inner.close_session(&victim).await?;
                }
                Ok((id, transport))
            }
            Err(refusal) => {
                self.inner.close_session(&id).await?;
                if let Some(opening) = &opening {
                    let _ = opening.refused.set(refusal);
                }
                Err(BoundedError::Refused(refusal))
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        // Busy since `admit`; idle once answered.
        let _answered = Busy {
            table: self.table.clone(),
            id: id.clone(),
        };
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        if let Ok(mut table) = self.table.lock() {
            table.sessions.remove(id);
        }
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.busy(id);
        let stream = self.inner.create_stream(id, message).await?;
        Ok(stream.map(move |event| {
            let _answering = &busy;
            event
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id, 0);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id, 0);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    /// A session another replica opened, continued here: admitted under the
    /// caps like a new one, for the caller the guard checked.
    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        let opening = OPENING.try_with(Opening::clone).ok();
        let owner = opening.as_ref().map_or("anonymous", |o| o.owner.as_str());
        let outcome = self.inner.restore_session(id.clone()).await?;
        if !matches!(outcome, RestoreOutcome::Restored(_)) {
            return Ok(outcome);
        }
        let admitted = match self.table.lock() {
            Ok(mut table) => table.admit(id.clone(), owner, self.caps),
            Err(_) => Ok(Vec::new()),
        };
        match admitted {
            Ok(closed) => {
                for (victim, _) in closed {
                    self.inner.close_session(&victim).await?;
                }
                // Busy since `admit`, like a new session; idle once its
                // replayed handshake is answered (`initialize_session`).
                Ok(outcome)
            }
            Err(refusal) => {
                self.inner.close_session(&id).await?;
                if let Some(opening) = &opening {
                    let _ = opening.refused.set(refusal);
                }
                Err(BoundedError::Refused(refusal))
            }
        }
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id, 0);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// Slows down guessing from one address: an address that failed the
/// bearer check `allowed` times within the last `window` (a sliding
/// window) is throttled: none of its requests has its token checked (each
/// gets 429) until its oldest failure in the window is `window` old. A
/// guesser then gets one try per `window / allowed` on average; another
/// address is never held back. At most [`Throttle::ADDRESSES`] addresses
/// and [`Throttle::MAX_ALLOWED`] failures per address are remembered.
#[derive(Debug)]
pub(crate) struct Throttle {
    allowed: usize,
    window: Duration,
    table: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl Throttle {
    /// Addresses remembered at most; past that, those whose failures all
    /// aged out are forgotten first, then the one that failed least recently.
    pub(crate) const ADDRESSES: usize = 4096;
    /// Failures allowed per window, at most (more would be no brake).
    pub(crate) const MAX_ALLOWED: usize = 1000;

    pub(crate) fn new(allowed: u32, window: Duration) -> Throttle {
        Throttle {
            allowed: usize::try_from(allowed)
                .unwrap_or(Throttle::MAX_ALLOWED)
                .clamp(1, Throttle::MAX_ALLOWED),
            window,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// How long `ip` must wait before its token is checked again at `now`,
    /// or `None` when it is not throttled.
    pub(crate) fn wait(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let mut table = self.table.lock().ok()?;
        let failures = table.get_mut(&ip)?;
        self.forget_old(failures, now);
        if failures.len() < self.allowed {
            return None;
        }
        let oldest = *failures.front()?;
        Some(
            self.window
                .saturating_sub(now.saturating_duration_since(oldest)),
        )
    }

    /// Records a failed bearer check from `ip` at `now`; `true` when the
    /// address is throttled from now on.
    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) -> bool {
        let Ok(mut table) = self.table.lock() else {
            return false;
        };
        if !table.contains_key(&ip) && table.len() >= Self::ADDRESSES {
            let window = self.window;
            table.retain(|_, f| {
                f.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < window)
            });
            if table.len() >= Self::ADDRESSES
                && let Some(stalest) = table
                    .iter()
                    .min_by_key(|(_, f)| f.back().copied())
                    .map(|(ip, _)| *ip)
            {
                table.remove(&stalest);
            }
        }
        let failures = table.entry(ip).or_default();
        self.forget_old(failures, now);
        if failures.len() >= self.allowed {
            failures.pop_front();
        }
        failures.push_back(now);
        failures.len() >= self.allowed
    }

    /// Drops the failures that left the window.
    fn forget_old(&self, failures: &mut VecDeque<Instant>, now: Instant) {
        while failures
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.window)
        {
            failures.pop_front();
        }
    }

    /// Addresses remembered now.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.table.lock().map(|t| t.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SessionId {
        SessionId::from(s)
    }

    fn caps(total: usize, per_token: usize) -> Caps {
        Caps { total, per_token }
    }

    /// Admits `name` for `owner` and marks its `initialize` answered.
    fn open(table: &mut Table, name: &str, owner: &str, c: Caps) -> Vec<String> {
        let closed = table
            .admit(id(name), owner, c)
            .unwrap_or_else(|r| panic!("{name} refused: {r}"));
        table.touch(&id(name), -1);
        closed.into_iter().map(|(v, _)| v.to_string()).collect()
    }

    #[test]
    fn the_session_idle_the_longest_is_closed_first() {
        let c = caps(3, 3);
        let mut table = Table::default();
        for name in ["a", "b", "c"] {
            assert!(open(&mut table, name, "bot", c).is_empty());
        }
        // `a` was used after `b`: `b` is now idle the longest.
        table.touch(&id("a"), 0);
        assert_eq!(open(&mut table, "d", "bot", c), ["b"]);
        assert_eq!(open(&mut table, "e", "bot", c), ["c"]);
        assert_eq!(open(&mut table, "f", "bot", c), ["a"]);
        let mut left: Vec<&str> = table.sessions.keys().map(|k| k.as_ref()).collect();
        left.sort_unstable();
        assert_eq!(left, ["d", "e", "f"]);
    }

    #[test]
    fn a_session_with_a_call_in_flight_is_not_idle() {
        let c = caps(2, 2);
        let mut table = Table::default();
        open(&mut table, "a", "bot", c);
        open(&mut table, "b", "bot", c);
        // `a` (the oldest) has a call in flight: `b` goes instead.
        table.touch(&id("a"), 1);
        let closed = table.admit(id("c"), "bot", c).map(|v| v.len());
        assert_eq!(closed, Ok(1));
        assert!(table.sessions.contains_key("a") && !table.sessions.contains_key("b"));
        // Both left are busy (`c` until its `initialize` is answered): refused.
        assert_eq!(
            table.admit(id("d"), "bot", c).map(|_| ()),
            Err(Refusal::Token(2))
        );
        assert_eq!(table.sessions.len(), 2, "a refusal changes nothing");
        // The call ends: `a` is idle again, and the oldest.
        table.touch(&id("a"), -1);
        table.touch(&id("c"), -1);
        assert_eq!(open(&mut table, "d", "bot", c), ["a"]);
    }

    #[test]
    fn each_token_has_its_cap_and_all_share_the_total() {
        let c = caps(4, 2);
        let mut table = Table::default();
        open(&mut table, "m1", "me", c);
        open(&mut table, "b1", "bot", c);
        open(&mut table, "b2", "bot", c);
        // `bot` is at its cap: its own oldest goes, not `me`'s older one.
        assert_eq!(open(&mut table, "b3", "bot", c), ["b1"]);
        open(&mut table, "m2", "me", c);
        assert_eq!(table.sessions.len(), 4);
        // The total is reached: a caller's own oldest idle session goes...
        assert_eq!(open(&mut table, "m3", "me", c), ["m1"]);
        assert_eq!(table.sessions.len(), 4);
        // ...never another's: a new token with none is refused.
        assert_eq!(
            table.admit(id("x1"), "other", c).map(|_| ()),
            Err(Refusal::Crowded(4))
        );
        assert_eq!(table.sessions.len(), 4, "a refusal changes nothing");
        // Every session busy: the total refuses, as it always did.
        for s in ["b2", "b3", "m2", "m3"] {
            table.touch(&id(s), 1);
        }
        assert_eq!(
            table.admit(id("y"), "other", c).map(|_| ()),
            Err(Refusal::Total(4))
        );
    }

    #[test]
    fn three_public_callers_at_the_cap_never_close_the_creators_session() {
        let c = caps(3, 3);
        let mut table = Table::default();
        open(&mut table, "creator-1", "creator", c);
        // The creator's session is idle the longest.
        for (i, who) in ["pub-a", "pub-b"].iter().enumerate() {
            assert!(open(&mut table, &format!("{who}-{i}"), who, c).is_empty());
        }
        assert_eq!(
            table.admit(id("pub-c-0"), "pub-c", c).map(|_| ()),
            Err(Refusal::Crowded(3))
        );
        assert!(table.sessions.contains_key("creator-1"));
        let text = Refusal::Crowded(3).to_string();
        assert!(text.contains("none of them is yours"), "{text}");
        // A caller that holds one closes its own to open another.
        assert_eq!(open(&mut table, "pub-a-9", "pub-a", c), ["pub-a-0"]);
        assert!(table.sessions.contains_key("creator-1"));
    }

    #[test]
    fn a_throttled_address_waits_for_its_oldest_failure_to_leave_the_sliding_window() {
        let throttle = Throttle::new(3, Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let me: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        assert_eq!(throttle.wait(me, at(0)), None);
        assert!(!throttle.failed(me, at(0)));
        assert!(!throttle.failed(me, at(10)));
        assert_eq!(throttle.wait(me, at(10)), None);
        assert!(throttle.failed(me, at(20)), "the third failure throttles");
        // Every request waits, whatever its token, until the failure at 0 is 60 s old.
        assert_eq!(throttle.wait(me, at(20)), Some(Duration::from_secs(40)));
        assert_eq!(throttle.wait(me, at(59)), Some(Duration::from_secs(1)));
        // Another address is not held back.
        assert_eq!(throttle.wait(other, at(30)), None);
        // The window slides: one more try at 60, then throttled until 70.
        assert_eq!(throttle.wait(me, at(60)), None);
        assert!(throttle.failed(me, at(60)));
        assert_eq!(throttle.wait(me, at(61)), Some(Duration::from_secs(9)));
        // A quiet window later, the address starts afresh.
        assert_eq!(throttle.wait(me, at(200)), None);
    }

    #[test]
    fn the_throttle_remembers_a_bounded_number_of_addresses() {
        let throttle = Throttle::new(1, Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..(Throttle::ADDRESSES as u32 + 100) {
            let ip = IpAddr::from(i.to_be_bytes());
            throttle.failed(ip, t0 + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(throttle.remembered(), Throttle::ADDRESSES);
        // The newest are the ones kept.
        let newest = IpAddr::from((Throttle::ADDRESSES as u32 + 99).to_be_bytes());
        assert!(throttle.wait(newest, t0 + Duration::from_secs(1)).is_some());
        let oldest = IpAddr::from(0u32.to_be_bytes());
        assert!(throttle.wait(oldest, t0 + Duration::from_secs(1)).is_none());
    }
}
