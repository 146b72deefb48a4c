//! A throwaway PostgreSQL cluster for a test (Debian's `postgresql`).

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::kept::{Kept, setpriv};

/// How long a cluster may take to accept connections.
const READY_LIMIT: Duration = Duration::from_secs(30);
/// How long an immediate shutdown may take before the server is killed.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// Settings that make a cluster start and write fast, durability traded
/// away (a test's data dies with it anyway).
const FAST: &[(&str, &str)] = &[
    ("fsync", "off"),
    // `synchronous_commit` stays on: a commit is written (not synced) before
    // it returns, so it survives [`Postgres::stop`]'s immediate shutdown.
    ("full_page_writes", "off"),
    ("wal_level", "minimal"),
    ("max_wal_senders", "0"),
    ("max_wal_size", "1GB"),
    ("checkpoint_timeout", "1h"),
    ("shared_buffers", "32MB"),
    ("max_connections", "200"),
    ("autovacuum", "off"),
    ("jit", "off"),
    ("logging_collector", "off"),
];

/// The default database of a [`Postgres`].
pub const POSTGRES_DATABASE: &str = "core_agent";

/// A PostgreSQL cluster of its own, for one test: `initdb` into a
/// temporary directory, the server on 127.0.0.1 at a port of its own (and
/// its Unix socket in that directory), trust authentication for the user
/// `postgres`, and a database [`POSTGRES_DATABASE`].
///
/// As root, the programs run as the `postgres` user (PostgreSQL refuses
/// root), the directory chown'ed to it. The server runs as a child of this
/// process, dying with it even on SIGKILL (see `kept.rs`); dropping the
/// value stops it (immediate shutdown), kills whatever is left of its
/// process group and removes the directory, panicking test or not.
///
/// The port is held by this value for its whole life (a socket bound with
/// `SO_REUSEADDR`, never listening, beside the server's own), so between
/// [`Postgres::stop`] and [`Postgres::start`] connections are refused and
/// no other test's server takes the port. Any number of clusters can run
/// side by side.
#[derive(Debug)]
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Holds the port.
    _held: OwnedFd,
    port: u16,
    settings: Vec<(String, String)>,
    run_as: Option<&'static str>,
    server: Option<Kept>,
}

impl Postgres {
    /// A running cluster with the [`POSTGRES_DATABASE`] database.
    pub fn new() -> Postgres {
        Postgres::with_settings(&[])
    }

