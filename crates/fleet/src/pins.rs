//! The host's [`PinStore`] on PostgreSQL, and what replicas tell each
//! other: pins changed, tools changed.

use std::sync::Arc;
use std::time::Duration;

use core_agent_host::{PinStore, PinStoreError};
use futures::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::Postgres;
use crate::error::{Error, Result};
use crate::postgres::{client, query};

/// The row of the fleet's one lock.
const LOCK: &str = "mcp.lock";
/// The channel pin changes are told on.
const PINS: &str = "core_agent_pins";
/// The channel tool changes are told on.
const TOOLS: &str = "core_agent_tools";

/// What another replica told the fleet ([`Postgres::listen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// The shared pins changed: build the catalog again.
    PinsChanged,
    /// Another replica's servers changed their tools: tell the clients.
    ToolsChanged,
    /// The listening connection was lost and opened again: whatever was
    /// told in between was missed, so assume both.
    Missed,
}

/// A [`Postgres::listen`] in progress; it stops when dropped.
#[derive(Debug)]
pub struct Listening {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PinStore for Postgres {
    fn load(&self) -> std::result::Result<Option<(String, u64)>, PinStoreError> {
        let rows = self.rows_blocking(
            "SELECT text, version FROM pin_locks WHERE name = $1",
            vec![Box::new(LOCK)],
        )?;
        Ok(rows.first().map(|row| {
            let version: i64 = row.get(1);
            (row.get::<_, String>(0), u64::try_from(version).unwrap_or(0))
        }))
    }

    fn store(&self, text: &str, version: Option<u64>) -> std::result::Result<bool, PinStoreError> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        let replica = self.inner.me.clone();
        let text = text.to_owned();
        let version = version.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        let written = self.block(async move {
            let mut client = client(&pool, &url).await?;
            let tx = client.transaction().await.map_err(|e| query(&url, e))?;
            let changed = match version {
                None => tx
                    .execute(
                        "INSERT INTO pin_locks (name, text, version) VALUES ($1, $2, 1)
                         ON CONFLICT (name) DO NOTHING",
                        &[&LOCK, &text],
                    )
                    .await
                    .map_err(|e| query(&url, e))?,
                Some(version) => tx
                    .execute(
                        "UPDATE pin_locks SET text = $2, version = version + 1
                         WHERE name = $1 AND version = $3",
                        &[&LOCK, &text, &version],
                    )
                    .await
                    .map_err(|e| query(&url, e))?,
            };
            if changed == 1 {
                // Told when the write commits, and only then.
                tx.execute("SELECT pg_notify($1, $2)", &[&PINS, &replica])
                    .await
                    .map_err(|e| query(&url, e))?;
            }
            tx.commit().await.map_err(|e| query(&url, e))?;
            Ok(changed == 1)
        })?;
        Ok(written)
    }
}

impl Postgres {
    /// Tells the other replicas that this one's servers changed their
    /// tools, so that they tell their clients too.
    pub async fn announce_tools_changed(&self) -> Result<()> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        let replica = self.inner.me.clone();
        self.run(async move {
            let client = client(&pool, &url).await?;
            client
                .execute("SELECT pg_notify($1, $2)", &[&TOOLS, &replica])
                .await
                .map_err(|e| query(&url, e))?;
            Ok(())
        })
        .await
    }

    /// Listens, on a connection of its own, for what the other replicas
    /// tell ([`Notice`]), and calls `on` for each (on the database's
    /// thread: keep it short). What this replica told itself is not
    /// repeated. A lost connection is opened again (every second at most),
    /// then `on(Notice::Missed)`. Stops when the returned value is dropped.
    pub fn listen(&self, on: impl Fn(Notice) + Send + Sync + 'static) -> Listening {
        let config = self.inner.config.clone();
        let url = self.inner.url.clone();
        let replica = self.inner.me.clone();
        let on = Arc::new(on);
        let task = self.inner.runtime.spawn(async move {
            let mut lost = false;
            loop {
                match listen_once(&config, &replica, &*on, lost).await {
                    Ok(()) => tracing::warn!(
                        "stopped listening to the database at {url}; listening again"
                    ),
                    Err(e) => tracing::warn!(
                        "cannot listen to the replicas' notices ({e}); trying again in 1 s"
                    ),
                }
                lost = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Listening { task }
    }
}

/// One listening connection, until it ends.
async fn listen_once(
    config: &tokio_postgres::Config,
    replica: &str,
    on: &(dyn Fn(Notice) + Send + Sync),
    lost: bool,
) -> Result<()> {
    let url = "the replicas' notices".to_owned();
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| Error::Unreachable {
            url: url.clone(),
            message: e.to_string(),
        })?;
    let (tx, mut rx) = futures::channel::mpsc::unbounded();
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(n) = message
                && tx.unbounded_send(n).is_err()
            {
                break;
            }
        }
    });
    let listening = client
        .batch_execute(&format!("LISTEN {PINS}; LISTEN {TOOLS}"))
        .await
        .map_err(|e| query(&url, e));
    if let Err(e) = listening {
        driver.abort();
        return Err(e);
    }
    if lost {
        on(Notice::Missed);
    }
    while let Some(notification) = rx.next().await {
        if notification.payload() == replica {
            continue;
        }
        match notification.channel() {
            PINS => on(Notice::PinsChanged),
            TOOLS => on(Notice::ToolsChanged),
            _ => {}
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}
