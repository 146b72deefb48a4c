//! The values core-agent knows to be secret, and the [`Redactor`] that
//! keeps them out of everything it prints, logs, audits or sends.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::{Config, Env, ServerEntry, Template, Transport};

/// What a secret value is replaced with.
pub const REDACTED: &str = "***";

/// Values shorter than this many bytes are not redacted: replacing every
/// `true` or `1234` would shred ordinary text, and so short a value is no
/// secret worth the name.
pub const MIN_SECRET_BYTES: usize = 6;

/// Replaces every known secret value in text with [`REDACTED`].
///
/// Built once per config load from `(name, value)` pairs; the names are
/// kept for reports (never the values: `Debug` shows names only). Values
/// shorter than [`MIN_SECRET_BYTES`] are left out. A value is also found
/// in its JSON-escaped form, so a secret holding `"` or `\` is caught in
/// JSON text too. Where secrets overlap or one holds another, the whole
/// span they cover is replaced, so no part of either shows.
///
/// ```
/// use core_agent_mcp_config::Redactor;
///
/// let r = Redactor::new([("GITHUB_TOKEN", "ghp_0123456789")]);
/// assert_eq!(r.redact("401: bad token ghp_0123456789"), "401: bad token ***");
/// assert_eq!(r.names(), ["GITHUB_TOKEN"]);
/// ```
#[derive(Clone, Default)]
pub struct Redactor {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    names: Vec<String>,
    values: Vec<String>,
    matcher: AhoCorasick,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor for these `(name, value)` pairs.
    pub fn new<N: Into<String>, V: Into<String>>(
        secrets: impl IntoIterator<Item = (N, V)>,
    ) -> Redactor {
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (name, value) in secrets {
            let value: String = value.into();
            if value.len() < MIN_SECRET_BYTES {
                continue;
            }
            let name = name.into();
            if !names.contains(&name) {
                names.push(name);
            }
            values.push(value);
        }
        Redactor::build(names, values)
    }

