//! The pruner's, the router's and `fit`'s properties over arbitrary JSON:
//! valid, bounded, deterministic, identifiers kept.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::prune::is_identifier_key;
use crate::{Digested, Limits, Method, Settings, fit, passthrough, prune, route};

fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("id".to_owned()),
        Just("name".to_owned()),
        Just("status".to_owned()),
        Just("selfLink_url".to_owned()),
        Just("owner_id".to_owned()),
        Just("spec".to_owned()),
        Just("data".to_owned()),
        Just("items".to_owned()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
        (0usize..3, ".{0,4}").prop_map(|(n, s)| Value::String(s.repeat(n * 300))),
        // Past max_identifier_chars (4096) now and then.
        (0usize..2, "[a-z/:]{1,4}").prop_map(|(n, s)| Value::String(s.repeat(n * 1100))),
    ];
    leaf.prop_recursive(12, 400, 30, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..30).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Checks the bounds and that identifier keys survive, walking input and
/// output together.
fn check(input: &Value, output: &Value, depth: usize, limits: &Limits) -> Result<(), String> {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) if depth <= limits.max_depth => {
            for (k, v) in i {
                let out = o
                    .get(k)
                    .ok_or(format!("key `{k}` dropped at depth {depth}"))?;
                if is_identifier_key(k) && !v.is_object() && !v.is_array() {
                    check_identifier(k, v, out, limits)?;
                } else {
                    // An object or array under an identifier key is pruned
                    // like any other value.
                    check(v, out, depth + 1, limits)?;
                }
            }
            Ok(())
        }
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i
                .iter()
                .filter(|(k, v)| is_identifier_key(k) && !v.is_object() && !v.is_array())
            {
                let out = o.get(k).ok_or(format!(
                    "identifier `{k}` lost in a summary at depth {depth}"
                ))?;
                check_identifier(k, v, out, limits)?;
            }
            Ok(())
        }
        (Value::Array(i), Value::Array(o)) if depth <= limits.max_depth => {
            let (head, tail) = (limits.array_head, limits.array_tail);
            if i.len() <= head + tail {
                if i.len() != o.len() {
                    return Err(format!("array of {} became {}", i.len(), o.len()));
                }
                for (a, b) in i.iter().zip(o) {
                    check(a, b, depth + 1, limits)?;
                }
            } else {
                if o.len() != head + tail + 1 {
                    return Err(format!("long array of {} became {}", i.len(), o.len()));
                }
                for (a, b) in i[..head].iter().zip(&o[..head]) {
                    check(a, b, depth + 1, limits)?;
                }
                for (a, b) in i[i.len() - tail..].iter().zip(&o[head + 1..]) {
                    check(a, b, depth + 1, limits)?;
                }
            }
            Ok(())
        }
        (Value::Array(_), Value::Array(o)) => {
            if o.len() == 1 {
                Ok(())
            } else {
                Err("deep array not summarized".into())
            }
        }
        (Value::String(i), Value::String(o)) => check_string(i, o, limits.max_string_chars),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{a} became {b}")),
    }
}

/// An identifier's scalar is whole; a string only up to `max_identifier_chars`.
fn check_identifier(k: &str, input: &Value, output: &Value, limits: &Limits) -> Result<(), String> {
    match (input, output) {
        (Value::String(i), Value::String(o)) => check_string(i, o, limits.max_identifier_chars)
            .map_err(|e| format!("identifier `{k}`: {e}")),
        (a, b) if a == b => Ok(()),
        _ => Err(format!("identifier `{k}` changed")),
    }
}

