//! The streaming structural pruner.
//!
//! It reads JSON bytes once, front to back, and writes the pruned JSON as it
//! goes; it never builds a tree. The middle of a long array is skipped at
//! scan speed (only its brackets and strings are tracked), and objects deeper
//! than the depth cap are skipped except for their identifier-shaped scalars.
//! An identifier key keeps its scalar value (up to `max_identifier_chars`);
//! an object or array under it is pruned like any other value.

use std::fmt::Write;

/// The pruner's bounds. [`Limits::default`] is the spec's; the `with_*`
/// methods change one bound each:
///
/// ```
/// use core_agent_digest::{Limits, prune};
///
/// let limits = Limits::default().with_array_head(2).with_array_tail(1);
/// let out = prune(b"[1, 2, 3, 4, 5]", &limits).unwrap();
/// assert_eq!(out, r#"[1,2,"[digest: 2 of 5 items omitted]",5]"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Strings longer than this many characters are cut (500).
    pub max_string_chars: usize,
    /// Arrays longer than `head + tail` keep only those (15 + 5).
    pub array_head: usize,
    /// See `array_head`.
    pub array_tail: usize,
    /// Objects and arrays deeper than this are summarized (8).
    pub max_depth: usize,
    /// A string under an identifier key is kept whole up to this many
    /// characters (4096: far past any real id, name, path or URL, but a
    /// `data:` URL or a status message of megabytes is still cut).
    pub max_identifier_chars: usize,
    /// An object keeps its first this many members and counts the rest in a
    /// `"_digest"` member (unbounded by default, as the spec sets no bound;
    /// the tighter passes of [`crate::fit`] set one).
    pub max_object_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_string_chars: 500,
            array_head: 15,
            array_tail: 5,
            max_depth: 8,
            max_identifier_chars: 4096,
            max_object_keys: usize::MAX,
        }
    }
}

impl Limits {
    /// Strings longer than this many characters are cut.
    #[must_use]
    pub fn with_max_string_chars(mut self, chars: usize) -> Limits {
        self.max_string_chars = chars;
        self
    }

    /// Items kept at the start of a long array.
    #[must_use]
    pub fn with_array_head(mut self, items: usize) -> Limits {
        self.array_head = items;
        self
    }

    /// Items kept at the end of a long array.
    #[must_use]
    pub fn with_array_tail(mut self, items: usize) -> Limits {
        self.array_tail = items;
        self
    }

    /// Objects and arrays deeper than this are summarized.
    #[must_use]
    pub fn with_max_depth(mut self, depth: usize) -> Limits {
        self.max_depth = depth;
        self
    }

    /// A string under an identifier key is kept whole up to this many
    /// characters.
    #[must_use]
    pub fn with_max_identifier_chars(mut self, chars: usize) -> Limits {
        self.max_identifier_chars = chars;
        self
    }

    /// An object keeps its first this many members.
    #[must_use]
    pub fn with_max_object_keys(mut self, keys: usize) -> Limits {
        self.max_object_keys = keys;
        self
    }
}

/// The input is not valid JSON at this byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    /// Byte offset of the problem.
    pub at: usize,
}

/// Whether a key names an identifier, whose scalar value is never dropped
/// and kept whole up to [`Limits::max_identifier_chars`]: `id`, `uid`, `name`, `title`, `key`, `kind`, `type`, `status`, `state`,
/// `apiVersion`, `ref`, `sha`, `path`, any key containing `url`, `Url`,
/// `URL` or `uri`, and any key ending in `_id` or `Id`.
pub(crate) fn is_identifier_key(key: &str) -> bool {
    matches!(
        key,
        "id" | "uid"
            | "name"
            | "title"
            | "key"
            | "kind"
            | "type"
            | "status"
            | "state"
            | "apiVersion"
            | "ref"
            | "sha"
            | "path"
    ) || key.contains("url")
        || key.contains("Url")
        || key.contains("URL")
        || key.contains("uri")
        || key.ends_with("_id")
        || key.ends_with("Id")
}

