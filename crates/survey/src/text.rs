//! Cutting text on character boundaries, with a marker that says how much
//! was cut.

use std::fmt::Write as _;

/// Whether `byte` starts a character (is not a UTF-8 continuation byte).
fn starts_char(byte: u8) -> bool {
    byte & 0xC0 != 0x80
}

/// The characters in `bytes` (invalid bytes count as one each).
fn chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| starts_char(b)).count()
}

/// The largest character boundary at or before `at`.
pub(crate) fn floor_boundary(bytes: &[u8], mut at: usize) -> usize {
    at = at.min(bytes.len());
    while at > 0 && at < bytes.len() && !starts_char(bytes[at]) {
        at -= 1;
    }
    at
}

/// The boundary `n` characters after the boundary `from` (or the end).
fn forward(bytes: &[u8], from: usize, n: usize) -> usize {
    let mut seen = 0;
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        if starts_char(b) {
            if seen == n {
                return i;
            }
            seen += 1;
        }
    }
    bytes.len()
}

/// The boundary `n` characters before the boundary `from` (or the start).
fn backward(bytes: &[u8], from: usize, n: usize) -> usize {
    let mut at = from;
    let mut seen = 0;
    while at > 0 && seen < n {
        at -= 1;
        if starts_char(bytes[at]) {
            seen += 1;
        }
    }
    at
}

/// `line` as text, lossy; when longer than `max` characters, a window of
/// `max` characters (starting a fifth of the window before `focus`, the
/// match, when there is one) with `[… N chars cut]` on the sides cut.
pub(crate) fn cut_line(line: &[u8], focus: Option<usize>, max: usize) -> String {
    if line.len() <= max {
        return String::from_utf8_lossy(line).into_owned();
    }
    let total = chars(line);
    if total <= max {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut start = match focus {
        Some(at) => backward(line, floor_boundary(line, at), max / 5),
        None => 0,
    };
    let mut end = forward(line, start, max);
    if end == line.len() {
        start = backward(line, end, max);
        end = line.len();
    }
    let before = chars(&line[..start]);
    let after = total - before - chars(&line[start..end]);
    let mut out = String::with_capacity(end - start + 48);
    if before > 0 {
        let _ = write!(out, "[{}] ", cut(before as u64, "char"));
    }
    out.push_str(&String::from_utf8_lossy(&line[start..end]));
    if after > 0 {
        let _ = write!(out, " [{}]", cut(after as u64, "char"));
    }
    out
}

/// `… 1 char cut`, `… 2 chars cut`: the marker's words.
pub(crate) fn cut(n: u64, unit: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("… {n} {unit}{s} cut")
}

/// `line` without its line terminator.
pub(crate) fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_pass() {
        assert_eq!(cut_line(b"hello", None, 5), "hello");
        assert_eq!(cut_line("héllo".as_bytes(), None, 5), "héllo");
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let line = "é".repeat(10);
        assert_eq!(cut_line(line.as_bytes(), None, 4), "éééé [… 6 chars cut]");
    }

    #[test]
    fn the_window_holds_the_match() {
        let line = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        assert_eq!(
            cut_line(line.as_bytes(), Some(100), 10),
            "[… 98 chars cut] aaneedlebb [… 98 chars cut]"
        );
        // Near the end, the window is full and ends with the line.
        assert_eq!(
            cut_line(line.as_bytes(), Some(205), 10),
            "[… 196 chars cut] bbbbbbbbbb"
        );
    }
}
