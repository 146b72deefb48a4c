//! The connection pool, the thread it runs on, and the migrations.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::error::{Error, Result, redact};

/// The newest schema version this release knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_fleet.sql"),
    include_str!("migrations/0002_pins.sql"),
    include_str!("migrations/0003_audit.sql"),
];

/// The advisory lock migrations run under ("core-agent" as a number), so
/// that replicas starting together take turns.
const MIGRATION_LOCK: i64 = 0x636f_7265_2d61_6765;

/// How to reach the database, and what this replica is called in it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// Connections held at most (16).
    pub max_connections: usize,
    /// How long connecting, or waiting for a free connection, may take
    /// before a call that needs the store fails (5 s).
    pub timeout: Duration,
    /// The name this replica writes its audit lines under (the `replica`
    /// column of `audit_lines`); `None`: the host name and the process id,
    /// `HOST:PID`.
    pub replica: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_connections: 16,
            timeout: Duration::from_secs(5),
            replica: None,
        }
    }
}

impl Options {
    /// Connections held at most.
    pub fn with_max_connections(mut self, max: usize) -> Options {
        self.max_connections = max.max(1);
        self
    }

    /// How long connecting, or waiting for a free connection, may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Options {
        self.timeout = timeout;
        self
    }

    /// The name this replica writes its audit lines under.
    pub fn with_replica(mut self, replica: impl Into<String>) -> Options {
        self.replica = Some(replica.into());
        self
    }
}

