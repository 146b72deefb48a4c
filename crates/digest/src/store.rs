use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::{DigestEvent, Error, Result, Usage};

/// A raw payload, kept so that `retrieve_raw` can give it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// The id the model was given.
    pub call_id: String,
    /// The session whose call produced it.
    pub session_id: String,
    /// The server.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// When it was stored, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The payload, whole.
    pub payload: String,
}

/// Where raw payloads and digest telemetry live: in memory, or SQLite
/// (`--session-db`, feature `sqlite`).
///
/// A store never replaces a payload: `put` under a `call_id` it already holds
/// fails with [`Error::Duplicate`]. Make ids with [`new_call_id`], which are
/// unique across processes and runs.
pub trait Store: Send + Sync {
    /// Keeps a raw payload; refuses a `call_id` that is already stored.
    fn put(&self, record: RawRecord) -> Result<()>;
    /// The payload stored under `call_id`.
    fn get(&self, call_id: &str) -> Result<Option<RawRecord>>;
    /// Adds a digest event to `session`'s telemetry.
    fn record(&self, session: &str, event: &DigestEvent) -> Result<()>;
    /// `session`'s telemetry.
    fn usage(&self, session: &str) -> Result<Usage>;
    /// The sessions that have telemetry, oldest first.
    fn sessions(&self) -> Result<Vec<String>>;
    /// Records that `session` was opened by `owner` (a caller's name, such
    /// as a gateway token's); the first claim stands, and a later claim by
    /// another owner fails.
    fn claim(&self, session: &str, owner: &str) -> Result<()>;
    /// The owner `session` was claimed by, if any.
    fn owner(&self, session: &str) -> Result<Option<String>>;
    /// Says that a holder of a claim on `session` is done with it (the
    /// host's session was dropped). A store in memory then forgets the
    /// owner of a session that stored nothing, so that sessions that come
    /// and go do not grow it; a persistent store keeps every claim (the
    /// default does nothing).
    fn release(&self, session: &str) -> Result<()> {
        let _ = session;
        Ok(())
    }
    /// What the store dropped to stay under its byte budget, if it has one
    /// and dropped anything (the default: `None`, it keeps everything).
    fn evicted(&self) -> Result<Option<Evicted>> {
        Ok(None)
    }
}

/// What a [`MemoryStore`] dropped so far to stay under its byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// How many payloads were dropped, oldest first.
    pub payloads: u64,
    /// Their bytes, as [`MemoryStore::with_budget`] counts them.
    pub bytes: u64,
    /// The budget, in bytes.
    pub budget: u64,
}

/// The byte budget of [`MemoryStore::new`]: 256 MiB of raw payloads.
pub const DEFAULT_RAW_BUDGET: u64 = 256 * 1024 * 1024;

/// A [`Store`] in memory, for one process, whose raw payloads are bounded
/// by a byte budget (see [`MemoryStore::with_budget`]).
///
/// Owner claims are counted: when every session that claimed a session id
/// is released ([`Store::release`]) and that session stored no payload and
/// recorded no telemetry, its owner entry is forgotten. Telemetry only grows
/// with [`Store::record`].
#[derive(Debug)]
pub struct MemoryStore {
    raw: Mutex<Raw>,
    usage: Mutex<HashMap<String, Usage>>,
    /// Per session: its owner, and how many claims on it are not released.
    owners: Mutex<HashMap<String, (String, usize)>>,
}

/// The raw payloads, in the order they were stored, and their bytes.
#[derive(Debug)]
struct Raw {
    records: HashMap<String, RawRecord>,
    order: VecDeque<String>,
    /// How many payloads each session has stored (and not had evicted).
    per_session: HashMap<String, usize>,
    bytes: u64,
    budget: u64,
    evicted: u64,
    evicted_bytes: u64,
}

impl Raw {
    fn evict(&mut self, call_id: &str) {
        if let Some(record) = self.records.remove(call_id) {
            let bytes = size(&record);
            self.bytes = self.bytes.saturating_sub(bytes);
            self.evicted += 1;
            self.evicted_bytes += bytes;
            if let Some(n) = self.per_session.get_mut(&record.session_id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.per_session.remove(&record.session_id);
                }
            }
        }
    }
}

/// The bytes a record counts against the budget: its payload and its ids.
fn size(record: &RawRecord) -> u64 {
    (record.payload.len()
        + record.call_id.len()
        + record.session_id.len()
        + record.server.len()
        + record.tool.len()) as u64
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::with_budget(DEFAULT_RAW_BUDGET)
    }
}

