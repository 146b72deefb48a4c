//! Did-you-mean: the known name a misspelled one was meant to be.

/// The longest name `suggestions` (and `closest`) looks for names
/// near: 128 bytes, MCP's limit for a tool name; a longer key gets none.
const SUGGEST_MAX_KEY: usize = 128;

/// At most this many known names are compared with a key (those of a
/// length that could be near it): a did-you-mean costs a bounded amount of
/// work however many names there are.
const SUGGEST_MAX_COMPARED: usize = 1000;

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
///
/// The work is bounded whoever sends `key`: a key over 128 bytes (MCP's
/// limit for a tool name) gets no suggestion, a name whose length differs
/// from the key's by more than its allowed distance (or over 256 bytes) is
/// skipped before any comparison, and at most 1,000 names are compared.
pub fn suggestions<'a>(
    key: &str,
    known: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<&'a str> {
    if key.len() > SUGGEST_MAX_KEY {
        return Vec::new();
    }
    let key = key.to_lowercase();
    let key_chars = key.chars().count();
    let allowed = |k: &str| 2.max(k.len() / 4);
    let mut scored: Vec<(usize, &'a str)> = known
        .into_iter()
        // The distance is at least the difference of the lengths.
        .filter(|k| {
            k.len() <= 2 * SUGGEST_MAX_KEY && key_chars.abs_diff(k.chars().count()) <= allowed(k)
        })
        .take(SUGGEST_MAX_COMPARED)
        .map(|k| (strsim::damerau_levenshtein(&key, &k.to_lowercase()), k))
        .filter(|(d, k)| *d <= allowed(k) && *d < k.len())
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

    #[test]
    fn long_keys_get_no_suggestion_and_cost_no_comparison() {
        let long = "a".repeat(1 << 20);
        assert_eq!(closest(&long, &["a", "aa"]), None);
        let near = format!("{}b", "a".repeat(SUGGEST_MAX_KEY - 1));
        let known = "a".repeat(SUGGEST_MAX_KEY);
        assert_eq!(closest(&near, &[known.as_str()]), Some(known.as_str()));
        // Names too short or too long to be near are not compared.
        assert_eq!(closest("abcdefgh", &["a", &"abcdefgh".repeat(4)]), None);
    }
}
