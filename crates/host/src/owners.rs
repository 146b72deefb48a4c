//! Who opened each session: a session id belongs to the first owner that
//! claims it, and an owner's sessions read each other's raw payloads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use core_agent_digest::{Entry, Store};

/// The owners of session ids (a caller's name, such as a gateway token's),
/// for the sessions of one [`Host`](crate::Host).
///
/// A claim on a session id stands for the first owner; a claim by another
/// owner is refused, and that session then has no owner. Claims are held
/// here, counted per open session, and also appended to the digest's store
/// ([`Entry::Owner`]): a store kept past the process (`--session-db`) keeps
/// them, so the owner's sessions in a later run, or in another process
/// sharing the file, find their earlier ones, and a claim held there by
/// another owner is refused here too.
///
/// What is held here stays bounded: when the last session on an id is
/// dropped, its owner is forgotten if the store keeps it, or if the store
/// holds no payload of it ([`Store::may_hold_payloads`]). Sessions that
/// come and go (a gateway's clients listing tools) leave nothing behind;
/// one whose call was digested keeps its owner while the store keeps its
/// payloads, so the same caller's later sessions still read them, and
/// another owner cannot claim the id and read them. Once a bounded store
/// (such as `MemoryStore`) dropped them, the owner is forgotten at the next
/// sweep: closed ids are swept whenever the ids held double, so owners
/// grow with the payloads a store holds, not with the sessions ever opened.
pub struct Owners {
    store: Arc<dyn Store>,
    held: Mutex<Claims>,
    /// Whether the store keeps owners, once a claim found out.
    keeps: std::sync::OnceLock<bool>,
}

/// The claims held, and when to sweep the closed ones next.
#[derive(Debug, Default)]
struct Claims {
    by_session: HashMap<String, Held>,
    /// Sweep when this many ids are held ([`SWEEP_FLOOR`] at least).
    sweep_at: usize,
}

/// Fewer held ids than this are never swept.
const SWEEP_FLOOR: usize = 64;

/// One claimed session id.
#[derive(Debug)]
struct Held {
    owner: String,
    /// Sessions open on the id now.
    holders: usize,
    /// One of them stored a payload.
    stored: bool,
    /// The store keeps this owner too.
    kept: bool,
}

impl std::fmt::Debug for Owners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owners")
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

impl Owners {
    /// Owners whose claims are also appended to `store`.
    pub(crate) fn new(store: Arc<dyn Store>) -> Owners {
        Owners {
            store,
            held: Mutex::default(),
            keeps: std::sync::OnceLock::new(),
        }
    }

    /// The held claims; each change is one step, so a panic elsewhere
    /// leaves them usable.
    fn lock(&self) -> MutexGuard<'_, Claims> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `session` for `owner` as a session opens on it: `true` when
    /// the id is `owner`'s (claimed now, or already), `false` when another
    /// owner holds it or the store cannot say.
    pub(crate) fn claim(&self, session: &str, owner: &str) -> bool {
        self.claim_id(session, owner, false)
    }

    /// [`Owners::claim`] of an id made up just now for this session: the
    /// store keeps the claim, and is not asked whose the id was.
    pub(crate) fn claim_new(&self, session: &str, owner: &str) -> bool {
        self.claim_id(session, owner, true)
    }

    fn claim_id(&self, session: &str, owner: &str, new: bool) -> bool {
        // Held across the store's answer, so two claims here cannot both win.
        let mut held = self.lock();
        if let Some(claim) = held.by_session.get_mut(session) {
            if claim.owner != owner {
                return false;
            }
            claim.holders += 1;
            return true;
        }
        // Not held here: the store may know it, from an earlier run or
        // another process (not an id made up just now).
        if self.store.append(Entry::Owner { session, owner }).is_err() {
            return false;
        }
        let kept = match self.keeps.get() {
            // Whether the store keeps owners does not change.
            Some(keeps) if new => keeps.then(|| owner.to_owned()),
            _ => match self.store.session_record(session) {
                Ok(record) => {
                    let kept = record.and_then(|r| r.owner);
                    let _ = self.keeps.set(kept.is_some());
                    kept
                }
                Err(_) => return false,
            },
        };
        if kept.as_deref().is_some_and(|kept| kept != owner) {
            return false;
        }
        held.by_session.insert(
            session.to_owned(),
            Held {
                owner: owner.to_owned(),
                holders: 1,
                stored: false,
                kept: kept.is_some(),
            },
        );
        if held.by_session.len() >= held.sweep_at.max(SWEEP_FLOOR) {
            self.sweep(&mut held);
        }
        true
    }

    /// Forgets the owners of closed ids whose payloads the store no longer
    /// holds (a store that cannot say keeps them), and sets the next sweep
    /// at twice what is left, so sweeping costs each claim O(1) on average.
    fn sweep(&self, held: &mut Claims) {
        held.by_session.retain(|session, claim| {
            claim.holders > 0 || !matches!(self.store.may_hold_payloads(session), Ok(false))
        });
        held.sweep_at = held.by_session.len().saturating_mul(2);
    }