impl MemoryStore {
    /// An empty store with the default budget, [`DEFAULT_RAW_BUDGET`].
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// An empty store that keeps at most `budget` bytes of raw payloads
    /// (a record counts its payload's and its ids' bytes). A `put` that would
    /// pass the budget first drops the oldest payloads, in the order they
    /// were stored, until the new one fits; `get` of a dropped one is `None`
    /// and [`Store::evicted`] counts them. A single payload larger than the
    /// whole budget is refused with [`Error::OverBudget`], and nothing is
    /// dropped for it.
    pub fn with_budget(budget: u64) -> MemoryStore {
        MemoryStore {
            raw: Mutex::new(Raw {
                records: HashMap::new(),
                order: VecDeque::new(),
                per_session: HashMap::new(),
                bytes: 0,
                budget,
                evicted: 0,
                evicted_bytes: 0,
            }),
            usage: Mutex::default(),
            owners: Mutex::default(),
        }
    }

    /// The bytes of raw payloads held now, and how many sessions have an
    /// owner entry: what the budget and [`Store::release`] bound.
    pub fn held(&self) -> Result<(u64, usize)> {
        let bytes = self.raw.lock().map_err(|_| poisoned())?.bytes;
        let owners = self.owners.lock().map_err(|_| poisoned())?.len();
        Ok((bytes, owners))
    }
}

fn poisoned() -> Error {
    Error::Store {
        message: "the in-memory store is unusable after a panic".to_owned(),
    }
}

impl Store for MemoryStore {
    fn put(&self, record: RawRecord) -> Result<()> {
        let mut raw = self.raw.lock().map_err(|_| poisoned())?;
        if raw.records.contains_key(&record.call_id) {
            return Err(Error::Duplicate {
                call_id: record.call_id,
            });
        }
        let bytes = size(&record);
        if bytes > raw.budget {
            return Err(Error::OverBudget {
                call_id: record.call_id,
                bytes,
                budget: raw.budget,
            });
        }
        while raw.bytes + bytes > raw.budget {
            let Some(oldest) = raw.order.pop_front() else {
                break;
            };
            raw.evict(&oldest);
        }
        raw.bytes += bytes;
        raw.order.push_back(record.call_id.clone());
        *raw.per_session
            .entry(record.session_id.clone())
            .or_default() += 1;
        raw.records.insert(record.call_id.clone(), record);
        Ok(())
    }

    fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
        Ok(self
            .raw
            .lock()
            .map_err(|_| poisoned())?
            .records
            .get(call_id)
            .cloned())
    }

    fn record(&self, session: &str, event: &DigestEvent) -> Result<()> {
        self.usage
            .lock()
            .map_err(|_| poisoned())?
            .entry(session.to_owned())
            .or_default()
            .record(event);
        Ok(())
    }

    fn usage(&self, session: &str) -> Result<Usage> {
        Ok(self
            .usage
            .lock()
            .map_err(|_| poisoned())?
            .get(session)
            .cloned()
            .unwrap_or_default())
    }

    fn sessions(&self) -> Result<Vec<String>> {
        // Session ids are ULIDs: sorted by name is sorted by time.
        let mut ids: Vec<String> = self
            .usage
            .lock()
            .map_err(|_| poisoned())?
            .keys()
            .cloned()
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn claim(&self, session: &str, owner: &str) -> Result<()> {
        let mut owners = self.owners.lock().map_err(|_| poisoned())?;
        let (kept, holders) = owners
            .entry(session.to_owned())
            .or_insert_with(|| (owner.to_owned(), 0));
        if kept == owner {
            *holders += 1;
            Ok(())
        } else {
            Err(Error::Store {
                message: format!("session {session} belongs to another caller"),
            })
        }
    }

    fn owner(&self, session: &str) -> Result<Option<String>> {
        Ok(self
            .owners
            .lock()
            .map_err(|_| poisoned())?
            .get(session)
            .map(|(owner, _)| owner.clone()))
    }

    fn release(&self, session: &str) -> Result<()> {
        // Lock order: owners, then usage, then raw (no other path holds two).
        let mut owners = self.owners.lock().map_err(|_| poisoned())?;
        let Some((_, holders)) = owners.get_mut(session) else {
            return Ok(());
        };
        *holders = holders.saturating_sub(1);
        if *holders > 0 {
            return Ok(());
        }
        let recorded = self
            .usage
            .lock()
            .map_err(|_| poisoned())?
            .contains_key(session);
        let stored = self
            .raw
            .lock()
            .map_err(|_| poisoned())?
            .per_session
            .contains_key(session);
        if !recorded && !stored {
            owners.remove(session);
        }
        Ok(())
    }

    fn evicted(&self) -> Result<Option<Evicted>> {
        let raw = self.raw.lock().map_err(|_| poisoned())?;
        Ok((raw.evicted > 0).then_some(Evicted {
            payloads: raw.evicted,
            bytes: raw.evicted_bytes,
            budget: raw.budget,
        }))
    }
}

