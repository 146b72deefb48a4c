//! Logs: the first and last lines, repeated lines collapsed with counts
//! (lines that differ only in numbers, timestamps and ids are the same
//! line), the first errors, and counts by level.

use std::collections::HashMap;
use std::fmt::Write;

use super::{MAX_LINE, Out, clip, count, lines};

/// How many lines detection looks at.
const SAMPLE_LINES: usize = 200;
/// Detection needs at least this many non-blank lines.
const MIN_LINES: usize = 10;
/// How far into a line a timestamp or level is looked for.
const PREFIX: usize = 120;
/// The most distinct line shapes counted (past it, new shapes are not).
const MAX_SHAPES: usize = 50_000;
/// How many of the most repeated shapes the digest lists.
const TOP_SHAPES: usize = 10;
/// How many error lines the digest lists.
const TOP_ERRORS: usize = 8;
/// Room kept for the closing marker.
const RESERVE: usize = 160;

/// What kind of log the sample looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Most lines carry a level (`INFO`, `level=warn`, `[error]`).
    Levelled,
    /// Most lines start with a timestamp, few carry a level.
    Timestamped,
}

/// The levels counted, most severe first.
const LEVELS: [&str; 8] = [
    "FATAL", "CRITICAL", "ERROR", "WARN", "NOTICE", "INFO", "DEBUG", "TRACE",
];

/// The words read as levels, and the level each counts as.
const LEVEL_WORDS: [(&[u8], &str); 14] = [
    (b"INFO", "INFO"),
    (b"DEBUG", "DEBUG"),
    (b"WARN", "WARN"),
    (b"WARNING", "WARN"),
    (b"ERROR", "ERROR"),
    (b"ERR", "ERROR"),
    (b"TRACE", "TRACE"),
    (b"NOTICE", "NOTICE"),
    (b"FATAL", "FATAL"),
    (b"PANIC", "FATAL"),
    (b"EMERG", "FATAL"),
    (b"ALERT", "FATAL"),
    (b"CRITICAL", "CRITICAL"),
    (b"CRIT", "CRITICAL"),
];

/// Whether `text` is a log: at least [`MIN_LINES`] non-blank lines in the
/// first [`SAMPLE_LINES`], at least 60% of them with a timestamp or a level
/// near their start.
pub(super) fn detect(text: &str) -> Option<Shape> {
    let (mut seen, mut stamped, mut levelled, mut either) = (0, 0, 0, 0);
    for line in lines(text).take(SAMPLE_LINES) {
        if line.trim().is_empty() {
            continue;
        }
        seen += 1;
        let stamp = has_timestamp(line);
        let level = level_of(line).is_some();
        stamped += usize::from(stamp);
        levelled += usize::from(level);
        either += usize::from(stamp || level);
    }
    if seen < MIN_LINES || either * 10 < seen * 6 {
        return None;
    }
    if levelled * 2 >= seen {
        Some(Shape::Levelled)
    } else if stamped * 10 >= seen * 6 {
        Some(Shape::Timestamped)
    } else {
        None
    }
}

/// A date (`2026-12-01`, `2026/12/01`) or a time (`10:00:00`) within the
/// first 40 bytes.
fn has_timestamp(line: &str) -> bool {
    let b = &line.as_bytes()[..line.len().min(40)];
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    b.windows(10).any(|w| {
        digits(&w[..4])
            && (w[4] == b'-' || w[4] == b'/')
            && digits(&w[5..7])
            && w[7] == w[4]
            && digits(&w[8..10])
    }) || b.windows(8).any(|w| {
        digits(&w[..2]) && w[2] == b':' && digits(&w[3..5]) && w[5] == b':' && digits(&w[6..8])
    })
}

