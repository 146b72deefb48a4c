//! Ctrl-C and SIGTERM: caught from before the first server is spawned
//! until the last one is stopped, so a run always stops its servers.

/// SIGINT and SIGTERM, caught from the moment they are installed: while
/// they are, neither kills the process, so it can stop its servers first.
pub(crate) struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(crate) fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the next signal, with its name.
    pub(crate) async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "interrupted",
            _ = self.terminate.recv() => "terminated",
        }
    }
}
