use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cancellation flag, shared by cloning: one clone cancels, every
/// operation holding another stops at its next check and returns
/// [`SurveyError::Cancelled`](crate::SurveyError::Cancelled).
///
/// Operations check it before and after compiling a pattern, at every
/// entry of a walk, at every file, and at every block a search reads (64
/// KiB), so an operation stops within one block's worth of work.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    /// Tests: the flag sets itself at this many checks, and counts them.
    #[cfg(test)]
    trip: Option<Arc<(u64, std::sync::atomic::AtomicU64)>>,
}

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag; every holder sees it.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        #[cfg(test)]
        if let Some(trip) = &self.trip
            && trip.1.fetch_add(1, Ordering::Relaxed) + 1 >= trip.0
        {
            self.cancel();
        }
        self.flag.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once the flag is set.
    pub(crate) fn check(&self) -> crate::Result<()> {
        if self.is_cancelled() {
            Err(crate::SurveyError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// A flag that sets itself at its `checks`-th check (as if the caller
    /// cancelled right then), so tests can count the work done after it.
    #[cfg(test)]
    pub(crate) fn after(checks: u64) -> Self {
        Self {
            flag: Arc::default(),
            trip: Some(Arc::new((checks, std::sync::atomic::AtomicU64::new(0)))),
        }
    }

    /// How many times the flag was looked at (tests: a measure of work).
    #[cfg(test)]
    pub(crate) fn checks(&self) -> u64 {
        self.trip
            .as_ref()
            .map_or(0, |trip| trip.1.load(Ordering::Relaxed))
    }
}