/// The level of a line: an upper-case level word near its start, or a
/// lower-case one right after `[`, `=`, `"` or `<` (`[info]`,
/// `level=warn`, `"level":"error"`).
fn level_of(line: &str) -> Option<&'static str> {
    let prefix = &line.as_bytes()[..line.len().min(PREFIX)];
    let mut i = 0;
    while i < prefix.len() {
        if !prefix[i].is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        let start = i;
        while i < prefix.len() && prefix[i].is_ascii_alphanumeric() {
            i += 1;
        }
        // A word cut by the prefix is not a word.
        if i == prefix.len() && i < line.len() {
            break;
        }
        let word = &prefix[start..i];
        if word.len() < 3 || word.len() > 8 {
            continue;
        }
        let upper = word.iter().all(u8::is_ascii_uppercase);
        let marked = start > 0 && matches!(prefix[start - 1], b'[' | b'=' | b'"' | b'<');
        if !upper && !marked {
            continue;
        }
        let Some(&(_, level)) = LEVEL_WORDS
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(word))
        else {
            continue;
        };
        return Some(level);
    }
    None
}

/// The line's shape: a hash of its first [`MAX_LINE`] bytes with every run
/// of letters and digits that holds a digit (a number, a timestamp's parts,
/// a hex id) read as `#`. Lines of the same shape are "repeated".
fn shape(line: &str) -> u64 {
    let b = &line.as_bytes()[..line.len().min(MAX_LINE)];
    // FNV-1a: shapes are counted, not defended against collisions.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |byte: u8| h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphanumeric() {
            let start = i;
            let mut digit = false;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                digit |= b[i].is_ascii_digit();
                i += 1;
            }
            if digit {
                mix(b'#');
            } else {
                b[start..i].iter().for_each(|&c| mix(c));
            }
        } else {
            mix(b[i]);
            i += 1;
        }
    }
    h
}

/// The digest of a log, under `target` bytes.
pub(super) fn digest(text: &str, target: usize) -> String {
    let all: Vec<&str> = lines(text).collect();
    let shapes: Vec<u64> = all.iter().map(|l| shape(l)).collect();
    let mut levels: HashMap<&'static str, usize> = HashMap::new();
    let mut unlevelled = 0;
    // Shape → (count, first line number).
    let mut counts: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut errors: Vec<usize> = Vec::new();
    for (n, line) in all.iter().enumerate() {
        match level_of(line) {
            Some(level) => {
                *levels.entry(level).or_default() += 1;
                if matches!(level, "FATAL" | "CRITICAL" | "ERROR") && errors.len() < TOP_ERRORS {
                    errors.push(n);
                }
            }
            None => unlevelled += 1,
        }
        let key = shapes[n];
        if let Some(c) = counts.get_mut(&key) {
            c.0 += 1;
        } else if counts.len() < MAX_SHAPES {
            counts.insert(key, (1, n));
        }
    }

    let mut out = Out::new(target);
    let mut by_level: Vec<String> = LEVELS
        .iter()
        .filter_map(|l| levels.get(l).map(|n| format!("{l} {n}")))
        .collect();
    if unlevelled > 0 {
        by_level.push(format!("no level {unlevelled}"));
    }
    out.line(&format!(
        "[digest: log, {} bytes: {}; {}]",
        text.len(),
        count(all.len(), "line", "lines"),
        by_level.join(", ")
    ));
    let limit = target.saturating_sub(RESERVE);

    // The most repeated shapes, then the first errors, each in at most a
    // fifth of the budget; then the head and tail share what is left.
    let mut repeated: Vec<(&u64, &(usize, usize))> =
        counts.iter().filter(|(_, c)| c.0 > 1).collect();
    repeated.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    if !repeated.is_empty() {
        let section = (out.len() + target / 5).min(limit);
        if out.line_within(
            "most repeated (numbers and ids read as #), with the first of each:",
            section,
        ) {
            for (_, (n, first)) in repeated.iter().take(TOP_SHAPES) {
                let line = format!("×{n} {}", clip(all[*first], MAX_LINE));
                if !out.line_within(&line, section) {
                    break;
                }
            }
        }
    }
    if !errors.is_empty() {
        let section = (out.len() + target / 5).min(limit);
        if out.line_within("first errors:", section) {
            for n in &errors {
                let line = format!("{}: {}", n + 1, clip(all[*n], MAX_LINE));
                if !out.line_within(&line, section) {
                    break;
                }
            }
        }
    }

    // Head: 60% of what is left; tail: the rest.
    let left = limit.saturating_sub(out.len());
    let head_limit = out.len() + left * 3 / 5;
    let mut head = Vec::new();
    let mut used = 0;
    let mut i = 0;
    while i < all.len() {
        let run = run_from(&shapes, i);
        let block = render_run(&all, i, run);
        if out.len() + 14 + used + block.len() > head_limit {
            break;
        }
        used += block.len();
        head.push(block);
        i += run;
    }
    let head_end = i;
    let mut tail = Vec::new();
    let mut used = 0;
    let mut j = all.len();
    let tail_room =
        limit.saturating_sub(out.len() + 14 + head.iter().map(String::len).sum::<usize>() + 14);
    while j > head_end {
        let run = run_back(&shapes, j, head_end);
        let start = j - run;
        let block = render_run_ending(&all, j, run);
        if used + block.len() > tail_room {
            break;
        }
        used += block.len();
        tail.push(block);
        j = start;
    }
    tail.reverse();
    out.line("first lines:");
    for block in &head {
        out.text.push_str(block);
    }
    if j > head_end {
        let _ = writeln!(
            out.text,
            "[… {} left out]",
            count(j - head_end, "line", "lines")
        );
    }
    if !tail.is_empty() {
        out.line("last lines:");
        for block in &tail {
            out.text.push_str(block);
        }
    }
    if j > head_end {
        out.line(&format!(
            "[digest: {} of {} left out of the first and last lines; retrieve_raw has them all]",
            j - head_end,
            count(all.len(), "line", "lines")
        ));
    }
    out.finish()
}

