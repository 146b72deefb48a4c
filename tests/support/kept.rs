//! A server process that never outlives the test process, even one killed
//! with SIGKILL: started through `setpriv --pdeathsig KILL` from a thread
//! kept alive until the process has been stopped and reaped.
//!
//! The parent-death signal fires when the *thread* that forked the child
//! ends, not only the process; a fixture created on a thread that ends
//! first (a blocking pool's worker, say) would lose its server. So each
//! server is forked by a thread of its own, which only waits to be released
//! once the server is gone.

use std::process::{Child, Command};
use std::sync::mpsc;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The `setpriv` that starts every kept process (util-linux, essential on
/// Debian).
pub(crate) fn setpriv() -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL"]);
    cmd
}

/// A child started by [`Kept::spawn`]: the forking thread lives as long as
/// this value.
#[derive(Debug)]
pub(crate) struct Kept {
    child: Child,
    /// Dropped once the child is reaped, which ends the forking thread.
    release: Option<mpsc::Sender<()>>,
}

impl Kept {
    /// Spawns `cmd` (a [`setpriv`] command, so it dies with its forking
    /// thread) in its own process group, from a thread of its own.
    pub(crate) fn spawn(mut cmd: Command) -> std::io::Result<Kept> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let (spawned_tx, spawned) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("kept-server".to_owned())
            .spawn(move || {
                let ok = match cmd.spawn() {
                    Ok(child) => spawned_tx.send(Ok(child)).is_ok(),
                    Err(e) => {
                        let _ = spawned_tx.send(Err(e));
                        false
                    }
                };
                if ok {
                    // Blocks until the `Kept` drops its sender.
                    let _ = released.recv();
                }
            })?;
        let child = spawned
            .recv()
            .map_err(|_| std::io::Error::other("the forking thread ended"))??;
        Ok(Kept {
            child,
            release: Some(release),
        })
    }

    /// The child's pid (the server's own: `setpriv` execs it).
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether it has not exited yet.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` to the child alone.
    pub(crate) fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), signal);
    }

    /// Waits up to `limit` for the child to exit; true when it did.
    pub(crate) fn wait_for_exit(&mut self, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return true,
                Ok(None) if std::time::Instant::now() >= deadline => return false,
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
    }

    /// Kills the child's whole process group and reaps the child. Once the
    /// child was reaped, its group is signalled only while members of it
    /// live on (a group id is not handed out again while it has members, so
    /// no other process is hit).
    pub(crate) fn kill_group(&mut self) {
        let pgid = self.pid();
        let reaped = !matches!(self.child.try_wait(), Ok(None));
        if !reaped || !crate::group_members(pgid).is_empty() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.kill_group();
        // Only now may the forking thread end (and its death signal fire).
        self.release.take();
    }
}
