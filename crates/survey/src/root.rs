use std::path::{Component, Path, PathBuf};

use crate::{Result, SurveyError};

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
/// Walks never follow symlinks (they are reported as symlinks), so nothing
/// below a checked path leaves the root either. The checks are made when the
/// operation starts; a tree changed while it runs is not re-checked.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
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
        Ok(Self { dir })
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
        Ok(abs)
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