    /// Says that a session holding a claim on `session` is done with it
    /// (`stored`: it stored a payload). The last one to go takes the
    /// owner with it, unless only this holds the owner of a session that
    /// stored something.
    pub(crate) fn release(&self, session: &str, stored: bool) {
        let mut held = self.lock();
        let Some(claim) = held.by_session.get_mut(session) else {
            return;
        };
        claim.holders = claim.holders.saturating_sub(1);
        claim.stored |= stored;
        if claim.holders == 0
            && (claim.kept
                || !claim.stored
                || matches!(self.store.may_hold_payloads(session), Ok(false)))
        {
            held.by_session.remove(session);
        }
    }

    /// The owner of `session`: held here, or kept by the store (`None`
    /// when neither knows one, or the store cannot say).
    pub fn owner(&self, session: &str) -> Option<String> {
        if let Some(claim) = self.lock().by_session.get(session) {
            return Some(claim.owner.clone());
        }
        self.store
            .session_record(session)
            .ok()
            .flatten()
            .and_then(|r| r.owner)
    }

    /// How many session ids have their owner held here: what dropping
    /// sessions bounds.
    pub fn held(&self) -> usize {
        self.lock().by_session.len()
    }
}

#[cfg(test)]
mod tests {
    use core_agent_digest::{DigestEvent, MemoryStore, Method, RawRecord};

    use super::*;

    fn in_memory() -> Owners {
        Owners::new(Arc::new(MemoryStore::new()))
    }

    #[test]
    fn a_released_session_that_stored_nothing_leaves_no_owner() {
        let owners = in_memory();
        assert!(owners.claim("s-empty", "alice"));
        assert_eq!(owners.held(), 1);
        owners.release("s-empty", false);
        assert_eq!(owners.owner("s-empty"), None);
        assert_eq!(owners.held(), 0);
        // Releasing what is not claimed is harmless.
        owners.release("s-empty", false);
        owners.release("never", true);
        assert_eq!(owners.held(), 0);
    }

    #[test]
    fn a_new_id_is_claimed_without_asking_the_store_and_kept_like_any() {
        let store = Arc::new(MemoryStore::new());
        let owners = Owners::new(store.clone());
        // The first claim finds out that a memory store keeps no owners.
        assert!(owners.claim("s-1", "alice"));
        assert!(owners.claim_new("s-2", "alice"));
        store.put(payload("call-2", "s-2", 10)).unwrap();
        owners.release("s-2", true);
        assert_eq!(
            owners.owner("s-2").as_deref(),
            Some("alice"),
            "held here, as the store keeps no owner"
        );
        assert!(!owners.claim("s-2", "bob"));
    }

    #[test]
    fn a_released_session_with_data_keeps_its_owner() {
        let store = Arc::new(MemoryStore::new());
        let owners = Owners::new(store.clone());
        assert!(owners.claim("s-raw", "alice"));
        store.put(payload("call-1", "s-raw", 10)).unwrap();
        owners.release("s-raw", true);
        assert_eq!(owners.owner("s-raw").as_deref(), Some("alice"));
        // Another owner still cannot take it.
        assert!(!owners.claim("s-raw", "bob"));
        // The same owner can, and storing nothing more does not forget it.
        assert!(owners.claim("s-raw", "alice"));
        owners.release("s-raw", false);
        assert_eq!(owners.owner("s-raw").as_deref(), Some("alice"));
        assert_eq!(owners.held(), 1);
    }

    #[test]
    fn an_owner_stays_while_another_claim_on_the_session_is_held() {
        let owners = in_memory();
        assert!(owners.claim("s", "alice"));
        assert!(owners.claim("s", "alice"));
        assert!(!owners.claim("s", "bob"));
        owners.release("s", false);
        assert_eq!(owners.owner("s").as_deref(), Some("alice"));
        owners.release("s", false);
        assert_eq!(owners.owner("s"), None);
    }

    #[test]
    fn an_in_memory_store_is_given_the_owner_but_not_its_bookkeeping() {
        let store = Arc::new(MemoryStore::new());
        let owners = Owners::new(store.clone());
        assert!(owners.claim("s", "alice"));
        store
            .put(RawRecord {
                call_id: "call-1".to_owned(),
                session_id: "s".to_owned(),
                server: "demo".to_owned(),
                tool: "list".to_owned(),
                created_ms: 0,
                payload: "payload".to_owned(),
            })
            .unwrap();
        store
            .record("s", &DigestEvent::new(Method::Passthrough, 10, 5))
            .unwrap();
        owners.release("s", true);
        // The owner is held here; the store's telemetry is only telemetry.
        assert_eq!(owners.owner("s").as_deref(), Some("alice"));
        assert_eq!(store.session_record("s").unwrap().unwrap().owner, None);
        assert_eq!(store.held().unwrap(), 22);
    }

    fn payload(call_id: &str, session: &str, bytes: usize) -> RawRecord {
        RawRecord {
            call_id: call_id.to_owned(),
            session_id: session.to_owned(),
            server: "demo".to_owned(),
            tool: "list".to_owned(),
            created_ms: 0,
            payload: "x".repeat(bytes),
        }
    }