/// How many lines from `i` on have the shape of line `i`.
fn run_from(shapes: &[u64], i: usize) -> usize {
    let mut n = 1;
    while i + n < shapes.len() && shapes[i + n] == shapes[i] {
        n += 1;
    }
    n
}

/// How many lines before `j` (and not before `floor`) share the shape of
/// line `j - 1`.
fn run_back(shapes: &[u64], j: usize, floor: usize) -> usize {
    let mut n = 1;
    while j - n > floor && shapes[j - n - 1] == shapes[j - 1] {
        n += 1;
    }
    n
}

/// The first line of a run, and how many more like it follow.
fn render_run(all: &[&str], start: usize, run: usize) -> String {
    let mut block = clip(all[start], MAX_LINE);
    block.push('\n');
    if run > 1 {
        let _ = writeln!(block, "[… ×{} more like the line above]", run - 1);
    }
    block
}

/// For the tail: how many lines like the last of a run came before it,
/// then that line (the log's last line is shown as it is).
fn render_run_ending(all: &[&str], end: usize, run: usize) -> String {
    let mut block = String::new();
    if run > 1 {
        let _ = writeln!(block, "[… ×{} more like the line below]", run - 1);
    }
    block.push_str(&clip(all[end - 1], MAX_LINE));
    block.push('\n');
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_read_where_logs_put_them() {
        for (line, level) in [
            ("2026-12-01 10:00:00,123 INFO app: started", Some("INFO")),
            ("[2026-12-01T10:00:00Z] [error] disk full", Some("ERROR")),
            ("ts=2026-12-01 level=warn msg=slow", Some("WARN")),
            (r#"{"level":"debug","msg":"x"}"#, Some("DEBUG")),
            ("E1201 10:00:00 ERROR x", Some("ERROR")),
            ("Info about the product follows.", None),
            ("an error occurred somewhere", None),
        ] {
            assert_eq!(level_of(line), level, "{line}");
        }
    }

    #[test]
    fn shapes_ignore_numbers_and_ids() {
        assert_eq!(
            shape("2026-12-01T10:00:01Z GET /items/42 200 in 3ms req=ab12f"),
            shape("2026-12-02T11:30:59Z GET /items/7 200 in 12ms req=ff00a")
        );
        assert_ne!(shape("GET /items 200"), shape("POST /items 200"));
    }
}
