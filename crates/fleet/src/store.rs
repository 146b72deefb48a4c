//! The digest's [`Store`] on PostgreSQL: raw payloads in chunks, the
//! digest's telemetry and the sessions' owners.

use std::collections::HashMap;

use core_agent_digest::{DigestEvent, Entry, RawRecord, SessionRecord, Store, Usage};
use futures::TryStreamExt;

use crate::Postgres;
use crate::error::Error;
use crate::postgres::{client, query};

/// Parameters of a statement, owned, for the database's thread.
type Params = Vec<Box<dyn tokio_postgres::types::ToSql + Send + Sync>>;

/// How a statement is run on a connection: `execute` or `query`.
type Statement<T> = for<'a> fn(
    &'a deadpool_postgres::Object,
    &'static str,
    &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)],
) -> futures::future::BoxFuture<'a, Result<T, tokio_postgres::Error>>;

/// Payloads are written and read in chunks of this many bytes, so that
/// neither side holds more than the payload and one chunk.
pub(crate) const CHUNK: usize = 256 * 1024;

fn digest_error(e: Error) -> core_agent_digest::Error {
    core_agent_digest::Error::Store {
        message: e.to_string(),
    }
}

impl Postgres {
    /// Keeps `record`, its payload in chunks; `false` when its `call_id`
    /// is already stored (nothing is replaced).
    async fn put_payload(&self, record: RawRecord) -> Result<bool, Error> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        self.run(async move {
            let mut client = client(&pool, &url).await?;
            let tx = client.transaction().await.map_err(|e| query(&url, e))?;
            let bytes = i64::try_from(record.payload.len()).unwrap_or(i64::MAX);
            let created = i64::try_from(record.created_ms).unwrap_or(i64::MAX);
            let inserted = tx
                .execute(
                    "INSERT INTO raw_payloads (call_id, session_id, server, tool, created_ms, bytes)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (call_id) DO NOTHING",
                    &[
                        &record.call_id,
                        &record.session_id,
                        &record.server,
                        &record.tool,
                        &created,
                        &bytes,
                    ],
                )
                .await
                .map_err(|e| query(&url, e))?;
            if inserted == 0 {
                return Ok(false);
            }
            let insert = tx
                .prepare("INSERT INTO raw_chunks (call_id, seq, data) VALUES ($1, $2, $3)")
                .await
                .map_err(|e| query(&url, e))?;
            for (seq, chunk) in record.payload.as_bytes().chunks(CHUNK).enumerate() {
                let seq = i32::try_from(seq).unwrap_or(i32::MAX);
                tx.execute(&insert, &[&record.call_id, &seq, &chunk])
                    .await
                    .map_err(|e| query(&url, e))?;
            }
            tx.commit().await.map_err(|e| query(&url, e))?;
            Ok(true)
        })
        .await
    }

    /// The payload under `call_id`, read chunk by chunk into one buffer.
    async fn get_payload(&self, call_id: String) -> Result<Option<RawRecord>, Error> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        self.run(async move {
            let client = client(&pool, &url).await?;
            let Some(row) = client
                .query_opt(
                    "SELECT session_id, server, tool, created_ms, bytes FROM raw_payloads WHERE call_id = $1",
                    &[&call_id],
                )
                .await
                .map_err(|e| query(&url, e))?
            else {
                return Ok(None);
            };
            let bytes: i64 = row.get(4);
            let mut payload = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
            let chunks = client
                .query_raw(
                    "SELECT data FROM raw_chunks WHERE call_id = $1 ORDER BY seq",
                    [&call_id],
                )
                .await
                .map_err(|e| query(&url, e))?;
            futures::pin_mut!(chunks);
            while let Some(chunk) = chunks.try_next().await.map_err(|e| query(&url, e))? {
                payload.extend_from_slice(chunk.get::<_, &[u8]>(0));
            }
            let payload = String::from_utf8(payload).map_err(|_| Error::Query {
                url: url.clone(),
                message: format!("the payload of `{call_id}` is not UTF-8"),
            })?;
            let created: i64 = row.get(3);
            Ok(Some(RawRecord {
                call_id,
                session_id: row.get(0),
                server: row.get(1),
                tool: row.get(2),
                created_ms: u64::try_from(created).unwrap_or(0),
                payload,
            }))
        })
        .await
    }

    /// Runs one statement that changes rows; how many it changed.
    async fn execute(&self, sql: &'static str, params: Params) -> Result<u64, Error> {
        self.statement(sql, params, |client, sql, params| {
            Box::pin(async move { client.execute(sql, params).await })
        })
        .await
    }

    /// Rows of `sql` over `params`.
    pub(crate) async fn rows(
        &self,
        sql: &'static str,
        params: Params,
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        self.statement(sql, params, |client, sql, params| {
            Box::pin(async move { client.query(sql, params).await })
        })
        .await
    }

    /// Runs `sql` over `params` with `how` on a pooled connection, on the
    /// database's thread.
    async fn statement<T: Send + 'static>(
        &self,
        sql: &'static str,
        params: Params,
        how: Statement<T>,
    ) -> Result<T, Error> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        self.run(async move {
            let client = client(&pool, &url).await?;
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            how(&client, sql, &params).await.map_err(|e| query(&url, e))
        })
        .await
    }

    /// Runs one changing statement from a synchronous trait.
    pub(crate) fn execute_blocking(&self, sql: &'static str, params: Params) -> Result<u64, Error> {
        let this = self.clone();
        self.block(async move { this.execute(sql, params).await })
    }

    /// Rows of `sql` from a synchronous trait.
    pub(crate) fn rows_blocking(
        &self,
        sql: &'static str,
        params: Params,
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let this = self.clone();
        self.block(async move { this.rows(sql, params).await })
    }

    /// `session`'s telemetry, `None` when it has none.
    fn telemetry(&self, session: &str) -> Result<Option<Usage>, Error> {
        let rows = self.rows_blocking(
            "SELECT event FROM digest_events WHERE session_id = $1 ORDER BY id",
            vec![Box::new(session.to_owned())],
        )?;
        let mut usage: Option<Usage> = None;
        for row in rows {
            usage
                .get_or_insert_default()
                .record(&event(&self.inner.url, &row)?);
        }
        Ok(usage)
    }
}

