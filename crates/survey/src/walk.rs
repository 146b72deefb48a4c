//! The walker every operation shares: ripgrep's rules, confined.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use serde::Serialize;

use crate::{Cancel, Result, Root};

/// A walker from `start` with ripgrep's ignore rules: `.gitignore` (inside a
/// git repository or not), `.git/info/exclude`, `.ignore`, and those of the
/// parent directories; hidden files are included, `.git` is skipped, the
/// user's global gitignore is not read (the answer must not depend on whose
/// machine runs it), symlinks are never followed below `start`, and what
/// `root` hides is left out (a hidden directory is not entered).
pub(crate) fn walker(root: &Root, start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    let dir = root.path().to_path_buf();
    let hidden = root.hidden().cloned();
    builder
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            entry.file_name() != ".git"
                && !hidden.as_ref().is_some_and(|hidden| {
                    let rel = entry.path().strip_prefix(&dir).unwrap_or(entry.path());
                    hidden.is_hidden(rel) || hidden.is_hidden_file(entry.path())
                })
        });
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

/// Walks `builder` on all threads. Each thread gets a state from `init`,
/// `visit` sees every readable entry (unreadable ones are left out, as
/// ripgrep does), and the states come back when the walk ends, or
/// `Cancelled` once `cancel` is set.
pub(crate) fn parallel<S, I, V>(
    builder: &WalkBuilder,
    cancel: &Cancel,
    init: I,
    visit: V,
) -> Result<Vec<S>>
where
    S: Send,
    I: Fn() -> S + Sync,
    V: Fn(&mut S, &DirEntry) + Sync,
{
    let states = Mutex::new(Vec::new());
    let mut threads = Threads {
        init: &init,
        visit: &visit,
        states: &states,
        cancel,
    };
    builder.build_parallel().visit(&mut threads);
    cancel.check()?;
    Ok(states.into_inner().unwrap_or_else(PoisonError::into_inner))
}

struct Threads<'a, S, I, V> {
    init: &'a I,
    visit: &'a V,
    states: &'a Mutex<Vec<S>>,
    cancel: &'a Cancel,
}

impl<'a, S, I, V> ParallelVisitorBuilder<'a> for Threads<'a, S, I, V>
where
    S: Send,
    I: Fn() -> S + Sync,
    V: Fn(&mut S, &DirEntry) + Sync,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Thread {
            state: Some((self.init)()),
            visit: self.visit,
            states: self.states,
            cancel: self.cancel,
        })
    }
}

struct Thread<'a, S: Send, V> {
    state: Option<S>,
    visit: &'a V,
    states: &'a Mutex<Vec<S>>,
    cancel: &'a Cancel,
}

impl<S, V> ParallelVisitor for Thread<'_, S, V>
where
    S: Send,
    V: Fn(&mut S, &DirEntry) + Sync,
{
    fn visit(&mut self, entry: std::result::Result<DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        if let (Ok(entry), Some(state)) = (entry, self.state.as_mut()) {
            (self.visit)(state, &entry);
        }
        WalkState::Continue
    }
}

impl<S: Send, V> Drop for Thread<'_, S, V> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.states
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(state);
        }
    }
}

/// Whether `entry` is a regular file: not a symlink, except the walk's own
/// start, which was checked by [`Root::resolve`](crate::Root::resolve).
pub(crate) fn is_file(entry: &DirEntry) -> bool {
    match entry.file_type() {
        Some(t) if t.is_file() => true,
        Some(t) if t.is_symlink() && entry.depth() == 0 => {
            std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file())
        }
        _ => false,
    }
}

/// Keeps the `max` smallest items of `items`, sorted, once it holds twice
/// as many (so memory stays bounded and sorting stays rare).
pub(crate) fn keep_first<T: Ord>(items: &mut Vec<T>, max: usize, finished: bool) {
    if finished || items.len() >= 2 * max.max(512) {
        items.sort_unstable();
        items.truncate(max);
    }
}
