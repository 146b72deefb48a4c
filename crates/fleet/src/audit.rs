//! The gateway's [`AuditSink`] on PostgreSQL: every replica's audit trail
//! in one table, `audit_lines`.

use std::sync::Arc;
use std::time::Duration;

use core_agent_gateway::AuditSink;

use crate::Postgres;
use crate::error::Error;
use crate::postgres::{client, query};

/// How long a batch waits before each try again while the database is
/// away; past the last, the batch is given up (the trail counts its lines
/// as dropped).
const RETRY: &[Duration] = &[Duration::from_millis(250), Duration::from_secs(1)];

/// One statement per batch: the lines as one `text[]`, each read as jsonb
/// once, the columns a query filters on taken from it, in the batch's
/// order (so `id` follows the order the replica made them in).
const INSERT: &str = "INSERT INTO audit_lines (at, replica, event, kind, caller, subject, session, decision, line)
     SELECT coalesce((l->>'time')::timestamptz, now()), $1::text, coalesce(l->>'event', ''), l->>'kind',
            l#>>'{caller,name}', l#>>'{caller,identity,subject}', l->>'session', l->>'decision', l
     FROM (SELECT raw::jsonb AS l, n FROM unnest($2::text[]) WITH ORDINALITY AS t(raw, n)) AS lines
     ORDER BY n";

impl AuditSink for Postgres {
    /// Inserts the batch with one statement, under this replica's name
    /// ([`Postgres::replica`]). While the database is away the batch is
    /// tried three times over about a second and a quarter (each try
    /// bounded by [`Options::timeout`](crate::Options::timeout)), then
    /// given up; a batch the database refuses for what it holds is given
    /// up at once.
    fn write_lines(
        &self,
        lines: &[String],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let lines = Arc::new(lines.to_vec());
        let mut waits = RETRY.iter();
        loop {
            let failed = match self.insert_lines(lines.clone()) {
                Ok(None) => return Ok(()),
                Ok(Some((error, retry))) => (error, retry),
                // No connection: the database is away.
                Err(error) => (error, true),
            };
            match (failed, waits.next()) {
                ((error, true), Some(wait)) => {
                    tracing::debug!("{error}; the audit lines are tried again in {wait:?}");
                    std::thread::sleep(*wait);
                }
                ((error, _), _) => return Err(error.into()),
            }
        }
    }
}

impl Postgres {
    /// Inserts `lines`; `Ok(Some((error, retry)))` when the statement
    /// failed, with whether trying again may help.
    fn insert_lines(&self, lines: Arc<Vec<String>>) -> Result<Option<(Error, bool)>, Error> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        let replica = self.inner.replica.clone();
        self.block(async move {
            let client = client(&pool, &url).await?;
            let lines: &[String] = &lines;
            Ok(match client.execute(INSERT, &[&replica, &lines]).await {
                Ok(_) => None,
                Err(e) => {
                    let retry = retriable(&e);
                    Some((query(&url, e), retry))
                }
            })
        })
    }
}

/// Whether a failed statement may pass when tried again: the connection
/// broke or the server is shutting down, out of resources, or chose this
/// transaction as a deadlock's victim; not when it refused the data.
fn retriable(e: &tokio_postgres::Error) -> bool {
    let Some(state) = e.code() else {
        // The connection closed, or an I/O error.
        return true;
    };
    let code = state.code();
    ["08", "53", "57"]
        .iter()
        .any(|class| code.starts_with(class))
        || matches!(code, "40001" | "40P01")
}
