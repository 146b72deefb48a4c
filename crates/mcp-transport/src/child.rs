//! A stdio server's process: its own process group, a drained stderr, and
//! a shutdown that escalates from EOF to SIGTERM to SIGKILL.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_mcp_config::Redactor;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::process::{ChildStdin, Command};
use tokio::sync::watch;

use crate::StartError;
use crate::supervise::{Ended, Supervisor};

/// How many stderr lines are kept for error reports.
const TAIL_LINES: usize = 20;
/// Longest stderr line kept, in bytes.
const TAIL_LINE_BYTES: usize = 512;

/// The last lines a child wrote to stderr.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == TAIL_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// What the stdout filter noticed besides the protocol: the first line that
/// was not a protocol message, and a line past the message limit (after
/// which it stopped reading).
#[derive(Debug, Default)]
pub(crate) struct StdoutNotes {
    noise: Mutex<Option<String>>,
    overflow: Mutex<Option<String>>,
}

impl StdoutNotes {
    /// The first line that was not a protocol message.
    pub(crate) fn noise(&self) -> Option<String> {
        self.noise.lock().ok().and_then(|n| n.clone())
    }

    /// Why the filter stopped reading, as the end of a sentence about the
    /// server (`sent a message longer than …, so it was stopped`).
    pub(crate) fn overflow(&self) -> Option<String> {
        self.overflow.lock().ok().and_then(|n| n.clone())
    }

    fn set(slot: &Mutex<Option<String>>, text: String) {
        if let Ok(mut slot) = slot.lock()
            && slot.is_none()
        {
            *slot = Some(text);
        }
    }
}

/// `n` bytes in words: `16 MiB` when whole mebibytes, else `1500 bytes`.
pub(crate) fn bytes(n: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// Extra time a supervisor gets, past the kill grace, to stop its server's
/// group and reap it before the host kills the supervisor itself.
const SUPERVISOR_SLACK: Duration = Duration::from_secs(2);

/// A spawned stdio server (directly, or under a [`Supervisor`]).
#[derive(Debug)]
pub(crate) struct ChildProcess {
    pid: Option<u32>,
    /// Started through a supervisor: the process is the supervisor, which
    /// stops the server's group itself.
    supervised: bool,
    stderr: StderrTail,
    drain: Option<tokio::task::JoinHandle<()>>,
    noise: Arc<StdoutNotes>,
    /// How the process ended, once it has (set by the task that waits for it).
    exit: watch::Receiver<Option<Ended>>,
    /// `terminate` has run: the group is gone.
    stopped: bool,
    /// How long a supervisor may take to stop once asked.
    patience: Duration,
}

impl Drop for ChildProcess {
    /// A child dropped without [`ChildProcess::terminate`] (a start that was
    /// interrupted, a host dropped without shutdown) takes its whole process
    /// group with it, so nothing it started is left behind. A supervisor is
    /// asked to do that itself (SIGTERM): killing it would orphan the server.
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        if self.supervised {
            self.signal(Signal::SIGTERM);
            // `settle` waits for it, so a shutdown returns once it is gone.
            if let Ok(mut stopping) = STOPPING.lock() {
                stopping.push((self.exit.clone(), Instant::now() + self.patience));
            }
        } else {
            self.signal(Signal::SIGKILL);
        }
    }
}

/// Supervisors that were dropped while running, asked to stop, with how
/// long each may take.
static STOPPING: Mutex<Vec<(watch::Receiver<Option<Ended>>, Instant)>> = Mutex::new(Vec::new());

/// Waits until every supervisor dropped so far (a start interrupted
/// part-way) has stopped its server and exited, each at most its grace
/// plus a little more.
pub(crate) async fn settle() {
    let stopping = STOPPING
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    for (mut exit, deadline) in stopping {
        let _ = tokio::time::timeout_at(deadline.into(), exit.wait_for(Option::is_some)).await;
    }
}

