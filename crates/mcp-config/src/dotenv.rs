use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Env, Error, Problem, Result};

/// Variables from a `.env` file, layered under the process environment:
/// a variable set in the real environment wins over the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DotEnv {
    /// The file they came from, when one was found.
    pub path: Option<PathBuf>,
    /// The variables, by name.
    pub vars: BTreeMap<String, String>,
}

impl DotEnv {
    /// Reads `path`; a missing file gives an empty set. Nothing is set in the
    /// process environment.
    ///
    /// The parsing is the `dotenvy` crate's: `KEY=value` per line, optional
    /// `export `, `#` comments (after a space when on a value's line), and
    /// values that are
    /// - unquoted: one word (quote a value that has spaces);
    /// - in single quotes: taken literally, and may span lines;
    /// - in double quotes: with the escapes `\n`, `\\`, `\"`, `\'`, `\$`
    ///   and `\ `, and may span lines.
    ///
    /// Unquoted and double-quoted values expand `$NAME` and `${NAME}`: from
    /// the process environment first, then from the variables defined above
    /// in the file, else empty. A byte-order mark at the start is skipped.
    ///
    /// A malformed entry is an [`Error::Invalid`] naming the file, the line
    /// the entry starts on and what is wrong, without echoing the value.
    pub fn load(path: &Path) -> Result<DotEnv> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DotEnv::default()),
            Err(source) => {
                return Err(Error::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let vars = parse(&text).map_err(|bad| Error::Invalid {
            problems: vec![Problem {
                path: path.to_owned(),
                line: Some(bad.line),
                column: Some(bad.column),
                server: None,
                pointer: String::new(),
                message: bad.message,
                fix: bad.fix.to_owned(),
            }],
        })?;
        Ok(DotEnv {
            path: Some(path.to_owned()),
            vars,
        })
    }

    /// The process environment layered over these variables.
    pub fn over_process(&self) -> Layered<'_> {
        Layered { dotenv: self }
    }
}

/// The process environment first, then a `.env` file.
#[derive(Debug, Clone, Copy)]
pub struct Layered<'a> {
    dotenv: &'a DotEnv,
}

impl Env for Layered<'_> {
    fn var(&self, name: &str) -> Option<String> {
        crate::ProcessEnv
            .var(name)
            .or_else(|| self.dotenv.vars.get(name).cloned())
    }
}

/// A malformed entry: where it starts (1-based), what is wrong, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bad {
    line: usize,
    column: usize,
    message: String,
    fix: &'static str,
}

const LINE_FIX: &str = "write one `NAME=value` per line";
const VALUE_FIX: &str = "quote a value that has spaces, close every quote and `${`, \
     and use only the escapes `\\n`, `\\\\`, `\\\"`, `\\'`, `\\$` and `\\ `";

/// Parses `.env` text with dotenvy; a later definition of a name wins.
fn parse(text: &str) -> std::result::Result<BTreeMap<String, String>, Bad> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let started = Cell::new(0);
    let lines = Lines {
        rest: text.as_bytes(),
        started: &started,
        at_line_start: true,
    };
    let mut vars = BTreeMap::new();
    for item in dotenvy::from_read_iter(lines) {
        match item {
            Ok((name, value)) => {
                vars.insert(name, value);
            }
            Err(dotenvy::Error::LineParse(entry, index)) => {
                return Err(locate(text, started.get(), &entry, index));
            }
            // Reading a string cannot fail and the iterator reads no
            // variable, but the error type is open to more kinds.
            Err(other) => {
                return Err(Bad {
                    line: started.get().max(1),
                    column: 1,
                    message: other.to_string(),
                    fix: LINE_FIX,
                });
            }
        }
    }
    Ok(vars)
}

/// Hands the text to dotenvy one line per `read`, counting the lines begun.
///
/// dotenvy's `BufReader` only reads when its buffer is empty, and it reads
/// a whole entry before reporting on it, so when an entry fails `started` is
/// the number of the last line of that entry. (dotenvy's error carries the
/// entry and a position within it, not a line number.)
struct Lines<'a> {
    rest: &'a [u8],
    started: &'a Cell<usize>,
    at_line_start: bool,
}

impl Read for Lines<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rest.is_empty() || buf.is_empty() {
            return Ok(0);
        }
        if self.at_line_start {
            self.started.set(self.started.get() + 1);
        }
        let line_end = self
            .rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.rest.len(), |i| i + 1);
        let (out, rest) = self.rest.split_at(line_end.min(buf.len()));
        buf[..out.len()].copy_from_slice(out);
        self.at_line_start = out.ends_with(b"\n");
        self.rest = rest;
        Ok(out.len())
    }
}

