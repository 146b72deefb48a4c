//! The supervisor: a small process between the host and a stdio server, so
//! that nothing the server started outlives the host, even when the host is
//! killed with `kill -9`.
//!
//! The host starts `<program> <args…> <parent-pid> <grace-ms> <command>
//! [<command-args>…]` (see [`Supervisor`]); that program calls [`run`] with
//! the [`Plan`] parsed from the words after its own arguments. The
//! `core-agent` binary does it in its hidden `__supervise` subcommand; a
//! library user with a binary of their own can do the same:
//!
//! ```no_run
//! use core_agent_mcp_transport::supervise::{self, Plan};
//!
//! let mut args = std::env::args_os().skip(1);
//! if args.next().is_some_and(|a| a == supervise::SUBCOMMAND) {
//!     let exit = match Plan::parse(args) {
//!         Ok(plan) => supervise::run(&plan),
//!         Err(e) => supervise::Exit::usage(e),
//!     };
//!     if let Some(message) = &exit.message {
//!         eprintln!("{message}");
//!     }
//!     std::process::exit(exit.code);
//! }
//! ```
//!
//! The supervisor, in order:
//! - catches `SIGCHLD`, `SIGTERM`, `SIGINT` and `SIGHUP` (on a
//!   single-threaded Tokio runtime; a handler, unlike a blocked signal
//!   mask, is not inherited by the server);
//! - on Linux asks for `SIGTERM` when its parent dies (`PR_SET_PDEATHSIG`)
//!   and becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`), so the
//!   server's orphaned descendants become its children; elsewhere it polls
//!   its parent twice a second instead;
//! - checks that its parent is still the process that started it (a host
//!   that died before the parent-death signal was armed is noticed here);
//! - starts the server in a process group of its own, with stdin, stdout and
//!   stderr passed through;
//! - when the server exits, or on `SIGTERM` (the host's shutdown, or the
//!   host's death), stops the group: `SIGTERM`, the grace period, `SIGKILL`;
//!   on Linux also every reparented descendant that left the group; then
//!   reaps every child (`waitpid` until `ECHILD`) and exits with the
//!   server's status (`128 + N` when signal `N` killed it).
//!
//! It uses no `unsafe` code: every call is one of `nix`'s safe wrappers.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The `core-agent` subcommand that runs [`run`].
pub const SUBCOMMAND: &str = "__supervise";

/// Exit code when the server's command does not exist.
pub const NOT_FOUND: i32 = 127;
/// Exit code when the server's command exists but cannot be started.
pub const CANNOT_START: i32 = 126;
/// Exit code when the supervisor was started wrongly, or its parent was gone.
pub const USAGE: i32 = 2;

/// How the host launches a supervisor: a program and the arguments that
/// select its supervisor mode, before the supervisor's own words.
/// [`Supervisor::current_exe`] for a binary that handles [`SUBCOMMAND`]
/// like `core-agent` does; [`Supervisor::new`] for another program.
///
/// ```
/// use core_agent_mcp_transport::Supervisor;
///
/// let supervisor = Supervisor::new("/usr/local/bin/my-host").with_args(vec!["supervise".into()]);
/// assert_eq!(supervisor.args.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Supervisor {
    /// The program (usually the host's own binary).
    pub program: PathBuf,
    /// The arguments that make it a supervisor (for `core-agent`: `__supervise`).
    pub args: Vec<OsString>,
}