impl ChildProcess {
    /// Spawns `command` in a process group of its own with stdin and stdout
    /// piped for MCP and stderr drained into a tail; under `supervisor`
    /// when given (the supervisor gets `grace` for stopping the server).
    ///
    /// stdout goes through a filter: JSON lines reach the returned reader,
    /// anything else (a banner, a log line) is dropped and the first such
    /// line is kept for [`ChildProcess::stdout_noise`]; a line longer than
    /// `max_line` bytes ends the stream (see [`StdoutNotes::overflow`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn spawn(
        server: &str,
        command: &str,
        args: &[String],
        env: &BTreeMap<OsString, OsString>,
        supervisor: Option<&Supervisor>,
        redactor: &Redactor,
        grace: Duration,
        max_line: usize,
    ) -> Result<(ChildProcess, DuplexStream, ChildStdin), StartError> {
        let mut cmd = match supervisor {
            Some(s) => {
                let mut cmd = Command::new(&s.program);
                cmd.args(s.argv(grace, command, args));
                cmd
            }
            None => {
                let mut cmd = Command::new(command);
                cmd.args(args);
                cmd
            }
        };
        // Only the computed environment: the supervisor needs nothing of
        // ours (it reads no variable), and the server inherits it from there.
        cmd.env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // A supervisor is never killed outright (see `Drop`).
            .kill_on_drop(supervisor.is_none());
        let spawned = match supervisor {
            Some(_) => crate::supervise::spawn(cmd).await,
            None => cmd.spawn(),
        };
        let mut child = spawned.map_err(|e| match (e.kind(), supervisor) {
            (std::io::ErrorKind::NotFound, None) => StartError::NotFound {
                command: command.to_owned(),
            },
            (_, Some(s)) => StartError::Spawn {
                command: s.program.display().to_string(),
                message: format!("cannot start the supervisor: {e}"),
            },
            _ => StartError::Spawn {
                command: command.to_owned(),
                message: e.to_string(),
            },
        })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(StartError::Spawn {
                command: command.to_owned(),
                message: "stdin or stdout was not piped".to_owned(),
            });
        };
        let tail = StderrTail::default();
        let drain = child.stderr.take().map(|stderr| {
            let tail = tail.clone();
            let server = server.to_owned();
            let redactor = redactor.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match reader.read_until(b'\n', &mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let text = String::from_utf8_lossy(&buf);
                            let text = redactor.redact(text.trim_end());
                            let line = truncate(&text, TAIL_LINE_BYTES);
                            tracing::debug!(target: "core_agent::server_stderr", server = %server, "{line}");
                            tail.push(line);
                        }
                    }
                }
            })
        });
        let noise = Arc::new(StdoutNotes::default());
        let (reader, writer) = tokio::io::duplex(64 * 1024);
        tokio::spawn(filter_stdout(stdout, writer, noise.clone(), max_line));
        let pid = child.id();
        let supervised = supervisor.is_some();
        let (ended, exit) = watch::channel(None);
        tokio::spawn(async move {
            let how = match child.wait().await {
                Ok(status) => Ended::of(status, supervised),
                Err(_) => Ended::Code(-1),
            };
            let _ = ended.send(Some(how));
        });
        Ok((
            ChildProcess {
                pid,
                supervised,
                stderr: tail,
                drain,
                noise,
                exit,
                stopped: false,
                patience: grace + SUPERVISOR_SLACK,
            },
            reader,
            stdin,
        ))
    }

    /// Whether the process is a supervisor.
    pub(crate) fn supervised(&self) -> bool {
        self.supervised
    }

    /// The last lines of stderr. Once the child has exited, waits briefly for
    /// the drain to reach the end of the pipe, so a crash message is not lost.
    pub(crate) async fn stderr_lines(&mut self) -> Vec<String> {
        if self.exited().is_some()
            && let Some(drain) = self.drain.as_mut()
        {
            let _ = tokio::time::timeout(Duration::from_millis(500), drain).await;
        }
        self.stderr.lines()
    }

    /// Where the first non-protocol stdout line is kept, to read it later
    /// without the child.
    pub(crate) fn noise_handle(&self) -> Arc<StdoutNotes> {
        self.noise.clone()
    }

    /// The first line the child wrote to stdout that was not a protocol message.
    pub(crate) fn stdout_noise(&self) -> Option<String> {
        self.noise.noise()
    }

    /// Why stdout stopped being read, when a line was too long.
    pub(crate) fn stdout_overflow(&self) -> Option<String> {
        self.noise.overflow()
    }

    /// How the child ended, if it has.
    pub(crate) fn exited(&self) -> Option<Ended> {
        *self.exit.borrow()
    }

    /// A receiver that holds how the child ended, once it has.
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<Ended>> {
        self.exit.clone()
    }

    /// Waits up to `within` for the child to exit on its own.
    pub(crate) async fn wait_exit(&mut self, within: Duration) -> Option<Ended> {
        let mut exit = self.exit.clone();
        match tokio::time::timeout(within, exit.wait_for(Option::is_some)).await {
            Ok(Ok(how)) => *how,
            _ => None,
        }
    }

    /// Stops the child and everything in its process group: a short wait for
    /// it to exit on stdin EOF (the caller has closed stdin), then SIGTERM,
    /// then SIGKILL after `grace`. A supervisor does the same to the
    /// server's group on SIGTERM, and gets `grace` plus a little more.
    pub(crate) async fn terminate(&mut self, grace: Duration) {
        if self.wait_exit(Duration::from_millis(100)).await.is_none() {
            self.signal(Signal::SIGTERM);
            let patience = if self.supervised {
                grace + SUPERVISOR_SLACK
            } else {
                grace
            };
            if self.wait_exit(patience).await.is_none() {
                self.signal(Signal::SIGKILL);
                let _ = self.wait_exit(Duration::from_secs(5)).await;
            }
        }
        if !self.supervised {
            // Whatever the leader left behind in its group goes too.
            self.signal(Signal::SIGKILL);
        }
        self.stopped = true;
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // ESRCH (nothing left in the group) is the good case.
            let _ = killpg(Pid::from_raw(pid), signal);
        }
    }
}

