use std::fmt;
use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why the permissions config could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file exists but could not be read.
    #[error("{}: cannot read the file: {source}; check its permissions", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not valid JSON.
    #[error("{}:{line}:{column}: invalid JSON: {message}; fix the syntax at that position", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// One or more fields are wrong.
    #[error("{}", Problems(problems))]
    Invalid {
        /// Every problem, in file order.
        problems: Vec<Problem>,
    },
}

/// One wrong field: the file, the JSON pointer, what is wrong and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub path: PathBuf,
    /// JSON pointer to the field (`/permissions/mode`).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}; {}",
            self.path.display(),
            self.pointer,
            self.message,
            self.fix
        )
    }
}

struct Problems<'a>(&'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}