    fn build(mut names: Vec<String>, mut values: Vec<String>) -> Redactor {
        names.sort();
        names.dedup();
        values.sort();
        values.dedup();
        if values.is_empty() {
            return Redactor::default();
        }
        let mut patterns = values.clone();
        for v in &values {
            if let Ok(quoted) = serde_json::to_string(v) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != v {
                    patterns.push(escaped.to_owned());
                }
            }
        }
        // Standard semantics: every occurrence of every pattern, overlaps included.
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns);
        match matcher {
            Ok(matcher) => Redactor {
                inner: Some(Arc::new(Inner {
                    names,
                    values,
                    matcher,
                })),
            },
            // Only a pattern set past the matcher's size limits (far beyond
            // what a config holds) fails.
            Err(_) => Redactor::default(),
        }
    }

    /// The secrets of a loaded config: the value of every variable that a
    /// server's `${…}` placeholder reads (`env`, `headers`, OAuth and token
    /// exchange client secrets) and of every `.env` entry, as `env` has
    /// them now. Variables of the minimal environment ([`EnvInherit::is_minimal`],
    /// such as `PATH` and `HOME`) are no secrets.
    ///
    /// [`EnvInherit::is_minimal`]: crate::EnvInherit::is_minimal
    pub fn of(config: &Config, env: &dyn Env) -> Redactor {
        Redactor::new(secret_values(config, env))
    }

    /// This redactor with more `(name, value)` pairs (a front end's own
    /// credentials: gateway tokens, a store URL, an API key).
    #[must_use]
    pub fn with<N: Into<String>, V: Into<String>>(
        &self,
        more: impl IntoIterator<Item = (N, V)>,
    ) -> Redactor {
        let (mut names, mut values) = match &self.inner {
            Some(inner) => (inner.names.clone(), inner.values.clone()),
            None => (Vec::new(), Vec::new()),
        };
        for (name, value) in more {
            let value: String = value.into();
            if value.len() >= MIN_SECRET_BYTES {
                names.push(name.into());
                values.push(value);
            }
        }
        Redactor::build(names, values)
    }

    /// The secrets of both.
    #[must_use]
    pub fn union(&self, other: &Redactor) -> Redactor {
        match (&self.inner, &other.inner) {
            (_, None) => self.clone(),
            (None, Some(_)) => other.clone(),
            (Some(a), Some(b)) => Redactor::build(
                a.names.iter().chain(&b.names).cloned().collect(),
                a.values.iter().chain(&b.values).cloned().collect(),
            ),
        }
    }

    /// The names of the secrets it protects, sorted (never their values).
    pub fn names(&self) -> &[String] {
        self.inner.as_ref().map_or(&[], |i| i.names.as_slice())
    }

    /// True when it protects nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// `text` with every secret value replaced by [`REDACTED`]; borrowed
    /// when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(inner) = &self.inner else {
            return Cow::Borrowed(text);
        };
        // Matches come ordered by where they end; a long one may start
        // before a short one that ended earlier, so sort, then merge.
        let mut spans: Vec<(usize, usize)> = inner
            .matcher
            .find_overlapping_iter(text)
            .map(|m| (m.start(), m.end()))
            .collect();
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut current = spans[0];
        for &(start, end) in &spans[1..] {
            if start <= current.1 {
                current.1 = current.1.max(end);
                continue;
            }
            out.push_str(&text[copied..current.0]);
            out.push_str(REDACTED);
            copied = current.1;
            current = (start, end);
        }
        out.push_str(&text[copied..current.0]);
        out.push_str(REDACTED);
        out.push_str(&text[current.1..]);
        Cow::Owned(out)
    }

    /// Redacts `text` in place; true when anything was replaced.
    pub fn redact_string(&self, text: &mut String) -> bool {
        match self.redact(text) {
            Cow::Borrowed(_) => false,
            Cow::Owned(clean) => {
                *text = clean;
                true
            }
        }
    }

    /// Redacts every string (and object key) in a JSON value, in place;
    /// true when anything was replaced.
    pub fn redact_json(&self, value: &mut serde_json::Value) -> bool {
        if self.is_empty() {
            return false;
        }
        match value {
            serde_json::Value::String(s) => self.redact_string(s),
            serde_json::Value::Array(items) => items
                .iter_mut()
                .fold(false, |any, v| self.redact_json(v) | any),
            serde_json::Value::Object(map) => {
                let mut any = false;
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| matches!(self.redact(k), Cow::Owned(_)))
                    .cloned()
                    .collect();
                for key in keys {
                    if let Some(v) = map.remove(&key) {
                        map.insert(self.redact(&key).into_owned(), v);
                        any = true;
                    }
                }
                map.values_mut()
                    .fold(any, |any, v| self.redact_json(v) | any)
            }
            _ => false,
        }
    }
}

/// The templates of one server entry: its `env`, its `headers`, and its
/// auth's client secret.
pub(crate) fn templates(entry: &ServerEntry) -> Vec<&Template> {
    let mut out = Vec::new();
    match &entry.spec.transport {
        Transport::Stdio(stdio) => out.extend(stdio.env.values()),
        Transport::Http(http) => {
            out.extend(http.headers.values());
            match &http.auth {
                Some(crate::AuthSpec::OAuth(o)) => out.extend(o.client_secret.as_ref()),
                Some(crate::AuthSpec::TokenExchange(t)) => out.extend(t.client_secret.as_ref()),
                _ => {}
            }
        }
    }
    out
}

