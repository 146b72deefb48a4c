//! Unified diffs (`git diff`, `git show`, `git log -p`, `diff -u`): every
//! file with its added and removed line counts, then the first hunk of as
//! many files as fit, the rest counted.

use std::fmt::Write;

use super::{MAX_LINE, Out, clip, count, lines};

/// How far into the text the first file header may be (a tool's
/// `Diff with HEAD~30:` line, a commit header).
const MAX_PREAMBLE_LINES: usize = 100;
/// The most lines of one hunk the digest shows.
const MAX_HUNK_LINES: usize = 24;
/// The most preamble lines the digest shows.
const SHOWN_PREAMBLE_LINES: usize = 3;
/// Room kept for the closing marker.
const RESERVE: usize = 240;

/// One file of the diff.
#[derive(Debug, Default)]
struct File<'a> {
    path: String,
    /// `new`, `deleted`, `renamed`, `binary`, `mode`, joined.
    notes: Vec<&'static str>,
    added: usize,
    removed: usize,
    hunks: usize,
    /// The first hunk: its header and body lines.
    first_hunk: Vec<&'a str>,
    /// How many body lines the first hunk has.
    first_hunk_lines: usize,
    /// Whether `path` came from a `+++`/`---` line (better than `diff --git`'s).
    path_from_markers: bool,
}

/// The parsed diff.
#[derive(Debug, Default)]
struct Diff<'a> {
    preamble: Vec<&'a str>,
    files: Vec<File<'a>>,
    /// Bytes of lines that are not diff syntax (commit headers, prose).
    other_bytes: usize,
}

/// The digest of `text` if it is a unified diff.
pub(super) fn digest(text: &str, target: usize, hard: usize) -> Option<String> {
    if !starts_like_a_diff(text) {
        return None;
    }
    let diff = parse(text);
    let changed = diff
        .files
        .iter()
        .any(|f| f.hunks > 0 || !f.notes.is_empty());
    // Mostly diff: an embedded snippet does not make prose a diff.
    if !changed || diff.other_bytes.saturating_mul(2) > text.len() {
        return None;
    }
    Some(render(&diff, text.len(), target, hard))
}

/// A file header within the first lines: `diff --git`, or `--- ` then
/// `+++ ` then a hunk header.
fn starts_like_a_diff(text: &str) -> bool {
    let first: Vec<&str> = lines(text).take(MAX_PREAMBLE_LINES + 3).collect();
    first.iter().enumerate().any(|(i, l)| {
        (i < MAX_PREAMBLE_LINES && (l.starts_with("diff --git ") || l.starts_with("diff --cc ")))
            || (l.starts_with("--- ")
                && first.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
                && first.get(i + 2).is_some_and(|n| hunk_header(n).is_some()))
    })
}

