use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::open::Links;
use crate::walk::{EntryType, keep_first, parallel, walker};
use crate::{Cancel, Limits, Result, Root, SurveyError};

/// The input of `list_dir`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDirInput {
    /// The directory, relative to the root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// How deep to list: 1 (the default) is the directory's own entries.
    #[serde(default)]
    pub depth: Option<usize>,
}

/// A directory's entries, directories first, then by name, each
/// directory's entries right after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListDirOutput {
    /// The directory listed, relative to the root.
    pub path: String,
    /// The first [`Limits::max_entries`] entries.
    pub entries: Vec<Entry>,
    /// How many entries there are in all.
    pub total: usize,
    /// Whether `entries` holds fewer than `total`.
    pub truncated: bool,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Entry {
    /// The path, relative to the root.
    pub path: String,
    /// What it is (a symlink is not followed).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// The size in bytes, for a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

pub(crate) fn list_dir(
    root: &Root,
    limits: &Limits,
    input: &ListDirInput,
    cancel: &Cancel,
) -> Result<ListDirOutput> {
    let given = input.path.as_deref().unwrap_or(".");
    let depth = input.depth.unwrap_or(1);
    if depth == 0 || depth > limits.max_depth {
        return Err(SurveyError::BadInput(format!(
            "depth must be between 1 and {}; got {depth}",
            limits.max_depth
        )));
    }
    let start = root.resolve(given)?;
    let meta = std::fs::metadata(&start).map_err(|source| not_found_or(given, source))?;
    if !meta.is_dir() {
        return Err(SurveyError::NotADirectory {
            path: given.to_owned(),
        });
    }

    let max = limits.max_entries;
    let mut builder = walker(root, &start);
    builder.max_depth(Some(depth));
    // Sizes are read (one stat each) only for the entries shown, after the
    // walk: on a large tree, most of a listing's time would go there.
    let states = parallel(
        &builder,
        cancel,
        || (Vec::new(), 0_usize),
        |(kept, total): &mut (Vec<Listed>, usize), entry| {
            if entry.depth() == 0 {
                return;
            }
            let kind = EntryType::of(entry.file_type());
            let below = entry.path().strip_prefix(&start).unwrap_or(entry.path());
            *total += 1;
            kept.push(Listed {
                key: sort_key(below, kind == EntryType::Dir),
                entry: Entry {
                    path: root.relative(entry.path()),
                    kind,
                    size: None,
                },
                abs: entry.path().to_path_buf(),
            });
            keep_first(kept, max, false);
        },
    )?;
    let mut kept = Vec::new();
    let mut total = 0;
    for (mut part, n) in states {
        kept.append(&mut part);
        total += n;
        keep_first(&mut kept, max, false);
    }
    keep_first(&mut kept, max, true);
    let mut entries = Vec::with_capacity(kept.len());
    for Listed { mut entry, abs, .. } in kept {
        cancel.check()?;
        if entry.kind == EntryType::File {
            // Opened beneath the root: a file swapped for a symlink is not
            // followed out of it.
            entry.size = root
                .open(&abs, Links::Inside)
                .ok()
                .and_then(|file| file.metadata().ok())
                .map(|m| m.len());
        }
        entries.push(entry);
    }
    Ok(ListDirOutput {
        path: root.relative(&start),
        truncated: entries.len() < total,
        entries,
        total,
    })
}

/// An entry on its way to the listing, ordered by `key` (see [`sort_key`]).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    key: Vec<u8>,
    entry: Entry,
    abs: PathBuf,
}

/// A byte string whose order is the listing's: per component, a class byte
/// (0 for a directory, 1 otherwise), the name's bytes, then a NUL, so a
/// directory sorts before files and its own entries come right after it.
fn sort_key(below: &Path, is_dir: bool) -> Vec<u8> {
    let mut key = Vec::new();
    let mut parts = below.components().peekable();
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        key.push(u8::from(last && !is_dir));
        key.extend_from_slice(part.as_os_str().as_encoded_bytes());
        key.push(0);
    }
    key
}

/// `NotFound` for a missing path, else the I/O error.
pub(crate) fn not_found_or(given: &str, source: std::io::Error) -> SurveyError {
    if source.kind() == std::io::ErrorKind::NotFound {
        SurveyError::NotFound {
            path: given.to_owned(),
        }
    } else {
        SurveyError::Io {
            path: given.to_owned(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_first_then_names_then_their_entries() {
        let mut paths = [
            ("b.txt", false),
            ("a", true),
            ("a/z.txt", false),
            ("a/y", true),
            ("a.b", true),
            ("Z", false),
        ];
        paths.sort_by_key(|(p, d)| sort_key(Path::new(p), *d));
        let order: Vec<&str> = paths.iter().map(|(p, _)| *p).collect();
        assert_eq!(order, ["a", "a/y", "a/z.txt", "a.b", "Z", "b.txt"]);
    }
}
