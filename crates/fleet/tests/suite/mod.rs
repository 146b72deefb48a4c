//! The fleet's state on a real PostgreSQL (a throwaway cluster per test).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use core_agent_digest::{DigestEvent, Entry, Error as DigestError, Method, RawRecord, Store};
use core_agent_e2e::Postgres as Cluster;
use core_agent_fleet::{Error, Options, Postgres, SCHEMA_VERSION};
use core_agent_gateway::{AuditLog, AuditSettings, AuditSink, AuditTarget, Fleet, SharedSession};
use core_agent_host::{Fact, SessionMemory};
use core_agent_mcp_config::TrustLevel;

mod audit;
mod database;
mod pins;
mod shared;

fn record(call_id: &str, session: &str, payload: String) -> RawRecord {
    RawRecord {
        call_id: call_id.to_owned(),
        session_id: session.to_owned(),
        server: "demo".to_owned(),
        tool: "list".to_owned(),
        created_ms: 7,
        payload,
    }
}

async fn connect(cluster: &Cluster) -> Postgres {
    Postgres::connect(&cluster.url(), Options::default())
        .await
        .expect("connects")
}
