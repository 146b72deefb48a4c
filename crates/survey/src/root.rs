use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::open::{Links, OpenError, open_beneath};
use crate::{Hidden, Result, SurveyError};

/// The directory every operation is confined to.
///
/// Built from a directory, which is canonicalized once. Every path given to
/// an operation is read relative to it (an absolute path is accepted when it
/// lies inside). [`Root::resolve`] refuses, with
/// [`SurveyError::OutsideRoot`]:
///
/// - `..` that leaves the root (`..` is resolved lexically: `a/..` is the
///   root even when `a` is a symlink);
/// - an absolute path outside the root;
/// - a path through a symlink whose target is outside the root (a dangling
///   symlink is judged by its target, read lexically).
///
/// Walks never follow symlinks (they are reported as symlinks), and every
/// file or directory read is opened beneath the root's own descriptor,
/// without following a symlink out of it (`openat2` with
/// `RESOLVE_BENEATH` on Linux, a walk of `O_NOFOLLOW` opens where it is
/// missing and on other Unixes): a symlink swapped in while an operation
/// runs cannot make it read a file outside.
///
/// [`Root::with_hidden`] also leaves [`Hidden`] paths out (for callers
/// below `creator`): they are refused with [`SurveyError::Hidden`] when
/// named, and left out of walks.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
    /// The root directory, open: every open starts from it.
    #[cfg(unix)]
    fd: Arc<std::fs::File>,
    hidden: Option<Arc<Hidden>>,
}

