use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::{Result, SurveyError};

/// What a [`Root`](crate::Root) leaves out of every result, for callers
/// below the `creator` trust level: secrets, version control and
/// core-agent's own files.
///
/// [`Hidden::new`] hides [`Hidden::DEFAULT`] (`.env*`, `.agents`, `.git`)
/// and every file the ignore rules leave out (`.gitignore`, `.ignore`,
/// `.git/info/exclude`), also when named outright. [`Hidden::with_pattern`]
/// adds a pattern, [`Hidden::with_file`] a file (the audit trail, a session
/// database: its `-wal`, `-shm` and `-journal` siblings go with it).
///
/// A pattern without `/` is matched against the name of every component
/// (`.env*` hides `a/.env.local`); one with `/` against the path from the
/// root (`config/secrets.toml`). A hidden directory hides everything below
/// it. Through a root that hides, no symlink is followed when a file is
/// opened, so a link cannot lead to a hidden file.
///
/// ```
/// use core_agent_survey::Hidden;
///
/// let hidden = Hidden::new().with_pattern("*.pem")?;
/// assert!(hidden.is_hidden("certs/server.pem".as_ref()));
/// assert!(hidden.is_hidden(".agents/audit.jsonl".as_ref()));
/// assert!(!hidden.is_hidden("src/main.rs".as_ref()));
/// # Ok::<(), core_agent_survey::SurveyError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Hidden {
    patterns: Vec<String>,
    /// Patterns without `/`, matched against each component's name.
    names: GlobSet,
    /// Patterns with `/`, matched against each path from the root.
    paths: GlobSet,
    files: Vec<PathBuf>,
}

impl Default for Hidden {
    fn default() -> Self {
        Self::new()
    }
}

impl Hidden {
    /// The patterns hidden by default: `.env` files (`.env`, `.env.local`,
    /// …), the agents directory and the git directory.
    pub const DEFAULT: [&'static str; 3] = [".env*", ".agents", ".git"];

    /// [`Hidden::DEFAULT`], and the ignored files.
    pub fn new() -> Hidden {
        let mut hidden = Hidden {
            patterns: Vec::new(),
            names: GlobSet::empty(),
            paths: GlobSet::empty(),
            files: Vec::new(),
        };
        // The defaults are valid globs.
        let _valid = hidden.add(Self::DEFAULT.iter().map(|p| (*p).to_owned()));
        hidden
    }

    /// Also hides what `pattern` matches (a glob, as described above; a
    /// trailing `/` is dropped).
    pub fn with_pattern(mut self, pattern: &str) -> Result<Hidden> {
        self.add([pattern.to_owned()])?;
        Ok(self)
    }

    /// Also hides the file at `path` (absolute, or relative to the current
    /// directory), and the files named like it with a `-` suffix.
    pub fn with_file(mut self, path: impl Into<PathBuf>) -> Hidden {
        let path = path.into();
        // The root is canonical: so is the file, as far as it exists.
        let canonical = std::fs::canonicalize(&path).ok().or_else(|| {
            let (parent, name) = (path.parent()?, path.file_name()?);
            std::fs::canonicalize(parent).ok().map(|p| p.join(name))
        });
        self.files.push(canonical.unwrap_or(path));
        self
    }

    /// The patterns hidden, defaults first.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The files hidden.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Whether `rel`, a path relative to the root, is hidden by a pattern
    /// (the files and the ignore rules need the root: see
    /// [`Root::with_hidden`](crate::Root::with_hidden)).
    pub fn is_hidden(&self, rel: &Path) -> bool {
        let mut prefix = PathBuf::new();
        for part in rel.components() {
            let Component::Normal(name) = part else {
                continue;
            };
            prefix.push(name);
            if self.names.is_match(Path::new(name)) || self.paths.is_match(&prefix) {
                return true;
            }
        }
        false
    }

    /// Whether `abs` is one of the files hidden, or below one.
    pub(crate) fn is_hidden_file(&self, abs: &Path) -> bool {
        self.files.iter().any(|file| {
            if abs.starts_with(file) {
                return true;
            }
            // `store.db-wal`, `store.db-shm`, `store.db-journal`.
            let (a, f) = (
                abs.as_os_str().as_encoded_bytes(),
                file.as_os_str().as_encoded_bytes(),
            );
            a.len() > f.len()
                && a.starts_with(f)
                && a[f.len()] == b'-'
                && !a[f.len()..].contains(&b'/')
        })
    }

    fn add(&mut self, patterns: impl IntoIterator<Item = String>) -> Result<()> {
        for pattern in patterns {
            let trimmed = pattern
                .trim()
                .trim_start_matches("./")
                .trim_end_matches('/');
            if trimmed.is_empty() || trimmed.starts_with('/') {
                let e = bad(
                    &pattern,
                    "give a name (`*.pem`) or a path from the root (`config/secrets.toml`)",
                );
                return Err(e);
            }
            if let Err(e) = glob(trimmed) {
                return Err(bad(&pattern, &e.kind().to_string()));
            }
            self.patterns.push(trimmed.to_owned());
        }
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for pattern in &self.patterns {
            if let Ok(g) = glob(pattern) {
                if pattern.contains('/') {
                    paths.add(g);
                } else {
                    names.add(g);
                }
            }
        }
        match (names.build(), paths.build()) {
            (Ok(names), Ok(paths)) => {
                self.names = names;
                self.paths = paths;
                Ok(())
            }
            (Err(e), _) | (_, Err(e)) => Err(bad(&self.patterns.join(", "), &e.kind().to_string())),
        }
    }
}

fn glob(pattern: &str) -> std::result::Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

fn bad(pattern: &str, message: &str) -> SurveyError {
    SurveyError::BadPattern {
        what: "hidden path",
        pattern: pattern.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_hide_secrets_and_core_agents_files_at_any_depth() {
        let h = Hidden::new();
        for path in [
            ".env",
            ".env.local",
            "sub/.env",
            ".git/config",
            ".agents/audit.jsonl",
            ".agents",
        ] {
            assert!(h.is_hidden(Path::new(path)), "{path}");
        }
        for path in ["src/env.rs", "environment", "a/.gitignore", "README.md"] {
            assert!(!h.is_hidden(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn patterns_with_a_slash_are_anchored_and_files_take_their_siblings() {
        let h = Hidden::new()
            .with_pattern("config/secret*")
            .unwrap()
            .with_file("/srv/p/store.db");
        assert!(h.is_hidden(Path::new("config/secret.toml")));
        assert!(!h.is_hidden(Path::new("x/config/secret.toml")));
        assert!(h.is_hidden_file(Path::new("/srv/p/store.db-wal")));
        assert!(!h.is_hidden_file(Path::new("/srv/p/store.dbx")));
        assert!(Hidden::new().with_pattern("/abs").is_err());
    }
}