impl Supervisor {
    /// `program`, with no arguments before the supervisor's own words: a
    /// binary that is nothing but a supervisor.
    pub fn new(program: impl Into<PathBuf>) -> Supervisor {
        Supervisor {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// The arguments that make the program a supervisor.
    #[must_use]
    pub fn with_args(mut self, args: Vec<OsString>) -> Supervisor {
        self.args = args;
        self
    }

    /// The running binary, with [`SUBCOMMAND`]: for a binary that handles
    /// `__supervise` like `core-agent` does.
    pub fn current_exe() -> io::Result<Supervisor> {
        Ok(Supervisor {
            program: std::env::current_exe()?,
            args: vec![SUBCOMMAND.into()],
        })
    }

    /// The full argument list after the program for supervising `command`.
    pub(crate) fn argv(&self, grace: Duration, command: &str, args: &[String]) -> Vec<OsString> {
        let mut argv = self.args.clone();
        argv.push(std::process::id().to_string().into());
        argv.push(grace.as_millis().to_string().into());
        argv.push(command.into());
        argv.extend(args.iter().map(OsString::from));
        argv
    }
}

/// What a supervisor runs: parsed from `<parent-pid> <grace-ms> <command>
/// [<args>…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The pid of the process that started the supervisor; it exits at once
    /// when its parent is another (`0`: do not check).
    pub parent: u32,
    /// Between `SIGTERM` and `SIGKILL` when it stops the server.
    pub grace: Duration,
    /// The server's command.
    pub command: OsString,
    /// The server's arguments.
    pub args: Vec<OsString>,
}

impl Plan {
    /// Reads `<parent-pid> <grace-ms> <command> [<args>…]`.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Plan, String> {
        let mut args = args.into_iter();
        let usage = "usage: __supervise <parent-pid> <grace-ms> <command> [<args>…]";
        let mut number = |what: &str| -> Result<u64, String> {
            let word = args
                .next()
                .ok_or_else(|| format!("{usage}: missing {what}"))?;
            word.to_str()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| format!("{usage}: {what} is not a number: {word:?}"))
        };
        let parent = u32::try_from(number("<parent-pid>")?).map_err(|e| e.to_string())?;
        let grace = Duration::from_millis(number("<grace-ms>")?);
        let command = args
            .next()
            .ok_or_else(|| format!("{usage}: missing <command>"))?;
        Ok(Plan {
            parent,
            grace,
            command,
            args: args.collect(),
        })
    }
}

/// How a supervisor ended: the exit code for the process, and a message
/// for its stderr (the caller prints it; this crate never prints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// The server's exit code, `128 + N` when signal `N` ended it, or one of
    /// [`NOT_FOUND`], [`CANNOT_START`], [`USAGE`].
    pub code: i32,
    /// What went wrong, when the supervisor itself failed.
    pub message: Option<String>,
}

impl Exit {
    /// A supervisor that was started wrongly.
    pub fn usage(message: String) -> Exit {
        Exit {
            code: USAGE,
            message: Some(format!("{SUBCOMMAND}: {message}")),
        }
    }
}

/// Runs the server of `plan` under supervision until it and everything it
/// started are gone (see the [module docs](self)). Blocks; call it from the
/// main thread of a process that runs nothing else (it runs a
/// single-threaded Tokio runtime of its own).
pub fn run(plan: &Plan) -> Exit {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(supervise(plan)),
        Err(e) => Exit::usage(format!("cannot start a runtime: {e}")),
    }
}

async fn supervise(plan: &Plan) -> Exit {
    use tokio::signal::unix::{SignalKind, signal};
    // Caught from here on: none of them kills the supervisor any more. A
    // handler (unlike a blocked mask) is not inherited by the server.
    let kinds = [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
        SignalKind::child(),
    ];
    let mut streams = Vec::new();
    for kind in kinds {
        match signal(kind) {
            Ok(stream) => streams.push(stream),
            Err(e) => return Exit::usage(format!("cannot catch signals: {e}")),
        }
    }
    let [mut term, mut int, mut hup, mut chld] = match <[_; 4]>::try_from(streams) {
        Ok(s) => s,
        Err(_) => return Exit::usage("cannot catch signals".to_owned()),
    };
    if let Err(e) = arm_parent_death() {
        return Exit::usage(format!("cannot watch the parent process: {e}"));
    }
    let parent = Pid::from_raw(i32::try_from(plan.parent).unwrap_or(0));
    if plan.parent != 0 && nix::unistd::getppid() != parent {
        return Exit::usage(format!(
            "the process that started it ({}) is gone",
            plan.parent
        ));
    }
    let spawned = std::process::Command::new(&plan.command)
        .args(&plan.args)
        .process_group(0)
        .spawn();
    let server = match spawned {
        Ok(child) => Pid::from_raw(i32::try_from(child.id()).unwrap_or(0)),
        Err(e) => {
            let code = if e.kind() == io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_START
            };
            return Exit {
                code,
                message: Some(format!(
                    "{SUBCOMMAND}: cannot start `{}`: {e}",
                    plan.command.to_string_lossy()
                )),
            };
        }
    };
    // Elsewhere than Linux the parent is polled; while stopping, the group is.
    let polls_parent = !cfg!(target_os = "linux") && plan.parent != 0;
    let mut tick = tokio::time::interval(if polls_parent {
        Duration::from_millis(500)
    } else {
        Duration::from_millis(50)
    });
    // Ticks missed while nothing was stopping are not made up in a burst.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut status: Option<i32> = None;
    let mut stop: Option<Stop> = None;
    loop {
        let ticking = polls_parent || stop.is_some();
        let asked = tokio::select! {
            _ = term.recv() => true,
            _ = int.recv() => true,
            _ = hup.recv() => true,
            _ = chld.recv() => false,
            _ = tick.tick(), if ticking => {
                polls_parent && nix::unistd::getppid() != parent
            }
        };
        reap(server, &mut status);
        if stop.is_none() && (asked || status.is_some()) {
            stop = Some(Stop::begin(server, plan.grace));
        }
        if let Some(stop) = stop.as_mut() {
            stop.escalate(server);
            if status.is_some() && stop.finished(server) {
                break;
            }
        }
    }
    Exit {
        code: status.unwrap_or(1),
        message: None,
    }
}