fn event(url: &str, row: &tokio_postgres::Row) -> Result<DigestEvent, Error> {
    serde_json::from_str(row.get::<_, &str>("event")).map_err(|e| Error::Query {
        url: url.to_owned(),
        message: format!("a digest event does not parse: {e}"),
    })
}

impl Store for Postgres {
    fn append(&self, entry: Entry<'_>) -> core_agent_digest::Result<()> {
        match entry {
            Entry::Payload(record) => {
                let call_id = record.call_id.clone();
                let this = self.clone();
                let stored = self
                    .block(async move { this.put_payload(record).await })
                    .map_err(digest_error)?;
                if stored {
                    Ok(())
                } else {
                    Err(core_agent_digest::Error::Duplicate { call_id })
                }
            }
            Entry::Event { session, event } => {
                let json =
                    serde_json::to_string(event).map_err(|e| core_agent_digest::Error::Store {
                        message: e.to_string(),
                    })?;
                self.execute_blocking(
                    "INSERT INTO digest_events (session_id, event) VALUES ($1, $2)",
                    vec![Box::new(session.to_owned()), Box::new(json)],
                )
                .map_err(digest_error)?;
                Ok(())
            }
            Entry::Owner { session, owner } => {
                self.execute_blocking(
                    "INSERT INTO session_owners (session_id, owner, claimed_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (session_id) DO NOTHING",
                    vec![
                        Box::new(session.to_owned()),
                        Box::new(owner.to_owned()),
                        Box::new(crate::now_ms()),
                    ],
                )
                .map_err(digest_error)?;
                Ok(())
            }
        }
    }

    fn get(&self, call_id: &str) -> core_agent_digest::Result<Option<RawRecord>> {
        let this = self.clone();
        let call_id = call_id.to_owned();
        self.block(async move { this.get_payload(call_id).await })
            .map_err(digest_error)
    }

    fn session_records(&self) -> core_agent_digest::Result<Vec<SessionRecord>> {
        let url = &self.inner.url;
        let mut records: Vec<SessionRecord> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let events = self
            .rows_blocking(
                "SELECT session_id, event FROM digest_events ORDER BY id",
                Vec::new(),
            )
            .map_err(digest_error)?;
        for row in events {
            let session: String = row.get(0);
            let event = event(url, &row).map_err(digest_error)?;
            let i = *at.entry(session.clone()).or_insert_with(|| {
                records.push(SessionRecord {
                    session,
                    ..SessionRecord::default()
                });
                records.len() - 1
            });
            records[i].usage.get_or_insert_default().record(&event);
        }
        let owners = self
            .rows_blocking(
                "SELECT session_id, owner FROM session_owners ORDER BY claimed_ms, session_id",
                Vec::new(),
            )
            .map_err(digest_error)?;
        for row in owners {
            let (session, owner): (String, String) = (row.get(0), row.get(1));
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

    fn session_record(&self, session: &str) -> core_agent_digest::Result<Option<SessionRecord>> {
        let owner = self
            .rows_blocking(
                "SELECT owner FROM session_owners WHERE session_id = $1",
                vec![Box::new(session.to_owned())],
            )
            .map_err(digest_error)?
            .first()
            .map(|row| row.get::<_, String>(0));
        let usage = self.telemetry(session).map_err(digest_error)?;
        Ok((owner.is_some() || usage.is_some()).then(|| SessionRecord {
            session: session.to_owned(),
            owner,
            usage,
        }))
    }

    fn usage(&self, session: &str) -> core_agent_digest::Result<Usage> {
        Ok(self
            .telemetry(session)
            .map_err(digest_error)?
            .unwrap_or_default())
    }

    fn sessions(&self) -> core_agent_digest::Result<Vec<String>> {
        Ok(self
            .rows_blocking(
                "SELECT session_id FROM digest_events GROUP BY session_id ORDER BY min(id)",
                Vec::new(),
            )
            .map_err(digest_error)?
            .iter()
            .map(|row| row.get(0))
            .collect())
    }

    /// Exact: whether any payload of `session` is stored.
    fn may_hold_payloads(&self, session: &str) -> core_agent_digest::Result<bool> {
        Ok(self
            .rows_blocking(
                "SELECT EXISTS (SELECT 1 FROM raw_payloads WHERE session_id = $1)",
                vec![Box::new(session.to_owned())],
            )
            .map_err(digest_error)?
            .first()
            .is_some_and(|row| row.get::<_, bool>(0)))
    }
}
