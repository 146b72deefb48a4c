use std::collections::HashMap;
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
}

/// A [`Store`] in memory, for one process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    raw: Mutex<HashMap<String, RawRecord>>,
    usage: Mutex<HashMap<String, Usage>>,
    owners: Mutex<HashMap<String, String>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
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
        match raw.entry(record.call_id.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => Err(Error::Duplicate {
                call_id: record.call_id,
            }),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(record);
                Ok(())
            }
        }
    }

    fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
        Ok(self
            .raw
            .lock()
            .map_err(|_| poisoned())?
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
        let kept = owners
            .entry(session.to_owned())
            .or_insert_with(|| owner.to_owned());
        if kept == owner {
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
            .cloned())
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
