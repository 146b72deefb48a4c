//! The pruner's properties over arbitrary JSON, and golden digests of
//! realistic payloads (refresh with `UPDATE_EXPECT=1` and read the diff).

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;

use core_agent_digest::{Limits, Method, Settings, is_identifier_key, passthrough, prune, route};
use proptest::prelude::*;
use serde_json::{Map, Value};

mod text;

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
                if is_identifier_key(k) {
                    if out != v {
                        return Err(format!("identifier `{k}` changed"));
                    }
                } else {
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
                if o.get(k) != Some(v) {
                    return Err(format!(
                        "identifier `{k}` lost in a summary at depth {depth}"
                    ));
                }
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
        (Value::String(i), Value::String(o)) => {
            let n = i.chars().count();
            if n <= limits.max_string_chars {
                if i == o {
                    Ok(())
                } else {
                    Err("short string changed".into())
                }
            } else if o
                .chars()
                .take(limits.max_string_chars)
                .eq(i.chars().take(limits.max_string_chars))
                && o.ends_with(&format!(
                    "…[digest: {} more characters]",
                    n - limits.max_string_chars
                ))
            {
                Ok(())
            } else {
                Err("long string not cut to 500 with a marker".into())
            }
        }
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!("{a} became {b}")),
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

#[test]
fn deep_input_does_not_overflow_the_stack() {
    let deep = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
    let out = prune(deep.as_bytes(), &Limits::default()).unwrap();
    assert!(serde_json::from_str::<Value>(&out).is_ok() || out.len() < 200);
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    prune(deep_obj.as_bytes(), &Limits::default()).unwrap();
}

#[test]
fn golden_payloads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut failures = Vec::new();
    let mut report = String::new();
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "input"))
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty());
    for input in inputs {
        let text = std::fs::read_to_string(&input).unwrap();
        let actual = match route(&text, &Settings::default()) {
            None => format!("untouched ({} bytes)\n", text.len()),
            Some(d) => {
                report.push_str(&format!(
                    "{}: {} → {} bytes ({:.1}×, {})\n",
                    input.file_name().unwrap().to_string_lossy(),
                    d.raw_bytes,
                    d.digest.len(),
                    d.raw_bytes as f64 / d.digest.len() as f64,
                    d.method
                ));
                if matches!(d.method, Method::StructuralJson | Method::StructuralJsonl) {
                    let v: Value = serde_json::from_str(&d.digest).unwrap();
                    format!(
                        "method: {}\nraw_bytes: {}\n{}\n",
                        d.method,
                        d.raw_bytes,
                        serde_json::to_string_pretty(&v).unwrap()
                    )
                } else {
                    format!(
                        "method: {}\nraw_bytes: {}\n{}\n",
                        d.method, d.raw_bytes, d.digest
                    )
                }
            }
        };
        let expected_path = input.with_extension("digest");
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&expected_path, &actual).unwrap();
        } else if std::fs::read_to_string(&expected_path).unwrap_or_default() != actual {
            failures.push(expected_path.display().to_string());
        }
    }
    eprintln!("{report}");
    assert!(
        failures.is_empty(),
        "golden digests differ (UPDATE_EXPECT=1 to refresh): {failures:?}"
    );
}

/// The passthrough cuts on a character boundary and counts what it cut.
#[test]
fn the_passthrough_cuts_on_a_character_boundary() {
    assert_eq!(passthrough("short", 10), "short");
    // `€` is three bytes; a cut inside it leaves the whole character out.
    assert_eq!(
        passthrough("ab€cd", 4),
        "ab\n[digest: 5 more bytes; retrieve_raw has them all]"
    );
    assert_eq!(
        passthrough("ab€cd", 5),
        "ab€\n[digest: 2 more bytes; retrieve_raw has them all]"
    );
}

/// A JSON wrapper of one long text (server-filesystem's `{"content": …}`,
/// FastMCP's `{"result": …}`) is prose: the digest keeps as much of it as
/// the passthrough would, never 500 characters.
#[test]
fn a_wrapper_of_one_long_string_takes_the_passthrough() {
    let settings = Settings::default();
    let line = "a line of a README that the model needs to read whole\n";
    for (key, size) in [("content", 30_000), ("result", 200_000)] {
        let text = line.repeat(size / line.len());
        let payload = serde_json::json!({ key: text }).to_string();
        let d = route(&payload, &settings).unwrap();
        assert_eq!(d.method, Method::Passthrough, "{key}");
        assert!(
            d.digest.len() >= payload.len().min(settings.passthrough_max),
            "{key}: kept {} of {} bytes",
            d.digest.len(),
            payload.len()
        );
        if payload.len() <= settings.passthrough_max {
            assert_eq!(d.digest, payload);
        } else {
            assert!(d.digest.starts_with(&payload[..settings.passthrough_max]));
            assert!(d.digest.ends_with("more bytes; retrieve_raw has them all]"));
        }
    }
    // Many long strings are data, not one text: the pruner keeps them all, cut.
    let records: Vec<Value> = (0..10)
        .map(|i| serde_json::json!({"id": i, "body": line.repeat(40)}))
        .collect();
    let payload = Value::Array(records).to_string();
    assert_eq!(
        route(&payload, &settings).unwrap().method,
        Method::StructuralJson
    );
    // One long string beside much structure stays structural too.
    let rows: Vec<Value> = (0..400)
        .map(|i| serde_json::json!({"id": i, "state": "ok"}))
        .collect();
    let payload = serde_json::json!({"log": line.repeat(100), "rows": rows}).to_string();
    assert_eq!(
        route(&payload, &settings).unwrap().method,
        Method::StructuralJson
    );
}
