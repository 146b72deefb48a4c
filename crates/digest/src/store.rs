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

/// What a session leaves in a [`Store`], one entry at a time.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry<'a> {
    /// A digested result's raw payload, for `retrieve_raw` (its session is
    /// its `session_id`).
    Payload(RawRecord),
    /// A digest's telemetry, added to the session's [`Usage`].
    Event {
        /// The session whose call was digested.
        session: &'a str,
        /// What the digest did.
        event: &'a DigestEvent,
    },
    /// Who opened `session` (a caller's name, such as a gateway token's).
    /// A store kept past the process keeps the first owner it is given for
    /// a session and ignores later ones, so that a later run, or another
    /// process sharing the store, finds it. A store in memory need not give
    /// it back ([`MemoryStore`] does not): the host holds the owners of its
    /// sessions while it runs, and decides what a claim means. A store with
    /// a budget shares it between owners ([`MemoryStore::with_budget`]).
    Owner {
        /// The session.
        session: &'a str,
        /// Its owner.
        owner: &'a str,
    },
}

/// What a store holds for one session: its owner and its telemetry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionRecord {
    /// The session id.
    pub session: String,
    /// The first owner appended for it ([`Entry::Owner`]), when the store
    /// keeps owners.
    pub owner: Option<String>,
    /// Its telemetry, once an event was recorded for it.
    pub usage: Option<Usage>,
}