/// What the current stdout line is, once its first non-blank byte is seen.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LineKind {
    Blank,
    Protocol,
    Noise,
}

/// How many bytes of `max_message_bytes` each JSON object or array of one
/// message must be worth: a message with more containers than
/// `max_line / BYTES_PER_CONTAINER` (32,768 at the default 16 MiB) is refused
/// like a long one. A parsed container costs far more than its text (an
/// empty content block is 25 bytes on the wire and about 1 KiB once parsed
/// and typed), so without this a 13 MB line of 500,000 empty blocks cost
/// over 500 MB; with it a message's parsed form stays within a small
/// multiple of `max_message_bytes`.
pub(crate) const BYTES_PER_CONTAINER: usize = 512;

/// The fewest containers a message may always hold, however small the limit.
const MIN_CONTAINERS: usize = 1024;

/// Counts the objects and arrays of one JSON text as it streams past, in
/// pieces, without parsing it (strings and their escapes are skipped).
#[derive(Debug, Default)]
struct Containers {
    count: usize,
    in_string: bool,
    escaped: bool,
}

impl Containers {
    fn feed(&mut self, piece: &[u8]) {
        let mut rest = piece;
        while !rest.is_empty() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    rest = &rest[1..];
                    continue;
                }
                match rest.iter().position(|b| matches!(b, b'"' | b'\\')) {
                    Some(i) => {
                        if rest[i] == b'"' {
                            self.in_string = false;
                        } else {
                            self.escaped = true;
                        }
                        rest = &rest[i + 1..];
                    }
                    None => return,
                }
            } else {
                match rest.iter().position(|b| matches!(b, b'"' | b'{' | b'[')) {
                    Some(i) => {
                        if rest[i] == b'"' {
                            self.in_string = true;
                        } else {
                            self.count += 1;
                        }
                        rest = &rest[i + 1..];
                    }
                    None => return,
                }
            }
        }
    }
}