    /// A running cluster with these server settings (`-c name=value`) over
    /// the fast defaults (such as `("max_connections", "400")`).
    pub fn with_settings(settings: &[(&str, &str)]) -> Postgres {
        let bin = postgres_bin().unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH); run `cargo xtask deps` (apt-get install postgresql, as root)"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("pg-")
            .tempdir()
            .expect("cannot create a temporary directory for PostgreSQL");
        let run_as = running_as_root().then_some("postgres");
        if let Some(user) = run_as {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{user}:{user}"))
                .arg(dir.path())
                .status()
                .expect("cannot run chown");
            assert!(
                status.success(),
                "cannot chown {} to {user} (is the `postgres` user there? Debian's postgresql package makes it)",
                dir.path().display()
            );
        }
        let (held, port) = hold_port();
        let mut merged: Vec<(String, String)> = FAST
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        for (k, v) in settings {
            merged.retain(|(name, _)| name != k);
            merged.push(((*k).to_owned(), (*v).to_owned()));
        }
        let mut pg = Postgres {
            dir,
            bin,
            _held: held,
            port,
            settings: merged,
            run_as,
            server: None,
        };
        pg.initdb();
        pg.start();
        pg.psql_in("postgres", &format!("CREATE DATABASE {POSTGRES_DATABASE}"));
        pg
    }

    /// `postgres://postgres@127.0.0.1:PORT/core_agent`.
    pub fn url(&self) -> String {
        self.url_of(POSTGRES_DATABASE)
    }

    /// The URL of another database of the cluster.
    pub fn url_of(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The directory of the Unix socket (`host=` of a libpq URL).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Creates a database and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.psql_in("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url_of(name)
    }

    /// Runs `sql` in the [`POSTGRES_DATABASE`] database with `psql` and
    /// returns its unaligned, tuples-only output (`a|b` lines); panics with
    /// psql's message when it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in(POSTGRES_DATABASE, sql)
    }

    /// [`Postgres::psql`] in another database.
    pub fn psql_in(&self, database: &str, sql: &str) -> String {
        let mut cmd = Command::new(self.bin.join("psql"));
        clear_pg_env(&mut cmd)
            .args([
                "-X",
                "-A",
                "-t",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", "postgres", "-d", database, "-c", sql])
            .stdin(Stdio::null());
        let out = cmd.output().expect("cannot run psql");
        assert!(
            out.status.success(),
            "psql -c {sql:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Whether the server runs.
    pub fn is_running(&mut self) -> bool {
        self.server.as_mut().is_some_and(Kept::running)
    }

    /// The postmaster's pid, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.server.as_ref().map(Kept::pid)
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`: SIGQUIT, no
    /// checkpoint; the next start recovers), and waits until it is gone:
    /// connections are refused from then on. Does nothing when stopped.
    pub fn stop(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        server.signal(Signal::SIGQUIT);
        if !server.wait_for_exit(STOP_LIMIT) {
            eprintln!(
                "postgres on port {} did not stop within {} s; killed",
                self.port,
                STOP_LIMIT.as_secs()
            );
        }
        // Backends still exiting go with the group.
        server.kill_group();
    }

    /// Kills the server with SIGKILL (a crash, not a shutdown) and whatever
    /// is left of its process group.
    pub fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.kill_group();
        }
    }

    /// Starts the server (again) on the same port and data, and waits until
    /// it accepts connections. Does nothing when it runs.
    pub fn start(&mut self) {
        if self.is_running() {
            return;
        }
        let data = self.data_dir();
        // A pid file left by a killed server would make it wait.
        let _ = std::fs::remove_file(data.join("postmaster.pid"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("cannot open the PostgreSQL log");
        let mut cmd = self.as_owner(&self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-h", "127.0.0.1"]);
        for (k, v) in &self.settings {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().expect("cannot share the PostgreSQL log"))
            .stderr(log);
        let mut server = Kept::spawn(cmd).expect("cannot start postgres (setpriv)");
        let started = Instant::now();
        loop {
            if ready(&data.join("postmaster.pid")) {
                break;
            }
            if !server.running() || started.elapsed() > READY_LIMIT {
                server.kill_group();
                panic!(
                    "postgres did not become ready on port {} within {} s; its log:\n{}",
                    self.port,
                    READY_LIMIT.as_secs(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.server = Some(server);
    }

    /// Stops the server and starts it again.
    pub fn restart(&mut self) {
        self.stop();
        self.start();
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `program` run as the cluster's owner, dying with this process.
    fn as_owner(&self, program: &Path) -> Command {
        let mut cmd = setpriv();
        if let Some(user) = self.run_as {
            cmd.arg(format!("--reuid={user}"))
                .arg(format!("--regid={user}"))
                .arg("--init-groups");
        }
        cmd.arg(program).current_dir(self.dir.path());
        clear_pg_env(&mut cmd);
        cmd
    }

    fn initdb(&self) {
        let mut cmd = self.as_owner(&self.bin.join("initdb"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null());
        let out = cmd.output().expect("cannot run initdb (setpriv)");
        assert!(
            out.status.success(),
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Default for Postgres {
    fn default() -> Self {
        Postgres::new()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `postmaster.pid` says the server accepts connections (its 8th
/// line, `ready`, which `pg_ctl start -w` waits for too).
fn ready(pid_file: &Path) -> bool {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.lines().nth(7).map(|l| l.trim() == "ready"))
        .unwrap_or(false)
}

/// Debian's PostgreSQL server programs: the `bin` directory of the highest
/// version under `/usr/lib/postgresql`, else the directory of `initdb` on
/// `PATH`.
pub fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file())
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Removes the libpq variables (`PGHOST`, `PGDATABASE`, …) of the test
/// process, which would point a program elsewhere.
fn clear_pg_env(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A socket bound to a port of the kernel's choosing on 127.0.0.1 with
/// `SO_REUSEADDR`, never listening: the server (which binds with
/// `SO_REUSEADDR` too) can listen on the port beside it, no socket without
/// that option can take it, and while the server is stopped connections
/// are refused.
fn hold_port() -> (OwnedFd, u16) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("cannot create a TCP socket");
    socket
        .set_reuse_address(true)
        .expect("cannot set SO_REUSEADDR");
    let any: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    socket
        .bind(&any.into())
        .expect("cannot bind a socket to 127.0.0.1");
    let port = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("an IPv4 address")
        .port();
    (socket.into(), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_file_is_ready_on_its_eighth_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("postmaster.pid");
        assert!(!ready(&file));
        std::fs::write(&file, "1\n/d\n1\n5432\n/tmp\n127.0.0.1\n 1 2\nstarting\n").unwrap();
        assert!(!ready(&file));
        std::fs::write(&file, "1\n/d\n1\n5432\n/tmp\n127.0.0.1\n 1 2\nready   \n").unwrap();
        assert!(ready(&file));
    }

    #[test]
    fn a_cluster_answers_psql_survives_a_stop_and_leaves_nothing_behind() {
        let mut pg = Postgres::new();
        assert_eq!(
            pg.url(),
            format!("postgres://postgres@127.0.0.1:{}/core_agent", pg.port())
        );
        assert_eq!(pg.psql("SELECT current_database()"), "core_agent");
        // psql with the URL itself, as a client would use it.
        let out = Command::new("psql")
            .args(["-X", "-A", "-t", "-c", "SELECT 40 + 2"])
            .arg(pg.url())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
        pg.psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')");
        assert_eq!(pg.psql("SHOW fsync"), "off");

        // Gone: connections are refused, and the port stays ours.
        let pid = pg.pid().unwrap();
        pg.stop();
        assert!(!pg.is_running() && !crate::alive(pid));
        let refused = std::net::TcpStream::connect(pg.addr()).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // Back on the same port, with what was committed.
        pg.start();
        assert_eq!(pg.psql("SELECT v FROM t"), "kept");
        let other = pg.create_database("other db");
        assert!(other.ends_with("/other db"));
        assert_eq!(pg.psql_in("other db", "SELECT 1"), "1");

        let pid = pg.pid().unwrap();
        let dir = pg.socket_dir().to_path_buf();
        drop(pg);
        assert!(!crate::alive(pid), "postgres outlived its value");
        assert!(!dir.exists(), "{} is left", dir.display());
        assert!(crate::processes_mentioning(&dir.display().to_string()).is_empty());
    }

    #[test]
    fn clusters_run_side_by_side() {
        let clusters: Vec<Postgres> = std::thread::scope(|s| {
            let started: Vec<_> = (0..3).map(|_| s.spawn(Postgres::new)).collect();
            started.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut ports: Vec<u16> = clusters.iter().map(Postgres::port).collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 3);
        for (i, pg) in clusters.iter().enumerate() {
            pg.psql(&format!(
                "CREATE TABLE mine (n int); INSERT INTO mine VALUES ({i})"
            ));
        }
        for (i, pg) in clusters.iter().enumerate() {
            assert_eq!(pg.psql("SELECT n FROM mine"), i.to_string());
        }
    }

    #[test]
    fn a_panicking_test_stops_its_cluster() {
        let (tx, rx) = std::sync::mpsc::channel();
        let result = std::panic::catch_unwind(move || {
            let pg = Postgres::new();
            tx.send((pg.pid().unwrap(), pg.socket_dir().to_path_buf()))
                .unwrap();
            panic!("the test fails");
        });
        assert!(result.is_err());
        let (pid, dir) = rx.recv().unwrap();
        assert!(!crate::alive(pid));
        assert!(!dir.exists());
    }

    /// Set in the child of [`a_killed_test_process_leaves_no_server`].
    const CHILD: &str = "CORE_AGENT_E2E_POSTGRES_CHILD";

    /// The child: starts a cluster, says its pid, and waits to be killed.
    #[test]
    #[ignore = "run by a_killed_test_process_leaves_no_server"]
    fn postgres_child_waits_to_be_killed() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let pg = Postgres::new();
        println!(
            "postgres pid {} dir {}",
            pg.pid().unwrap(),
            pg.socket_dir().display()
        );
        std::thread::sleep(Duration::from_secs(60));
    }

    #[test]
    fn a_killed_test_process_leaves_no_server() {
        use std::io::BufRead;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "postgres::tests::postgres_child_waits_to_be_killed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (pid, dir): (i32, PathBuf) = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            // libtest prints the test's name on the same line first.
            .find_map(|l| {
                let (_, said) = l.split_once("postgres pid ")?;
                let (pid, dir) = said.split_once(" dir ")?;
                Some((pid.trim().parse().ok()?, PathBuf::from(dir.trim())))
            })
            .expect("the child said no pid");
        assert!(crate::alive(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::alive(pid) {
            assert!(
                Instant::now() < deadline,
                "postgres {pid} outlived its killed test"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // A killed process removes nothing: its directory is left to us.
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
