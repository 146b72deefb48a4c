use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::list_dir::not_found_or;
use crate::walk::{is_file, keep_first, parallel, walker};
use crate::{Cancel, Limits, Result, Root, SurveyError};

/// The input of `glob`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// The glob, matched against paths relative to `path`: `*` and `?` stay
    /// within one component, `**` crosses any number, `{a,b}` and `[ab]`
    /// are alternatives.
    pub pattern: String,
    /// The directory to search, relative to the root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
}

/// The files (and symlinks) that match, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GlobOutput {
    /// The directory searched, relative to the root.
    pub path: String,
    /// The first [`Limits::max_paths`] matching paths, relative to the root.
    pub paths: Vec<String>,
    /// How many paths match in all.
    pub count: usize,
    /// Whether `paths` holds fewer than `count`.
    pub truncated: bool,
}

pub(crate) fn glob(
    root: &Root,
    limits: &Limits,
    input: &GlobInput,
    cancel: &Cancel,
) -> Result<GlobOutput> {
    check_length("glob", &input.pattern, limits)?;
    let given = input.path.as_deref().unwrap_or(".");
    let base = directory(root, given)?;
    let (paths, count) = matching(root, &base, &input.pattern, limits.max_paths, cancel)?;
    Ok(GlobOutput {
        path: root.relative(&base),
        truncated: paths.len() < count,
        paths: paths.into_iter().map(|(shown, _)| shown).collect(),
        count,
    })
}

/// `given`, resolved, which must be a directory.
pub(crate) fn directory(root: &Root, given: &str) -> Result<PathBuf> {
    let base = root.resolve(given)?;
    let meta = std::fs::metadata(&base).map_err(|source| not_found_or(given, source))?;
    if meta.is_dir() {
        Ok(base)
    } else {
        Err(SurveyError::NotADirectory {
            path: given.to_owned(),
        })
    }
}

/// `BadPattern` for a pattern longer than [`Limits::max_pattern_bytes`].
pub(crate) fn check_length(what: &'static str, pattern: &str, limits: &Limits) -> Result<()> {
    if pattern.len() <= limits.max_pattern_bytes {
        return Ok(());
    }
    let mut shown = pattern.to_owned();
    shown.truncate(crate::text::floor_boundary(pattern.as_bytes(), 64));
    shown.push('…');
    Err(SurveyError::BadPattern {
        what,
        pattern: shown,
        message: format!(
            "it is {} bytes long, over the limit of {}; give a shorter one",
            pattern.len(),
            limits.max_pattern_bytes
        ),
    })
}

/// A glob as this crate reads one: relative, `*` within one component.
pub(crate) fn compile(pattern: &str) -> Result<GlobMatcher> {
    let bad = |message: &str| SurveyError::BadPattern {
        what: "glob",
        pattern: pattern.to_owned(),
        message: message.to_owned(),
    };
    if pattern.starts_with('/') {
        return Err(bad(
            "globs match paths relative to `path`; drop the leading `/`",
        ));
    }
    if Path::new(pattern)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        return Err(bad(
            "a glob cannot climb with `..`; give the directory as `path` instead",
        ));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| bad(&e.kind().to_string()))
}

/// The directories a pattern starts with, written out: `src/**/*.rs` →
/// `src`. Never the last component.
fn literal_prefix(pattern: &str) -> PathBuf {
    let mut out = PathBuf::new();
    let mut parts: Vec<&str> = pattern.split('/').collect();
    parts.pop();
    for part in parts {
        if part.is_empty() || part == "." || part.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            break;
        }
        out.push(part);
    }
    out
}

/// The files and symlinks below `base` whose path relative to `base`
/// matches `pattern`: the first `max` (as shown, relative to the root, and
/// as they are), sorted, and how many in all.
///
/// The directories the pattern starts with are walked into directly, as if
/// given as `path` (so `target/*.o` lists a gitignored `target`), when they
/// are real directories (a symlink is never walked through).
pub(crate) fn matching(
    root: &Root,
    base: &Path,
    pattern: &str,
    max: usize,
    cancel: &Cancel,
) -> Result<(Vec<(String, PathBuf)>, usize)> {
    // `./src/*.rs` means `src/*.rs`: walked paths never start with `./`.
    let pattern = pattern.trim_start_matches("./");
    let matcher = compile(pattern)?;
    let prefix = base.join(literal_prefix(pattern));
    let start = match std::fs::symlink_metadata(&prefix) {
        Ok(meta) if meta.is_dir() => prefix,
        Ok(_) | Err(_) if prefix != base => return Ok((Vec::new(), 0)),
        _ => base.to_path_buf(),
    };
    // Walked into directly, a hidden (or ignored) directory stays hidden.
    if start != base && root.is_hidden(&start) {
        return Ok((Vec::new(), 0));
    }
    let states = parallel(
        &walker(root, &start),
        cancel,
        || (Vec::new(), 0_usize),
        |(paths, count), entry| {
            let wanted = is_file(entry) || entry.path_is_symlink() && entry.depth() > 0;
            let below = entry.path().strip_prefix(base).unwrap_or(entry.path());
            if wanted && matcher.is_match(below) {
                *count += 1;
                paths.push((root.relative(entry.path()), entry.path().to_path_buf()));
                keep_first(paths, max, false);
            }
        },
    )?;
    let mut paths = Vec::new();
    let mut count = 0;
    for (mut part, n) in states {
        paths.append(&mut part);
        count += n;
        keep_first(&mut paths, max, false);
    }
    keep_first(&mut paths, max, true);
    Ok((paths, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prefix_stops_at_the_first_pattern() {
        let p = |s: &str| literal_prefix(s).display().to_string();
        assert_eq!(p("src/**/*.rs"), "src");
        assert_eq!(p("crates/survey/src/*.rs"), "crates/survey/src");
        assert_eq!(p("*.rs"), "");
        assert_eq!(p("src"), "");
        assert_eq!(p("./src/a/*"), "");
        assert_eq!(p("{a,b}/c/*"), "");
    }
}
