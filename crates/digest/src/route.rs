use std::fmt;

use crate::prune::{Limits, prune_with_stats};
use crate::text;

/// How a result was shrunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// JSON, pruned structurally.
    StructuralJson,
    /// Prose (or malformed JSON), passed through up to a bound.
    Passthrough,
    /// Summarized by the LLM second chance.
    LlmFallback,
    /// A unified diff: every file with its counts, then first hunks.
    StructuralDiff,
    /// A log: first and last lines, repeats collapsed, counts by level.
    StructuralLog,
    /// A CSV or TSV table: header, first and last rows, counts.
    StructuralCsv,
    /// JSON Lines, pruned as an array.
    StructuralJsonl,
}

impl Method {
    /// The name in the synthetic response and in telemetry.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::StructuralJson => "structural_json",
            Method::Passthrough => "passthrough",
            Method::LlmFallback => "llm_fallback",
            Method::StructuralDiff => "structural_diff",
            Method::StructuralLog => "structural_log",
            Method::StructuralCsv => "structural_csv",
            Method::StructuralJsonl => "structural_jsonl",
        }
    }

    /// The method called `name`.
    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Every method.
    pub const ALL: [Method; 7] = [
        Method::StructuralJson,
        Method::Passthrough,
        Method::LlmFallback,
        Method::StructuralDiff,
        Method::StructuralLog,
        Method::StructuralCsv,
        Method::StructuralJsonl,
    ];

    /// Whether the router shrank the payload by its structure (JSON or one
    /// of the text formats), not by cutting it or summarizing it.
    pub fn is_structural(self) -> bool {
        !matches!(self, Method::Passthrough | Method::LlmFallback)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The router's settings. Start from [`Settings::default`] (the spec's)
/// and change what you need with the `with_*` methods:
///
/// ```
/// use core_agent_digest::{Limits, Settings};
///
/// let settings = Settings::default()
///     .with_threshold(1500)
///     .with_limits(Limits::default().with_max_string_chars(200));
/// assert_eq!(settings.passthrough_max, 64 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Payloads smaller than this many bytes pass untouched (8000).
    pub threshold: usize,
    /// The bound of a digest (64 KiB): prose is passed through up to this
    /// many bytes (and a marker), and a structural digest longer than this
    /// is pruned again, more tightly, until it fits (see [`crate::fit`]).
    pub passthrough_max: usize,
    /// The structural pruner's bounds.
    pub limits: Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            threshold: 8000,
            passthrough_max: 64 * 1024,
            limits: Limits::default(),
        }
    }
}

impl Settings {
    /// Payloads smaller than this many bytes pass untouched.
    #[must_use]
    pub fn with_threshold(mut self, threshold: usize) -> Settings {
        self.threshold = threshold;
        self
    }

    /// The bound of a digest, and of a passthrough.
    #[must_use]
    pub fn with_passthrough_max(mut self, passthrough_max: usize) -> Settings {
        self.passthrough_max = passthrough_max;
        self
    }

    /// The structural pruner's bounds.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Settings {
        self.limits = limits;
        self
    }
}

/// A payload after the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digested {
    /// What the model sees in place of the payload.
    pub digest: String,
    /// The payload's size in bytes.
    pub raw_bytes: usize,
    /// How it was shrunk.
    pub method: Method,
}

impl Digested {
    /// Bytes the digest saved (never negative).
    pub fn bytes_saved(&self) -> usize {
        self.raw_bytes.saturating_sub(self.digest.len())
    }

    /// The synthetic response the model sees:
    /// `{"digest", "raw_bytes", "method", "call_id"}`.
    pub fn envelope(&self, call_id: &str) -> String {
        self.envelope_with_note(call_id, None)
    }

    /// [`Digested::envelope`], with a `"note"` after the `call_id` when
    /// `note` is given (what the caller should know about keeping the raw
    /// payload; its wording is the front end's).
    pub fn envelope_with_note(&self, call_id: &str, note: Option<&str>) -> String {
        let mut envelope = serde_json::json!({
            "digest": self.digest,
            "raw_bytes": self.raw_bytes,
            "method": self.method.as_str(),
            "call_id": call_id,
        });
        if let (Some(note), Some(fields)) = (note, envelope.as_object_mut()) {
            fields.insert("note".to_owned(), note.into());
        }
        envelope.to_string()
    }
}

/// At most this many cut strings make a JSON payload "prose in a wrapper".
pub(crate) const PROSE_WRAPPER_STRINGS: usize = 4;

/// Routes a payload: below the threshold, `None` (pass it untouched);
/// JSON-shaped, the structural pruner (pruned again more tightly while the
/// digest is over `passthrough_max` bytes); a unified diff, a log, a CSV/TSV
/// table or JSON Lines, that format's structural digest (near the
/// threshold, see [`Method`]); anything else (prose, malformed JSON), a
/// passthrough cut at `passthrough_max` bytes with a marker.
///
/// JSON whose mass is prose is passed through too, so the digest never keeps
/// less of a text than the passthrough would: when the pruner had to cut at
/// most four long strings and they hold at least half of
/// the payload's bytes (`{"content": "<a file>"}`, FastMCP's
/// `{"result": "<text>"}`), the payload takes the passthrough instead of
/// being cut to `max_string_chars`.
pub fn route(payload: &str, settings: &Settings) -> Option<Digested> {
    if payload.len() < settings.threshold {
        return None;
    }
    let trimmed = payload.trim_start();
    let json_shaped = trimmed.starts_with('{') || trimmed.starts_with('[');
    let mut json = None;
    if json_shaped {
        json = prune_with_stats(payload.as_bytes(), &settings.limits).ok();
    }
    if json.is_none()
        && let Some((digest, method)) = text::digest(payload, settings)
    {
        return Some(Digested {
            digest,
            raw_bytes: payload.len(),
            method,
        });
    }
    if let Some((digest, stats)) = json {
        let prose_wrapper = (1..=PROSE_WRAPPER_STRINGS).contains(&stats.strings_cut)
            && stats.string_bytes_cut.saturating_mul(2) >= payload.len();
        if !prose_wrapper {
            let digested = Digested {
                digest,
                raw_bytes: payload.len(),
                method: Method::StructuralJson,
            };
            let bound = settings.passthrough_max;
            return Some(crate::fit(payload, digested, settings, |d| {
                d.digest.len() <= bound
            }));
        }
    }
    Some(Digested {
        digest: passthrough(payload, settings.passthrough_max),
        raw_bytes: payload.len(),
        method: Method::Passthrough,
    })
}

/// `text` up to `max` bytes (on a character boundary), with a marker saying
/// how much was cut.
pub fn passthrough(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(max);
    format!(
        "{}\n[digest: {} more bytes; retrieve_raw has them all]",
        &text[..end],
        text.len() - end
    )
}

/// The part of a JSON payload at a JSON pointer, as JSON text.
pub fn extract(payload: &str, pointer: &str) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(payload)
        .map_err(|e| format!("the payload is not JSON ({e}), so it has no parts"))?;
    match value.pointer(pointer) {
        Some(part) => Ok(part.to_string()),
        None => Err(format!("nothing at `{pointer}` in the payload")),
    }
}
