//! The machinery both of core-agent's JSON config files report through
//! (`mcp.json` here, `config.json` in `core-agent-permissions`): read the
//! file, parse it, and collect [`Problem`]s, each placed at its line and
//! column, with the server or field it is about and its fix.

use std::path::Path;

use serde_json::{Map, Value};

use crate::position::{Positions, escape_pointer};
use crate::suggest::closest;
use crate::{Error, Problem, Result};

/// The text of `path`, or `None` when the file does not exist.
///
/// # Errors
/// [`Error::Read`] when the file exists but cannot be read.
pub fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Parses `text`, the content of `path`, as JSON.
///
/// # Errors
/// [`Error::Syntax`], with the line and column of the first syntax error.
pub fn parse_json(path: &Path, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::Syntax {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })
}

/// serde_json appends " at line L column C"; we print the position first.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The problems found in one JSON file, each placed at the line and column
/// of the value its pointer names.
///
/// ```
/// use std::path::Path;
/// use core_agent_mcp_config::FileProblems;
///
/// let text = "{\n  \"mdoe\": \"ask\"\n}";
/// let root: serde_json::Value = serde_json::from_str(text).unwrap();
/// let mut problems = FileProblems::new(Path::new("config.json"), text);
/// problems.unknown_keys(root.as_object().unwrap(), "", &["mode"]);
/// assert_eq!(
///     problems.into_problems()[0].to_string(),
///     "config.json:2:3: /mdoe: unknown field `mdoe`; did you mean `mode`?"
/// );
/// ```
#[derive(Debug)]
pub struct FileProblems<'a> {
    path: &'a Path,
    positions: Positions<'a>,
    problems: Vec<Problem>,
}

impl<'a> FileProblems<'a> {
    /// No problems yet in `path`, whose text is `text`.
    pub fn new(path: &'a Path, text: &'a str) -> FileProblems<'a> {
        FileProblems {
            path,
            positions: Positions::new(text),
            problems: Vec::new(),
        }
    }

    /// The file.
    pub fn path(&self) -> &'a Path {
        self.path
    }

    /// Records a problem at `pointer`, about `server` when it is one's.
    pub fn push(&mut self, server: Option<&str>, pointer: &str, message: &str, fix: &str) {
        let (line, column) = self.positions.line_col(pointer);
        self.problems.push(Problem {
            path: self.path.to_owned(),
            line: Some(line),
            column: Some(column),
            server: server.map(str::to_owned),
            pointer: pointer.to_owned(),
            message: message.to_owned(),
            fix: fix.to_owned(),
        });
    }

    /// Records each key of `obj` (the object at `base`) that is not in
    /// `known` as an unknown field, with a did-you-mean ([`closest`](crate::closest))
    /// or else the list of valid fields.
    pub fn unknown_keys(&mut self, obj: &Map<String, Value>, base: &str, known: &[&str]) {
        for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
            let fix = match closest(key, known) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!(
                    "valid fields here are {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            self.push(
                None,
                &format!("{base}/{}", escape_pointer(key)),
                &format!("unknown field `{key}`"),
                &fix,
            );
        }
    }

    /// `v` as an object, or `None` with a problem at `pointer` saying an
    /// object was expected.
    pub fn object<'v>(&mut self, v: &'v Value, pointer: &str) -> Option<&'v Map<String, Value>> {
        let obj = v.as_object();
        if obj.is_none() {
            self.push(None, pointer, "expected a JSON object", "write {…}");
        }
        obj
    }

    /// Whether no problem was found.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// How many problems were found so far.
    pub fn len(&self) -> usize {
        self.problems.len()
    }

    /// The problems, in the order found.
    pub fn into_problems(self) -> Vec<Problem> {
        self.problems
    }
}
