use std::collections::BTreeMap;
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
    /// Reads `path`; a missing file gives an empty set.
    ///
    /// The format is the common one: `KEY=value` per line, optional
    /// `export ` prefix, `#` comments, and values optionally in single quotes
    /// (taken literally) or double quotes (with `\n`, `\"` and `\\` escapes).
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
        let vars = parse(&text).map_err(|(line, message)| Error::Invalid {
            problems: vec![Problem {
                path: path.to_owned(),
                line: Some(line),
                column: Some(1),
                server: None,
                pointer: String::new(),
                message,
                fix: "write one `NAME=value` per line".to_owned(),
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

/// Parses `.env` text; an error carries its 1-based line.
fn parse(text: &str) -> std::result::Result<BTreeMap<String, String>, (usize, String)> {
    let mut vars = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err((i + 1, format!("`{}` is not `NAME=value`", first_word(line))));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err((i + 1, format!("`{key}` is not a variable name")));
        }
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('\'') {
            inner
                .strip_suffix('\'')
                .ok_or((i + 1, "unclosed single quote".to_owned()))?
                .to_owned()
        } else if let Some(inner) = value.strip_prefix('"') {
            let inner = inner
                .strip_suffix('"')
                .ok_or((i + 1, "unclosed double quote".to_owned()))?;
            unescape(inner)
        } else {
            // An unquoted value ends at ` #`, a trailing comment.
            value
                .split(" #")
                .next()
                .unwrap_or_default()
                .trim_end()
                .to_owned()
        };
        vars.insert(key.to_owned(), value);
    }
    Ok(vars)
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The start of a line, for messages that must not echo a whole value.
fn first_word(line: &str) -> String {
    line.chars()
        .take_while(|c| !c.is_whitespace())
        .take(24)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_common_format() {
        let text = "# comment\n\nA=1\nexport B = two words \nC='lit ${X} \\n'\nD=\"a\\nb \\\"q\\\"\"\nE=v # trailing\nF=\n";
        let vars = parse(text).unwrap();
        let want: BTreeMap<String, String> = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "lit ${X} \\n"),
            ("D", "a\nb \"q\""),
            ("E", "v"),
            ("F", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(vars, want);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            parse("A=1\nnot a pair\n"),
            Err((2, "`not` is not `NAME=value`".to_owned()))
        );
        assert_eq!(
            parse("A-B=1"),
            Err((1, "`A-B` is not a variable name".to_owned()))
        );
        assert_eq!(parse("A='x"), Err((1, "unclosed single quote".to_owned())));
    }
}
