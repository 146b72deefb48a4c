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

/// Copies JSON lines from the child's stdout to `out` as they arrive (a line
/// is never held whole here); remembers the first line that is not JSON. A
/// line longer than `max_line` bytes ends the copy: what is in `notes` says
/// why, and `out` ends, so the connection ends and the server is stopped.
/// Memory stays bounded whatever the child writes.
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
}