/// `o` is `i`, or when `i` is over `max` characters its first `max` and a marker.
fn check_string(i: &str, o: &str, max: usize) -> Result<(), String> {
    let n = i.chars().count();
    if n <= max {
        if i == o {
            Ok(())
        } else {
            Err("short string changed".into())
        }
    } else if o.chars().take(max).eq(i.chars().take(max))
        && o.ends_with(&format!("…[digest: {} more characters]", n - max))
    {
        Ok(())
    } else {
        Err(format!("long string not cut to {max} with a marker"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pruned_json_is_valid_bounded_deterministic_and_keeps_identifiers(value in json_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
        let limits = Limits::default();
        let out = prune(text.as_bytes(), &limits).unwrap();
        let again = prune(text.as_bytes(), &limits).unwrap();
        prop_assert_eq!(&out, &again);
        let parsed: Value = serde_json::from_str(&out).map_err(|e| TestCaseError::fail(format!("invalid output: {e}\n{out}")))?;
        // Compare with the input as parsed from the same text, so numbers round the same way.
        let input: Value = serde_json::from_str(&text).unwrap();
        check(&input, &parsed, 1, &limits).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(out) = prune(&bytes, &Limits::default()) {
            prop_assert!(serde_json::from_str::<Value>(&out).is_ok(), "{}", out);
        }
    }

    #[test]
    fn malformed_json_is_rejected(value in json_value(), cut in 1usize..50) {
        let text = value.to_string();
        if text.len() > cut {
            let truncated = &text.as_bytes()[..text.len() - cut];
            prop_assert!(prune(truncated, &Limits::default()).is_err() || serde_json::from_slice::<Value>(truncated).is_ok());
        }
    }
}

/// Whether `d` is the last resort of [`fit`]: a one-line summary of shape.
fn last_resort(d: &Digested) -> bool {
    serde_json::from_str::<String>(&d.digest)
        .is_ok_and(|s| s.starts_with("[digest: ") && s.ends_with("retrieve_raw has it whole]"))
        && d.digest.len() < 160
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// For any JSON input and any bound, the router's digest parses (when
    /// structural) and stays within `passthrough_max`; a prose wrapper's
    /// passthrough within it plus its marker.
    #[test]
    fn the_routers_digest_stays_within_its_bound(value in json_value(), bound in 0usize..6000) {
        let text = value.to_string();
        let settings = Settings { threshold: 0, passthrough_max: bound, ..Settings::default() };
        let d = route(&text, &settings).unwrap();
        prop_assert_eq!(d.raw_bytes, text.len());
        match d.method {
            Method::StructuralJson => {
                prop_assert!(serde_json::from_str::<Value>(&d.digest).is_ok(), "{}", d.digest);
                prop_assert!(d.digest.len() <= bound || last_resort(&d), "{} > {bound}: {}", d.digest.len(), d.digest);
            }
            _ => {
                let marker = passthrough(&text, bound).len().saturating_sub(bound.min(text.len()));
                prop_assert!(d.digest.len() <= bound + marker, "{}", d.digest);
            }
        }
    }

    /// `fit` ends for every input and bound: with whatever `fits` asks, the
    /// digest is valid JSON, and within the bound unless the bound is under
    /// the last resort's one line.
    #[test]
    fn fitting_ends_within_any_bound(value in json_value(), bound in 0usize..3000) {
        let text = value.to_string();
        let settings = Settings::default();
        let first = Digested {
            digest: prune(text.as_bytes(), &settings.limits).unwrap(),
            raw_bytes: text.len(),
            method: Method::StructuralJson,
        };
        let mut asked = 0;
        let d = fit(&text, first, &settings, |d| {
            asked += 1;
            d.digest.len() <= bound
        });
        prop_assert!(asked <= 12, "asked {asked} times");
        prop_assert!(serde_json::from_str::<Value>(&d.digest).is_ok(), "{}", d.digest);
        prop_assert!(d.digest.len() <= bound || last_resort(&d), "{}", d.digest);
        prop_assert_eq!(d.method, Method::StructuralJson);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Under any limits, the tightest included (no head, no tail, no member,
    /// depth 0), the output is valid JSON.
    #[test]
    fn pruning_under_any_limits_is_valid_json(
        value in json_value(),
        strings in 0usize..30,
        head in 0usize..4,
        tail in 0usize..3,
        depth in 0usize..4,
        keys in 0usize..4,
    ) {
        let limits = Limits {
            max_string_chars: strings,
            array_head: head,
            array_tail: tail,
            max_depth: depth,
            max_identifier_chars: strings * 2,
            max_object_keys: keys,
        };
        let text = value.to_string();
        let out = prune(text.as_bytes(), &limits).unwrap();
        prop_assert!(serde_json::from_str::<Value>(&out).is_ok(), "{}", out);
    }
}