/// `HOST:PID`: the kernel's host name (a pod's name on Kubernetes), else
/// `$HOSTNAME`, else `localhost`, and this process's id.
fn default_replica() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// One PostgreSQL database shared by every replica: a pool of connections
/// run on a thread of its own, so that no query ever blocks a thread of the
/// caller's runtime. Cheap to clone.
///
/// It is the digest's [`Store`](core_agent_digest::Store), the host's
/// [`SessionMemory`](core_agent_host::SessionMemory), and the gateway's
/// [`Fleet`](core_agent_gateway::Fleet) and
/// [`AuditSink`](core_agent_gateway::AuditSink).
#[derive(Clone)]
pub struct Postgres {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) pool: Pool,
    /// How to open a connection of its own (the one that listens).
    pub(crate) config: tokio_postgres::Config,
    /// This process among the fleet's, in the notices it sends (random,
    /// so that no two replicas share it).
    pub(crate) me: String,
    pub(crate) url: String,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Stops the worker thread when the last clone is dropped.
    _stop: tokio::sync::oneshot::Sender<()>,
    pub(crate) secret: [u8; 32],
    /// The name this replica writes its audit lines under.
    pub(crate) replica: String,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("url", &self.inner.url)
            .field("replica", &self.inner.replica)
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`),
    /// applies the migrations it lacks (under an advisory lock, so replicas
    /// starting together take turns) and reads the fleet's shared secret
    /// (made by the first replica). A database a newer release migrated is
    /// refused, and nothing is written to it.
    pub async fn connect(url: &str, options: Options) -> Result<Postgres> {
        let shown = redact(url);
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| Error::BadUrl {
            url: shown.clone(),
            message: e.to_string(),
        })?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(Error::BadUrl {
                url: shown,
                message: "it asks for TLS (sslmode=require), which core-agent does not speak to PostgreSQL".to_owned(),
            });
        }
        config.connect_timeout(options.timeout);
        if config.get_application_name().is_none() {
            config.application_name("core-agent");
        }
        let (handle, stop) = worker(&shown)?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .wait_timeout(Some(options.timeout))
            .create_timeout(Some(options.timeout))
            .recycle_timeout(Some(options.timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| Error::BadUrl {
                url: shown.clone(),
                message: e.to_string(),
            })?;
        let prepared = {
            let pool = pool.clone();
            let url = shown.clone();
            on(&handle, &shown, async move {
                migrate(&pool, &url).await?;
                shared_secret(&pool, &url).await
            })
            .await?
        };
        Ok(Postgres {
            inner: Arc::new(Inner {
                pool,
                config,
                me: replica_id(),
                url: shown,
                runtime: handle,
                _stop: stop,
                secret: prepared,
                replica: options.replica.unwrap_or_else(default_replica),
            }),
        })
    }

    /// The database's URL, without its password.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The name this replica writes its audit lines under
    /// ([`Options::replica`]).
    pub fn replica(&self) -> &str {
        &self.inner.replica
    }

    /// The schema version the database is at now.
    pub async fn schema_version(&self) -> Result<i32> {
        let pool = self.inner.pool.clone();
        let url = self.inner.url.clone();
        self.run(async move {
            let client = client(&pool, &url).await?;
            let row = client
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM core_agent_schema",
                    &[],
                )
                .await
                .map_err(|e| query(&url, e))?;
            Ok(row.get::<_, i32>(0))
        })
        .await
    }

    /// Runs `work` on the database's thread, and waits for it.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        on(&self.inner.runtime, &self.inner.url, work).await
    }

    /// Runs `work` on the database's thread, and blocks this thread until
    /// it is done: for the synchronous traits (the digest's store, the
    /// host's memory). On a multi-threaded runtime the caller's worker is
    /// handed over to the runtime's other tasks while it waits.
    pub(crate) fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        if ON_WORKER.with(std::cell::Cell::get) {
            // Waiting here would wait for this very thread.
            return Err(Error::Query {
                url: self.inner.url.clone(),
                message: "a synchronous call was made from the database's own thread".to_owned(),
            });
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.inner.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        let wait = || {
            rx.recv().map_err(|_| Error::Stopped {
                url: self.inner.url.clone(),
            })?
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }
}

thread_local! {
    /// Set on the thread the pool runs on.
    static ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A name for this process among the fleet's: random, so two replicas on
/// one host (or two runs) differ.
fn replica_id() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts the thread the pool's connections run on.
fn worker(url: &str) -> Result<(tokio::runtime::Handle, tokio::sync::oneshot::Sender<()>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Unreachable {
            url: url.to_owned(),
            message: format!("cannot start its worker: {e}"),
        })?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("core-agent-postgres".to_owned())
        .spawn(move || {
            ON_WORKER.with(|on| on.set(true));
            runtime.block_on(async move {
                let _ = stopped.await;
            });
        })
        .map_err(|e| Error::Unreachable {
            url: url.to_owned(),
            message: format!("cannot start its worker: {e}"),
        })?;
    Ok((handle, stop))
}

/// Runs `work` on `runtime` and waits for it.
async fn on<T: Send + 'static>(
    runtime: &tokio::runtime::Handle,
    url: &str,
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    runtime.spawn(work).await.map_err(|_| Error::Stopped {
        url: url.to_owned(),
    })?
}

/// A connection from `pool`.
pub(crate) async fn client(pool: &Pool, url: &str) -> Result<deadpool_postgres::Object> {
    pool.get().await.map_err(|e| Error::Unreachable {
        url: url.to_owned(),
        message: match e {
            deadpool_postgres::PoolError::Backend(e) => e.to_string(),
            deadpool_postgres::PoolError::Timeout(_) => {
                "no connection within the timeout (is the database up?)".to_owned()
            }
            other => other.to_string(),
        },
    })
}

/// A failed query's error, with the server's words (the driver's own
/// `Display` says only "db error").
pub(crate) fn query(url: &str, e: tokio_postgres::Error) -> Error {
    let message = match (e.as_db_error(), std::error::Error::source(&e)) {
        (Some(db), _) => db.to_string(),
        (None, Some(source)) => format!("{e}: {source}"),
        (None, None) => e.to_string(),
    };
    Error::Query {
        url: url.to_owned(),
        message,
    }
}

/// Applies the migrations the database lacks, under the advisory lock.
async fn migrate(pool: &Pool, url: &str) -> Result<()> {
    let mut client = client(pool, url).await?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| query(url, e))?;
    let result = apply(&mut client, url).await;
    // Released even when a migration failed; a dropped connection releases it too.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result?;
    unlocked.map_err(|e| query(url, e))?;
    Ok(())
}

async fn apply(client: &mut deadpool_postgres::Object, url: &str) -> Result<()> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS core_agent_schema (
                 version    integer PRIMARY KEY,
                 applied_ms bigint NOT NULL,
                 release    text NOT NULL)",
        )
        .await
        .map_err(|e| query(url, e))?;
    let found: i32 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM core_agent_schema",
            &[],
        )
        .await
        .map_err(|e| query(url, e))?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(Error::NewerSchema {
            url: url.to_owned(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (at, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        let version = at as i32 + 1;
        let failed = |e: tokio_postgres::Error| Error::Migration {
            url: url.to_owned(),
            version,
            message: e.to_string(),
        };
        let tx = client.transaction().await.map_err(failed)?;
        tx.batch_execute(sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO core_agent_schema (version, applied_ms, release) VALUES ($1, $2, $3)",
            &[
                &version,
                &crate::now_ms(),
                &concat!("core-agent ", env!("CARGO_PKG_VERSION")),
            ],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        tracing::info!("migrated the database at {url} to schema version {version}");
    }
    Ok(())
}

/// The fleet's shared secret: made by the first replica, read by the rest.
async fn shared_secret(pool: &Pool, url: &str) -> Result<[u8; 32]> {
    let client = client(pool, url).await?;
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh).map_err(|e| Error::Unreachable {
        url: url.to_owned(),
        message: format!("no randomness for the fleet's secret: {e}"),
    })?;
    client
        .execute(
            "INSERT INTO fleet_secrets (name, value) VALUES ('relay', $1) ON CONFLICT (name) DO NOTHING",
            &[&fresh.as_slice()],
        )
        .await
        .map_err(|e| query(url, e))?;
    let row = client
        .query_one("SELECT value FROM fleet_secrets WHERE name = 'relay'", &[])
        .await
        .map_err(|e| query(url, e))?;
    let value: Vec<u8> = row.get(0);
    value.try_into().map_err(|_| Error::Query {
        url: url.to_owned(),
        message: "the fleet's secret (fleet_secrets.relay) is not 32 bytes; delete that row and restart the replicas".to_owned(),
    })
}