/// The old and new line counts of a hunk header `@@ -a[,b] +c[,d] @@`.
fn hunk_header(line: &str) -> Option<(usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let len = |range: &str| -> Option<usize> {
        match range.split_once(',') {
            Some((start, n)) => {
                start.parse::<usize>().ok()?;
                n.parse().ok()
            }
            None => range.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((len(old)?, len(new)?))
}

/// The path of a `--- a/x` / `+++ b/x` line, without its prefix and any
/// tab-separated timestamp; `None` for `/dev/null`.
fn marker_path(line: &str) -> Option<&str> {
    let path = line[4..].split('\t').next().unwrap_or_default();
    if path == "/dev/null" {
        return None;
    }
    Some(
        path.strip_prefix("a/")
            .or_else(|| path.strip_prefix("b/"))
            .unwrap_or(path),
    )
}

/// The new path of `diff --git a/x b/y`.
fn git_header_path(line: &str) -> String {
    let rest = line
        .strip_prefix("diff --git ")
        .or_else(|| line.strip_prefix("diff --cc "))
        .unwrap_or(line);
    // `a/P b/P`: the same path twice, so the middle is known.
    if let Some(inner) = rest.strip_prefix("a/") {
        let half = inner.len().saturating_sub(3) / 2;
        if inner.is_char_boundary(half)
            && inner[half..].starts_with(" b/")
            && inner[..half] == inner[half + 3..]
        {
            return inner[..half].to_owned();
        }
        if let Some((_, new)) = inner.rsplit_once(" b/") {
            return new.to_owned();
        }
    }
    rest.to_owned()
}

fn parse(text: &str) -> Diff<'_> {
    let mut diff = Diff::default();
    let all: Vec<&str> = lines(text).collect();
    // Lines left in the current hunk, old and new.
    let mut left: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < all.len() {
        let line = all[i];
        i += 1;
        if let Some((old, new)) = left {
            let file = diff.files.last_mut();
            let (mut old, mut new) = (old, new);
            let body = match line.as_bytes().first() {
                Some(b'+') if new > 0 => {
                    new -= 1;
                    if let Some(f) = file {
                        f.added += 1;
                        push_hunk_line(f, line);
                    }
                    true
                }
                Some(b'-') if old > 0 => {
                    old -= 1;
                    if let Some(f) = file {
                        f.removed += 1;
                        push_hunk_line(f, line);
                    }
                    true
                }
                // Context; some tools strip the space of an empty context line.
                Some(b' ') | None if old > 0 && new > 0 => {
                    old -= 1;
                    new -= 1;
                    if let Some(f) = file {
                        push_hunk_line(f, line);
                    }
                    true
                }
                Some(b'\\') => {
                    if let Some(f) = file {
                        push_hunk_line(f, line);
                    }
                    true
                }
                _ => false,
            };
            if body {
                left = (old > 0 || new > 0).then_some((old, new));
                // `\ No newline at end of file` may follow the last line.
                if left.is_none() && all.get(i).is_some_and(|n| n.starts_with('\\')) {
                    left = Some((0, 0));
                }
                continue;
            }
            left = None;
        }
        if line.starts_with("diff --git ") || line.starts_with("diff --cc ") {
            diff.files.push(File {
                path: git_header_path(line),
                ..File::default()
            });
        } else if line.starts_with("--- ") && all.get(i).is_some_and(|n| n.starts_with("+++ ")) {
            let new_file = match diff.files.last() {
                Some(f) => f.hunks > 0 || f.path_from_markers,
                None => true,
            };
            if new_file {
                diff.files.push(File::default());
            }
            if let Some(f) = diff.files.last_mut() {
                let old = marker_path(line);
                let new = marker_path(all[i]);
                if let Some(path) = new.or(old) {
                    f.path = path.to_owned();
                }
                f.path_from_markers = true;
                if old.is_none() && !f.notes.contains(&"new") {
                    f.notes.push("new");
                }
                if new.is_none() && !f.notes.contains(&"deleted") {
                    f.notes.push("deleted");
                }
            }
            i += 1;
        } else if let (Some((old, new)), Some(f)) = (hunk_header(line), diff.files.last_mut()) {
            f.hunks += 1;
            if f.hunks == 1 {
                f.first_hunk.push(line);
            }
            left = Some((old, new));
        } else if let Some(f) = diff.files.last_mut().filter(|f| f.hunks == 0) {
            let note = if line.starts_with("new file mode") {
                Some("new")
            } else if line.starts_with("deleted file mode") {
                Some("deleted")
            } else if line.starts_with("rename to ") || line.starts_with("copy to ") {
                if let Some((_, to)) = line.split_once(" to ") {
                    f.path = to.to_owned();
                }
                Some(if line.starts_with("rename") {
                    "renamed"
                } else {
                    "copied"
                })
            } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
                Some("binary")
            } else if line.starts_with("old mode ") {
                Some("mode changed")
            } else if [
                "index ",
                "new mode ",
                "similarity index ",
                "dissimilarity index ",
                "rename from ",
                "copy from ",
                "literal ",
                "delta ",
            ]
            .iter()
            .any(|p| line.starts_with(p))
                || f.notes.contains(&"binary")
            {
                None
            } else {
                diff.other_bytes += line.len() + 1;
                continue;
            };
            if let Some(note) = note
                && !f.notes.contains(&note)
            {
                f.notes.push(note);
            }
        } else {
            diff.other_bytes += line.len() + 1;
            if diff.files.is_empty() {
                diff.preamble.push(line);
            }
        }
    }
    diff
}

