//! A small JSON reader, enough for `cargo metadata` (xtask keeps its
//! no-dependency rule, so no serde).

/// A JSON value; objects keep their keys in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// The number's text, as written.
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value at `key`, if this is an object that has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an array; nothing for anything else.
    pub(crate) fn items(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            _ => &[],
        }
    }

    /// The keys of an object; nothing for anything else.
    pub(crate) fn keys(&self) -> Vec<&str> {
        match self {
            Json::Object(entries) => entries.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub(crate) fn parse(text: &str) -> Result<Json, String> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = p.value()?;
    p.space();
    if p.at != p.bytes.len() {
        return Err(format!("trailing characters at byte {}", p.at));
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b" \t\r\n".contains(b))
        {
            self.at += 1;
        }
    }

    fn error<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.at))
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            self.error("unexpected character")
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.space();
        match self.bytes.get(self.at) {
            None => self.error("unexpected end"),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return self.error("expected `,` or `]`"),
                    }
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut entries = Vec::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(entries));
                }
                loop {
                    self.space();
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return self.error("expected a key");
                    }
                    let key = self.string()?;
                    self.space();
                    if self.bytes.get(self.at) != Some(&b':') {
                        return self.error("expected `:`");
                    }
                    self.at += 1;
                    entries.push((key, self.value()?));
                    self.space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Object(entries));
                        }
                        _ => return self.error("expected `,` or `}`"),
                    }
                }
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| b"+-.eE0123456789".contains(b))
                {
                    self.at += 1;
                }
                let text = String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned();
                if text.parse::<f64>().is_err() {
                    return self.error("malformed number");
                }
                Ok(Json::Number(text))
            }
            Some(_) => self.error("unexpected character"),
        }
    }

    /// A string, the cursor on its opening quote.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.at) else {
                return self.error("unterminated string");
            };
            self.at += 1;
            match b {
                b'"' => {
                    return String::from_utf8(out).map_err(|e| format!("invalid UTF-8: {e}"));
                }
                b'\\' => {
                    let Some(&e) = self.bytes.get(self.at) else {
                        return self.error("unterminated escape");
                    };
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode()?,
                        _ => return self.error("unknown escape"),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                b if b < 0x20 => return self.error("control character in string"),
                b => out.push(b),
            }
        }
    }

    /// The code point of `\uXXXX` (a surrogate pair joined), the cursor after the `u`.
    fn unicode(&mut self) -> Result<char, String> {
        let high = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.at..].starts_with(b"\\u") {
                return self.error("unpaired surrogate");
            }
            self.at += 2;
            let low = self.hex4()?;
            0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
        } else {
            high
        };
        char::from_u32(code).map_or_else(|| self.error("invalid code point"), Ok)
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        match digits {
            Some(n) => {
                self.at += 4;
                Ok(n)
            }
            None => self.error("expected four hex digits"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_cargo_metadata_prints() {
        let v = parse(
            r#" {"packages": [{"name": "a\"b\u00e9\ud83d\ude00", "publish": null,
                 "features": {"default": ["x"], "x": []}, "n": -1.5e3, "ok": true}]} "#,
        )
        .unwrap();
        let p = &v.get("packages").unwrap().items()[0];
        assert_eq!(p.get("name").unwrap().as_str(), Some("a\"bé😀"));
        assert_eq!(p.get("publish"), Some(&Json::Null));
        assert_eq!(p.get("features").unwrap().keys(), ["default", "x"]);
        assert_eq!(p.get("n"), Some(&Json::Number("-1.5e3".into())));
        assert_eq!(p.get("ok"), Some(&Json::Bool(true)));
    }

    #[test]
    fn rejects_malformed_documents() {
        for bad in [
            "",
            "{",
            "[1,]",
            r#"{"a" 1}"#,
            r#""\x""#,
            "[1] 2",
            "nul",
            "-",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
