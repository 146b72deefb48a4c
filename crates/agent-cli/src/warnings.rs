//! The catalog's and config's warnings on stderr: each distinct warning
//! once per process, whenever it is first known (at start, and in `serve`
//! after every rebuild of the catalog), unless `--quiet`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use core_agent_host::Host;

/// The warnings this process has printed.
#[derive(Debug, Default)]
pub(crate) struct WarningLog {
    quiet: bool,
    printed: Mutex<HashSet<String>>,
}

impl WarningLog {
    pub(crate) fn new(quiet: bool) -> WarningLog {
        WarningLog {
            quiet,
            printed: Mutex::default(),
        }
    }

    /// Prints the host's warnings not printed before.
    pub(crate) fn print_new(&self, host: &Host) {
        for warning in self.fresh(host.warnings()) {
            errln!("core-agent: {}", crate::clean(&warning));
        }
    }

    /// The warnings of `now` not seen before, now marked seen; none when quiet.
    fn fresh(&self, now: Vec<String>) -> Vec<String> {
        if self.quiet {
            return Vec::new();
        }
        let Ok(mut printed) = self.printed.lock() else {
            return Vec::new();
        };
        now.into_iter()
            .filter(|w| printed.insert(w.clone()))
            .collect()
    }

    /// Prints the host's warnings once every server's start has ended, then
    /// the new ones after each change of the catalog, until the host's
    /// servers are stopped (for `serve`).
    pub(crate) fn follow(self: Arc<Self>, host: Arc<Host>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut changes = host.subscribe();
            changes.borrow_and_update();
            host.wait_all().await;
            loop {
                self.print_new(&host);
                if changes.changed().await.is_err() {
                    return;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warning_is_printed_once_and_none_when_quiet() {
        let log = WarningLog::new(false);
        let w = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(log.fresh(w(&["a", "b"])), w(&["a", "b"]));
        assert_eq!(log.fresh(w(&["a", "b", "c"])), w(&["c"]));
        assert!(log.fresh(w(&["b"])).is_empty());
        let quiet = WarningLog::new(true);
        assert!(quiet.fresh(w(&["a"])).is_empty());
    }
}
