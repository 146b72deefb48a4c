use crate::list_dir::{ListDirInput, ListDirOutput};
use crate::{Cancel, Limits, Result, Root};

/// The survey tools on one [`Root`], under one set of [`Limits`].
///
/// Every operation is read-only, synchronous, and checks its [`Cancel`]
/// while it walks.
#[derive(Debug, Clone)]
pub struct Survey {
    root: Root,
    limits: Limits,
}

impl Survey {
    /// The tools on `root`, with the default limits.
    pub fn new(root: Root) -> Self {
        Self::with_limits(root, Limits::default())
    }

    /// The tools on `root`, with `limits`.
    pub fn with_limits(root: Root, limits: Limits) -> Self {
        Self { root, limits }
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `list_dir`: a directory's entries to `depth`, directories first, then
    /// by name, ignore files honoured.
    pub fn list_dir(&self, input: &ListDirInput, cancel: &Cancel) -> Result<ListDirOutput> {
        crate::list_dir::list_dir(&self.root, &self.limits, input, cancel)
    }
}
