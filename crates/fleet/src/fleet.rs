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
                    "SELECT owner, caller, trust_level, started_ms, used_ms, initialize
                     FROM mcp_sessions WHERE id = $1",
                    vec![Box::new(id.to_owned())],
                )
                .await?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let level: &str = row.get(2);
            let Some(trust_level) = TrustLevel::parse(level) else {
                return Err(format!("session {id} has an unknown trust level `{level}`").into());
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
            Ok(Some(session))
        })
    }

    fn touch<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), FleetError>> {
        Box::pin(async move {
            self.rows(
                "UPDATE mcp_sessions SET used_ms = greatest(used_ms, $2) WHERE id = $1",
                vec![Box::new(id.to_owned()), Box::new(crate::now_ms())],
            )
            .await?;
            Ok(())
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
