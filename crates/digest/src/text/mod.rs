//! Structural digests of text that is not prose: unified diffs, logs,
//! CSV/TSV and JSON Lines.
//!
//! Each detector looks at the first lines only and says no unless the text
//! has the format's structure throughout that sample (prose keeps the
//! passthrough); only then is the whole payload read, once. Each digest is
//! bounded (see [`digest`]) and names what it left out.

mod csv;
mod diff;
mod jsonl;
mod log;

use crate::route::{Method, Settings};

/// The structural digest of a text payload, when it is a diff, a log, a
/// CSV/TSV table or JSON Lines; `None` otherwise (prose).
///
/// The digest aims at `settings.threshold` bytes (at least [`MIN_TARGET`])
/// and never exceeds it, except that a diff's file list is kept whole up to
/// `settings.passthrough_max` bytes (past that, the files it cannot list are
/// counted), and JSON Lines are pruned as an array, more tightly until the
/// digest fits under the threshold, else under `passthrough_max`.
pub(crate) fn digest(payload: &str, settings: &Settings) -> Option<(String, Method)> {
    let target = settings.threshold.max(MIN_TARGET);
    let hard = settings.passthrough_max.max(target);
    if let Some(d) = jsonl::digest(payload, &settings.limits, target, hard) {
        return Some((d, Method::StructuralJsonl));
    }
    if let Some(d) = diff::digest(payload, target, hard) {
        return Some((d, Method::StructuralDiff));
    }
    // A table whose first column is a timestamp also looks like a log: it
    // is a log when most lines carry a level, else a table if it is one.
    let log = log::detect(payload);
    if log == Some(log::Shape::Levelled) {
        return Some((log::digest(payload, target), Method::StructuralLog));
    }
    if let Some(table) = csv::detect(payload) {
        return Some((csv::digest(payload, &table, target), Method::StructuralCsv));
    }
    if log.is_some() {
        return Some((log::digest(payload, target), Method::StructuralLog));
    }
    None
}

/// The smallest budget a digest works with, whatever the threshold.
const MIN_TARGET: usize = 1024;

/// The longest line a digest shows whole.
const MAX_LINE: usize = 240;

/// The lines of `text` without their terminators (`\n` or `\r\n`); a final
/// terminator does not start an empty line.
fn lines(text: &str) -> impl DoubleEndedIterator<Item = &str> {
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// `line` cut to at most `max` bytes (on a character boundary), with a
/// marker saying how many bytes were cut.
fn clip(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let end = line.floor_char_boundary(max.saturating_sub(24));
    format!("{}…[+{} bytes]", &line[..end], line.len() - end)
}

/// A digest being written under a byte budget.
struct Out {
    text: String,
    cap: usize,
}

impl Out {
    fn new(cap: usize) -> Out {
        Out {
            text: String::with_capacity(cap.min(1 << 16)),
            cap,
        }
    }

    fn len(&self) -> usize {
        self.text.len()
    }

    /// Appends `line` and a newline if they fit under `limit` (at most the
    /// cap); says whether they did.
    fn line_within(&mut self, line: &str, limit: usize) -> bool {
        if self.text.len() + line.len() + 1 > limit.min(self.cap) {
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        true
    }

    /// Appends `line` and a newline if they fit under the cap.
    fn line(&mut self, line: &str) -> bool {
        self.line_within(line, self.cap)
    }

    /// The digest, without its final newline.
    fn finish(mut self) -> String {
        if self.text.ends_with('\n') {
            self.text.pop();
        }
        self.text
    }
}

/// `n` and the noun, singular or plural.
fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_strip_terminators() {
        assert_eq!(lines("a\r\nb\n").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(lines("a\n\nb").collect::<Vec<_>>(), ["a", "", "b"]);
    }

    #[test]
    fn clip_cuts_on_a_character_boundary_under_the_bound() {
        let line = "é".repeat(200);
        let cut = clip(&line, 100);
        assert!(cut.len() <= 100, "{}", cut.len());
        assert!(cut.ends_with("bytes]"));
        assert_eq!(clip("short", 100), "short");
    }

    /// Prose, Markdown and code keep the passthrough.
    #[test]
    fn prose_is_not_a_structured_text() {
        let settings = Settings::default();
        let prose = "The quick brown fox jumps over the lazy dog, twice. It rests.\n".repeat(300);
        let markdown = "# Title\n\nSome text, with a comma.\n\n- an item\n- another, item\n\n```rust\nfn main() {}\n```\n".repeat(200);
        let c_code = "int a = 1;\nint b = 2;\nreturn a + b;\n".repeat(400);
        let go_code = "package main\n\nfunc f() {\n\tif x {\n\t\treturn y\n\t}\n}\n".repeat(300);
        let changelog =
            "## 2026-01-01\n\nFixed a bug where the thing broke.\nAdded a feature.\n\n".repeat(200);
        let one_line = "word ".repeat(20_000);
        let numbers = "1\n2\n3\n".repeat(3000);
        let csv_mention = "The file has columns a,b,c and the rows follow.\nNothing else is a table here, nor a log.\n".repeat(200);
        for (name, text) in [
            ("prose", prose),
            ("markdown", markdown),
            ("c", c_code),
            ("go", go_code),
            ("changelog", changelog),
            ("one line", one_line),
            ("numbers", numbers),
            ("mention", csv_mention),
        ] {
            assert_eq!(
                digest(&text, &settings).map(|(_, m)| m),
                None,
                "{name} was taken for a structured text"
            );
        }
    }
}
