//! The host's [`SessionMemory`] on PostgreSQL: each session's "always"
//! answers and plan.

use core_agent_host::{Fact, MemoryError, Recalled, SessionMemory};

use crate::Postgres;

impl SessionMemory for Postgres {
    fn recall(&self, session: &str) -> Result<Recalled, MemoryError> {
        let always = self.rows_blocking(
            "SELECT tool FROM session_always WHERE session_id = $1 ORDER BY answered_ms, tool",
            vec![Box::new(session.to_owned())],
        )?;
        let plan = self.rows_blocking(
            "SELECT plan FROM session_plans WHERE session_id = $1",
            vec![Box::new(session.to_owned())],
        )?;
        let mut recalled = Recalled::new();
        for row in &always {
            recalled = recalled.with(Fact::Always(row.get::<_, &str>(0)));
        }
        if let Some(row) = plan.first() {
            recalled = recalled.with(Fact::Plan(row.get::<_, &str>(0)));
        }
        Ok(recalled)
    }

    fn remember(&self, session: &str, fact: Fact<'_>) -> Result<(), MemoryError> {
        match fact {
            Fact::Always(tool) => self.execute_blocking(
                "INSERT INTO session_always (session_id, tool, answered_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id, tool) DO NOTHING",
                vec![
                    Box::new(session.to_owned()),
                    Box::new(tool.to_owned()),
                    Box::new(crate::now_ms()),
                ],
            )?,
            Fact::Plan(plan) => self.execute_blocking(
                "INSERT INTO session_plans (session_id, plan, recorded_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (session_id) DO UPDATE SET plan = excluded.plan, recorded_ms = excluded.recorded_ms",
                vec![
                    Box::new(session.to_owned()),
                    Box::new(plan.to_owned()),
                    Box::new(crate::now_ms()),
                ],
            )?,
            // A fact this release does not know is not kept.
            _ => 0,
        };
        Ok(())
    }
}
