//! JSON Lines: one JSON object or array per line, digested as the array of
//! them by the structural pruner, more tightly until it fits.

use serde::de::IgnoredAny;

use super::{MAX_LINE, Out, clip, count, lines};
use crate::prune::{Limits, prune};

/// The digest of `text` if it is JSON Lines: at least two non-blank lines,
/// each one JSON object or array. It is the pruned array of the lines,
/// under `target` bytes if tighter limits get it there, else under `hard`;
/// a line too wide for either is shown cut, as text.
pub(super) fn digest(text: &str, limits: &Limits, target: usize, hard: usize) -> Option<String> {
    let first = text.trim_start().as_bytes().first()?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    let mut n = 0usize;
    for line in lines(text) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let shaped = (line.starts_with('{') && line.ends_with('}'))
            || (line.starts_with('[') && line.ends_with(']'));
        if !shaped || serde_json::from_str::<IgnoredAny>(line).is_err() {
            return None;
        }
        n += 1;
    }
    if n < 2 {
        return None;
    }
    let mut array = String::with_capacity(text.len() + 2);
    array.push('[');
    for line in lines(text).map(str::trim).filter(|l| !l.is_empty()) {
        if array.len() > 1 {
            array.push(',');
        }
        array.push_str(line);
    }
    array.push(']');
    let mut within_hard = None;
    // `limits`, then ever tighter ones (fewer items, shorter strings,
    // shallower), as the fit of any structural digest.
    let mut next = Some(*limits);
    while let Some(limits) = next.take() {
        next = crate::fit::tighter(&limits);
        let Ok(pruned) = prune(array.as_bytes(), &limits) else {
            return None;
        };
        if pruned.len() <= target {
            return Some(pruned);
        }
        if pruned.len() <= hard && within_hard.is_none() {
            within_hard = Some(pruned);
        }
    }
    Some(within_hard.unwrap_or_else(|| cut(text, n, target)))
}

/// The last resort for lines too wide to prune under the bound: the first
/// and last lines, cut.
fn cut(text: &str, n: usize, target: usize) -> String {
    let mut out = Out::new(target);
    out.line(&format!(
        "[digest: JSON Lines, {} bytes: {}, too wide to prune under {target} bytes; the first and last, cut]",
        text.len(),
        count(n, "line", "lines")
    ));
    let mut rows = lines(text).map(str::trim).filter(|l| !l.is_empty());
    if let Some(first) = rows.next() {
        out.line(&clip(first, MAX_LINE * 4));
    }
    if let Some(last) = rows.next_back() {
        out.line(&clip(last, MAX_LINE * 4));
    }
    out.finish()
}