/// Prunes the JSON text `input` under `limits`. The output is valid JSON,
/// and the same input always gives the same output.
pub fn prune(input: &[u8], limits: &Limits) -> Result<String, Malformed> {
    prune_with_stats(input, limits).map(|(out, _)| out)
}

/// What the pruner cut from long strings, beside the output of [`prune`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneStats {
    /// How many strings were cut to `max_string_chars`.
    pub strings_cut: usize,
    /// How many bytes of the input those cuts left out.
    pub string_bytes_cut: usize,
}

/// [`prune`], and how much of the input's mass was in long strings it cut.
/// The router uses it to tell a wrapper of one long text (`{"content": "…"}`)
/// from structured data.
pub fn prune_with_stats(input: &[u8], limits: &Limits) -> Result<(String, PruneStats), Malformed> {
    let mut p = Pruner {
        src: input,
        at: 0,
        out: String::with_capacity(input.len().min(1 << 20)),
        limits: *limits,
        stats: PruneStats::default(),
    };
    p.ws();
    p.value(1)?;
    p.ws();
    if p.at != input.len() {
        return Err(Malformed { at: p.at });
    }
    Ok((p.out, p.stats))
}

/// The shape of the JSON value `input` in a few words (`an object of 3
/// fields`, `an array of 5000 items`, `a string of 80 characters`, `a
/// number`), or `None` when it is not JSON.
pub(crate) fn shape(input: &[u8]) -> Option<String> {
    let mut p = Pruner {
        src: input,
        at: 0,
        out: String::new(),
        limits: Limits::default(),
        stats: PruneStats::default(),
    };
    p.ws();
    let what = match p.peek()? {
        b'[' => format!("an array of {} items", p.skip_array_count().ok()?),
        b'{' => format!("an object of {} fields", p.skip_object_count().ok()?),
        b'"' => format!("a string of {} characters", p.string_span().ok()?.2),
        b't' | b'f' => {
            p.scalar_span().ok()?;
            "a boolean".to_owned()
        }
        b'n' => {
            p.scalar_span().ok()?;
            "null".to_owned()
        }
        _ => {
            p.scalar_span().ok()?;
            "a number".to_owned()
        }
    };
    p.ws();
    (p.at == input.len()).then_some(what)
}

struct Pruner<'a> {
    src: &'a [u8],
    at: usize,
    out: String,
    limits: Limits,
    stats: PruneStats,
}