/// Turns dotenvy's error into a line, a column and a message.
///
/// `entry` is what dotenvy was parsing (the whole entry, or only its value),
/// ending on line `last_line`; `index` is a position in it, equal to its
/// length when a quote stays open to the end of the file. Messages name the
/// variable, never its value, which may be a secret.
fn locate(text: &str, last_line: usize, entry: &str, index: usize) -> Bad {
    let body = entry.strip_suffix('\n').unwrap_or(entry);
    let spans = body.matches('\n').count() + 1;
    let line = (last_line + 1).saturating_sub(spans).max(1);
    let first = text.lines().nth(line - 1).unwrap_or_default();
    let column = |byte: usize| first.get(..byte).map_or(0, |s| s.chars().count()) + 1;

    let mut start = first.len() - first.trim_start().len();
    if let Some(after) = first[start..].strip_prefix("export")
        && after.starts_with(char::is_whitespace)
        && !after.trim_start().starts_with('=')
    {
        start = first.len() - after.trim_start().len();
    }
    let Some((name, value)) = first[start..].split_once('=') else {
        return Bad {
            line,
            column: column(start),
            message: format!("`{}` is not `NAME=value`", first_word(&first[start..])),
            fix: LINE_FIX,
        };
    };
    let name = name.trim_end();
    if !is_name(name) {
        return Bad {
            line,
            column: column(start),
            message: format!("`{}` is not a variable name", shorten(name)),
            fix: LINE_FIX,
        };
    }
    let value_start = first.len() - value.trim_start().len();
    let message = if !entry.is_empty() && index >= entry.len() {
        format!("the value of `{name}` opens a quote that is not closed before the end of the file")
    } else {
        format!("the value of `{name}` is not valid")
    };
    Bad {
        line,
        column: column(value_start),
        message,
        fix: VALUE_FIX,
    }
}

/// A name as dotenvy takes it: a letter or `_`, then letters, digits, `_`, `.`.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The start of a line, for messages that must not echo a whole value.
fn first_word(line: &str) -> String {
    shorten(line.split(char::is_whitespace).next().unwrap_or_default())
}

fn shorten(s: &str) -> String {
    s.chars().take(24).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Line, column and message of the error for `text`.
    fn error(text: &str) -> (usize, usize, String) {
        let bad = parse(text).unwrap_err();
        (bad.line, bad.column, bad.message)
    }

    #[test]
    fn parses_the_common_format() {
        let text = "\u{feff}# comment\n\nA=1\nexport B = \"two words\" \nC='lit ${X} \\n'\nD=\"a\\nb \\\"q\\\"\"\nE=v # trailing\nF=\nG=v#not-a-comment\r\nA=again\n";
        assert_eq!(
            parse(text).unwrap(),
            vars(&[
                ("A", "again"),
                ("B", "two words"),
                ("C", "lit ${X} \\n"),
                ("D", "a\nb \"q\""),
                ("E", "v"),
                ("F", ""),
                ("G", "v#not-a-comment"),
            ])
        );
    }

    #[test]
    fn quoted_values_may_span_lines() {
        let text = "A=\"line one\nline two\"\nB='first\n  second # kept\n'\nC=after\n";
        assert_eq!(
            parse(text).unwrap(),
            vars(&[
                ("A", "line one\nline two"),
                ("B", "first\n  second # kept\n"),
                ("C", "after"),
            ])
        );
    }

    #[test]
    fn references_take_variables_defined_above() {
        let text = "A=one\nB=${A}-two\nC=\"$A and ${A}\"\nD='${A}'\nE=\\${A}\nF=${CA_DOTENV_TEST_UNSET}\nG=${H}\nH=later\n";
        assert_eq!(
            parse(text).unwrap(),
            vars(&[
                ("A", "one"),
                ("B", "one-two"),
                ("C", "one and one"),
                ("D", "${A}"),
                ("E", "${A}"),
                ("F", ""),
                ("G", ""),
                ("H", "later"),
            ])
        );
    }

    #[test]
    fn references_take_the_process_environment_first() {
        let Ok(path) = std::env::var("PATH") else {
            return;
        };
        let parsed = parse("PATH=not-the-real-path\nP=${PATH}\n").unwrap();
        assert_eq!(parsed.get("P"), Some(&path));
    }

    #[test]
    fn errors_name_the_line_the_entry_starts_on() {
        let value = |name: &str| format!("the value of `{name}` is not valid");
        let unclosed = |name: &str| {
            format!(
                "the value of `{name}` opens a quote that is not closed before the end of the file"
            )
        };
        let long = format!("A={}\nB\n", "x".repeat(20_000));
        let cases = [
            (
                "A=1\nnot a pair\n",
                (2, 1, "`not` is not `NAME=value`".to_owned()),
            ),
            ("A-B=1", (1, 1, "`A-B` is not a variable name".to_owned())),
            (
                "  export 1A=\"x\ny\"\n",
                (1, 10, "`1A` is not a variable name".to_owned()),
            ),
            ("A='x", (1, 3, unclosed("A"))),
            ("A=1\nB='it\nC=2\n\n", (2, 3, unclosed("B"))),
            ("# c\n\nA=\"one\ntwo\"\n  B= x y\n", (5, 6, value("B"))),
            ("A=1\r\nB=x y", (2, 3, value("B"))),
            ("A=\"\\q\"\n", (1, 3, value("A"))),
            (long.as_str(), (2, 1, "`B` is not `NAME=value`".to_owned())),
        ];
        for (text, want) in cases {
            assert_eq!(error(text), want, "{text:?}");
        }
    }

    #[test]
    fn errors_do_not_echo_the_value() {
        let bad = parse("TOKEN=secret value\n").unwrap_err();
        assert!(!bad.message.contains("secret"), "{bad:?}");
    }
}