/// `(name, value)` of every placeholder variable and `.env` entry.
fn secret_values(config: &Config, env: &dyn Env) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in config.secret_variables() {
        if let Some(value) = env.var(&name) {
            out.insert(name, value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn r(pairs: &[(&str, &str)]) -> Redactor {
        Redactor::new(pairs.iter().copied())
    }

    #[test]
    fn every_occurrence_is_replaced_and_clean_text_is_borrowed() {
        let red = r(&[("A", "secret-one"), ("B", "secret-two")]);
        assert_eq!(
            red.redact("x secret-one y secret-two secret-one"),
            "x *** y *** ***"
        );
        assert!(matches!(red.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(red.names(), ["A", "B"]);
        assert_eq!(format!("{red:?}"), r#"Redactor { names: ["A", "B"], .. }"#);
    }

    #[test]
    fn overlapping_and_nested_secrets_leave_no_part_visible() {
        // Overlapping: "abcdefgh" and "efghijkl" share "efgh".
        let red = r(&[("A", "abcdefgh"), ("B", "efghijkl")]);
        assert_eq!(red.redact("[abcdefghijkl]"), "[***]");
        // A long secret found after a short one that ends inside it.
        let red = r(&[("A", "xxxxxx"), ("B", "0123456789abcdefxxxxxx-long")]);
        assert_eq!(
            red.redact("xxxxxx 0123456789abcdefxxxxxx-long!"),
            "*** ***!"
        );
        // One inside another, and adjacent occurrences.
        let red = r(&[("A", "token-123456"), ("B", "123456")]);
        assert_eq!(red.redact("token-123456 123456"), "*** ***");
        assert_eq!(red.redact("token-123456token-123456"), "***");
    }

    #[test]
    fn secrets_at_the_edges_of_the_text_are_found() {
        let red = r(&[("A", "hunter22")]);
        assert_eq!(red.redact("hunter22"), "***");
        assert_eq!(red.redact("hunter22 tail"), "*** tail");
        assert_eq!(red.redact("head hunter22"), "head ***");
        assert_eq!(red.redact("hunter2"), "hunter2");
    }

    #[test]
    fn utf8_secrets_and_text_stay_valid() {
        let red = r(&[("A", "пароль-é")]);
        assert_eq!(red.redact("é пароль-é ü"), "é *** ü");
        // A secret that is a suffix of a multi-byte neighbourhood.
        let red = r(&[("A", "ßecret")]);
        assert_eq!(red.redact("ßßecretß"), "ß***ß");
    }

    #[test]
    fn short_values_are_ignored() {
        let red = r(&[("SHORT", "12345"), ("EMPTY", "")]);
        assert!(red.is_empty());
        assert_eq!(red.redact("12345"), "12345");
        let red = red.with([("LONG", "123456")]);
        assert_eq!(red.redact("x123456x"), "x***x");
        assert_eq!(red.names(), ["LONG"]);
        let both = red.union(&r(&[("OTHER", "abcdefg")]));
        assert_eq!(both.redact("123456 abcdefg"), "*** ***");
        assert_eq!(both.names(), ["LONG", "OTHER"]);
    }

    #[test]
    fn json_escaped_values_and_json_trees_are_redacted() {
        let red = r(&[("Q", "a\"quoted\\secret")]);
        let text = serde_json::to_string(&serde_json::json!({"v": "a\"quoted\\secret"})).unwrap();
        assert_eq!(red.redact(&text), r#"{"v":"***"}"#);
        let mut v =
            serde_json::json!({"a": ["x a\"quoted\\secret"], "a\"quoted\\secret": 1, "n": 2});
        assert!(red.redact_json(&mut v));
        assert_eq!(v, serde_json::json!({"a": ["x ***"], "***": 1, "n": 2}));
    }

    proptest! {
        #[test]
        fn no_secret_survives(
            secrets in proptest::collection::vec("[a-cé]{6,9}", 1..4),
            text in "[a-cé ]{0,60}",
        ) {
            let red = Redactor::new(secrets.iter().map(|s| ("S", s.clone())));
            let out = red.redact(&text);
            for s in &secrets {
                prop_assert!(!out.contains(s.as_str()), "{s:?} in {out:?}");
            }
        }
    }
}
