use std::io::Read as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::glob::{check_length, matching};
use crate::open::{Links, OpenError};
use crate::text::{cut, floor_boundary};
use crate::{Cancel, Limits, Result, Root, SurveyError};

/// The input of `read_many_files`: `paths` or `glob`, not both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadManyFilesInput {
    /// The files, relative to the root, read in this order.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// A glob relative to the root (as `glob`'s); the files it matches are
    /// read in path order.
    #[serde(default)]
    pub glob: Option<String>,
}

/// The files' texts, in the order asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadManyFilesOutput {
    /// The files read.
    pub files: Vec<FileText>,
    /// The files not read, and why.
    pub skipped: Vec<Skipped>,
    /// How many files were asked for (the paths given, or the glob's
    /// matches).
    pub count: usize,
    /// How many of them were neither read nor skipped: past
    /// [`Limits::max_files`], or once [`Limits::max_total_bytes`] was spent.
    pub omitted: usize,
}

/// One file's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileText {
    /// The file, relative to the root.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether `text` stops before the end of the file.
    pub truncated: bool,
    /// The text (lossy when not UTF-8), at most [`Limits::max_file_bytes`],
    /// cut on a character boundary and ending with `[… N bytes cut]` when
    /// cut.
    pub text: String,
}

/// A file that was not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The path as given (or as matched).
    pub path: String,
    /// Why.
    pub reason: SkipReason,
}

/// Why a file was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// It holds a NUL byte in the part read.
    Binary,
    /// It does not exist.
    NotFound,
    /// It is a directory or something else that is not a file.
    NotAFile,
    /// It is a symlink whose target is outside the root (matched by the
    /// glob; a path given outright is refused instead).
    OutsideRoot,
    /// Reading it failed.
    Unreadable,
    /// It is hidden from this caller (see [`Hidden`](crate::Hidden)).
    Hidden,
}

pub(crate) fn read_many_files(
    root: &Root,
    limits: &Limits,
    input: &ReadManyFilesInput,
    cancel: &Cancel,
) -> Result<ReadManyFilesOutput> {
    // Each file as given (or as shown, for a match), and its path.
    let (paths, count, from_glob): (Vec<(String, PathBuf)>, _, _) =
        match (&input.paths, &input.glob) {
            (Some(paths), None) => (
                paths
                    .iter()
                    .map(|p| (p.clone(), PathBuf::from(p)))
                    .collect(),
                paths.len(),
                false,
            ),
            (None, Some(glob)) => {
                check_length("glob", glob, limits)?;
                let (paths, count) = matching(root, root.path(), glob, limits.max_files, cancel)?;
                (paths, count, true)
            }
            _ => {
                return Err(SurveyError::BadInput(
                    "give either `paths` (a list of files) or `glob` (a pattern), not both".into(),
                ));
            }
        };
    // Refuse a path given outright that leaves the root before reading any.
    let mut resolved = Vec::with_capacity(paths.len().min(limits.max_files));
    for (path, real) in paths.into_iter().take(limits.max_files) {
        match root.resolve(&real) {
            Ok(abs) => resolved.push((path, Ok(abs))),
            Err(SurveyError::OutsideRoot { .. }) if from_glob => {
                resolved.push((path, Err(SkipReason::OutsideRoot)));
            }
            Err(SurveyError::Hidden { .. }) => resolved.push((path, Err(SkipReason::Hidden))),
            Err(e) => return Err(e),
        }
    }

    let mut out = ReadManyFilesOutput {
        files: Vec::new(),
        skipped: Vec::new(),
        count,
        omitted: count - resolved.len(),
    };
    let mut budget = limits.max_total_bytes;
    for (path, abs) in resolved {
        cancel.check()?;
        if budget == 0 {
            out.omitted += 1;
            continue;
        }
        let abs = match abs {
            Ok(abs) => abs,
            Err(reason) => {
                out.skipped.push(Skipped { path, reason });
                continue;
            }
        };
        match read_one(root, &abs, limits.max_file_bytes.min(budget)) {
            Ok(Some((text, bytes, shown))) => {
                budget -= shown;
                out.files.push(FileText {
                    path: root.relative(&abs),
                    bytes,
                    truncated: (shown as u64) < bytes,
                    text,
                });
            }
            Ok(None) => out.skipped.push(Skipped {
                path,
                reason: SkipReason::Binary,
            }),
            Err(reason) => out.skipped.push(Skipped { path, reason }),
        }
    }
    Ok(out)
}

/// The first `max` bytes of the file at `abs` as text, its size and the
/// bytes shown; `None` for a binary file.
fn read_one(
    root: &Root,
    abs: &std::path::Path,
    max: usize,
) -> std::result::Result<Option<(String, u64, usize)>, SkipReason> {
    let unreadable = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => SkipReason::NotFound,
        _ => SkipReason::Unreadable,
    };
    // Opened beneath the root, then looked at: what is read is what was
    // checked, whatever the tree became since `Root::resolve`.
    let file = match root.open(abs, Links::Inside) {
        Ok(file) => file,
        Err(OpenError::Outside) => return Err(SkipReason::OutsideRoot),
        Err(OpenError::Io(e)) => return Err(unreadable(e)),
    };
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(SkipReason::NotAFile);
    }
    let mut head = Vec::with_capacity(max.min(meta.len() as usize) + 1);
    // One byte more than shown tells whether the file goes on.
    file.take(max as u64 + 1)
        .read_to_end(&mut head)
        .map_err(unreadable)?;
    if head.contains(&0) {
        return Ok(None);
    }
    let bytes = meta.len().max(head.len() as u64);
    if head.len() <= max {
        let shown = head.len();
        return Ok(Some((
            String::from_utf8_lossy(&head).into_owned(),
            bytes,
            shown,
        )));
    }
    let shown = floor_boundary(&head, max);
    let mut text = String::from_utf8_lossy(&head[..shown]).into_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('[');
    text.push_str(&cut(bytes - shown as u64, "byte"));
    text.push(']');
    Ok(Some((text, bytes, shown)))
}
