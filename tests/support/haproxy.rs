//! HAProxy (Debian's `haproxy`) in front of a test's replicas, run from the
//! checked-in `deploy/haproxy.cfg`.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::kept::{Kept, setpriv};
use crate::{ReservedPort, root};

/// How long HAProxy may take to listen.
const START_LIMIT: Duration = Duration::from_secs(15);

/// The sections of `deploy/haproxy.cfg` a [`Haproxy`] keeps (the rest, such
/// as its DNS resolvers, is for a real deployment).
const KEPT_SECTIONS: &[&str] = &[
    "global",
    "defaults",
    "frontend core_agent",
    "backend core_agent",
];

/// How a [`Haproxy`] is set up: [`Haproxy::builder`].
#[derive(Debug, Clone)]
pub struct HaproxyBuilder {
    backends: Vec<SocketAddr>,
    balance: Option<String>,
    check_interval: Duration,
    extra_backend_lines: Vec<String>,
}

impl HaproxyBuilder {
    /// Replaces `balance roundrobin`, for example with
    /// `"hdr(mcp-session-id)"`.
    pub fn balance(mut self, algorithm: &str) -> HaproxyBuilder {
        self.balance = Some(algorithm.to_owned());
        self
    }

    /// How often each backend's `/health/ready` is checked (default
    /// 200 ms; a backend is down after two failed checks, up after one
    /// passed).
    pub fn check_interval(mut self, interval: Duration) -> HaproxyBuilder {
        self.check_interval = interval;
        self
    }

    /// Adds a line to the `backend core_agent` section (such as
    /// `"stick on req.hdr(mcp-session-id)"`).
    pub fn backend_line(mut self, line: &str) -> HaproxyBuilder {
        self.extra_backend_lines.push(line.to_owned());
        self
    }

    /// Writes the configuration and starts HAProxy; panics when it does not
    /// start.
    pub fn start(self) -> Haproxy {
        Haproxy::launch(self)
    }
}

/// A backend as HAProxy's `show stat` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaproxyServer {
    /// `replica1`, `replica2`, … in the order the backends were given.
    pub name: String,
    /// `UP`, `DOWN`, `MAINT`, `UP 1/2` (going down), `DOWN 1/1` (going up), …
    pub status: String,
    /// Requests sent to it so far (`stot`, sessions).
    pub sessions: u64,
    /// Requests it is answering now (`scur`).
    pub current: u64,
}

impl HaproxyServer {
    /// Whether HAProxy sends it requests (`UP`, also while going down).
    pub fn is_up(&self) -> bool {
        self.status.starts_with("UP")
    }
}

/// HAProxy 2.6 in front of `backends`, from `deploy/haproxy.cfg`: round
/// robin (`balance roundrobin`, HTTP mode) with a health check on
/// `/health/ready` (`Host: localhost`), the file's timeouts, on a port of
/// 127.0.0.1 of its own (a [`ReservedPort`] it listens on as `fd@0`). Its
/// backends are `replica1`, `replica2`, … in order; [`Haproxy::servers`]
/// reads their state from the admin socket.
///
/// It runs with `-db` (foreground) as a child of this process, dying with it
/// even on SIGKILL; dropping the value kills it.
#[derive(Debug)]
pub struct Haproxy {
    server: Kept,
    port: ReservedPort,
    dir: tempfile::TempDir,
    backends: Vec<SocketAddr>,
}

impl Haproxy {
    /// HAProxy round robin over `backends`, as `deploy/haproxy.cfg` says.
    pub fn start(backends: &[SocketAddr]) -> Haproxy {
        Haproxy::builder(backends).start()
    }

    /// HAProxy over `backends` with settings changed.
    pub fn builder(backends: &[SocketAddr]) -> HaproxyBuilder {
        HaproxyBuilder {
            backends: backends.to_vec(),
            balance: None,
            check_interval: Duration::from_millis(200),
            extra_backend_lines: Vec::new(),
        }
    }

