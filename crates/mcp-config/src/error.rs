use std::fmt;
use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A config file exists but could not be read.
    #[error("{}: cannot read the file: {source}; check its permissions", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A config file is not valid JSON.
    #[error("{}:{line}:{column}: invalid JSON: {message}; fix the syntax at that position", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// A server to add has the name of one the file already has.
    #[error("{}: {pointer}: a server named `{server}` already exists; remove it first, or pick another name", path.display())]
    NameTaken {
        /// The file.
        path: PathBuf,
        /// JSON pointer to the existing server (`/servers/fs`).
        pointer: String,
        /// The name.
        server: String,
    },
    /// A server was asked for by name, and no file configures one of that
    /// name to start ([`Config::only`](crate::Config::only)).
    #[error("{}", UnknownServer { name, files, configured, closest, left_out: left_out.as_deref() })]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// The config files that were read (those that exist).
        files: Vec<PathBuf>,
        /// The servers they configure to start, sorted by name.
        configured: Vec<String>,
        /// The configured name closest to `name`, if any is close.
        closest: Option<String>,
        /// The server of that name that is configured but not started, and why.
        left_out: Option<Box<crate::LeftOut>>,
    },
    /// One or more files are valid JSON but break the schema.
    #[error("{}", Problems(problems))]
    Invalid {
        /// Every problem found, in file order.
        problems: Vec<Problem>,
    },
}

/// One problem in a JSON file: where it is, what is wrong, and how to fix it.
///
/// Displayed as one line, with the position and the server when known:
/// ``mcp.json:3:7: server `fs`: /servers/fs/comand: unknown field `comand`; did you mean `command`?``
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file the problem is in.
    pub path: PathBuf,
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters), when known.
    pub column: Option<usize>,
    /// The server the problem belongs to, when it belongs to one.
    pub server: Option<String>,
    /// JSON pointer to the offending value (`/servers/fs/url`).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": ")?;
        if let Some(server) = &self.server {
            write!(f, "server `{server}`: ")?;
        }
        let pointer = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{pointer}: {}; {}", self.message, self.fix)
    }
}

struct UnknownServer<'a> {
    name: &'a str,
    files: &'a [PathBuf],
    configured: &'a [String],
    closest: &'a Option<String>,
    left_out: Option<&'a crate::LeftOut>,
}

impl fmt::Display for UnknownServer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        if let Some(left_out) = self.left_out {
            return write!(f, "{left_out}");
        }
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        let read = if files.is_empty() {
            "no config file was found".to_owned()
        } else {
            format!("none in {}", files.join(", "))
        };
        write!(f, "no server named `{name}` is configured ({read})")?;
        if let Some(closest) = self.closest {
            write!(f, "; did you mean `{closest}`?")?;
        }
        if self.configured.is_empty() {
            write!(f, "; add one to mcp.json first")
        } else {
            write!(
                f,
                "; the configured servers are: {}",
                self.configured.join(", ")
            )
        }
    }
}

struct Problems<'a>(&'a [Problem]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}