/// Keeps a line of the first hunk (a few more than are shown, to count).
fn push_hunk_line<'a>(f: &mut File<'a>, line: &'a str) {
    if f.hunks == 1 {
        f.first_hunk_lines += 1;
        if f.first_hunk.len() <= MAX_HUNK_LINES {
            f.first_hunk.push(line);
        }
    }
}

fn render(diff: &Diff<'_>, raw_bytes: usize, target: usize, hard: usize) -> String {
    let added: usize = diff.files.iter().map(|f| f.added).sum();
    let removed: usize = diff.files.iter().map(|f| f.removed).sum();
    let hunks: usize = diff.files.iter().map(|f| f.hunks).sum();
    let mut out = Out::new(hard);
    out.line(&format!(
        "[digest: unified diff, {raw_bytes} bytes: {}, +{added} -{removed} lines, {}]",
        count(diff.files.len(), "file", "files"),
        count(hunks, "hunk", "hunks")
    ));
    for line in diff.preamble.iter().take(SHOWN_PREAMBLE_LINES) {
        out.line(&clip(line, MAX_LINE));
    }
    if diff.preamble.len() > SHOWN_PREAMBLE_LINES {
        out.line(&format!(
            "[… {} more lines before the first file]",
            diff.preamble.len() - SHOWN_PREAMBLE_LINES
        ));
    }

    // Every file, as long as the hard bound allows.
    out.line("files (+added -removed):");
    let mut listed = 0;
    for f in &diff.files {
        let mut entry = format!("+{} -{} {}", f.added, f.removed, clip(&f.path, MAX_LINE));
        if !f.notes.is_empty() {
            let _ = write!(entry, " ({})", f.notes.join(", "));
        }
        if !out.line_within(&entry, hard.saturating_sub(RESERVE)) {
            break;
        }
        listed += 1;
    }
    if listed < diff.files.len() {
        let rest = &diff.files[listed..];
        out.line(&format!(
            "[digest: {} more not listed (+{} -{} lines); retrieve_raw has the whole diff]",
            count(rest.len(), "file", "files"),
            rest.iter().map(|f| f.added).sum::<usize>(),
            rest.iter().map(|f| f.removed).sum::<usize>()
        ));
    }

    // First hunks, up to the target (or a quarter of it past a long list).
    let limit = target
        .max(out.len() + target / 4)
        .min(hard)
        .saturating_sub(RESERVE);
    let with_hunks = diff.files.iter().filter(|f| f.hunks > 0).count();
    let mut shown = 0;
    if with_hunks > 0 && out.line_within("first hunks:", limit) {
        for f in diff.files.iter().filter(|f| f.hunks > 0) {
            if !show_hunk(&mut out, f, limit) {
                break;
            }
            shown += 1;
        }
    }
    if shown < with_hunks || shown < hunks {
        out.line(&format!(
            "[digest: first hunk of {shown} of {} shown; {} left out; retrieve_raw has the whole diff]",
            count(with_hunks, "file", "files"),
            count(hunks - shown, "hunk", "hunks")
        ));
    }
    out.finish()
}