/// Where raw payloads and digest telemetry live: in memory, or SQLite
/// (`--session-db`, feature `sqlite`).
///
/// A backend writes three methods: [`Store::append`] keeps an [`Entry`],
/// [`Store::get`] gives a payload back, and [`Store::session_records`] reads
/// what is held per session. Everything else is provided, computed from
/// them; a backend may override a provided method to answer faster (both of
/// this crate's stores do), never to answer differently. The one exception
/// is [`Store::may_hold_payloads`], which the three cannot answer: its
/// provided answer is the cautious one, and a backend that knows better
/// says so.
///
/// Nothing in a store is replaced: a payload under a `call_id` it already
/// holds is refused with [`Error::Duplicate`] (make ids with
/// [`new_call_id`], which are unique across processes and runs), an event
/// only adds to its session's telemetry, and a session keeps its first
/// owner.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
///
/// use core_agent_digest::{
///     DigestEvent, Entry, Error, Method, RawRecord, Result, SessionRecord, Store,
/// };
///
/// /// A store in a few lines: payloads by `call_id`, and each session's record.
/// #[derive(Default)]
/// struct Tiny {
///     payloads: Mutex<HashMap<String, RawRecord>>,
///     sessions: Mutex<Vec<SessionRecord>>,
/// }
///
/// impl Store for Tiny {
///     fn append(&self, entry: Entry<'_>) -> Result<()> {
///         let session = |id: &str, sessions: &mut Vec<SessionRecord>| {
///             match sessions.iter().position(|r| r.session == id) {
///                 Some(at) => at,
///                 None => {
///                     sessions.push(SessionRecord { session: id.to_owned(), ..Default::default() });
///                     sessions.len() - 1
///                 }
///             }
///         };
///         let mut sessions = self.sessions.lock().unwrap();
///         match entry {
///             Entry::Payload(record) => {
///                 let mut payloads = self.payloads.lock().unwrap();
///                 if payloads.contains_key(&record.call_id) {
///                     return Err(Error::Duplicate { call_id: record.call_id });
///                 }
///                 payloads.insert(record.call_id.clone(), record);
///             }
///             Entry::Event { session: id, event } => {
///                 let at = session(id, &mut sessions);
///                 sessions[at].usage.get_or_insert_default().record(event);
///             }
///             Entry::Owner { session: id, owner } => {
///                 let at = session(id, &mut sessions);
///                 sessions[at].owner.get_or_insert_with(|| owner.to_owned());
///             }
///         }
///         Ok(())
///     }
///
///     fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
///         Ok(self.payloads.lock().unwrap().get(call_id).cloned())
///     }
///
///     fn session_records(&self) -> Result<Vec<SessionRecord>> {
///         Ok(self.sessions.lock().unwrap().clone())
///     }
/// }
///
/// let store = Tiny::default();
/// store.put(RawRecord {
///     call_id: "call-1".into(),
///     session_id: "s".into(),
///     server: "demo".into(),
///     tool: "list".into(),
///     created_ms: 0,
///     payload: "[1, 2, 3]".into(),
/// })?;
/// store.record("s", &DigestEvent::new(Method::StructuralJson, 9000, 900))?;
/// assert_eq!(store.get("call-1")?.unwrap().payload, "[1, 2, 3]");
/// assert_eq!(store.usage("s")?.digest_methods.bytes_saved["structural_json"], 8100);
/// assert_eq!(store.sessions()?, ["s"]);
/// # Ok::<(), core_agent_digest::Error>(())
/// ```
pub trait Store: Send + Sync {
    /// Keeps `entry`: a payload (refused with [`Error::Duplicate`] under a
    /// `call_id` already held), an event added to its session's telemetry,
    /// or a session's owner (ignored when the session has one).
    fn append(&self, entry: Entry<'_>) -> Result<()>;
    /// The payload stored under `call_id`.
    fn get(&self, call_id: &str) -> Result<Option<RawRecord>>;
    /// What the store holds per session: every session with telemetry,
    /// oldest first (the order of [`Store::sessions`]), then any other
    /// session it keeps an owner for.
    fn session_records(&self) -> Result<Vec<SessionRecord>>;

    /// Keeps a raw payload; refuses a `call_id` that is already stored.
    fn put(&self, record: RawRecord) -> Result<()> {
        self.append(Entry::Payload(record))
    }
    /// Adds a digest event to `session`'s telemetry.
    fn record(&self, session: &str, event: &DigestEvent) -> Result<()> {
        self.append(Entry::Event { session, event })
    }
    /// What the store holds for `session`, if anything.
    fn session_record(&self, session: &str) -> Result<Option<SessionRecord>> {
        Ok(self
            .session_records()?
            .into_iter()
            .find(|r| r.session == session))
    }
    /// `session`'s telemetry (all zeros when it has none).
    fn usage(&self, session: &str) -> Result<Usage> {
        Ok(self
            .session_record(session)?
            .and_then(|r| r.usage)
            .unwrap_or_default())
    }
    /// The sessions that have telemetry, oldest first.
    fn sessions(&self) -> Result<Vec<String>> {
        Ok(self
            .session_records()?
            .into_iter()
            .filter(|r| r.usage.is_some())
            .map(|r| r.session)
            .collect())
    }
    /// What the store dropped to stay under its byte budget, if it has one
    /// and dropped anything (the default: `None`, it keeps everything).
    fn evicted(&self) -> Result<Option<Evicted>> {
        Ok(None)
    }
    /// Whether the store may still hold a payload stored by `session`:
    /// `false` only when it surely holds none (none was stored, or every
    /// one was dropped to stay under a budget). The host forgets the owner
    /// of a session that holds nothing more, so that what it remembers
    /// stays bounded.
    ///
    /// Provided: `true`, as [`Store::get`] and [`Store::session_records`]
    /// cannot tell which payloads a session has; the host then keeps that
    /// session's owner while it runs. [`MemoryStore`] answers exactly.
    fn may_hold_payloads(&self, session: &str) -> Result<bool> {
        let _ = session;
        Ok(true)
    }
    /// Says that `session` ended here (the last of its sessions in this
    /// process went away), so a store that bounds its memory may forget its
    /// telemetry once enough later sessions ended. A session that records
    /// again is live again.
    ///
    /// Provided: nothing (a store that keeps everything forgets nothing).
    /// [`MemoryStore`] keeps the telemetry of the last
    /// [`ENDED_SESSIONS_KEPT`] ended sessions.
    fn ended(&self, session: &str) -> Result<()> {
        let _ = session;
        Ok(())
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

/// How many ended sessions' telemetry a [`MemoryStore`] keeps: past it,
/// the telemetry of the session that ended first is forgotten. Live
/// sessions' is always kept (their LLM spend counts against their ceiling).
pub const ENDED_SESSIONS_KEPT: usize = 4096;

/// A [`Store`] in memory, for one process, whose raw payloads are bounded
/// by a byte budget (see [`MemoryStore::with_budget`]).
///
/// Telemetry grows with [`Store::record`], by one [`Usage`] per session
/// that has any, and is bounded by session: of the sessions that ended
/// ([`Store::ended`]), the last [`ENDED_SESSIONS_KEPT`] keep theirs.
/// Owners ([`Entry::Owner`]) are not given back ([`SessionRecord::owner`]
/// is `None`): a store that ends with its process has nobody to tell them
/// to, and the host holds the owners of its sessions while it runs. The
/// store keeps them only to share its budget between owners, while a
/// session is live or holds payloads (see [`MemoryStore::with_budget`]).
#[derive(Debug)]
pub struct MemoryStore {
    raw: Mutex<Raw>,
    usage: Mutex<Telemetry>,
}

/// Each session's telemetry, and the order in which sessions ended.
#[derive(Debug, Default)]
struct Telemetry {
    by_session: HashMap<String, Usage>,
    /// Ended sessions, by the number of their end (a session that ends,
    /// records again and ends again counts by its last end).
    ended: HashMap<String, u64>,
    /// `(session, end number)`, oldest first; entries whose number is no
    /// longer the session's are skipped.
    ends: VecDeque<(String, u64)>,
    next_end: u64,
}

impl Telemetry {
    fn ended(&mut self, session: &str) {
        // A session with no telemetry leaves nothing to forget.
        if !self.by_session.contains_key(session) {
            return;
        }
        self.next_end += 1;
        self.ended.insert(session.to_owned(), self.next_end);
        self.ends.push_back((session.to_owned(), self.next_end));
        while self.ended.len() > ENDED_SESSIONS_KEPT {
            let Some((oldest, end)) = self.ends.pop_front() else {
                break;
            };
            if self.ended.get(&oldest) == Some(&end) {
                self.ended.remove(&oldest);
                self.by_session.remove(&oldest);
            }
        }
        // Entries of sessions that came back, or ended again, are skipped
        // when they come up; compacted, they stay under twice the ended
        // sessions kept (plus a little).
        if self.ends.len() > 2 * self.ended.len() + 64 {
            let ended = &self.ended;
            self.ends.retain(|(s, n)| ended.get(s) == Some(n));
        }
    }
}

/// The raw payloads, each owner's in the order they were stored, and
/// their bytes.
#[derive(Debug)]
struct Raw {
    records: HashMap<String, Held>,
    /// How many of `records` each session stored.
    per_session: HashMap<String, usize>,
    /// The owner of each session that told one ([`Entry::Owner`]), while
    /// the session is live or holds payloads: whose share its payloads count
    /// against.
    owners: HashMap<String, String>,
    /// Sessions that ended ([`Store::ended`]) and still hold payloads: their
    /// owner is forgotten with their last payload.
    ended: std::collections::HashSet<String>,
    /// Each owner's payloads, oldest first, and their bytes ("" holds
    /// the payloads of sessions with no owner).
    shares: HashMap<String, Share>,
    /// Numbers the payloads in the order they were stored.
    next: u64,
    bytes: u64,
    budget: u64,
    evicted: u64,
    evicted_bytes: u64,
}

/// A payload held, and whose share it counts against.
#[derive(Debug)]
struct Held {
    record: RawRecord,
    owner: String,
}

/// One owner's payloads: `(number, call_id)` oldest first, and their bytes.
#[derive(Debug, Default)]
struct Share {
    order: VecDeque<(u64, String)>,
    bytes: u64,
}

impl Raw {
    /// The owner whose oldest payload goes next: the one holding the most
    /// bytes (counting `incoming` bytes for `putter`, about to be stored),
    /// the one whose oldest payload is oldest on a tie.
    fn heaviest(&self, putter: &str, incoming: u64) -> Option<String> {
        self.shares
            .iter()
            .filter_map(|(owner, share)| {
                let (first, _) = share.order.front()?;
                let weight = share.bytes + if owner == putter { incoming } else { 0 };
                Some((weight, std::cmp::Reverse(*first), owner))
            })
            .max()
            .map(|(_, _, owner)| owner.clone())
    }

    fn evict(&mut self, call_id: &str) {
        if let Some(Held { record, owner }) = self.records.remove(call_id) {
            let bytes = size(&record);
            if let Some(share) = self.shares.get_mut(&owner) {
                share.bytes = share.bytes.saturating_sub(bytes);
                if share.order.is_empty() {
                    self.shares.remove(&owner);
                }
            }
            if let Some(count) = self.per_session.get_mut(&record.session_id) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.per_session.remove(&record.session_id);
                    if self.ended.remove(&record.session_id) {
                        self.owners.remove(&record.session_id);
                    }
                }
            }
            self.bytes = self.bytes.saturating_sub(bytes);
            self.evicted += 1;
            self.evicted_bytes += bytes;
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
    /// (a record counts its payload's and its ids' bytes), shared between
    /// owners: a `put` that would pass the budget first drops payloads
    /// until the new one fits, each time the oldest payload of the owner
    /// holding the most bytes (the new payload counted for its own owner),
    /// so a caller that stores much evicts its own payloads before another
    /// owner's. A payload's owner is its session's ([`Entry::Owner`]);
    /// sessions with none share one. `get` of a dropped payload is `None`
    /// and [`Store::evicted`] counts them. A single payload larger than the
    /// whole budget is refused with [`Error::OverBudget`], and nothing is
    /// dropped for it.
    pub fn with_budget(budget: u64) -> MemoryStore {
        MemoryStore {
            raw: Mutex::new(Raw {
                records: HashMap::new(),
                per_session: HashMap::new(),
                owners: HashMap::new(),
                ended: std::collections::HashSet::new(),
                shares: HashMap::new(),
                next: 0,
                bytes: 0,
                budget,
                evicted: 0,
                evicted_bytes: 0,
            }),
            usage: Mutex::default(),
        }
    }

    /// The bytes of raw payloads held now: what the budget bounds.
    pub fn held(&self) -> Result<u64> {
        Ok(self.raw.lock().map_err(|_| poisoned())?.bytes)
    }

    fn put_payload(&self, record: RawRecord) -> Result<()> {
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
        let owner = raw
            .owners
            .get(&record.session_id)
            .cloned()
            .unwrap_or_default();
        while raw.bytes + bytes > raw.budget {
            let Some(heaviest) = raw.heaviest(&owner, bytes) else {
                break;
            };
            let Some((_, oldest)) = raw
                .shares
                .get_mut(&heaviest)
                .and_then(|share| share.order.pop_front())
            else {
                break;
            };
            raw.evict(&oldest);
        }
        raw.bytes += bytes;
        raw.next += 1;
        let number = raw.next;
        let share = raw.shares.entry(owner.clone()).or_default();
        share.order.push_back((number, record.call_id.clone()));
        share.bytes += bytes;
        *raw.per_session
            .entry(record.session_id.clone())
            .or_default() += 1;
        raw.records
            .insert(record.call_id.clone(), Held { record, owner });
        Ok(())
    }
}

fn poisoned() -> Error {
    Error::Store {
        message: "the in-memory store is unusable after a panic".to_owned(),
    }
}

impl Store for MemoryStore {
    fn append(&self, entry: Entry<'_>) -> Result<()> {
        match entry {
            Entry::Payload(record) => self.put_payload(record),
            Entry::Event { session, event } => {
                let mut telemetry = self.usage.lock().map_err(|_| poisoned())?;
                // Recording again, the session is live again.
                telemetry.ended.remove(session);
                telemetry
                    .by_session
                    .entry(session.to_owned())
                    .or_default()
                    .record(event);
                Ok(())
            }
            // Kept only to count payloads against their owner's share:
            // see the type's doc.
            Entry::Owner { session, owner } => {
                let mut raw = self.raw.lock().map_err(|_| poisoned())?;
                raw.ended.remove(session);
                raw.owners
                    .entry(session.to_owned())
                    .or_insert_with(|| owner.to_owned());
                Ok(())
            }
        }
    }

    fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
        Ok(self
            .raw
            .lock()
            .map_err(|_| poisoned())?
            .records
            .get(call_id)
            .map(|held| held.record.clone()))
    }

    fn session_records(&self) -> Result<Vec<SessionRecord>> {
        // Session ids are ULIDs: sorted by name is sorted by time.
        let usage = self.usage.lock().map_err(|_| poisoned())?;
        let mut records: Vec<SessionRecord> = usage
            .by_session
            .iter()
            .map(|(session, usage)| SessionRecord {
                session: session.clone(),
                owner: None,
                usage: Some(usage.clone()),
            })
            .collect();
        records.sort_by(|a, b| a.session.cmp(&b.session));
        Ok(records)
    }

    fn session_record(&self, session: &str) -> Result<Option<SessionRecord>> {
        Ok(self
            .usage
            .lock()
            .map_err(|_| poisoned())?
            .by_session
            .get(session)
            .map(|usage| SessionRecord {
                session: session.to_owned(),
                owner: None,
                usage: Some(usage.clone()),
            }))
    }

    fn usage(&self, session: &str) -> Result<Usage> {
        Ok(self
            .usage
            .lock()
            .map_err(|_| poisoned())?
            .by_session
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
            .by_session
            .keys()
            .cloned()
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn evicted(&self) -> Result<Option<Evicted>> {
        let raw = self.raw.lock().map_err(|_| poisoned())?;
        Ok((raw.evicted > 0).then_some(Evicted {
            payloads: raw.evicted,
            bytes: raw.evicted_bytes,
            budget: raw.budget,
        }))
    }

    fn ended(&self, session: &str) -> Result<()> {
        {
            let mut raw = self.raw.lock().map_err(|_| poisoned())?;
            if raw.per_session.contains_key(session) {
                if raw.owners.contains_key(session) {
                    raw.ended.insert(session.to_owned());
                }
            } else {
                raw.owners.remove(session);
            }
        }
        self.usage.lock().map_err(|_| poisoned())?.ended(session);
        Ok(())
    }

    fn may_hold_payloads(&self, session: &str) -> Result<bool> {
        Ok(self
            .raw
            .lock()
            .map_err(|_| poisoned())?
            .per_session
            .contains_key(session))
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
        assert_eq!(store.held().unwrap(), 300);
        assert_eq!(store.evicted().unwrap(), None);
        // Reading does not refresh: the order is the order of storing.
        store.get("call-1").unwrap().unwrap();
        // 150 bytes: the two oldest go.
        store.put(record("call-4", &"b".repeat(135))).unwrap();
        assert_eq!(store.get("call-1").unwrap(), None);
        assert_eq!(store.get("call-2").unwrap(), None);
        assert!(store.get("call-3").unwrap().is_some());
        assert!(store.get("call-4").unwrap().is_some());
        assert_eq!(store.held().unwrap(), 250);
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

    fn owned_by(store: &MemoryStore, session: &str, owner: &str) {
        store.append(Entry::Owner { session, owner }).unwrap();
    }

    /// Puts a record of exactly 100 bytes as the budget counts them.
    fn put100(store: &MemoryStore, call_id: &str, session: &str) {
        let ids = call_id.len() + session.len() + "demo".len() + "list".len();
        store
            .put(in_session(call_id, session, &"a".repeat(100 - ids)))
            .unwrap();
    }

    #[test]
    fn a_heavy_owner_evicts_its_own_payloads_before_anyone_elses() {
        // Ten records fit.
        let store = MemoryStore::with_budget(1000);
        owned_by(&store, "c", "creator");
        owned_by(&store, "p", "public");
        put100(&store, "c1", "c");
        put100(&store, "c2", "c");
        // The public caller stores many more than fit.
        for i in 0..600 {
            put100(&store, &format!("p{i:03}"), "p");
        }
        // The creator's came first, yet only the public caller's went.
        assert!(store.get("c1").unwrap().is_some());
        assert!(store.get("c2").unwrap().is_some());
        assert!(store.get("p599").unwrap().is_some());
        assert!(store.get("p592").unwrap().is_some());
        assert_eq!(store.get("p591").unwrap(), None);
        assert_eq!(store.held().unwrap(), 1000);
        assert_eq!(store.evicted().unwrap().map(|e| e.payloads), Some(592));
        // The creator grows: the public caller, heavier, still pays...
        for i in 3..=5 {
            put100(&store, &format!("c{i}"), "c");
        }
        assert!(store.get("c1").unwrap().is_some());
        assert_eq!(store.get("p594").unwrap(), None);
        assert!(store.get("p595").unwrap().is_some());
        // ...until the creator, counting its new payload, holds the most
        // (6 with it, against 5): then its own oldest goes.
        put100(&store, "c6", "c");
        assert_eq!(store.get("c1").unwrap(), None);
        assert!(store.get("c2").unwrap().is_some());
        assert!(store.get("p595").unwrap().is_some());
        assert_eq!(store.held().unwrap(), 1000);
    }

    #[test]
    fn sessions_of_one_owner_share_its_share_and_owners_are_forgotten_with_their_payloads() {
        let store = MemoryStore::with_budget(400);
        owned_by(&store, "a1", "alice");
        owned_by(&store, "a2", "alice");
        owned_by(&store, "b1", "bob");
        put100(&store, "b-1", "b1");
        put100(&store, "a-1", "a1");
        put100(&store, "a-2", "a2");
        put100(&store, "a-3", "a1");
        // Alice's two sessions are one owner: 4 with the new one against
        // bob's 1, her oldest goes.
        put100(&store, "a-4", "a2");
        assert_eq!(store.get("a-1").unwrap(), None);
        assert!(store.get("b-1").unwrap().is_some());
        // A session with no owner counts against the unnamed owner.
        put100(&store, "x-1", "xx");
        assert!(store.get("b-1").unwrap().is_some());
        assert_eq!(store.get("a-2").unwrap(), None);
        // Owners are held while a session is live or holds payloads.
        store.ended("a1").unwrap();
        let held = |s: &str| store.raw.lock().unwrap().owners.contains_key(s);
        assert!(held("a1"), "a1 still holds a-3");
        owned_by(&store, "gone", "carol");
        store.ended("gone").unwrap();
        assert!(!held("gone"), "nothing stored: forgotten at its end");
        // a1's last payload goes: its owner with it.
        put100(&store, "a-5", "a2");
        assert_eq!(store.get("a-3").unwrap(), None);
        assert!(!held("a1"));
        assert!(held("a2"), "live");
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
        assert_eq!(store.held().unwrap(), 300);
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
    fn telemetry_grows_only_with_record() {
        let store = MemoryStore::new();
        store
            .append(Entry::Owner {
                session: "s",
                owner: "alice",
            })
            .unwrap();
        store.put(in_session("call-1", "s", "payload")).unwrap();
        let _ = store.usage("s").unwrap();
        let _ = store.usage("other").unwrap();
        assert!(store.sessions().unwrap().is_empty());
        assert!(store.session_records().unwrap().is_empty());
        assert_eq!(store.session_record("s").unwrap(), None, "no owner kept");
    }

    #[test]
    fn the_memory_stores_shortcuts_answer_like_the_provided_methods() {
        let store = MemoryStore::new();
        for session in ["session-2", "session-1", "session-2"] {
            store
                .record(
                    session,
                    &DigestEvent::new(crate::Method::Passthrough, 10, 5),
                )
                .unwrap();
        }
        let records = store.session_records().unwrap();
        let ids: Vec<&str> = records.iter().map(|r| r.session.as_str()).collect();
        assert_eq!(ids, ["session-1", "session-2"]);
        assert_eq!(store.sessions().unwrap(), ids);
        for record in &records {
            assert_eq!(
                store.session_record(&record.session).unwrap().as_ref(),
                Some(record)
            );
            assert_eq!(
                Some(store.usage(&record.session).unwrap()),
                record.usage.clone()
            );
        }
        assert_eq!(
            store
                .usage("session-2")
                .unwrap()
                .digest_savings
                .structural_calls,
            2
        );
    }

    /// A backend that writes only the three required methods: payloads in
    /// a list, and each session's entries as they came.
    #[derive(Default)]
    struct Minimal {
        payloads: Mutex<Vec<RawRecord>>,
        entries: Mutex<Vec<(String, Noted)>>,
    }

    enum Noted {
        Owner(String),
        Event(DigestEvent),
    }

    impl Store for Minimal {
        fn append(&self, entry: Entry<'_>) -> Result<()> {
            let (session, noted) = match entry {
                Entry::Payload(record) => {
                    let mut payloads = self.payloads.lock().unwrap();
                    if payloads.iter().any(|p| p.call_id == record.call_id) {
                        return Err(Error::Duplicate {
                            call_id: record.call_id,
                        });
                    }
                    payloads.push(record);
                    return Ok(());
                }
                Entry::Event { session, event } => (session, Noted::Event(event.clone())),
                Entry::Owner { session, owner } => (session, Noted::Owner(owner.to_owned())),
            };
            self.entries
                .lock()
                .unwrap()
                .push((session.to_owned(), noted));
            Ok(())
        }

        fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
            let payloads = self.payloads.lock().unwrap();
            Ok(payloads.iter().find(|p| p.call_id == call_id).cloned())
        }

        fn session_records(&self) -> Result<Vec<SessionRecord>> {
            let mut records: Vec<SessionRecord> = Vec::new();
            for (session, noted) in self.entries.lock().unwrap().iter() {
                let at = match records.iter().position(|r| &r.session == session) {
                    Some(at) => at,
                    None => {
                        records.push(SessionRecord {
                            session: session.clone(),
                            ..SessionRecord::default()
                        });
                        records.len() - 1
                    }
                };
                let record = &mut records[at];
                match noted {
                    Noted::Owner(owner) => {
                        record.owner.get_or_insert_with(|| owner.clone());
                    }
                    Noted::Event(event) => record.usage.get_or_insert_default().record(event),
                }
            }
            // With telemetry first, as the contract lists them.
            records.sort_by_key(|r| r.usage.is_none());
            Ok(records)
        }
    }

    #[test]
    fn a_backend_that_writes_only_the_required_methods_gets_the_rest() {
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(Minimal::default());
        store.put(in_session("call-1", "s1", "first")).unwrap();
        let err = store.put(in_session("call-1", "s2", "second")).unwrap_err();
        assert!(matches!(err, Error::Duplicate { .. }), "{err}");
        assert_eq!(store.get("call-1").unwrap().unwrap().payload, "first");
        assert_eq!(store.get("call-2").unwrap(), None);

        store
            .append(Entry::Owner {
                session: "s0",
                owner: "bot",
            })
            .unwrap();
        store
            .record(
                "s1",
                &DigestEvent::new(crate::Method::StructuralJson, 1000, 100),
            )
            .unwrap();
        store
            .record(
                "s1",
                &DigestEvent::new(crate::Method::Passthrough, 500, 500),
            )
            .unwrap();
        let usage = store.usage("s1").unwrap();
        assert_eq!(usage.digest_methods.counts["structural_json"], 1);
        assert_eq!(usage.digest_methods.bytes_saved["structural_json"], 900);
        assert_eq!(usage.digest_savings.structural_calls, 2);
        assert_eq!(usage.digest_savings.parent_tokens_saved, 225);
        assert_eq!(store.usage("s0").unwrap(), Usage::default());
        assert_eq!(store.usage("nobody").unwrap(), Usage::default());
        // Only sessions with telemetry are listed.
        assert_eq!(store.sessions().unwrap(), ["s1"]);
        // A session keeps its first owner.
        store
            .append(Entry::Owner {
                session: "s0",
                owner: "me",
            })
            .unwrap();
        let s0 = store.session_record("s0").unwrap().unwrap();
        assert_eq!((s0.owner.as_deref(), s0.usage), (Some("bot"), None));
        assert_eq!(store.session_record("nobody").unwrap(), None);
        assert_eq!(store.evicted().unwrap(), None);
        // It cannot tell which payloads a session has: the cautious answer.
        assert!(store.may_hold_payloads("s1").unwrap());
        assert!(store.may_hold_payloads("nobody").unwrap());
    }

    #[test]
    fn the_memory_store_keeps_the_telemetry_of_live_sessions_and_the_last_ended_ones() {
        let store = MemoryStore::new();
        let event = || DigestEvent::new(crate::Method::StructuralJson, 1000, 100);
        let record = |s: &str| store.record(s, &event()).unwrap();
        record("live");
        record("comes-back");
        store.ended("comes-back").unwrap();
        record("comes-back");
        for i in 0..ENDED_SESSIONS_KEPT + 10 {
            let id = format!("gone-{i:05}");
            record(&id);
            store.ended(&id).unwrap();
        }
        // A session with no telemetry leaves nothing behind when it ends.
        store.ended("never-recorded").unwrap();
        let sessions = store.sessions().unwrap();
        assert_eq!(sessions.len(), ENDED_SESSIONS_KEPT + 2);
        assert!(sessions.iter().any(|s| s == "live"));
        assert!(
            sessions.iter().any(|s| s == "comes-back"),
            "recorded again: live"
        );
        assert!(
            !sessions.iter().any(|s| s == "gone-00000"),
            "the first to end went first"
        );
        assert!(sessions.iter().any(|s| s == "gone-00010"));
        assert_eq!(
            store.usage("live").unwrap().digest_methods.counts["structural_json"],
            1
        );
        let telemetry = store.usage.lock().unwrap();
        assert!(telemetry.ends.len() <= 2 * telemetry.ended.len() + 64);
    }

    #[test]
    fn the_memory_store_knows_which_sessions_still_hold_payloads() {
        // Each record here counts 101 bytes: three fit.
        let store = MemoryStore::with_budget(303);
        let put = |call_id: &str, session: &str| {
            store
                .put(in_session(call_id, session, &"a".repeat(85)))
                .unwrap();
        };
        assert!(!store.may_hold_payloads("s1").unwrap());
        put("call-1", "s1");
        put("call-2", "s1");
        put("call-3", "s2");
        assert!(store.may_hold_payloads("s1").unwrap());
        assert!(store.may_hold_payloads("s2").unwrap());
        // Telemetry is not a payload.
        store
            .record("s3", &DigestEvent::new(crate::Method::Passthrough, 1, 1))
            .unwrap();
        assert!(!store.may_hold_payloads("s3").unwrap());
        // call-1 goes: s1 still has call-2.
        put("call-4", "s3");
        assert!(store.may_hold_payloads("s1").unwrap());
        // call-2 goes: s1 has nothing left.
        put("call-5", "s3");
        assert!(!store.may_hold_payloads("s1").unwrap());
        assert!(store.may_hold_payloads("s2").unwrap());
        assert!(store.may_hold_payloads("s3").unwrap());
        // A refused payload counts for nothing.
        assert!(
            store
                .put(in_session("call-6", "s4", &"a".repeat(400)))
                .is_err()
        );
        assert!(!store.may_hold_payloads("s4").unwrap());
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