/// Copies JSON lines from the child's stdout to `out` as they arrive (a line
/// is never held whole here); remembers the first line that is not JSON. A
/// line longer than `max_line` bytes, or with more objects and arrays than
/// `max_line / BYTES_PER_CONTAINER`, ends the copy before its end reaches
/// `out` (so it is never parsed): what is in `notes` says why, and `out`
/// ends, so the connection ends and the server is stopped. Memory stays
/// bounded whatever the child writes.
async fn filter_stdout(
    stdout: tokio::process::ChildStdout,
    mut out: DuplexStream,
    notes: Arc<StdoutNotes>,
    max_line: usize,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut kind = LineKind::Blank;
    let mut length = 0_usize;
    let mut noise = Vec::new();
    let max_containers = (max_line / BYTES_PER_CONTAINER).max(MIN_CONTAINERS);
    let mut containers = Containers::default();
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let newline = chunk.iter().position(|b| *b == b'\n');
        let take = newline.map_or(chunk.len(), |i| i + 1);
        let mut piece = &chunk[..take];
        length += newline.map_or(take, |i| i);
        if kind == LineKind::Blank
            && let Some(first) = piece.iter().position(|b| !b.is_ascii_whitespace())
        {
            kind = if matches!(piece[first], b'{' | b'[') {
                LineKind::Protocol
            } else {
                LineKind::Noise
            };
            piece = &piece[first..];
        }
        // Every line is bounded (noise is never held past its first bytes,
        // but a server that writes endlessly without a newline is broken).
        if length > max_line {
            let what = match kind {
                LineKind::Protocol => "sent a message",
                LineKind::Noise | LineKind::Blank => "wrote a non-protocol stdout line",
            };
            StdoutNotes::set(
                &notes.overflow,
                format!(
                    "{what} longer than max_message_bytes ({}), so it was stopped",
                    bytes(max_line)
                ),
            );
            break;
        }
        if kind == LineKind::Protocol {
            containers.feed(piece);
            if containers.count > max_containers {
                StdoutNotes::set(
                    &notes.overflow,
                    format!(
                        "sent a message with more than {max_containers} JSON objects and arrays \
                         (one per {BYTES_PER_CONTAINER} bytes of max_message_bytes, {}), so it was stopped",
                        bytes(max_line)
                    ),
                );
                break;
            }
        }
        match kind {
            LineKind::Protocol => {
                if out.write_all(piece).await.is_err() {
                    break;
                }
            }
            LineKind::Noise if noise.len() < TAIL_LINE_BYTES + 4 => {
                let room = TAIL_LINE_BYTES + 4 - noise.len();
                noise.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            LineKind::Noise | LineKind::Blank => {}
        }
        reader.consume(take);
        if newline.is_some() {
            if kind == LineKind::Noise {
                let text = String::from_utf8_lossy(&noise);
                StdoutNotes::set(&notes.noise, truncate(text.trim(), TAIL_LINE_BYTES));
            }
            kind = LineKind::Blank;
            length = 0;
            noise.clear();
            containers = Containers::default();
        }
    }
    // A last line without a newline (a message printed just before exit).
    if kind == LineKind::Noise {
        let text = String::from_utf8_lossy(&noise);
        StdoutNotes::set(&notes.noise, truncate(text.trim(), TAIL_LINE_BYTES));
    }
    let _ = out.shutdown().await;
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    format!("{}…", &s[..s.floor_char_boundary(max)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_cuts_on_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        // `é` is two bytes: a cut inside it keeps the character whole or not at all.
        assert_eq!(truncate("héllo", 2), "h…");
        assert_eq!(truncate("héllo", 3), "hé…");
        assert_eq!(truncate("", 0), "");
    }

    fn count(pieces: &[&str]) -> usize {
        let mut c = Containers::default();
        for piece in pieces {
            c.feed(piece.as_bytes());
        }
        c.count
    }

    #[test]
    fn containers_are_counted_outside_strings_across_pieces() {
        assert_eq!(count(&[r#"{"a":[1,{"b":[]}]}"#]), 4);
        // Brackets inside strings, escaped quotes and escaped backslashes.
        assert_eq!(count(&[r#"{"t":"{[\"{\\"}"#]), 1);
        assert_eq!(count(&[r#"{"t":"a\"#, r#""{"}"#]), 1);
        assert_eq!(count(&[r#"{"t":"a\\"#, r#""}"#, "[]"]), 2);
        // The same text in any cut counts the same.
        let text = r#"{"content":[{"type":"text","text":"x{"},{"type":"text","text":"\"["}]}"#;
        for cut in 0..text.len() {
            let (a, b) = text.as_bytes().split_at(cut);
            let mut c = Containers::default();
            c.feed(a);
            c.feed(b);
            assert_eq!(c.count, 4, "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn a_dense_message_is_stopped_before_its_end_reaches_the_reader() {
        use tokio::io::AsyncReadExt;
        let blocks = vec![r#"{"type":"text","text":""}"#; 5_000].join(",");
        let line =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{blocks}]}}}}\n");
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' '{}'", line.trim_end()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (mut reader, writer) = tokio::io::duplex(1 << 20);
        let notes = Arc::new(StdoutNotes::default());
        // 1 MiB allows 2,048 containers: the line has 5,002.
        filter_stdout(stdout, writer, notes.clone(), 1 << 20).await;
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        assert!(got.len() < line.len(), "the whole line was passed on");
        let why = notes.overflow().unwrap();
        assert!(
            why.contains("more than 2048 JSON objects and arrays"),
            "{why}"
        );
        let _ = child.wait().await;

        // The same blocks under the default limit pass whole.
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' '{}'", line.trim_end()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (mut reader, writer) = tokio::io::duplex(1 << 20);
        let notes = Arc::new(StdoutNotes::default());
        let copy = tokio::spawn(filter_stdout(stdout, writer, notes.clone(), 16 << 20));
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        copy.await.unwrap();
        assert_eq!(got.len(), line.len());
        assert!(notes.overflow().is_none());
        let _ = child.wait().await;
    }
}
