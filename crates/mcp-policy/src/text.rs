//! Text a backend or a caller wrote, made safe to keep and to show: names
//! checked against MCP's rule, control characters removed, long strings
//! cut with their size and a hash.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

/// The longest tool name MCP allows (its rule for tool names: 1–128
/// characters of `A-Z a-z 0-9 _ - .`). A longer name a caller sends can
/// name no tool, so it is refused before any lookup or did-you-mean.
pub const MAX_TOOL_NAME: usize = 128;

/// Whether `name` is a valid MCP tool name: 1 to [`MAX_TOOL_NAME`]
/// characters, each an ASCII letter, digit, `_`, `-` or `.`.
///
/// ```
/// use core_agent_mcp_policy::valid_tool_name;
///
/// assert!(valid_tool_name("read_file"));
/// assert!(valid_tool_name("v1.search-all"));
/// assert!(!valid_tool_name(""));
/// assert!(!valid_tool_name("two words"));
/// assert!(!valid_tool_name(&"x".repeat(129)));
/// ```
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `text` without control characters (C0, DEL and C1, which carry
/// terminal escapes such as OSC 52 and OSC 8); a newline and a tab are
/// kept, so a description keeps its lines.
///
/// ```
/// use core_agent_mcp_policy::strip_controls;
///
/// assert_eq!(strip_controls("a\u{1b}]52;c;eA==\u{7}b\nc"), "a]52;c;eA==b\nc");
/// assert_eq!(strip_controls("plain"), "plain");
/// ```
pub fn strip_controls(text: &str) -> Cow<'_, str> {
    let keep = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if text.chars().all(keep) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().filter(|c| keep(*c)).collect())
    }
}

/// `text` when it is at most `keep` bytes; else its first `keep` bytes (cut
/// at a character boundary) followed by `… (<size>, sha256:<8 hex>)`, so a
/// log line or an error names a long string without carrying it.
///
/// ```
/// use core_agent_mcp_policy::elide;
///
/// assert_eq!(elide("short", 256), "short");
/// let long = "x".repeat(4 * 1024 * 1024);
/// let cut = elide(&long, 8);
/// assert!(cut.starts_with("xxxxxxxx… (4.0 MiB, sha256:"), "{cut}");
/// assert!(cut.len() < 50);
/// ```
pub fn elide(text: &str, keep: usize) -> Cow<'_, str> {
    if text.len() <= keep {
        return Cow::Borrowed(text);
    }
    let mut end = keep;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let hash = Sha256::digest(text.as_bytes());
    let short: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Cow::Owned(format!(
        "{}… ({}, sha256:{short})",
        &text[..end],
        size(text.len())
    ))
}

/// `bytes` as a person reads it: `812 bytes`, `14.2 KiB`, `3.9 MiB`.
fn size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} bytes")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / (KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elide_keeps_whole_characters_and_names_the_size() {
        let text = "é".repeat(200);
        let cut = elide(&text, 5);
        assert!(cut.starts_with("éé… (400 bytes, sha256:"), "{cut}");
        assert_eq!(elide("", 0), "");
    }

    #[test]
    fn strip_controls_removes_c1_and_escapes() {
        assert_eq!(strip_controls("a\u{9b}31mb\r\u{7f}"), "a31mb");
        assert_eq!(strip_controls("tab\tkept"), "tab\tkept");
    }

    #[test]
    fn valid_tool_names_follow_mcp() {
        assert!(valid_tool_name(&"a".repeat(128)));
        assert!(!valid_tool_name("é"));
        assert!(!valid_tool_name("a/b"));
    }
}