/// Stopping the server's group: `SIGTERM` sent at the start, `SIGKILL`
/// once the grace has passed.
struct Stop {
    deadline: Instant,
    /// Past this, give up on stragglers (a process stuck in the kernel).
    give_up: Instant,
    killed: bool,
}

impl Stop {
    fn begin(server: Pid, grace: Duration) -> Stop {
        signal_all(server, Signal::SIGTERM);
        let now = Instant::now();
        Stop {
            deadline: now + grace,
            give_up: now + grace + Duration::from_secs(5),
            killed: false,
        }
    }

    fn escalate(&mut self, server: Pid) {
        if !self.killed && Instant::now() >= self.deadline {
            signal_all(server, Signal::SIGKILL);
            self.killed = true;
        }
    }

    /// Whether nothing of the server is left: no process in its group and,
    /// on Linux, no child of the supervisor (reparented descendants included).
    fn finished(&self, server: Pid) -> bool {
        if Instant::now() >= self.give_up {
            return true;
        }
        let group_gone = killpg(server, None) == Err(Errno::ESRCH);
        let children_gone = !cfg!(target_os = "linux")
            || matches!(
                waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)),
                Err(Errno::ECHILD)
            );
        group_gone && children_gone
    }
}

/// Sends `signal` to the server's group and to every child of the
/// supervisor (descendants that left the group were reparented to it).
fn signal_all(server: Pid, signal: Signal) {
    let _ = killpg(server, signal);
    for child in children() {
        let _ = kill(child, signal);
    }
}

/// Reaps every child that has exited; keeps the server's status.
fn reap(server: Pid, status: &mut Option<i32>) {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == server => *status = Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == server => {
                *status = Some(128 + signal as i32);
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[cfg(target_os = "linux")]
fn arm_parent_death() -> nix::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
    nix::sys::prctl::set_child_subreaper(true)
}

#[cfg(not(target_os = "linux"))]
fn arm_parent_death() -> nix::Result<()> {
    Ok(())
}

/// The supervisor's children, from `/proc/self/task/*/children` (Linux;
/// empty elsewhere or when the kernel does not provide the file).
fn children() -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .map(Pid::from_raw)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// How a supervised (or plain) stdio server ended, read from the exit
/// status of the process the host started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited with this code.
    Code(i32),
    /// This signal ended it.
    Signal(i32),
}