/// A new `call_id`: `call-` and a ULID (48 bits of milliseconds since the
/// Unix epoch, then 80 random bits, in Crockford base32). Ids sort by time
/// and are unique across processes and runs, so a store shared by many runs
/// (`--session-db`) never sees one twice.
pub fn new_call_id() -> String {
    format!("call-{}", ulid())
}

/// A new session id: `session-` and a ULID, unique across processes and runs.
pub fn new_session_id() -> String {
    format!("session-{}", ulid())
}

fn ulid() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut random = [0u8; 10];
    if getrandom::fill(&mut random).is_err() {
        // No OS randomness: mix what differs between processes and calls.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seq = FALLBACK_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mixed =
            (u128::from(std::process::id()) << 64) ^ (u128::from(nanos) << 32) ^ u128::from(seq);
        random.copy_from_slice(&mixed.to_be_bytes()[6..]);
    }
    let mut value = u128::from(ms & 0xFFFF_FFFF_FFFF) << 80;
    for (i, b) in random.iter().enumerate() {
        value |= u128::from(*b) << (72 - 8 * i);
    }
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut id = String::with_capacity(26);
    for i in (0..26).rev() {
        let digit = ((value >> (5 * i)) & 0x1F) as usize;
        id.push(char::from(ALPHABET[digit]));
    }
    id
}

