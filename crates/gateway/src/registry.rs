//! The gateway's sessions, for the sessions API and for draining: who opened
//! each, when, at which trust level, how many calls it made, and how many
//! calls are in flight.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use core_agent_mcp_config::TrustLevel;
use serde::Serialize;

/// Ended sessions kept for the API, at most (the oldest are forgotten).
const ENDED_KEPT: usize = 1000;

/// One MCP session, as `GET /sessions` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The session id (its digests and telemetry are kept under it).
    pub id: String,
    /// The name of the token that opened it, or the signed-in user's
    /// email, name or subject.
    pub caller: String,
    /// What owns it and its digest payloads: the token's name, or
    /// `oauth:<issuer>#<sub>` for a signed-in user.
    pub owner: String,
    /// Who signed in, when an identity provider issued the caller's token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::Identity>,
    /// Its trust level.
    pub trust_level: &'static str,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Tool calls it made.
    pub calls: u64,
    /// Whether it is still connected (`false` for an ended session, or one
    /// known only from `--session-db`).
    pub live: bool,
}

/// A session's live counters.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) id: String,
    caller: String,
    owner: String,
    identity: Option<crate::Identity>,
    level: TrustLevel,
    started_ms: u64,
    calls: AtomicU64,
    live: AtomicBool,
}

impl Record {
    pub(crate) fn count_call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn info(&self) -> SessionInfo {
        SessionInfo {
            id: self.id.clone(),
            caller: self.caller.clone(),
            owner: self.owner.clone(),
            identity: self.identity.clone(),
            trust_level: self.level.as_str(),
            started_ms: self.started_ms,
            calls: self.calls.load(Ordering::Relaxed),
            live: self.live.load(Ordering::Relaxed),
        }
    }
}

/// Every session the gateway has served, the calls in flight, and the
/// HTTP answers still being streamed to their clients.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    sessions: Mutex<VecDeque<Arc<Record>>>,
    in_flight: AtomicUsize,
    /// Streamed HTTP answers (a call's SSE response) not yet fully sent: a
    /// call's handler returns before its answer reaches the client.
    answering: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Registry {
    /// Registers a new live session.
    pub(crate) fn open(&self, id: String, caller: &crate::Caller) -> Arc<Record> {
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let record = Arc::new(Record {
            id,
            caller: caller.name.clone(),
            owner: caller.owner(),
            identity: caller.identity.clone(),
            level: caller.trust_level,
            started_ms,
            calls: AtomicU64::new(0),
            live: AtomicBool::new(true),
        });
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.push_back(record.clone());
            // Forget the oldest ended sessions past the bound.
            let mut ended = sessions
                .iter()
                .filter(|r| !r.live.load(Ordering::Relaxed))
                .count();
            while ended > ENDED_KEPT {
                match sessions
                    .iter()
                    .position(|r| !r.live.load(Ordering::Relaxed))
                {
                    Some(i) => {
                        sessions.remove(i);
                        ended -= 1;
                    }
                    None => break,
                }
            }
        }
        record
    }

    /// Marks a session ended.
    pub(crate) fn close(&self, record: &Record) {
        record.live.store(false, Ordering::Relaxed);
    }

    /// Every session, oldest first.
    pub(crate) fn list(&self) -> Vec<SessionInfo> {
        self.sessions
            .lock()
            .map(|s| s.iter().map(|r| r.info()).collect())
            .unwrap_or_default()
    }

    /// The session called `id`, if this process served it.
    pub(crate) fn get(&self, id: &str) -> Option<SessionInfo> {
        self.sessions
            .lock()
            .ok()?
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.info())
    }

    /// Counts a call in flight until the guard drops.
    pub(crate) fn call_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone(), Counter::Calls)
    }

    /// Counts a streamed HTTP answer until the guard drops (when its body
    /// has been sent, or its client went away).
    pub(crate) fn answer_started(self: &Arc<Self>) -> InFlight {
        self.answering.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone(), Counter::Answers)
    }

    /// Calls in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until no call is in flight and every streamed answer has been
    /// sent, or `limit` has passed; the calls still in flight then.
    pub(crate) async fn drain(&self, limit: Duration) -> usize {
        let wait = async {
            loop {
                let idle = self.idle.notified();
                if self.in_flight() == 0 && self.answering.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
        self.in_flight()
    }
}

/// What an [`InFlight`] counts.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Calls,
    Answers,
}

/// One call in flight, or one streamed answer being sent.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Registry>, Counter);

impl Drop for InFlight {
    fn drop(&mut self) {
        let counter = match self.1 {
            Counter::Calls => &self.0.in_flight,
            Counter::Answers => &self.0.answering,
        };
        if counter.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_listed_with_their_calls_and_end() {
        let registry = Registry::default();
        let a = registry.open("s-a".into(), &crate::Caller::new("bot", TrustLevel::Public));
        let _b = registry.open("s-b".into(), &crate::Caller::new("me", TrustLevel::Creator));
        a.count_call();
        a.count_call();
        registry.close(&a);
        let list = registry.list();
        assert_eq!(list.len(), 2);
        assert_eq!(
            (
                list[0].id.as_str(),
                list[0].calls,
                list[0].live,
                list[0].trust_level
            ),
            ("s-a", 2, false, "public")
        );
        assert!(list[1].live);
        assert_eq!(registry.get("s-b").map(|s| s.caller), Some("me".into()));
        assert!(registry.get("nope").is_none());
    }

    #[tokio::test]
    async fn drain_waits_for_the_last_call_in_flight() {
        let registry = Arc::new(Registry::default());
        let first = registry.call_started();
        let second = registry.call_started();
        assert_eq!(registry.drain(Duration::from_millis(20)).await, 2);
        let r = registry.clone();
        let waiter = tokio::spawn(async move { r.drain(Duration::from_secs(30)).await });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(second);
        assert_eq!(waiter.await.unwrap_or(99), 0);
    }

    #[tokio::test]
    async fn drain_waits_for_the_answer_after_the_call() {
        let registry = Arc::new(Registry::default());
        let call = registry.call_started();
        let answer = registry.answer_started();
        let r = registry.clone();
        let waiter = tokio::spawn(async move { r.drain(Duration::from_secs(30)).await });
        drop(call);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the answer is still on its way");
        assert_eq!(registry.in_flight(), 0, "answers are not calls");
        drop(answer);
        assert_eq!(waiter.await.unwrap_or(99), 0);
    }
}
