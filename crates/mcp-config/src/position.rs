//! JSON pointers in the text of a file: escaping a segment, and finding the
//! line and column a pointer points to, for error messages.

/// Escapes one JSON pointer segment ([RFC 6901]): `~` becomes `~0` and `/`
/// becomes `~1`, so a key can be appended to a pointer as `/{segment}`.
///
/// ```
/// use core_agent_mcp_config::escape_pointer;
///
/// assert_eq!(escape_pointer("a/b~c"), "a~1b~0c");
/// assert_eq!(format!("/servers/{}", escape_pointer("my/server")), "/servers/my~1server");
/// ```
///
/// [RFC 6901]: https://www.rfc-editor.org/rfc/rfc6901
pub fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The 1-based line and column (in characters) that the JSON pointer
/// `pointer` points to in `text`: the key of an object member, the start of
/// an array element, or the start of the document for `""`.
///
/// A pointer that is not in the text gives the position of its closest
/// ancestor that is, so a "missing field" problem points at the object that
/// lacks it. `text` should be valid JSON; anything else gives a best effort,
/// never a panic. Each call scans the whole text, which suits the few
/// problems of a config file.
///
/// ```
/// use core_agent_mcp_config::locate;
///
/// let text = "{\n  \"permissions\": {\n    \"mode\": \"sometimes\"\n  }\n}";
/// assert_eq!(locate(text, "/permissions/mode"), (3, 5));
/// assert_eq!(locate(text, "/permissions/allow"), (2, 3)); // not there: its parent
/// assert_eq!(locate(text, ""), (1, 1));
/// ```
pub fn locate(text: &str, pointer: &str) -> (usize, usize) {
    Positions::new(text).line_col(pointer)
}

/// Finds JSON pointers in the text of a document: each lookup walks the
/// text once, without recursion and without building an index, so its cost
/// is linear in the text whatever the nesting or the length of keys.
#[derive(Debug)]
pub(crate) struct Positions<'a> {
    text: &'a str,
}

impl<'a> Positions<'a> {
    /// For lookups in `text`, which should be valid JSON (invalid input
    /// gives a best effort, never a panic).
    pub(crate) fn new(text: &'a str) -> Positions<'a> {
        Positions { text }
    }

    /// 1-based line and column (in characters) of `pointer`, or of its
    /// closest ancestor that exists.
    pub(crate) fn line_col(&self, pointer: &str) -> (usize, usize) {
        let offset = self.offset(pointer);
        let mut end = offset.min(self.text.len());
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &self.text[..end];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    /// The byte offset of the node at `pointer` (an object member's key, an
    /// array element's start, the root's start), or of its deepest ancestor
    /// in the text. A repeated key is found at its last occurrence, the one
    /// a JSON parser keeps.
    fn offset(&self, pointer: &str) -> usize {
        let mut scanner = Scanner {
            bytes: self.text.as_bytes(),
            text: self.text,
            at: 0,
        };
        scanner.ws();
        let mut found = scanner.at;
        if pointer.is_empty() {
            return found;
        }
        for segment in pointer.split('/').skip(1) {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            let next = match scanner.bytes.get(scanner.at) {
                Some(b'{') => scanner.member(&segment),
                Some(b'[') => segment
                    .parse::<usize>()
                    .ok()
                    .filter(|_| segment == "0" || !segment.starts_with('0'))
                    .and_then(|index| scanner.element(index)),
                _ => None,
            };
            match next {
                Some(at) => found = at,
                None => break,
            }
        }
        found
    }
}

struct Scanner<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    /// At a `{`: the offset of the last member named `key`, leaving the
    /// scanner at its value.
    fn member(&mut self, key: &str) -> Option<usize> {
        self.at += 1;
        let mut found: Option<(usize, usize)> = None;
        loop {
            self.ws();
            match self.bytes.get(self.at) {
                Some(b'}') | None => break,
                Some(b',') => self.at += 1,
                Some(b'"') => {
                    let key_at = self.at;
                    let name = self.string();
                    self.ws();
                    if self.bytes.get(self.at) == Some(&b':') {
                        self.at += 1;
                    }
                    self.ws();
                    if name == key {
                        found = Some((key_at, self.at));
                    }
                    self.skip_value();
                }
                Some(_) => self.skip_value_or_byte(),
            }
        }
        let (key_at, value_at) = found?;
        self.at = value_at;
        Some(key_at)
    }

    /// At a `[`: the offset of element `index`, leaving the scanner there.
    fn element(&mut self, index: usize) -> Option<usize> {
        self.at += 1;
        let mut i = 0;
        loop {
            self.ws();
            match self.bytes.get(self.at) {
                Some(b']') | None => return None,
                Some(b',') => self.at += 1,
                Some(_) if i == index => return Some(self.at),
                Some(_) => {
                    self.skip_value_or_byte();
                    i += 1;
                }
            }
        }
    }

    /// Skips one value, however deep, without recursion.
    fn skip_value(&mut self) {
        let mut depth = 0usize;
        loop {
            match self.bytes.get(self.at) {
                None => return,
                Some(b'"') => {
                    self.string();
                    if depth == 0 {
                        return;
                    }
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    self.at += 1;
                }
                Some(b'}' | b']') => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    self.at += 1;
                    if depth == 0 {
                        return;
                    }
                }
                Some(b',') if depth == 0 => return,
                Some(_) => self.at += 1,
            }
        }
    }