    fn launch(options: HaproxyBuilder) -> Haproxy {
        let program = haproxy_program().unwrap_or_else(|| {
            panic!(
                "haproxy is not on PATH; run `cargo xtask deps` (apt-get install haproxy, as root)"
            )
        });
        assert!(
            !options.backends.is_empty(),
            "HAProxy needs at least one backend"
        );
        let dir = tempfile::Builder::new()
            .prefix("haproxy-")
            .tempdir()
            .expect("cannot create a temporary directory for HAProxy");
        let template = root().join("deploy/haproxy.cfg");
        let text = std::fs::read_to_string(&template)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", template.display()));
        let config = render(&text, &options, &dir.path().join("admin.sock"));
        let config_path = dir.path().join("haproxy.cfg");
        std::fs::write(&config_path, &config).expect("cannot write the HAProxy config");
        let log = std::fs::File::create(dir.path().join("haproxy.log"))
            .expect("cannot create the HAProxy log");
        let port = ReservedPort::new();
        let mut cmd = setpriv();
        cmd.arg(&program)
            .arg("-f")
            .arg(&config_path)
            .arg("-db")
            .current_dir(dir.path())
            .stdin(Stdio::from(port.socket()))
            .stdout(log.try_clone().expect("cannot share the HAProxy log"))
            .stderr(log);
        let server = Kept::spawn(cmd).expect("cannot start haproxy (setpriv)");
        let mut haproxy = Haproxy {
            server,
            port,
            dir,
            backends: options.backends,
        };
        let started = Instant::now();
        // Up once its admin socket answers (it listens on fd@0 by then).
        while haproxy.admin("show info").is_none() {
            if !haproxy.server.running() || started.elapsed() > START_LIMIT {
                panic!(
                    "haproxy did not start within {} s; its config:\n{config}\nits output:\n{}",
                    START_LIMIT.as_secs(),
                    haproxy.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        haproxy
    }

    /// `127.0.0.1:PORT`, where clients connect.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port.port()))
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port.port()
    }

    /// `http://127.0.0.1:PORT<path>`, such as `url("/mcp")`.
    pub fn url(&self, path: &str) -> String {
        self.port.url(path)
    }

    /// The backends, in the order given (`replica1` first).
    pub fn backends(&self) -> &[SocketAddr] {
        &self.backends
    }

    /// The configuration it runs.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("haproxy.cfg")
    }

    /// Its output so far (its log lines go to stdout).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// Each backend's state, `replica1` first.
    pub fn servers(&self) -> Vec<HaproxyServer> {
        let stat = self.admin("show stat").unwrap_or_else(|| {
            panic!(
                "haproxy's admin socket does not answer; its output:\n{}",
                self.log()
            )
        });
        parse_stat(&stat)
    }

    /// Waits until exactly `up` backends are up, panicking after `limit`
    /// with their states (to wait for the health checks to see a replica
    /// start, or die).
    pub fn wait_until_up(&self, up: usize, limit: Duration) {
        let started = Instant::now();
        loop {
            let servers = self.servers();
            if servers.iter().filter(|s| s.is_up()).count() == up {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{up} backend(s) up expected within {:?}; haproxy says {servers:?}",
                limit
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One command on the admin socket (`show stat`, `disable server
    /// core_agent/replica1`, …) and its answer, or `None` when the socket
    /// does not answer.
    pub fn admin(&self, command: &str) -> Option<String> {
        let mut stream = UnixStream::connect(self.dir.path().join("admin.sock")).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream.write_all(format!("{command}\n").as_bytes()).ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        Some(answer)
    }
}

/// `haproxy` on `PATH` (Debian puts it in `/usr/sbin`, which a user's
/// `PATH` may lack).
pub fn haproxy_program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("haproxy"))
        .find(|p| p.is_file())
}

/// The backend lines of `show stat`'s CSV.
fn parse_stat(csv: &str) -> Vec<HaproxyServer> {
    let mut lines = csv.lines();
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
    let at = |name: &str| {
        columns
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no `{name}` column in haproxy's stats: {header}"))
    };
    let (px, sv, status, stot) = (at("pxname"), at("svname"), at("status"), at("stot"));
    let scur = at("scur");
    lines
        .map(|l| l.split(',').collect::<Vec<&str>>())
        .filter(|f| {
            f.get(px) == Some(&"core_agent")
                && !matches!(f.get(sv), Some(&"BACKEND" | &"FRONTEND") | None)
        })
        .map(|f| HaproxyServer {
            name: f[sv].to_owned(),
            status: f.get(status).copied().unwrap_or_default().to_owned(),
            sessions: f.get(stot).and_then(|n| n.parse().ok()).unwrap_or(0),
            current: f.get(scur).and_then(|n| n.parse().ok()).unwrap_or(0),
        })
        .collect()
}

/// `deploy/haproxy.cfg` for a test: only [`KEPT_SECTIONS`]; the frontend
/// listens on `fd@0`; the backend's `server` lines are the test's
/// backends (their checks every `check_interval`, no DNS); an admin socket
/// in the test's directory.
fn render(template: &str, options: &HaproxyBuilder, admin: &Path) -> String {
    let mut out = String::new();
    let mut section: Option<String> = None;
    let mut keep = false;
    let close = |out: &mut String, section: &Option<String>| match section.as_deref() {
        Some("global") => {
            out.push_str(&format!(
                "    stats socket {} mode 600 level admin\n",
                admin.display()
            ));
        }
        Some("backend core_agent") => {
            for line in &options.extra_backend_lines {
                out.push_str(&format!("    {line}\n"));
            }
            let inter = options.check_interval.as_millis().max(1);
            for (i, addr) in options.backends.iter().enumerate() {
                out.push_str(&format!(
                    "    server replica{} {addr} check inter {inter}ms fastinter {inter}ms downinter {inter}ms fall 2 rise 1\n",
                    i + 1
                ));
            }
        }
        _ => {}
    };
    for line in template.lines() {
        let trimmed = line.trim();
        let starts_section = !line.starts_with([' ', '\t', '#']) && !trimmed.is_empty();
        if starts_section {
            if keep {
                close(&mut out, &section);
            }
            let name = trimmed.split_whitespace().collect::<Vec<_>>().join(" ");
            keep = KEPT_SECTIONS.contains(&name.as_str());
            section = Some(name);
            if keep {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        if !keep || trimmed.starts_with('#') {
            continue;
        }
        let keyword = trimmed.split_whitespace().next().unwrap_or_default();
        let line = match (section.as_deref(), keyword) {
            (Some("frontend core_agent"), "bind") => "    bind fd@0".to_owned(),
            // Within a test process's file limit (HAProxy needs two per
            // connection and fails when it cannot raise the limit).
            (Some("global"), "maxconn") => "    maxconn 2000".to_owned(),
            (Some("backend core_agent"), "server" | "server-template" | "default-server") => {
                continue;
            }
            (Some("backend core_agent"), "balance") => match &options.balance {
                Some(balance) => format!("    balance {balance}"),
                None => line.to_owned(),
            },
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    if keep {
        close(&mut out, &section);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deploy_config_is_rendered_with_the_tests_backends() {
        let template = std::fs::read_to_string(root().join("deploy/haproxy.cfg")).unwrap();
        let options = Haproxy::builder(&[
            "127.0.0.1:1001".parse().unwrap(),
            "127.0.0.1:1002".parse().unwrap(),
        ])
        .balance("hdr(mcp-session-id)");
        let config = render(&template, &options, Path::new("/t/admin.sock"));
        let lines: Vec<&str> = config.lines().map(str::trim).collect();
        assert!(lines.contains(&"bind fd@0"), "{config}");
        assert!(lines.contains(&"maxconn 2000"), "{config}");
        assert!(lines.contains(&"balance hdr(mcp-session-id)"), "{config}");
        assert!(lines.contains(&"option httpchk"), "{config}");
        assert!(lines.contains(&"stats socket /t/admin.sock mode 600 level admin"));
        let servers: Vec<&&str> = lines.iter().filter(|l| l.starts_with("server ")).collect();
        assert_eq!(servers.len(), 2, "{config}");
        assert!(servers[0].starts_with("server replica1 127.0.0.1:1001 check"));
        assert!(!config.contains("resolvers") && !config.contains("core-agent-1"));
        assert!(!config.contains("bind :8080"));
    }

    #[test]
    fn show_stat_is_read_by_column_name() {
        let csv = "# pxname,svname,qcur,scur,stot,status\n\
            core_agent,FRONTEND,0,3,9,OPEN\n\
            core_agent,replica1,0,2,4,UP\n\
            core_agent,replica2,0,1,5,DOWN 1/2\n\
            core_agent,BACKEND,0,3,9,UP\n";
        let servers = parse_stat(csv);
        assert_eq!(servers.len(), 2);
        assert!(servers[0].is_up() && !servers[1].is_up());
        assert_eq!(
            (servers[0].sessions, servers[1].status.as_str()),
            (4, "DOWN 1/2")
        );
        assert_eq!((servers[0].current, servers[1].current), (2, 1));
    }

    /// A tiny HTTP server on 127.0.0.1 that answers every request with its
    /// `name` (Connection: close), and `/health/ready` with 200 while
    /// `ready` holds, else 503.
    fn named_server(
        name: &'static str,
        ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> SocketAddr {
        use std::io::BufRead;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut request_line = String::new();
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let _ = reader.read_line(&mut request_line);
                // The rest of the head.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let health = request_line.contains("/health/ready");
                let status = if health && !ready.load(std::sync::atomic::Ordering::SeqCst) {
                    "503 Service Unavailable"
                } else {
                    "200 OK"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                    name.len()
                );
            }
        });
        addr
    }

    fn get(url: &str) -> String {
        let addr = url.trim_start_matches("http://").split('/').next().unwrap();
        let path = &url[url.find(addr).unwrap() + addr.len()..];
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        response
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn haproxy_round_robins_between_two_servers_and_leaves_out_one_not_ready() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let ready_b = Arc::new(AtomicBool::new(true));
        let a = named_server("a", Arc::new(AtomicBool::new(true)));
        let b = named_server("b", ready_b.clone());
        let haproxy = Haproxy::start(&[a, b]);
        haproxy.wait_until_up(2, Duration::from_secs(10));
        let answers: Vec<String> = (0..6).map(|_| get(&haproxy.url("/mcp"))).collect();
        // Round robin: they alternate.
        for pair in answers.windows(2) {
            assert_ne!(pair[0], pair[1], "not round robin: {answers:?}");
        }
        assert_eq!(
            answers.iter().filter(|a| *a == "a").count(),
            3,
            "{answers:?}"
        );
        let servers = haproxy.servers();
        assert_eq!(
            servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["replica1", "replica2"]
        );
        assert!(servers.iter().all(|s| s.sessions >= 3), "{servers:?}");

        // Not ready: its health check fails, and it gets nothing more.
        ready_b.store(false, Ordering::SeqCst);
        haproxy.wait_until_up(1, Duration::from_secs(10));
        let answers: Vec<String> = (0..4).map(|_| get(&haproxy.url("/mcp"))).collect();
        assert_eq!(answers, ["a", "a", "a", "a"]);
        // Ready again: back in the rotation.
        ready_b.store(true, Ordering::SeqCst);
        haproxy.wait_until_up(2, Duration::from_secs(10));

        let pid = haproxy.server.pid();
        let dir = haproxy.dir.path().to_path_buf();
        drop(haproxy);
        assert!(!crate::alive(pid), "haproxy outlived its value");
        assert!(!dir.exists());
    }

    #[test]
    fn the_session_header_keeps_a_client_on_one_server() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let a = named_server("a", Arc::new(AtomicBool::new(true)));
        let b = named_server("b", Arc::new(AtomicBool::new(true)));
        let haproxy = Haproxy::builder(&[a, b])
            .balance("hdr(mcp-session-id)")
            .start();
        haproxy.wait_until_up(2, Duration::from_secs(10));
        let ask = |session: &str| {
            let mut stream = std::net::TcpStream::connect(haproxy.addr()).unwrap();
            write!(
                stream,
                "GET /mcp HTTP/1.1\r\nHost: localhost\r\nMcp-Session-Id: {session}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).unwrap();
            response
                .split("\r\n\r\n")
                .nth(1)
                .unwrap_or_default()
                .to_owned()
        };
        for session in ["s-1", "s-2", "s-3", "s-4"] {
            let first = ask(session);
            for _ in 0..3 {
                assert_eq!(ask(session), first, "session {session} moved");
            }
        }
    }
}
