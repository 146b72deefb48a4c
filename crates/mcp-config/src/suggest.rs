//! Did-you-mean: the known name a misspelled one was meant to be.

/// The name in `known` closest to `key`, when it is close enough to be a
/// typo of it; `None` when nothing is.
///
/// Distance is Damerau-Levenshtein (a swap of two neighbours counts once),
/// ignoring case; a name is close enough within 2 edits, or a quarter of its
/// length for long names, and never when every character would change. The
/// closest wins; on a tie, the first in `known`.
///
/// ```
/// use core_agent_mcp_config::closest;
///
/// let known = ["command", "args", "env"];
/// assert_eq!(closest("comand", &known), Some("command"));
/// assert_eq!(closest("ARGS", &known), Some("args"));
/// assert_eq!(closest("timeout", &known), None);
/// ```
pub fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    suggestions(key, known.iter().copied(), 1)
        .into_iter()
        .next()
}

/// Up to `max` names of `known` close enough to `key` to be a typo of it
/// (as [`closest`] decides), closest first; on a tie, in `known`'s order.
///
/// ```
/// use core_agent_mcp_config::suggestions;
///
/// let known = ["fs_read", "fs_reads", "fs_write"];
/// assert_eq!(suggestions("fs_raed", known, 3), ["fs_read", "fs_reads"]);
/// assert_eq!(suggestions("fs_raed", known, 1), ["fs_read"]);
/// ```
pub fn suggestions<'a>(
    key: &str,
    known: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<&'a str> {
    let key = key.to_lowercase();
    let mut scored: Vec<(usize, &'a str)> = known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(&key, &k.to_lowercase()), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .collect();
    // Stable: equal distances keep `known`'s order.
    scored.sort_by_key(|(d, _)| *d);
    scored.into_iter().take(max).map(|(_, k)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_typos_only() {
        let keys = ["command", "read_only", "transport"];
        assert_eq!(closest("comand", &keys), Some("command"));
        assert_eq!(closest("readonly", &keys), Some("read_only"));
        assert_eq!(closest("Transport", &keys), Some("transport"));
        assert_eq!(closest("zzzzzz", &keys), None);
        // Nothing is a typo of a name it shares no character with.
        assert_eq!(closest("ab", &["xy"]), None);
        assert_eq!(closest("x", &[]), None);
    }
}