    #[test]
    fn an_owner_goes_once_the_store_dropped_its_sessions_payloads() {
        // Room for one payload of about 100 bytes.
        let store = Arc::new(MemoryStore::with_budget(150));
        let owners = Owners::new(store.clone());
        assert!(owners.claim("s1", "alice"));
        store.put(payload("call-1", "s1", 80)).unwrap();
        owners.release("s1", true);
        // Its payload is there: the id stays alice's, so bob cannot read it.
        assert_eq!(owners.owner("s1").as_deref(), Some("alice"));
        assert!(!owners.claim("s1", "bob"));
        // Another session's payload pushes s1's out of the store.
        assert!(owners.claim("s2", "carol"));
        store.put(payload("call-2", "s2", 80)).unwrap();
        assert_eq!(store.get("call-1").unwrap(), None);
        // A later claim of s1 by alice, released: nothing is left to guard.
        assert!(owners.claim("s1", "alice"));
        owners.release("s1", false);
        assert_eq!(owners.owner("s1"), None);
        // s2, still open, keeps its owner whatever its payloads.
        assert_eq!(owners.owner("s2").as_deref(), Some("carol"));
        owners.release("s2", true);
        assert_eq!(owners.owner("s2").as_deref(), Some("carol"));
        assert_eq!(owners.held(), 1);
    }

    #[test]
    fn owners_stay_bounded_however_many_sessions_store_payloads() {
        // Room for about ten payloads.
        let store = Arc::new(MemoryStore::with_budget(1_000));
        let owners = Owners::new(store.clone());
        let mut most = 0;
        for n in 0..10_000 {
            let session = format!("s{n:05}");
            assert!(owners.claim(&session, &format!("caller{}", n % 7)));
            store
                .put(payload(&format!("call-{n}"), &session, 80))
                .unwrap();
            owners.release(&session, true);
            most = most.max(owners.held());
        }
        // Each held id still has a payload in the store, or waits for the
        // next sweep, which comes before the ids held pass 64 or double.
        assert!(most <= 2 * SWEEP_FLOOR, "held {most} owners at most");
        // The newest session's payload is there, and so is its owner.
        assert_eq!(owners.owner("s09999").as_deref(), Some("caller3"));
        assert!(!owners.claim("s09999", "caller0"));
        // The oldest's payload is long gone; so is its owner.
        assert_eq!(owners.owner("s00000"), None);
    }

    /// A store that cannot say which payloads a session has keeps its
    /// sessions' owners: forgetting one could let another caller read them.
    #[test]
    fn a_store_that_cannot_tell_keeps_the_owners_of_sessions_that_stored() {
        struct Unknowing(MemoryStore);
        impl Store for Unknowing {
            fn append(&self, entry: Entry<'_>) -> core_agent_digest::Result<()> {
                self.0.append(entry)
            }
            fn get(&self, call_id: &str) -> core_agent_digest::Result<Option<RawRecord>> {
                self.0.get(call_id)
            }
            fn session_records(
                &self,
            ) -> core_agent_digest::Result<Vec<core_agent_digest::SessionRecord>> {
                self.0.session_records()
            }
        }
        let owners = Owners::new(Arc::new(Unknowing(MemoryStore::with_budget(10))));
        for n in 0..200 {
            let session = format!("s{n}");
            assert!(owners.claim(&session, "alice"));
            owners.release(&session, true);
        }
        assert_eq!(owners.held(), 200);
        assert!(!owners.claim("s0", "bob"));
    }

    /// A session id claimed in a session database stays its first owner's
    /// across runs and processes; what is held in memory does not grow.
    #[cfg(feature = "sqlite")]
    #[test]
    fn a_session_keeps_its_first_owner_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let owners = Owners::new(Arc::new(
                core_agent_digest::SqliteStore::open(&path).unwrap(),
            ));
            assert!(owners.claim("s1", "bot"));
            assert!(owners.claim("s1", "bot"));
            owners.release("s1", true);
            owners.release("s1", true);
            assert_eq!(owners.held(), 0, "the database keeps it");
        }
        let owners = Owners::new(Arc::new(
            core_agent_digest::SqliteStore::open(&path).unwrap(),
        ));
        assert_eq!(owners.owner("s1").as_deref(), Some("bot"));
        assert!(!owners.claim("s1", "me"));
        assert_eq!(owners.owner("s1").as_deref(), Some("bot"));
        assert_eq!(owners.owner("s2"), None);
        // Another process on the same file sees this one's claims.
        let other = Owners::new(Arc::new(
            core_agent_digest::SqliteStore::open(&path).unwrap(),
        ));
        assert!(owners.claim("s3", "bot"));
        assert!(!other.claim("s3", "me"));
        assert!(other.claim("s3", "bot"));
        let memory = in_memory();
        assert!(memory.claim("s1", "bot"));
        assert!(!memory.claim("s1", "me"));
        assert_eq!(memory.owner("s1").as_deref(), Some("bot"));
    }
}