    /// Skips a value, and always at least one byte, so a stray `}` or `]`
    /// where a value belongs cannot stop the scan in place.
    fn skip_value_or_byte(&mut self) {
        let before = self.at;
        self.skip_value();
        if self.at == before {
            self.at += 1;
        }
    }

    /// Reads a string token and returns its decoded text.
    fn string(&mut self) -> String {
        let start = self.at;
        self.at += 1;
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    break;
                }
                _ => self.at += 1,
            }
        }
        let raw = self
            .text
            .get(start..self.at.min(self.text.len()))
            .unwrap_or_default();
        serde_json::from_str(raw).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_point_at_their_keys_and_elements_at_their_values() {
        let text = "{\n  \"servers\": {\n    \"fs\": {\"comand\": \"x\", \"args\": [1, \"a/b\"]},\n    \"a/b\": 1\n  }\n}";
        let p = Positions::new(text);
        assert_eq!(p.line_col(""), (1, 1));
        assert_eq!(p.line_col("/servers"), (2, 3));
        assert_eq!(p.line_col("/servers/fs"), (3, 5));
        assert_eq!(p.line_col("/servers/fs/comand"), (3, 12));
        assert_eq!(p.line_col("/servers/fs/args/1"), (3, 39));
        assert_eq!(p.line_col("/servers/a~1b"), (4, 5));
        // A pointer that does not exist falls back to its closest ancestor.
        assert_eq!(p.line_col("/servers/fs/url"), (3, 5));
    }

    /// Found by `cargo xtask fuzz pointer`: a long key over a long array,
    /// or 64 KiB of `[`, took gigabytes (every node's pointer was kept) and
    /// recursed once per level. A lookup is now one linear walk.
    #[test]
    fn deep_nesting_and_long_keys_are_linear() {
        let text = "[".repeat(1_000_000);
        assert_eq!(locate(&text, "/0/0/0"), (1, 4));
        let objects = "{\"a\":".repeat(100_000);
        assert_eq!(locate(&objects, "/a/a"), (1, 7));
        let wide = format!("{{\"{}\": [{}1]}}", "k".repeat(30_000), "1,".repeat(30_000));
        let pointer = format!("/{}/29999", "k".repeat(30_000));
        assert_eq!(locate(&wide, &pointer), (1, 30_007 + 2 * 29_999));
    }

    #[test]
    fn the_last_of_repeated_keys_is_found_and_leading_zeros_are_no_index() {
        let text = "{\"a\": 1,\n \"a\": [5, 6]}";
        assert_eq!(locate(text, "/a"), (2, 2));
        assert_eq!(locate(text, "/a/1"), (2, 11));
        assert_eq!(locate(text, "/a/01"), (2, 2));
    }

    #[test]
    fn garbage_never_panics() {
        for text in ["", "{", "{\"a\":", "[1,", "\"abc", "{\"a\\", "}}}"] {
            let _ = Positions::new(text).line_col("/a/b");
        }
    }
}
