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
pub trait Store: Send + Sync {
    /// Keeps a raw payload.
    fn put(&self, record: RawRecord) -> Result<()>;
    /// The payload stored under `call_id`.
    fn get(&self, call_id: &str) -> Result<Option<RawRecord>>;
    /// Adds a digest event to `session`'s telemetry.
    fn record(&self, session: &str, event: &DigestEvent) -> Result<()>;
    /// `session`'s telemetry.
    fn usage(&self, session: &str) -> Result<Usage>;
}

/// A [`Store`] in memory, for one process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    raw: Mutex<HashMap<String, RawRecord>>,
    usage: Mutex<HashMap<String, Usage>>,
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
        self.raw
            .lock()
            .map_err(|_| poisoned())?
            .insert(record.call_id.clone(), record);
        Ok(())
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
}
