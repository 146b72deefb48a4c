//! The walker every operation shares: ripgrep's rules, confined.

use std::path::Path;

use ignore::WalkBuilder;
use serde::Serialize;

/// A walker from `start` with ripgrep's ignore rules: `.gitignore` (inside a
/// git repository or not), `.git/info/exclude`, `.ignore`, and those of the
/// parent directories; hidden files are included, `.git` is skipped, the
/// user's global gitignore is not read (the answer must not depend on whose
/// machine runs it), and symlinks are never followed below `start`.
pub(crate) fn walker(start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// What an entry is, as the walk sees it (symlinks are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symlink, whatever it points to.
    Symlink,
    /// A socket, a FIFO, a device.
    Other,
}

impl EntryType {
    pub(crate) fn of(file_type: Option<std::fs::FileType>) -> Self {
        match file_type {
            Some(t) if t.is_symlink() => Self::Symlink,
            Some(t) if t.is_dir() => Self::Dir,
            Some(t) if t.is_file() => Self::File,
            _ => Self::Other,
        }
    }
}
