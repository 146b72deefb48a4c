//! The gateway's [`Fleet`] on PostgreSQL: the MCP sessions clients opened,
//! and the secret relayed states are sealed with.

use core_agent_gateway::{Fleet, FleetError, SharedSession};
use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::BoxFuture;

use crate::Postgres;

impl Fleet for Postgres {
    fn secret(&self) -> [u8; 32] {
        self.inner.secret
    }

    fn open<'a>(
        &'a self,
        id: &'a str,
        session: &'a SharedSession,
    ) -> BoxFuture<'a, Result<(), FleetError>> {
        Box::pin(async move {
            let initialize = serde_json::to_string(&session.initialize)?;
            self.rows(
                "INSERT INTO mcp_sessions (id, owner, caller, trust_level, started_ms, used_ms, initialize)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
                vec![
                    Box::new(id.to_owned()),
                    Box::new(session.owner.clone()),
                    Box::new(session.caller.clone()),
                    Box::new(session.trust_level.as_str().to_owned()),
                    Box::new(i64::try_from(session.started_ms).unwrap_or(i64::MAX)),
                    Box::new(i64::try_from(session.used_ms).unwrap_or(i64::MAX)),
                    Box::new(initialize),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn find<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SharedSession>, FleetError>> {
        Box::pin(async move {
            let rows = self
                .rows(
                    "SELECT owner, caller, trust_level, started_ms, used_ms, initialize, calls
                     FROM mcp_sessions WHERE id = $1",
                    vec![Box::new(id.to_owned())],
                )
                .await?;
            rows.first().map(shared).transpose()
        })
    }

    fn touch<'a>(&'a self, id: &'a str, calls: u64) -> BoxFuture<'a, Result<(), FleetError>> {
        Box::pin(async move {
            self.rows(
                "UPDATE mcp_sessions SET used_ms = greatest(used_ms, $2), calls = calls + $3 WHERE id = $1",
                vec![
                    Box::new(id.to_owned()),
                    Box::new(crate::now_ms()),
                    Box::new(i64::try_from(calls).unwrap_or(i64::MAX)),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn list(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<(String, SharedSession)>, FleetError>> {
        Box::pin(async move {
            let rows = self
                .rows(
                    "SELECT owner, caller, trust_level, started_ms, used_ms, initialize, calls, id
                     FROM mcp_sessions ORDER BY used_ms DESC LIMIT $1",
                    vec![Box::new(i64::try_from(limit).unwrap_or(i64::MAX))],
                )
                .await?;
            rows.iter()
                .map(|row| Ok((row.get::<_, String>(7), shared(row)?)))
                .collect()
        })
    }

    fn close<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), FleetError>> {
        Box::pin(async move {
            self.rows(
                "DELETE FROM mcp_sessions WHERE id = $1",
                vec![Box::new(id.to_owned())],
            )
            .await?;
            Ok(())
        })
    }
}

/// A row of `mcp_sessions` (owner, caller, trust_level, started_ms,
/// used_ms, initialize, calls, …).
fn shared(row: &tokio_postgres::Row) -> Result<SharedSession, FleetError> {
    let level: &str = row.get(2);
    let Some(trust_level) = TrustLevel::parse(level) else {
        return Err(format!("a shared session has an unknown trust level `{level}`").into());
    };
    let initialize: serde_json::Value = serde_json::from_str(row.get::<_, &str>(5))?;
    let mut session = SharedSession::new(
        row.get::<_, String>(0),
        row.get::<_, String>(1),
        trust_level,
        initialize,
    );
    session.started_ms = u64::try_from(row.get::<_, i64>(3)).unwrap_or(0);
    session.used_ms = u64::try_from(row.get::<_, i64>(4)).unwrap_or(0);
    session.calls = u64::try_from(row.get::<_, i64>(6)).unwrap_or(0);
    Ok(session)
}
