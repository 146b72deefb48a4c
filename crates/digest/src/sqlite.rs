use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::{DigestEvent, Entry, Error, RawRecord, Result, SessionRecord, Store, Usage};

/// A [`Store`] in a SQLite file (`--session-db PATH`): raw payloads,
/// telemetry and the sessions' owners outlive the process, so `core-agent
/// raw` and `core-agent usage` can read them later, and an owner's sessions
/// in a later run (or in another process sharing the file) find its
/// earlier ones. It keeps everything, with no budget.
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
        // The file is created where it is asked for: its directory too (a
        // fresh machine has no /var/lib/core-agent).
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                err(format!(
                    "cannot create {}, the directory of {}: {e}",
                    dir.display(),
                    path.display()
                ))
            })?;
        }
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

impl SqliteStore {
    /// The payload is written in place (a `zeroblob` of its size, then
    /// incremental blob I/O), so SQLite never holds a copy of it: a payload
    /// of tens of MiB costs no more memory than the caller already has.
    fn put_payload(&self, r: RawRecord) -> Result<()> {
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

    /// `session`'s owner, if one was appended.
    fn owner(conn: &Connection, session: &str) -> Result<Option<String>> {
        conn.query_row(
            "SELECT owner FROM session_owners WHERE session_id = ?1",
            params![session],
            |r| r.get(0),
        )
        .optional()
        .map_err(err)
    }

    /// `session`'s telemetry, `None` when it has none.
    fn telemetry(conn: &Connection, session: &str) -> Result<Option<Usage>> {
        let mut stmt = conn
            .prepare("SELECT event FROM digest_events WHERE session_id = ?1 ORDER BY rowid")
            .map_err(err)?;
        let rows = stmt
            .query_map(params![session], |r| r.get::<_, String>(0))
            .map_err(err)?;
        let mut usage: Option<Usage> = None;
        for row in rows {
            let event: DigestEvent = serde_json::from_str(&row.map_err(err)?).map_err(err)?;
            usage.get_or_insert_default().record(&event);
        }
        Ok(usage)
    }
}

impl Store for SqliteStore {
    fn append(&self, entry: Entry<'_>) -> Result<()> {
        match entry {
            Entry::Payload(record) => self.put_payload(record),
            Entry::Event { session, event } => {
                let json = serde_json::to_string(event).map_err(err)?;
                self.conn()?
                    .execute(
                        "INSERT INTO digest_events (session_id, event) VALUES (?1, ?2)",
                        params![session, json],
                    )
                    .map_err(err)?;
                Ok(())
            }
            Entry::Owner { session, owner } => {
                self.conn()?
                    .execute(
                        "INSERT INTO session_owners (session_id, owner) VALUES (?1, ?2)
                         ON CONFLICT (session_id) DO NOTHING",
                        params![session, owner],
                    )
                    .map_err(err)?;
                Ok(())
            }
        }
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

    fn session_records(&self) -> Result<Vec<SessionRecord>> {
        let conn = self.conn()?;
        let mut records: Vec<SessionRecord> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        {
            let mut stmt = conn
                .prepare("SELECT session_id, event FROM digest_events ORDER BY rowid")
                .map_err(err)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .map_err(err)?;
            for row in rows {
                let (session, json) = row.map_err(err)?;
                let event: DigestEvent = serde_json::from_str(&json).map_err(err)?;
                let i = *at.entry(session.clone()).or_insert_with(|| {
                    records.push(SessionRecord {
                        session,
                        ..SessionRecord::default()
                    });
                    records.len() - 1
                });
                records[i].usage.get_or_insert_default().record(&event);
            }
        }
        let mut stmt = conn
            .prepare("SELECT session_id, owner FROM session_owners ORDER BY rowid")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(err)?;
        for row in rows {
            let (session, owner) = row.map_err(err)?;
            match at.get(&session) {
                Some(&i) => records[i].owner = Some(owner),
                None => records.push(SessionRecord {
                    session,
                    owner: Some(owner),
                    usage: None,
                }),
            }
        }
        Ok(records)
    }

    fn session_record(&self, session: &str) -> Result<Option<SessionRecord>> {
        let conn = self.conn()?;
        let owner = SqliteStore::owner(&conn, session)?;
        let usage = SqliteStore::telemetry(&conn, session)?;
        Ok((owner.is_some() || usage.is_some()).then(|| SessionRecord {
            session: session.to_owned(),
            owner,
            usage,
        }))
    }

    fn usage(&self, session: &str) -> Result<Usage> {
        Ok(SqliteStore::telemetry(&*self.conn()?, session)?.unwrap_or_default())
    }

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Method;

    #[test]
    fn a_missing_directory_is_created_and_one_that_cannot_be_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("var/lib/core-agent/sessions.db");
        SqliteStore::open(&path).unwrap();
        assert!(path.exists());
        // Below a file, no directory can be made: the error names it.
        let blocked = dir.path().join("var/lib/core-agent/sessions.db/x/s.db");
        let Err(e) = SqliteStore::open(&blocked) else {
            panic!("a store below a file opened");
        };
        assert!(e.to_string().contains("cannot create"), "{e}");
        assert!(e.to_string().contains("sessions.db/x"), "{e}");
    }

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
        let owner = |session, owner| Entry::Owner { session, owner };
        {
            let store = SqliteStore::open(&path).unwrap();
            store.append(owner("s1", "bot")).unwrap();
            store.append(owner("s1", "bot")).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let kept = |session| store.session_record(session).unwrap().and_then(|r| r.owner);
        assert_eq!(kept("s1").as_deref(), Some("bot"));
        store.append(owner("s1", "me")).unwrap();
        assert_eq!(kept("s1").as_deref(), Some("bot"));
        assert_eq!(kept("s2"), None);
        // An owner is not telemetry.
        assert!(store.sessions().unwrap().is_empty());
        assert_eq!(store.usage("s1").unwrap(), Usage::default());
    }

    #[test]
    fn the_sqlite_stores_shortcuts_answer_like_the_provided_methods() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let event = DigestEvent::new(Method::StructuralJson, 1000, 100);
        store.record("b", &event).unwrap();
        store
            .append(Entry::Owner {
                session: "owned-only",
                owner: "bot",
            })
            .unwrap();
        store.record("a", &event).unwrap();
        store
            .append(Entry::Owner {
                session: "a",
                owner: "me",
            })
            .unwrap();
        store.record("b", &event).unwrap();
        let records = store.session_records().unwrap();
        let ids: Vec<&str> = records.iter().map(|r| r.session.as_str()).collect();
        // Telemetry first, oldest first; then sessions with an owner only.
        assert_eq!(ids, ["b", "a", "owned-only"]);
        assert_eq!(store.sessions().unwrap(), ["b", "a"]);
        assert_eq!(records[1].owner.as_deref(), Some("me"));
        for record in &records {
            assert_eq!(
                store.session_record(&record.session).unwrap().as_ref(),
                Some(record)
            );
            assert_eq!(
                store.usage(&record.session).unwrap(),
                record.usage.clone().unwrap_or_default()
            );
        }
        assert_eq!(store.usage("b").unwrap().digest_savings.structural_calls, 2);
        assert_eq!(store.session_record("nobody").unwrap(), None);
    }
}
