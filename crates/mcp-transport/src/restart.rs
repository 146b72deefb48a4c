//! A connected server whose connection ends unexpectedly (a stdio server
//! that crashed, an HTTP server whose session could not be re-initialized):
//! what is said about it, and the policy it is restarted under.

use std::time::Duration;

use crate::error::humanize;

/// When and how often a server whose connection ended is started again.
///
/// The `n`-th restart within `window` (counting from 0) waits
/// `first_delay × 2ⁿ`; once `max_restarts` restarts happened within
/// `window`, the server stays down. A restart that fails to start counts
/// as a restart.
///
/// ```
/// use std::time::Duration;
///
/// use core_agent_mcp_transport::{RestartPolicy, StartOptions};
///
/// let policy = RestartPolicy::default().with_first_delay(Duration::from_millis(100));
/// let options = StartOptions::default().with_restart(Some(policy));
/// assert_eq!(policy.delay(2), Duration::from_millis(400));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartPolicy {
    /// The wait before the first restart (1 s by default); each further
    /// restart within the window waits twice as long as the one before.
    pub first_delay: Duration,
    /// At most this many restarts within `window` (5 by default).
    pub max_restarts: usize,
    /// The window the restarts are counted in (10 minutes by default).
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            first_delay: Duration::from_secs(1),
            max_restarts: 5,
            window: Duration::from_secs(600),
        }
    }
}

impl RestartPolicy {
    /// The wait before the first restart.
    #[must_use]
    pub fn with_first_delay(mut self, delay: Duration) -> RestartPolicy {
        self.first_delay = delay;
        self
    }

    /// At most this many restarts within the window.
    #[must_use]
    pub fn with_max_restarts(mut self, restarts: usize) -> RestartPolicy {
        self.max_restarts = restarts;
        self
    }

    /// The window the restarts are counted in.
    #[must_use]
    pub fn with_window(mut self, window: Duration) -> RestartPolicy {
        self.window = window;
        self
    }

    /// The wait before a restart when `done` restarts already happened
    /// within the window.
    pub fn delay(&self, done: usize) -> Duration {
        let factor = 1u32.checked_shl(u32::try_from(done).unwrap_or(u32::MAX));
        factor
            .and_then(|f| self.first_delay.checked_mul(f))
            .unwrap_or(Duration::MAX)
    }
}

/// How a connected server is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// Its connection is up.
    Up,
    /// Its connection ended (the reason); it is being started again.
    Restarting(String),
    /// Its connection ended (the reason, with why it is not restarted).
    Down(String),
}

/// How one connection ended: what happened, and the last lines of stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ending {
    /// `exited with status 1`, `was killed by signal 9 (SIGKILL)`,
    /// `closed the connection`.
    pub(crate) how: String,
    /// The last lines a stdio server wrote to stderr.
    pub(crate) stderr: Vec<String>,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.how,
            crate::error::stderr_suffix(&self.stderr)
        )
    }
}
/// `10 min` for whole minutes, else as [`humanize`] says it.
pub(crate) fn window(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 60 && s % 60 == 0 && d.subsec_nanos() == 0 => format!("{} min", s / 60),
        _ => humanize(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_1_2_4_seconds_at_most_5_in_10_minutes() {
        let policy = RestartPolicy::default();
        let delays: Vec<u64> = (0..5).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16]);
        assert_eq!(policy.max_restarts, 5);
        assert_eq!(policy.window, Duration::from_secs(600));
        assert_eq!(window(policy.window), "10 min");
        assert_eq!(window(Duration::from_secs(90)), "90 s");
        // Never overflows.
        assert_eq!(policy.delay(200), Duration::MAX);
    }
}