impl Root {
    /// The root at `dir`, which must be an existing directory.
    pub fn new(dir: impl AsRef<Path>) -> Result<Self> {
        let given = dir.as_ref();
        let bad = |source| SurveyError::BadRoot {
            root: given.to_path_buf(),
            source,
        };
        let dir = std::fs::canonicalize(given).map_err(bad)?;
        if !dir.is_dir() {
            return Err(bad(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        #[cfg(unix)]
        let fd = Arc::new(std::fs::File::open(&dir).map_err(bad)?);
        Ok(Self {
            dir,
            #[cfg(unix)]
            fd,
            hidden: None,
        })
    }

    /// The same root, leaving `hidden` out of every result.
    pub fn with_hidden(mut self, hidden: Hidden) -> Root {
        self.hidden = Some(Arc::new(hidden));
        self
    }

    /// What this root leaves out, when it hides anything.
    pub fn hidden(&self) -> Option<&Hidden> {
        self.hidden.as_deref()
    }

    /// The root directory, canonical.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The absolute path that `path` names inside the root, or
    /// [`SurveyError::OutsideRoot`]. The path need not exist; an empty path
    /// is the root itself. The result is lexically normal (no `.` or `..`)
    /// and starts with [`Root::path`].
    pub fn resolve(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let given = path.as_ref();
        let outside = || SurveyError::OutsideRoot {
            path: given.to_string_lossy().into_owned(),
            root: self.dir.clone(),
        };
        let mut abs = normalize(&self.dir.join(given));
        if !abs.starts_with(&self.dir) {
            // An absolute path may name the root through another spelling
            // (a symlinked /tmp, say): accept it when it exists inside.
            match std::fs::canonicalize(&abs) {
                Ok(real) if given.is_absolute() && real.starts_with(&self.dir) => abs = real,
                _ => return Err(outside()),
            }
        }
        // Every existing symlink on the way must stay inside.
        let mut at = self.dir.clone();
        let below = abs.strip_prefix(&self.dir).map_err(|_| outside())?;
        for part in below.components() {
            at.push(part);
            let Ok(meta) = std::fs::symlink_metadata(&at) else {
                // Nothing exists from here on: nothing to follow.
                break;
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            let inside = match std::fs::canonicalize(&at) {
                Ok(real) => real.starts_with(&self.dir),
                // Dangling (or a loop): judge the target as written.
                Err(_) => match (std::fs::read_link(&at), at.parent()) {
                    (Ok(target), Some(parent)) => {
                        normalize(&parent.join(target)).starts_with(&self.dir)
                    }
                    _ => false,
                },
            };
            if !inside {
                return Err(outside());
            }
        }
        if self.is_hidden(&abs) {
            return Err(SurveyError::Hidden {
                path: given.to_string_lossy().into_owned(),
            });
        }
        Ok(abs)
    }

    /// Whether `abs` (inside the root) is hidden from this root's callers:
    /// by a pattern or a file, through the symlinks on its way, or by the
    /// ignore rules.
    pub(crate) fn is_hidden(&self, abs: &Path) -> bool {
        let Some(hidden) = &self.hidden else {
            return false;
        };
        let real = std::fs::canonicalize(abs).ok();
        [Some(abs), real.as_deref()]
            .into_iter()
            .flatten()
            .any(|at| {
                let rel = at.strip_prefix(&self.dir).unwrap_or(at);
                hidden.is_hidden(rel) || hidden.is_hidden_file(at) || self.ignored(rel)
            })
    }

    /// Whether a walk would leave `rel` out by the ignore rules: those of
    /// each directory from the root down, the deepest deciding.
    fn ignored(&self, rel: &Path) -> bool {
        use ignore::Match;
        use ignore::gitignore::GitignoreBuilder;
        let parts: Vec<Component<'_>> = rel.components().collect();
        if parts.is_empty() {
            return false;
        }
        let abs = self.dir.join(rel);
        let is_dir = std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir());
        let mut dirs = vec![self.dir.clone()];
        for part in &parts[..parts.len() - 1] {
            let mut next = dirs[dirs.len() - 1].clone();
            next.push(part);
            dirs.push(next);
        }
        for dir in dirs.iter().rev() {
            let mut rules = GitignoreBuilder::new(dir);
            for file in [".gitignore", ".ignore"] {
                let _missing = rules.add(dir.join(file));
            }
            if *dir == self.dir {
                let _missing = rules.add(dir.join(".git/info/exclude"));
            }
            let Ok(rules) = rules.build() else {
                continue;
            };
            let below = abs.strip_prefix(dir).unwrap_or(rel);
            match rules.matched_path_or_any_parents(below, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// Opens `abs` (inside the root) for reading, beneath the root: a
    /// symlink on the way that leads out of it (or, through a root that
    /// hides, any symlink; with `links` [`Links::Never`], any symlink) is
    /// not followed.
    pub(crate) fn open(
        &self,
        abs: &Path,
        links: Links,
    ) -> std::result::Result<std::fs::File, OpenError> {
        let rel = abs
            .strip_prefix(&self.dir)
            .map_err(|_| OpenError::Outside)?;
        let links = if self.hidden.is_some() {
            Links::Never
        } else {
            links
        };
        #[cfg(unix)]
        return open_beneath(&self.fd, rel, links);
        #[cfg(not(unix))]
        return open_beneath(&self.dir, rel, links);
    }

    /// `abs` relative to the root, `/`-separated and lossy for names that
    /// are not UTF-8; `.` for the root itself.
    pub fn relative(&self, abs: &Path) -> String {
        display(abs.strip_prefix(&self.dir).unwrap_or(abs))
    }
}

/// A relative path as `a/b/c` (lossy), `.` when empty.
pub(crate) fn display(rel: &Path) -> String {
    let mut out = String::new();
    for part in rel.components() {
        if let Component::Normal(name) = part {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&name.to_string_lossy());
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// `path` without `.` and with each `..` removing the component before it
/// (never above the filesystem root).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        let n = |s: &str| normalize(Path::new(s)).display().to_string();
        assert_eq!(n("/a/./b/../c"), "/a/c");
        assert_eq!(n("/a/../../.."), "/");
        assert_eq!(n("/a/b/"), "/a/b");
    }

    #[test]
    fn display_is_slash_separated() {
        assert_eq!(display(Path::new("")), ".");
        assert_eq!(display(Path::new("a/b")), "a/b");
    }
}
