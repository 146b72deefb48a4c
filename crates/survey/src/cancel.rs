use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cancellation flag, shared by cloning: one clone cancels, every
/// operation holding another stops at its next check and returns
/// [`SurveyError::Cancelled`](crate::SurveyError::Cancelled).
///
/// Walks check it at every entry and searches at every matching line, so
/// an operation stops within one file's worth of work.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag; every holder sees it.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once the flag is set.
    pub(crate) fn check(&self) -> crate::Result<()> {
        if self.is_cancelled() {
            Err(crate::SurveyError::Cancelled)
        } else {
            Ok(())
        }
    }
}
