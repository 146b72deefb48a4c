use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::{DigestEvent, Error, RawRecord, Result, Store, Usage};

/// A [`Store`] in a SQLite file (`--session-db PATH`): raw payloads and
/// telemetry outlive the process, so `core-agent raw` and `core-agent usage`
/// can read them later.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::Store {
        message: e.to_string(),
    }
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let conn = Connection::open(path)
            .map_err(|e| err(format!("cannot open {}: {e}", path.display())))?;
        // Processes sharing one `--session-db` (a `serve` and a `call`) wait
        // for each other's writes instead of failing at once.
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| err(format!("cannot prepare {}: {e}", path.display())))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS raw_payloads (
                 call_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, server TEXT NOT NULL,
                 tool TEXT NOT NULL, created_ms INTEGER NOT NULL, payload TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS digest_events (
                 session_id TEXT NOT NULL, event TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS digest_events_session ON digest_events (session_id);
             CREATE TABLE IF NOT EXISTS session_owners (
                 session_id TEXT PRIMARY KEY, owner TEXT NOT NULL);",
        )
        .map_err(|e| err(format!("cannot prepare {}: {e}", path.display())))?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| err("the database connection is unusable after a panic"))
    }
}

impl Store for SqliteStore {
    /// The sessions that have telemetry, oldest first.
    fn sessions(&self) -> Result<Vec<String>> {
        let conn = self.conn()?;
        let mut stmt = conn
            .prepare("SELECT session_id FROM digest_events GROUP BY session_id ORDER BY MIN(rowid)")
            .map_err(err)?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(err)?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(err)
    }

    /// The payload is written in place (a `zeroblob` of its size, then
    /// incremental blob I/O), so SQLite never holds a copy of it: a payload
    /// of tens of MiB costs no more memory than the caller already has.
    fn put(&self, r: RawRecord) -> Result<()> {
        use std::io::Write;
        let mut conn = self.conn()?;
        let tx = conn.transaction().map_err(err)?;
        let inserted = tx
            .execute(
                "INSERT INTO raw_payloads (call_id, session_id, server, tool, created_ms, payload)
                 VALUES (?1, ?2, ?3, ?4, ?5, zeroblob(?6)) ON CONFLICT (call_id) DO NOTHING",
                params![
                    r.call_id,
                    r.session_id,
                    r.server,
                    r.tool,
                    r.created_ms as i64,
                    r.payload.len() as i64
                ],
            )
            .map_err(err)?;
        if inserted == 0 {
            return Err(Error::Duplicate { call_id: r.call_id });
        }
        let row = tx.last_insert_rowid();
        {
            let mut blob = tx
                .blob_open(rusqlite::MAIN_DB, "raw_payloads", "payload", row, false)
                .map_err(err)?;
            blob.write_all(r.payload.as_bytes()).map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    fn get(&self, call_id: &str) -> Result<Option<RawRecord>> {
        self.conn()?
            .query_row(
                "SELECT call_id, session_id, server, tool, created_ms, CAST(payload AS TEXT) FROM raw_payloads WHERE call_id = ?1",
                params![call_id],
                |row| {
                    Ok(RawRecord {
                        call_id: row.get(0)?,
                        session_id: row.get(1)?,
                        server: row.get(2)?,
                        tool: row.get(3)?,
                        created_ms: row.get::<_, i64>(4)? as u64,
                        payload: row.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(err)
    }

    fn record(&self, session: &str, event: &DigestEvent) -> Result<()> {
        let json = serde_json::to_string(event).map_err(err)?;
        self.conn()?
            .execute(
                "INSERT INTO digest_events (session_id, event) VALUES (?1, ?2)",
                params![session, json],
            )
            .map_err(err)?;
        Ok(())
    }

    fn claim(&self, session: &str, owner: &str) -> Result<()> {
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO session_owners (session_id, owner) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO NOTHING",
            params![session, owner],
        )
        .map_err(err)?;
        let kept: String = conn
            .query_row(
                "SELECT owner FROM session_owners WHERE session_id = ?1",
                params![session],
                |r| r.get(0),
            )
            .map_err(err)?;
        if kept == owner {
            Ok(())
        } else {
            Err(Error::Store {
                message: format!("session {session} belongs to another caller"),
            })
        }
    }

    fn owner(&self, session: &str) -> Result<Option<String>> {
        self.conn()?
            .query_row(
                "SELECT owner FROM session_owners WHERE session_id = ?1",
                params![session],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)
    }

    fn usage(&self, session: &str) -> Result<Usage> {
        let conn = self.conn()?;
        let mut stmt = conn
            .prepare("SELECT event FROM digest_events WHERE session_id = ?1 ORDER BY rowid")
            .map_err(err)?;
        let rows = stmt
            .query_map(params![session], |r| r.get::<_, String>(0))
            .map_err(err)?;
        let mut usage = Usage::default();
        for row in rows {
            let event: DigestEvent = serde_json::from_str(&row.map_err(err)?).map_err(err)?;
            usage.record(&event);
        }
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Method;

    #[test]
    fn payloads_and_telemetry_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store
                .put(RawRecord {
                    call_id: "s1-1".into(),
                    session_id: "s1".into(),
                    server: "demo".into(),
                    tool: "list".into(),
                    created_ms: 5,
                    payload: "{\"a\": 1}".into(),
                })
                .unwrap();
            store
                .record("s1", &DigestEvent::new(Method::StructuralJson, 1000, 100))
                .unwrap();
            store
                .record("s1", &DigestEvent::new(Method::Passthrough, 500, 500))
                .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.get("s1-1").unwrap().unwrap().payload, "{\"a\": 1}");
        let again = RawRecord {
            call_id: "s1-1".into(),
            session_id: "s2".into(),
            server: "demo".into(),
            tool: "list".into(),
            created_ms: 9,
            payload: "overwritten".into(),
        };
        assert!(matches!(store.put(again), Err(Error::Duplicate { .. })));
        assert_eq!(store.get("s1-1").unwrap().unwrap().payload, "{\"a\": 1}");
        assert_eq!(store.get("nope").unwrap(), None);
        let usage = store.usage("s1").unwrap();
        assert_eq!(usage.digest_methods.counts["structural_json"], 1);
        assert_eq!(usage.digest_methods.bytes_saved["structural_json"], 900);
        assert_eq!(usage.digest_savings.structural_calls, 2);
        assert_eq!(usage.digest_savings.parent_tokens_saved, 225);
        assert_eq!(store.sessions().unwrap(), ["s1"]);
        assert_eq!(store.usage("other").unwrap(), Usage::default());
    }

    #[test]
    fn a_session_keeps_its_first_owner_across_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store.claim("s1", "bot").unwrap();
            store.claim("s1", "bot").unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.owner("s1").unwrap().as_deref(), Some("bot"));
        assert!(store.claim("s1", "me").is_err());
        assert_eq!(store.owner("s1").unwrap().as_deref(), Some("bot"));
        assert_eq!(store.owner("s2").unwrap(), None);
        let memory = crate::MemoryStore::new();
        memory.claim("s1", "bot").unwrap();
        assert!(memory.claim("s1", "me").is_err());
        assert_eq!(memory.owner("s1").unwrap().as_deref(), Some("bot"));
    }
}