impl Pruner<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.src.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    fn bad<T>(&self) -> Result<T, Malformed> {
        Err(Malformed { at: self.at })
    }

    fn expect(&mut self, b: u8) -> Result<(), Malformed> {
        self.ws();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            self.bad()
        }
    }

    /// Copies input bytes `[start, end)` to the output (they are valid UTF-8:
    /// they lie between JSON tokens of a `&str`-derived input or were checked).
    fn copy(&mut self, start: usize, end: usize) {
        self.out
            .push_str(&String::from_utf8_lossy(&self.src[start..end]));
    }

    /// Prunes one value at `depth` (the root is depth 1).
    fn value(&mut self, depth: usize) -> Result<(), Malformed> {
        self.ws();
        match self.peek() {
            Some(b'{') if depth > self.limits.max_depth => self.summarize_object(),
            Some(b'[') if depth > self.limits.max_depth => {
                let start = self.at;
                let n = self.skip_array_count()?;
                let _ = start;
                let _ = write!(
                    self.out,
                    "[\"[digest: array of {n} items at depth {depth} omitted]\"]"
                );
                Ok(())
            }
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let max = self.limits.max_string_chars;
                let (start, end, chars, cut) = self.string_span_cut(max)?;
                if chars > max {
                    self.stats.strings_cut += 1;
                    self.stats.string_bytes_cut += end.saturating_sub(cut);
                    self.cut_string(start, cut, chars, max)
                } else {
                    self.copy(start, end);
                    Ok(())
                }
            }
            Some(_) => {
                let (start, end) = self.scalar_span()?;
                self.copy(start, end);
                Ok(())
            }
            None => self.bad(),
        }
    }

    fn object(&mut self, depth: usize) -> Result<(), Malformed> {
        self.at += 1;
        self.out.push('{');
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.out.push('}');
            return Ok(());
        }
        let (mut kept, mut omitted) = (0usize, 0usize);
        loop {
            self.ws();
            let (ks, ke, _) = self.string_span()?;
            self.expect(b':')?;
            self.ws();
            if kept == self.limits.max_object_keys {
                self.skip_value()?;
                omitted += 1;
            } else {
                if kept > 0 {
                    self.out.push(',');
                }
                kept += 1;
                self.copy(ks, ke);
                self.out.push(':');
                let key = decode_key(&self.src[ks..ke]);
                if is_identifier_key(&key) && !matches!(self.peek(), Some(b'{' | b'[')) {
                    self.identifier_scalar()?;
                } else {
                    self.value(depth + 1)?;
                }
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                _ => return self.bad(),
            }
        }
        if omitted > 0 {
            if kept > 0 {
                self.out.push(',');
            }
            let _ = write!(
                self.out,
                "\"_digest\":\"{omitted} of {} fields omitted\"",
                kept + omitted
            );
        }
        self.out.push('}');
        Ok(())
    }

    /// The scalar value of an identifier key: whole, but a string longer than
    /// `max_identifier_chars` is cut like any other (not counted in the
    /// stats, which weigh prose).
    fn identifier_scalar(&mut self) -> Result<(), Malformed> {
        if self.peek() != Some(b'"') {
            let (start, end) = self.scalar_span()?;
            self.copy(start, end);
            return Ok(());
        }
        let max = self.limits.max_identifier_chars;
        let (start, end, chars, cut) = self.string_span_cut(max)?;
        if chars > max {
            self.cut_string(start, cut, chars, max)
        } else {
            self.copy(start, end);
            Ok(())
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Malformed> {
        self.at += 1;
        self.out.push('[');
        self.ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            self.out.push(']');
            return Ok(());
        }
        let head = self.limits.array_head;
        let tail = self.limits.array_tail;
        let mut count = 0usize;
        // The last `tail` elements after the head, as byte spans: pruned at the end.
        let mut ring: std::collections::VecDeque<(usize, usize)> =
            std::collections::VecDeque::with_capacity(tail + 1);
        loop {
            self.ws();
            if count < head {
                if count > 0 {
                    self.out.push(',');
                }
                self.value(depth + 1)?;
            } else {
                let span = self.skip_value()?;
                ring.push_back(span);
                if ring.len() > tail {
                    ring.pop_front();
                }
            }
            count += 1;
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    break;
                }
                _ => return self.bad(),
            }
        }
        let omitted = count.saturating_sub(head + ring.len());
        // Whether an element was written (the head may be empty).
        let mut any = count.min(head) > 0;
        if omitted > 0 {
            if any {
                self.out.push(',');
            }
            any = true;
            let _ = write!(self.out, "\"[digest: {omitted} of {count} items omitted]\"");
        }
        for (start, end) in ring {
            if any {
                self.out.push(',');
            }
            any = true;
            let mut sub = Pruner {
                src: &self.src[..end],
                at: start,
                out: String::new(),
                limits: self.limits,
                stats: self.stats,
            };
            sub.value(depth + 1)?;
            self.out.push_str(&sub.out);
            self.stats = sub.stats;
        }
        self.out.push(']');
        Ok(())
    }

    /// An object past the depth cap: its identifier-shaped scalars, and a
    /// note of what was left out.
    fn summarize_object(&mut self) -> Result<(), Malformed> {
        self.at += 1;
        self.out.push('{');
        let mut kept = 0usize;
        let mut omitted = 0usize;
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.out.push('}');
            return Ok(());
        }
        loop {
            self.ws();
            let (ks, ke, _) = self.string_span()?;
            let key = decode_key(&self.src[ks..ke]);
            self.expect(b':')?;
            self.ws();
            let scalar = !matches!(self.peek(), Some(b'{' | b'['));
            if scalar && is_identifier_key(&key) && kept < self.limits.max_object_keys {
                if kept > 0 {
                    self.out.push(',');
                }
                self.copy(ks, ke);
                self.out.push(':');
                self.identifier_scalar()?;
                kept += 1;
            } else {
                self.skip_value()?;
                omitted += 1;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                _ => return self.bad(),
            }
        }
        if omitted > 0 {
            if kept > 0 {
                self.out.push(',');
            }
            let _ = write!(
                self.out,
                "\"_digest\":\"{omitted} fields below depth {} omitted\"",
                self.limits.max_depth
            );
        }
        self.out.push('}');
        Ok(())
    }

    /// Cuts a long string to `max` characters, with a marker; only the kept
    /// prefix (`start..cut`) is decoded.
    fn cut_string(
        &mut self,
        start: usize,
        cut_at: usize,
        chars: usize,
        max: usize,
    ) -> Result<(), Malformed> {
        let mut prefix = Vec::with_capacity(cut_at - start + 1);
        prefix.extend_from_slice(&self.src[start..cut_at]);
        prefix.push(b'"');
        let keep: String = serde_json::from_slice(&prefix).map_err(|_| Malformed { at: start })?;
        let cut = chars - max;
        let marked = format!("{keep}…[digest: {cut} more characters]");
        self.out
            .push_str(&serde_json::to_string(&marked).map_err(|_| Malformed { at: start })?);
        Ok(())
    }

    /// The span of a string token (quotes included) and its length in characters.
    fn string_span(&mut self) -> Result<(usize, usize, usize), Malformed> {
        self.string_span_cut(self.limits.max_string_chars)
            .map(|(s, e, c, _)| (s, e, c))
    }

    /// Like `string_span`, plus the byte offset where the character after
    /// the first `max` begins (where a long string is cut).
    fn string_span_cut(&mut self, max: usize) -> Result<(usize, usize, usize, usize), Malformed> {
        if self.peek() != Some(b'"') {
            return self.bad();
        }
        let start = self.at;
        self.at += 1;
        let mut chars = 0usize;
        let mut cut = usize::MAX;
        loop {
            if chars >= max && cut == usize::MAX {
                cut = self.at;
            }
            // Fast path over plain ASCII (only as far as the cut point while
            // it is still unknown).
            let limit = if cut == usize::MAX {
                self.at + (max - chars.min(max))
            } else {
                usize::MAX
            };
            // Eight bytes at a time while none of them is special…
            while self.at.saturating_add(8) <= limit.min(self.src.len()) {
                let Some(chunk) = self.src.get(self.at..self.at + 8) else {
                    break;
                };
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                if has_special(u64::from_le_bytes(word)) {
                    break;
                }
                self.at += 8;
                chars += 8;
            }
            // …then byte by byte up to the next special one.
            while let Some(&b) = self.src.get(self.at) {
                if b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b) || self.at >= limit {
                    break;
                }
                self.at += 1;
                chars += 1;
            }
            if chars >= max && cut == usize::MAX {
                cut = self.at;
            }
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok((start, self.at, chars, cut));
                }
                // The fast path stopped at the cut point, before a plain character.
                Some(b) if (0x20..0x80).contains(&b) && b != b'\\' => continue,
                Some(b'\\') => {
                    match self.src.get(self.at + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.at += 2
                        }
                        Some(b'u') => {
                            let hex = self
                                .src
                                .get(self.at + 2..self.at + 6)
                                .ok_or(Malformed { at: self.at })?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return self.bad();
                            }
                            self.at += 6;
                        }
                        _ => return self.bad(),
                    }
                    chars += 1;
                }
                Some(b) if b < 0x20 => return self.bad(),
                Some(b) => {
                    // A UTF-8 sequence: its length from the lead byte.
                    let len = match b {
                        0xC0..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        0xF0..=0xF7 => 4,
                        _ => return self.bad(),
                    };
                    let seq = self
                        .src
                        .get(self.at..self.at + len)
                        .ok_or(Malformed { at: self.at })?;
                    if std::str::from_utf8(seq).is_err() {
                        return self.bad();
                    }
                    self.at += len;
                    chars += 1;
                }
                None => return self.bad(),
            }
        }
    }

    /// The span of a number or literal.
    fn scalar_span(&mut self) -> Result<(usize, usize), Malformed> {
        let start = self.at;
        for lit in [&b"true"[..], b"false", b"null"] {
            if self.src[self.at..].starts_with(lit) {
                self.at += lit.len();
                return Ok((start, self.at));
            }
        }
        // -?digits(.digits)?([eE][+-]?digits)?
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.at;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.at += 1;
            }
            p.at > s
        };
        if !digits(self) {
            return self.bad();
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !digits(self) {
                return self.bad();
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return self.bad();
            }
        }
        Ok((start, self.at))
    }

    /// Skips one value, checking its structure, without recursion; returns its span.
    fn skip_value(&mut self) -> Result<(usize, usize), Malformed> {
        self.ws();
        let start = self.at;
        let mut stack: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'{') => {
                    self.at += 1;
                    stack.push(b'}');
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.at += 1;
                        stack.pop();
                    } else {
                        self.string_span()?;
                        self.expect(b':')?;
                        continue;
                    }
                }
                Some(b'[') => {
                    self.at += 1;
                    stack.push(b']');
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.at += 1;
                        stack.pop();
                    } else {
                        continue;
                    }
                }
                Some(b'"') => {
                    self.string_span()?;
                }
                Some(_) => {
                    self.scalar_span()?;
                }
                None => return self.bad(),
            }
            // After a value: close containers, or go on to the next member.
            loop {
                let Some(&close) = stack.last() else {
                    return Ok((start, self.at));
                };
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        if close == b'}' {
                            self.ws();
                            self.string_span()?;
                            self.expect(b':')?;
                        }
                        break;
                    }
                    Some(b) if b == close => {
                        self.at += 1;
                        stack.pop();
                    }
                    _ => return self.bad(),
                }
            }
        }
    }

    /// Skips an object and counts its members.
    fn skip_object_count(&mut self) -> Result<usize, Malformed> {
        self.at += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(0);
        }
        let mut n = 0;
        loop {
            self.ws();
            self.string_span()?;
            self.expect(b':')?;
            self.skip_value()?;
            n += 1;
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(n);
                }
                _ => return self.bad(),
            }
        }
    }

    /// Skips an array and counts its elements.
    fn skip_array_count(&mut self) -> Result<usize, Malformed> {
        self.at += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(0);
        }
        let mut n = 0;
        loop {
            self.skip_value()?;
            n += 1;
            self.ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(n);
                }
                _ => return self.bad(),
            }
        }
    }
}

/// Whether any byte of `w` is `"`, `\\`, a control character (< 0x20) or
/// not ASCII (SWAR: the classic "has a zero byte" test on transformed words).
fn has_special(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0;
    zero_byte(w ^ (ONES * u64::from(b'"')))
        || zero_byte(w ^ (ONES * u64::from(b'\\')))
        || below_space
        || w & HIGH != 0
}

/// A key's text; keys with escapes are decoded, plain ones borrowed cheaply.
fn decode_key(raw: &[u8]) -> String {
    if raw.contains(&b'\\') {
        serde_json::from_slice(raw).unwrap_or_default()
    } else {
        String::from_utf8_lossy(&raw[1..raw.len() - 1]).into_owned()
    }
}