static FALLBACK_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    fn record(call_id: &str, payload: &str) -> RawRecord {
        RawRecord {
            call_id: call_id.to_owned(),
            session_id: "s".to_owned(),
            server: "demo".to_owned(),
            tool: "list".to_owned(),
            created_ms: 0,
            payload: payload.to_owned(),
        }
    }

    #[test]
    fn a_stored_payload_is_never_replaced() {
        let store = MemoryStore::new();
        store.put(record("call-1", "first")).unwrap();
        let err = store.put(record("call-1", "second")).unwrap_err();
        assert!(matches!(err, Error::Duplicate { .. }), "{err}");
        assert_eq!(store.get("call-1").unwrap().unwrap().payload, "first");
    }

    fn in_session(call_id: &str, session: &str, payload: &str) -> RawRecord {
        RawRecord {
            session_id: session.to_owned(),
            ..record(call_id, payload)
        }
    }

    #[test]
    fn a_full_store_drops_its_oldest_payloads_first_and_counts_them() {
        // Each record counts its payload plus 6 + 1 + 4 + 4 bytes of ids.
        let one = size(&record("call-1", &"a".repeat(85)));
        assert_eq!(one, 100);
        let store = MemoryStore::with_budget(300);
        for id in ["call-1", "call-2", "call-3"] {
            store.put(record(id, &"a".repeat(85))).unwrap();
        }
        assert_eq!(store.held().unwrap().0, 300);
        assert_eq!(store.evicted().unwrap(), None);
        // Reading does not refresh: the order is the order of storing.
        store.get("call-1").unwrap().unwrap();
        // 150 bytes: the two oldest go.
        store.put(record("call-4", &"b".repeat(135))).unwrap();
        assert_eq!(store.get("call-1").unwrap(), None);
        assert_eq!(store.get("call-2").unwrap(), None);
        assert!(store.get("call-3").unwrap().is_some());
        assert!(store.get("call-4").unwrap().is_some());
        assert_eq!(store.held().unwrap().0, 250);
        assert_eq!(
            store.evicted().unwrap(),
            Some(Evicted {
                payloads: 2,
                bytes: 200,
                budget: 300
            })
        );
        // A refused duplicate drops nothing.
        assert!(matches!(
            store.put(record("call-4", "x")),
            Err(Error::Duplicate { .. })
        ));
        assert!(store.get("call-3").unwrap().is_some());
    }

    #[test]
    fn a_payload_larger_than_the_whole_budget_is_refused_and_drops_nothing() {
        let store = MemoryStore::with_budget(300);
        store.put(record("call-1", "small")).unwrap();
        let err = store.put(record("call-2", &"x".repeat(300))).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OverBudget {
                    bytes: 315,
                    budget: 300,
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("call-2") && text.contains("300 bytes"),
            "{text}"
        );
        assert!(store.get("call-1").unwrap().is_some());
        assert_eq!(store.get("call-2").unwrap(), None);
        assert_eq!(store.evicted().unwrap(), None);
        // Exactly the budget fits, alone.
        store.put(record("call-3", &"x".repeat(285))).unwrap();
        assert_eq!(store.get("call-1").unwrap(), None);
        assert_eq!(store.held().unwrap().0, 300);
    }

    #[test]
    fn the_default_budget_is_generous_and_new_uses_it() {
        let store = MemoryStore::new();
        let big = "x".repeat(16 * 1024 * 1024);
        for i in 0..15 {
            store.put(record(&format!("call-{i:02}"), &big)).unwrap();
        }
        assert_eq!(store.evicted().unwrap(), None, "15 × 16 MiB fit in 256 MiB");
        // The 16th, with its ids, passes 256 MiB: the oldest goes.
        store.put(record("call-15", &big)).unwrap();
        assert_eq!(store.evicted().unwrap().map(|e| e.payloads), Some(1));
        assert_eq!(store.get("call-00").unwrap(), None);
        assert!(store.get("call-01").unwrap().is_some());
    }

    #[test]
    fn a_released_session_that_stored_nothing_leaves_no_owner() {
        let store = MemoryStore::new();
        store.claim("s-empty", "alice").unwrap();
        assert_eq!(store.held().unwrap().1, 1);
        store.release("s-empty").unwrap();
        assert_eq!(store.owner("s-empty").unwrap(), None);
        assert_eq!(store.held().unwrap().1, 0);
        // Releasing what is not claimed is harmless.
        store.release("s-empty").unwrap();
        store.release("never").unwrap();
    }

    #[test]
    fn a_released_session_with_data_keeps_its_owner() {
        let store = MemoryStore::new();
        store.claim("s-raw", "alice").unwrap();
        store.put(in_session("call-1", "s-raw", "payload")).unwrap();
        store.release("s-raw").unwrap();
        assert_eq!(store.owner("s-raw").unwrap().as_deref(), Some("alice"));

        store.claim("s-usage", "alice").unwrap();
        store
            .record(
                "s-usage",
                &DigestEvent::new(crate::Method::Passthrough, 10, 5),
            )
            .unwrap();
        store.release("s-usage").unwrap();
        assert_eq!(store.owner("s-usage").unwrap().as_deref(), Some("alice"));
        // Another owner still cannot take them.
        assert!(store.claim("s-raw", "bob").is_err());
    }

    #[test]
    fn an_owner_stays_while_another_claim_on_the_session_is_held() {
        let store = MemoryStore::new();
        store.claim("s", "alice").unwrap();
        store.claim("s", "alice").unwrap();
        assert!(store.claim("s", "bob").is_err());
        store.release("s").unwrap();
        assert_eq!(store.owner("s").unwrap().as_deref(), Some("alice"));
        store.release("s").unwrap();
        assert_eq!(store.owner("s").unwrap(), None);
    }

    #[test]
    fn telemetry_grows_only_with_record() {
        let store = MemoryStore::new();
        store.claim("s", "alice").unwrap();
        store.put(in_session("call-1", "s", "payload")).unwrap();
        let _ = store.usage("s").unwrap();
        let _ = store.usage("other").unwrap();
        assert!(store.sessions().unwrap().is_empty());
    }

    #[test]
    fn call_ids_are_distinct_well_formed_and_time_ordered() {
        let ids: Vec<String> = (0..2000).map(|_| new_call_id()).collect();
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        for id in &ids {
            assert_eq!(id.len(), 31, "{id}");
            assert!(id.starts_with("call-"));
            assert!(
                id[5..]
                    .bytes()
                    .all(|b| b"0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains(&b))
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = new_call_id();
        assert!(
            ids.iter().all(|id| id[5..15] <= later[5..15]),
            "time prefix sorts"
        );
    }
}
