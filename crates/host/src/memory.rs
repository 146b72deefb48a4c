//! What a session remembers past its process: the gate's "always" answers
//! and its plan, so that the same session continued by another process (a
//! replica of a gateway behind a load balancer) keeps them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Why a [`SessionMemory`] could not answer (its store is away, say).
pub type MemoryError = Box<dyn std::error::Error + Send + Sync>;

/// What a session told its [`SessionMemory`] to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fact<'a> {
    /// The caller answered "always" for this tool (the gate's name for it).
    Always(&'a str),
    /// The session recorded this plan (`record_plan`), lifting plan-first.
    Plan(&'a str),
}

/// What a [`SessionMemory`] holds for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recalled {
    /// The tools answered "always", in the order they were answered.
    pub always: Vec<String>,
    /// The last plan recorded.
    pub plan: Option<String>,
}

impl Recalled {
    /// Nothing remembered.
    pub fn new() -> Recalled {
        Recalled::default()
    }

    /// `self` with `fact` kept, as a memory keeps it: an "always" answer once,
    /// the latest plan.
    pub fn with(mut self, fact: Fact<'_>) -> Recalled {
        match fact {
            Fact::Always(tool) => {
                if !self.always.iter().any(|t| t == tool) {
                    self.always.push(tool.to_owned());
                }
            }
            Fact::Plan(plan) => self.plan = Some(plan.to_owned()),
        }
        self
    }
}

/// Where sessions keep what they must not forget when another process
/// continues them: a host given one ([`crate::HostOptions::with_memory`])
/// recalls a session's answers and plan when it opens under an id, tells
/// the memory each new one, and looks again before it asks the caller (a
/// sibling process may have been answered since).
///
/// A backend writes two methods. Facts are only added: an answer is never
/// withdrawn, and a plan replaces the one before it. A memory that cannot
/// answer costs the session only what it would have recalled: the gate then
/// asks, as for a new session.
///
/// ```
/// use core_agent_host::{Fact, InMemory, SessionMemory};
///
/// let memory = InMemory::default();
/// memory.remember("s1", Fact::Always("git_commit"))?;
/// memory.remember("s1", Fact::Plan("commit, then push"))?;
/// let recalled = memory.recall("s1")?;
/// assert_eq!(recalled.always, ["git_commit"]);
/// assert_eq!(recalled.plan.as_deref(), Some("commit, then push"));
/// assert!(memory.recall("s2")?.always.is_empty());
/// # Ok::<(), core_agent_host::MemoryError>(())
/// ```
pub trait SessionMemory: Send + Sync + std::fmt::Debug {
    /// What `session` remembers (nothing, for a session it never heard of).
    fn recall(&self, session: &str) -> Result<Recalled, MemoryError>;
    /// Keeps `fact` for `session`.
    fn remember(&self, session: &str, fact: Fact<'_>) -> Result<(), MemoryError>;
}

/// A [`SessionMemory`] in this process: sessions of one host that share an
/// id share their answers. It grows by one entry per session that was
/// answered "always" or recorded a plan, and forgets nothing; use it for
/// tests and one-process hosts that reopen session ids.
#[derive(Debug, Default)]
pub struct InMemory {
    sessions: Mutex<HashMap<String, Recalled>>,
}

impl SessionMemory for InMemory {
    fn recall(&self, session: &str) -> Result<Recalled, MemoryError> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(sessions.get(session).cloned().unwrap_or_default())
    }

    fn remember(&self, session: &str, fact: Fact<'_>) -> Result<(), MemoryError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = sessions.entry(session.to_owned()).or_default();
        *entry = std::mem::take(entry).with(fact);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_once_and_the_latest_plan_wins() {
        let memory = InMemory::default();
        memory.remember("s", Fact::Always("a")).unwrap();
        memory.remember("s", Fact::Always("a")).unwrap();
        memory.remember("s", Fact::Always("b")).unwrap();
        memory.remember("s", Fact::Plan("one")).unwrap();
        memory.remember("s", Fact::Plan("two")).unwrap();
        let recalled = memory.recall("s").unwrap();
        assert_eq!(recalled.always, ["a", "b"]);
        assert_eq!(recalled.plan.as_deref(), Some("two"));
        assert_eq!(memory.recall("other").unwrap(), Recalled::new());
    }
}
