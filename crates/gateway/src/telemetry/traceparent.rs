//! The W3C Trace Context `traceparent` a client sends in a request's
//! `_meta` (SEP-414), parsed by the rules of its specification.

/// A parsed W3C `traceparent`: the trace a request belongs to and the
/// caller's span in it.
///
/// ```
/// use core_agent_gateway::TraceParent;
///
/// let parent = TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
///     .expect("a valid traceparent");
/// assert_eq!(parent.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
/// assert!(parent.sampled());
/// assert_eq!(TraceParent::parse("00-00000000000000000000000000000000-b7ad6b7169203331-01"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id (16 bytes, never all zero).
    pub trace_id: [u8; 16],
    /// The caller's span id (8 bytes, never all zero).
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value; `None` when it is not one
    /// (wrong length or version `ff`, upper-case or non-hex digits, an
    /// all-zero id). A version above `00` is read as `00` is, ignoring
    /// what follows the flags, as the specification asks.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let value = value.trim();
        let mut parts = value.splitn(5, '-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let rest = parts.next();
        if version.len() != 2 || version == "ff" {
            return None;
        }
        let [version] = hex::<1>(version)?;
        if version == 0 && rest.is_some() {
            return None;
        }
        let trace_id = hex::<16>(trace)?;
        let span_id = hex::<8>(span)?;
        let [flags] = hex::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent {
            trace_id,
            span_id,
            flags,
        })
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// The span id as 16 lower-case hex digits.
    pub fn span_id_hex(&self) -> String {
        to_hex(&self.span_id)
    }
}

impl std::fmt::Display for TraceParent {
    /// The version-00 header value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id_hex(),
            self.span_id_hex(),
            self.flags
        )
    }
}

/// `N` bytes from exactly `2 * N` lower-case hex digits.
fn hex<const N: usize>(digits: &str) -> Option<[u8; N]> {
    let bytes = digits.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let p = TraceParent::parse(GOOD).unwrap();
        assert_eq!(p.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(p.span_id_hex(), "00f067aa0ba902b7");
        assert!(p.sampled());
        assert_eq!(p.to_string(), GOOD);
        let unsampled = TraceParent::parse(&GOOD.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
    }

    #[test]
    fn what_is_not_a_traceparent_is_refused() {
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            // Upper case, a short id, a long id, non-hex.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            // All-zero ids, the forbidden version, extra fields on 00.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_as_00_ignoring_what_follows() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future";
        let p = TraceParent::parse(later).unwrap();
        assert_eq!(p.to_string(), GOOD);
    }
}
