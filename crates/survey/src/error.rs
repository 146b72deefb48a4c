use std::path::PathBuf;

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, SurveyError>;

/// Why a survey operation did not run or did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SurveyError {
    /// A path leaves the root: by `..`, as an absolute path elsewhere, or
    /// through a symlink whose target is outside.
    #[error(
        "`{path}` is outside the root `{root}`: give a path relative to the root \
         (or an absolute path inside it), without `..` leaving it and without \
         symlinks that point out of it",
        root = root.display()
    )]
    OutsideRoot {
        /// The path as given.
        path: String,
        /// The root (canonical).
        root: PathBuf,
    },
    /// The directory given as the root cannot be used.
    #[error("cannot use `{}` as the survey root: {source}; give an existing directory", root.display())]
    BadRoot {
        /// The directory as given.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A path inside the root does not exist.
    #[error("`{path}` does not exist under the root; list the directory to see what is there")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A path that must be a directory is not one.
    #[error("`{path}` is not a directory; give a directory, or read the file instead")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// A glob or a regular expression does not parse.
    #[error("bad {what} `{pattern}`: {message}")]
    BadPattern {
        /// `glob` or `regex`.
        what: &'static str,
        /// The pattern as given.
        pattern: String,
        /// The parser's message.
        message: String,
    },
    /// JSON arguments do not fit the tool's input.
    #[error("bad arguments for `{tool}`: {message}; see the tool's input schema")]
    BadArguments {
        /// The tool's name.
        tool: &'static str,
        /// What does not fit.
        message: String,
    },
    /// The input asks for something impossible.
    #[error("{0}")]
    BadInput(String),
    /// Reading failed.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The path, relative to the root.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A path is hidden from this caller (see
    /// [`Hidden`](crate::Hidden)).
    #[error(
        "`{path}` is hidden from this caller: secrets, version control, ignored files and \
         core-agent's own files are left out below the creator trust level; \
         search or read other paths"
    )]
    Hidden {
        /// The path as given.
        path: String,
    },
    /// The caller cancelled the operation.
    #[error("cancelled")]
    Cancelled,
}
