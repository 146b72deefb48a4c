//! A digest that fits its bound.
//!
//! A digest over its bound (the router's `passthrough_max`, or the room a
//! caller's result cap leaves for the synthetic response) is made again,
//! more tightly, until it fits: JSON is pruned again under ever tighter
//! [`Limits`] (fewer head and tail items, shorter strings, fewer members,
//! shallower); a text digest is cut shorter. The last resort, a one-line
//! summary of the payload's shape, fits any bound of a hundred bytes or so,
//! so [`fit`] ends for every input.

use crate::prune::{Limits, prune, shape};
use crate::route::{Digested, Method, Settings, passthrough};

/// The limits of the next, tighter pass after `l`, or `None` when `l` is
/// already the tightest: strings halve (down to 20 characters), identifier
/// strings quarter (down to 100), head and tail halve (down to none),
/// objects keep at most 64 members and then halve (down to 4), and the
/// depth cap drops by two (down to 1).
pub fn tighter(l: &Limits) -> Option<Limits> {
    let next = Limits {
        max_string_chars: (l.max_string_chars / 2).max(20).min(l.max_string_chars),
        max_identifier_chars: (l.max_identifier_chars / 4)
            .max(100)
            .min(l.max_identifier_chars),
        array_head: l.array_head / 2,
        array_tail: l.array_tail / 2,
        max_depth: l.max_depth.saturating_sub(2).max(1).min(l.max_depth),
        max_object_keys: (l.max_object_keys.min(128) / 2)
            .max(4)
            .min(l.max_object_keys),
    };
    (next != *l).then_some(next)
}

/// `digested` when `fits` accepts it; else the payload digested again, more
/// tightly, until `fits` does:
///
/// - structural JSON is pruned again under each [`tighter`] limit in turn,
///   from `settings.limits`;
/// - a passthrough is cut shorter, halving what it keeps;
/// - any other digest (a summary, a text digest) has its own text cut
///   shorter the same way, with the passthrough's marker;
///
/// and the last resort is a JSON string naming the payload's shape and size
/// (`"[digest: an object of 3 fields, 612345 bytes: too large to digest
/// here; retrieve_raw has it whole]"`), returned even if `fits` refuses it.
/// The method stays, and `raw_bytes` is the payload's size.
pub fn fit(
    payload: &str,
    digested: Digested,
    settings: &Settings,
    mut fits: impl FnMut(&Digested) -> bool,
) -> Digested {
    if fits(&digested) {
        return digested;
    }
    let method = digested.method;
    let make = |digest: String| Digested {
        digest,
        raw_bytes: payload.len(),
        method,
    };
    if method == Method::StructuralJson {
        let mut limits = settings.limits;
        while let Some(next) = tighter(&limits) {
            limits = next;
            if let Ok(digest) = prune(payload.as_bytes(), &limits) {
                let candidate = make(digest);
                if fits(&candidate) {
                    return candidate;
                }
            }
        }
    } else {
        let source = match method {
            Method::Passthrough => payload,
            _ => digested.digest.as_str(),
        };
        let mut keep = source.len().min(settings.passthrough_max);
        loop {
            keep /= 2;
            let candidate = make(passthrough(source, keep));
            if fits(&candidate) {
                return candidate;
            }
            if keep == 0 {
                break;
            }
        }
    }
    let what = shape(payload.as_bytes()).unwrap_or_else(|| "a text".to_owned());
    let summary = format!(
        "[digest: {what}, {} bytes: too large to digest here; retrieve_raw has it whole]",
        payload.len()
    );
    make(serde_json::Value::String(summary).to_string())
}
