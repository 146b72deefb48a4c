use std::collections::BTreeMap;
use std::path::Path;

use globset::GlobMatcher;
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use serde::{Deserialize, Serialize};

use crate::glob::{check_length, compile};
use crate::list_dir::not_found_or;
use crate::open::Links;
use crate::text::{cut_line, trim_eol};
use crate::walk::{is_file, parallel, walker};
use crate::{Cancel, Limits, Result, Root, SurveyError};

/// The input of `grep`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// A regular expression (Rust's `regex` syntax, as ripgrep's); a
    /// literal is searched as fast as ripgrep does.
    pub pattern: String,
    /// The file or directory to search, relative to the root (default: the
    /// root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files matching this glob: against the file name when it has no
    /// `/` (`*.rs`), else against the path relative to `path`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match without regard to case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Lines of context before and after each match (default 0).
    #[serde(default)]
    pub context: Option<usize>,
}

/// The matching lines, sorted by path, then line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepOutput {
    /// The first [`Limits::max_matches`] lines: matches, and context lines
    /// around them when asked for.
    pub matches: Vec<GrepLine>,
    /// How many lines match in all.
    pub total: usize,
    /// How many files have a match.
    pub files: usize,
    /// Whether lines were left out of `matches`.
    pub truncated: bool,
    /// How many files were skipped as binary (a NUL byte).
    pub binary_files: usize,
}

/// One line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepLine {
    /// The file, relative to the root.
    pub path: String,
    /// The line number, from 1.
    pub line: u64,
    /// The line without its terminator, lossy, cut past
    /// [`Limits::max_line_chars`] around the first match with
    /// `[… N chars cut]` markers.
    pub text: String,
    /// Whether this is a context line rather than a match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub context: bool,
}

pub(crate) fn grep(
    root: &Root,
    limits: &Limits,
    input: &GrepInput,
    cancel: &Cancel,
) -> Result<GrepOutput> {
    check_length("regex", &input.pattern, limits)?;
    cancel.check()?;
    // Bounded: a pattern whose compiled form would pass the size limit is
    // refused while it is being built, before it takes more.
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(input.case_insensitive)
        .line_terminator(Some(b'\n'))
        .size_limit(limits.regex_size_limit)
        .dfa_size_limit(limits.regex_dfa_size_limit)
        .build(&input.pattern)
        .map_err(|e| SurveyError::BadPattern {
            what: "regex",
            pattern: input.pattern.clone(),
            message: regex_message(&e.to_string(), limits),
        })?;
    cancel.check()?;
    let given = input.path.as_deref().unwrap_or(".");
    let base = root.resolve(given)?;
    std::fs::metadata(&base).map_err(|source| not_found_or(given, source))?;
    let filter = match input.glob.as_deref() {
        Some(glob) => {
            let glob = glob.trim_start_matches("./");
            Some((compile(glob)?, glob.contains('/')))
        }
        None => None,
    };
    let context = input.context.unwrap_or(0).min(limits.max_context);
    let mut searcher = SearcherBuilder::new();
    searcher
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .before_context(context)
        .after_context(context);

    let search = Search {
        root,
        base: &base,
        filter: filter.as_ref(),
        max: limits.max_matches,
        max_chars: limits.max_line_chars,
        cancel,
    };
    let workers = parallel(
        &walker(root, &base),
        cancel,
        || Worker {
            matcher: matcher.clone(),
            searcher: searcher.build(),
            found: Found::default(),
        },
        |worker, entry| search.file(worker, entry),
    )?;
    let mut found = Found::default();
    for worker in workers {
        found.merge(worker.found, limits.max_matches);
    }
    Ok(GrepOutput {
        truncated: found.kept < found.records,
        matches: found.files.into_values().flatten().collect(),
        total: found.total,
        files: found.matched_files,
        binary_files: found.binary_files,
    })
}

/// The parser's complaint without the picture of the (wrapped) pattern,
/// and how to search for a literal.
fn regex_message(full: &str, limits: &Limits) -> String {
    if full.contains("size limit") {
        return format!(
            "compiled, it would take more than {} bytes (the limit); use fewer or smaller \
             repetitions (`{{n}}`), or a literal",
            limits.regex_size_limit
        );
    }
    let last = full
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(full);
    let what = last.trim().trim_start_matches("error: ");
    format!("{what}; to match one of `\\.+*?()|[]{{}}^$` literally, escape it with `\\`")
}

/// What every thread shares.
struct Search<'a> {
    root: &'a Root,
    base: &'a Path,
    /// The glob, and whether it has a `/` (else it matches file names).
    filter: Option<&'a (GlobMatcher, bool)>,
    max: usize,
    max_chars: usize,
    cancel: &'a Cancel,
}

/// One thread's tools and findings.
struct Worker {
    matcher: RegexMatcher,
    searcher: Searcher,
    found: Found,
}

/// Findings: the first `max` records by path (then line), and the counts.
#[derive(Default)]
struct Found {
    files: BTreeMap<String, Vec<GrepLine>>,
    /// Records in `files`.
    kept: usize,
    /// Records produced in all (matches and context lines).
    records: usize,
    /// Matching lines.
    total: usize,
    matched_files: usize,
    binary_files: usize,
}