impl Ended {
    /// A supervisor reports a server killed by signal `N` as `128 + N`.
    pub(crate) fn of(status: ExitStatus, supervised: bool) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) if supervised && (129..=128 + 64).contains(&code) => {
                Ended::Signal(code - 128)
            }
            (Some(code), _) => Ended::Code(code),
            (None, Some(signal)) => Ended::Signal(signal),
            (None, None) => Ended::Code(-1),
        }
    }

    fn signal_name(signal: i32) -> String {
        match Signal::try_from(signal) {
            Ok(s) => format!("{signal} ({})", s.as_str()),
            Err(_) => signal.to_string(),
        }
    }

    /// As a start error says it: `exit status: 3`, `signal: 9 (SIGKILL)`.
    pub(crate) fn status(self) -> String {
        match self {
            Ended::Code(code) => format!("exit status: {code}"),
            Ended::Signal(signal) => format!("signal: {}", Ended::signal_name(signal)),
        }
    }

    /// As a sentence: `exited with status 3`, `was killed by signal 9 (SIGKILL)`.
    pub(crate) fn sentence(self) -> String {
        match self {
            Ended::Code(code) => format!("exited with status {code}"),
            Ended::Signal(signal) => {
                format!("was killed by signal {}", Ended::signal_name(signal))
            }
        }
    }
}

/// Spawns a supervisor from one thread that lives as long as the process:
/// the parent-death signal fires when the *thread* that forked the child
/// ends, and a runtime's worker or blocking thread may end long before the host.
pub(crate) async fn spawn(command: tokio::process::Command) -> io::Result<tokio::process::Child> {
    use std::sync::OnceLock;
    use std::sync::mpsc;

    type Job = (
        tokio::process::Command,
        tokio::runtime::Handle,
        tokio::sync::oneshot::Sender<io::Result<tokio::process::Child>>,
    );
    static SPAWNER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("core-agent-spawner".to_owned())
            .spawn(move || {
                for (mut command, runtime, reply) in queue {
                    // The child is registered with the caller's runtime.
                    let _entered = runtime.enter();
                    let _ = reply.send(command.spawn());
                }
            })
            .ok()
            .map(|_| jobs)
    });
    let Some(spawner) = spawner else {
        return Err(io::Error::other("cannot start the spawner thread"));
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    spawner
        .send((command, tokio::runtime::Handle::current(), reply))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| io::Error::other("the spawner thread dropped the request"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_parent_grace_command_and_arguments() {
        let words = ["42", "3000", "npx", "-y", "--flag", "server"].map(OsString::from);
        let plan = Plan::parse(words).unwrap();
        assert_eq!(plan.parent, 42);
        assert_eq!(plan.grace, Duration::from_secs(3));
        assert_eq!(plan.command, "npx");
        assert_eq!(plan.args, ["-y", "--flag", "server"].map(OsString::from));
        assert!(
            Plan::parse(["x".into()])
                .unwrap_err()
                .contains("not a number")
        );
        assert!(
            Plan::parse(["1".into(), "2".into()])
                .unwrap_err()
                .contains("missing <command>")
        );
    }

    #[test]
    fn the_supervisor_command_line_round_trips() {
        let supervisor = Supervisor {
            program: "core-agent".into(),
            args: vec![SUBCOMMAND.into()],
        };
        let argv = supervisor.argv(
            Duration::from_millis(250),
            "server",
            &["--port".to_owned(), "1".to_owned()],
        );
        assert_eq!(argv[0], SUBCOMMAND);
        let plan = Plan::parse(argv.into_iter().skip(1)).unwrap();
        assert_eq!(plan.parent, std::process::id());
        assert_eq!(plan.grace, Duration::from_millis(250));
        assert_eq!(plan.command, "server");
        assert_eq!(plan.args, ["--port", "1"].map(OsString::from));
    }

    #[test]
    fn a_supervisor_reports_a_signal_as_128_plus_n() {
        use std::os::unix::process::ExitStatusExt;
        let code = |c: i32| ExitStatus::from_raw(c << 8);
        assert_eq!(Ended::of(code(1), true), Ended::Code(1));
        assert_eq!(Ended::of(code(137), true), Ended::Signal(9));
        assert_eq!(Ended::of(code(137), false), Ended::Code(137));
        assert_eq!(Ended::of(ExitStatus::from_raw(9), false), Ended::Signal(9));
        assert_eq!(Ended::Signal(9).status(), "signal: 9 (SIGKILL)");
        assert_eq!(Ended::Code(3).status(), "exit status: 3");
        assert_eq!(Ended::Code(1).sentence(), "exited with status 1");
        assert_eq!(
            Ended::Signal(15).sentence(),
            "was killed by signal 15 (SIGTERM)"
        );
    }
}