/// Writes the first hunk of `f` under `limit`: its path, header, and up to
/// [`MAX_HUNK_LINES`] lines; `false` if not even the header and one line fit.
fn show_hunk(out: &mut Out, f: &File<'_>, limit: usize) -> bool {
    let Some((header, body)) = f.first_hunk.split_first() else {
        return true;
    };
    let path = format!("--- {}", clip(&f.path, MAX_LINE));
    let header = clip(header, MAX_LINE);
    let first = body.first().map(|l| clip(l, MAX_LINE)).unwrap_or_default();
    let needed = path.len() + header.len() + first.len() + 3 + 80;
    if out.len() + needed > limit {
        return false;
    }
    out.line(&path);
    out.line(&header);
    let mut written = 0;
    for line in body.iter().take(MAX_HUNK_LINES) {
        // Keep room for the "more lines" marker.
        if !out.line_within(&clip(line, MAX_LINE), limit.saturating_sub(80)) {
            break;
        }
        written += 1;
    }
    if written < f.first_hunk_lines {
        out.line(&format!(
            "[… {} more {} in this hunk{}]",
            f.first_hunk_lines - written,
            if f.first_hunk_lines - written == 1 {
                "line"
            } else {
                "lines"
            },
            if f.hunks > 1 {
                format!("; {} in this file", more_hunks(f.hunks - 1))
            } else {
                String::new()
            }
        ));
    } else if f.hunks > 1 {
        out.line(&format!("[… {} in this file]", more_hunks(f.hunks - 1)));
    }
    true
}

/// `1 more hunk`, `3 more hunks`.
fn more_hunks(n: usize) -> String {
    format!("{n} more {}", if n == 1 { "hunk" } else { "hunks" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(text: &str) -> Vec<(String, usize, usize, Vec<&'static str>)> {
        parse(text)
            .files
            .into_iter()
            .map(|f| (f.path, f.added, f.removed, f.notes))
            .collect()
    }

    #[test]
    fn git_headers_give_paths_and_notes() {
        let text = "diff --git a/new.rs b/new.rs\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/new.rs\n@@ -0,0 +1,2 @@\n+a\n+b\n\
diff --git a/gone.rs b/gone.rs\ndeleted file mode 100644\n--- a/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\
diff --git a/old name.rs b/new name.rs\nsimilarity index 90%\nrename from old name.rs\nrename to new name.rs\n\
diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n";
        assert_eq!(
            files(text),
            [
                ("new.rs".to_owned(), 2, 0, vec!["new"]),
                ("gone.rs".to_owned(), 0, 1, vec!["deleted"]),
                ("new name.rs".to_owned(), 0, 0, vec!["renamed"]),
                ("logo.png".to_owned(), 0, 0, vec!["binary"]),
            ]
        );
    }

    #[test]
    fn hunk_counts_tell_a_removed_dashed_line_from_a_file_header() {
        // The removed line `-- a SQL comment` reads `--- a SQL comment`, the
        // added `++ kept` reads `+++ kept`: the hunk's counts say they are lines.
        let text = "--- a/q.sql\t2026-12-01\n+++ b/q.sql\t2026-12-02\n@@ -1,2 +1,2 @@\n--- a SQL comment\n+++ kept\n select 1;\n--- a/r.sql\n+++ b/r.sql\n@@ -1 +1 @@\n-x\n+y\n";
        assert_eq!(
            files(text),
            [
                ("q.sql".to_owned(), 1, 1, vec![]),
                ("r.sql".to_owned(), 1, 1, vec![]),
            ]
        );
    }

    #[test]
    fn commit_headers_between_files_are_not_diff_lines() {
        let mut text = String::new();
        for c in 0..3 {
            text.push_str(&format!(
                "commit {c}abc\nAuthor: A <a@b>\nDate:   today\n\n    change {c}\n\n"
            ));
            text.push_str(&format!("diff --git a/f{c}.rs b/f{c}.rs\nindex 1..2 100644\n--- a/f{c}.rs\n+++ b/f{c}.rs\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n"));
        }
        let diff = parse(&text);
        assert_eq!(diff.files.len(), 3);
        assert_eq!(diff.preamble.len(), 6);
        assert!(digest(&text, 8000, 65536).is_some());
    }

    #[test]
    fn prose_quoting_a_diff_is_not_a_diff() {
        let snippet = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let prose = format!(
            "{snippet}{}",
            "This paragraph explains the change at length.\n".repeat(200)
        );
        assert_eq!(digest(&prose, 8000, 65536), None);
    }
}