impl Found {
    fn add(&mut self, path: String, lines: Vec<GrepLine>, records: usize, max: usize) {
        self.kept += lines.len();
        self.records += records;
        self.files.insert(path, lines);
        // Drop the records past the first `max`, from the last path back.
        while self.kept > max {
            let Some(mut last) = self.files.last_entry() else {
                break;
            };
            let excess = self.kept - max;
            if last.get().len() <= excess {
                self.kept -= last.remove().len();
            } else {
                let keep = last.get().len() - excess;
                last.get_mut().truncate(keep);
                self.kept = max;
            }
        }
    }

    fn merge(&mut self, other: Found, max: usize) {
        self.total += other.total;
        self.matched_files += other.matched_files;
        self.binary_files += other.binary_files;
        // `add` counts kept records into `records`; count the dropped ones too.
        self.records += other.records - other.kept;
        for (path, lines) in other.files {
            let n = lines.len();
            self.add(path, lines, n, max);
        }
    }
}

impl Search<'_> {
    fn file(&self, worker: &mut Worker, entry: &ignore::DirEntry) {
        if !is_file(entry) {
            return;
        }
        if let Some((glob, has_slash)) = self.filter {
            let subject = if *has_slash {
                entry.path().strip_prefix(self.base).unwrap_or(entry.path())
            } else {
                Path::new(entry.file_name())
            };
            if !glob.is_match(subject) {
                return;
            }
        }
        let mut sink = FileSink {
            matcher: &worker.matcher,
            max: self.max,
            max_chars: self.max_chars,
            cancel: self.cancel,
            lines: Vec::new(),
            records: 0,
            matched: 0,
            binary: false,
        };
        // Opened beneath the root: a file swapped for a symlink after the
        // walk saw it is not followed out of the root.
        // An unreadable file is left out, as ripgrep does.
        let Ok(file) = self.root.open(entry.path(), Links::Inside) else {
            return;
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return;
        }
        let reader = Checked {
            file,
            cancel: self.cancel,
        };
        if worker
            .searcher
            .search_reader(&worker.matcher, reader, &mut sink)
            .is_err()
        {
            return;
        }
        let found = &mut worker.found;
        if sink.binary {
            found.binary_files += 1;
        } else if sink.matched > 0 {
            found.total += sink.matched;
            found.matched_files += 1;
            // The path is written out only for a file that matched.
            let path = self.root.relative(entry.path());
            let mut lines = sink.lines;
            for line in &mut lines {
                line.path.clone_from(&path);
            }
            found.add(path, lines, sink.records, self.max);
        }
    }
}

/// A file that stops being read once the call is cancelled: a search
/// checks at every block it reads, matches or not.
struct Checked<'a> {
    file: std::fs::File,
    cancel: &'a Cancel,
}

impl std::io::Read for Checked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(std::io::Error::other("cancelled"));
        }
        self.file.read(buf)
    }
}

/// Collects one file's lines.
struct FileSink<'a> {
    matcher: &'a RegexMatcher,
    max: usize,
    max_chars: usize,
    cancel: &'a Cancel,
    /// The first `max` records, their paths still empty.
    lines: Vec<GrepLine>,
    /// Records in all.
    records: usize,
    /// Matching lines in all.
    matched: usize,
    binary: bool,
}

impl FileSink<'_> {
    fn push(&mut self, number: Option<u64>, bytes: &[u8], is_match: bool) {
        self.records += 1;
        if self.lines.len() >= self.max {
            return;
        }
        let line = trim_eol(bytes);
        let focus = if is_match && line.len() > self.max_chars {
            self.matcher.find(line).ok().flatten().map(|m| m.start())
        } else {
            None
        };
        self.lines.push(GrepLine {
            path: String::new(),
            line: number.unwrap_or(0),
            text: cut_line(line, focus, self.max_chars),
            context: !is_match,
        });
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> std::io::Result<bool> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.matched += 1;
        self.push(found.line_number(), found.bytes(), true);
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> std::io::Result<bool> {
        if matches!(context.kind(), SinkContextKind::Other) {
            return Ok(true);
        }
        self.push(context.line_number(), context.bytes(), false);
        Ok(!self.cancel.is_cancelled())
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> std::io::Result<bool> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(path: &str, n: u64) -> GrepLine {
        GrepLine {
            path: path.to_owned(),
            line: n,
            text: String::new(),
            context: false,
        }
    }

    #[test]
    fn found_keeps_the_first_records_by_path() {
        let mut a = Found::default();
        a.add("c".into(), vec![line("c", 1), line("c", 2)], 2, 3);
        a.add("a".into(), vec![line("a", 1), line("a", 2)], 2, 3);
        let mut b = Found::default();
        b.add(
            "b".into(),
            vec![line("b", 1), line("b", 2), line("b", 3)],
            5,
            3,
        );
        let mut all = Found::default();
        all.merge(a, 3);
        all.merge(b, 3);
        let kept: Vec<(String, u64)> = all
            .files
            .into_values()
            .flatten()
            .map(|l| (l.path, l.line))
            .collect();
        assert_eq!(kept, [("a".into(), 1), ("a".into(), 2), ("b".into(), 1)]);
        assert_eq!((all.kept, all.records), (3, 9));
    }
}
