//! The pruner's properties over arbitrary JSON, and golden digests of
//! realistic payloads (refresh with `UPDATE_EXPECT=1` and read the diff).

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;

use core_agent_digest::{
    Digested, Limits, Method, Settings, fit, is_identifier_key, passthrough, prune, route, tighter,
};
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

/// A job whose `status` holds a long history: ~600 KB of JSON under an
/// identifier key.
fn job_with_history(entries: usize) -> Value {
    let history: Vec<Value> = (0..entries)
        .map(|i| {
            serde_json::json!({"at": format!("2026-12-01T10:{:02}:{:02}Z", i / 60 % 60, i % 60),
                "state": if i % 7 == 0 { "retrying" } else { "running" },
                "message": format!("step {i} of the rollout: {}", "progress ".repeat(8))})
        })
        .collect();
    serde_json::json!({"id": "job-1", "name": "rollout", "status": {"state": "running", "history": history}})
}

#[test]
fn an_identifier_key_keeps_scalars_and_prunes_what_it_holds() {
    let payload = job_with_history(5_000).to_string();
    assert!(payload.len() > 500_000, "{}", payload.len());
    let d = route(&payload, &Settings::default()).unwrap();
    assert_eq!(d.method, Method::StructuralJson);
    assert!(d.digest.len() < 16_000, "{} bytes", d.digest.len());
    let v: Value = serde_json::from_str(&d.digest).unwrap();
    assert_eq!(
        (&v["id"], &v["status"]["state"]),
        (&"job-1".into(), &"running".into())
    );
    let history = v["status"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 21);
    assert_eq!(history[15], "[digest: 4980 of 5000 items omitted]");
    assert_eq!(history[20]["state"], "running");
    // An array straight under an identifier key, and a long string.
    let payload = serde_json::json!({"state": (0..2000).collect::<Vec<_>>()}).to_string();
    let v: Value =
        serde_json::from_str(&prune(payload.as_bytes(), &Limits::default()).unwrap()).unwrap();
    assert_eq!(v["state"].as_array().unwrap().len(), 21);
    let url = format!("data:image/png;base64,{}", "A".repeat(300_000));
    let payload = serde_json::json!({"url": url, "id": 12345678901234567u64}).to_string();
    let v: Value =
        serde_json::from_str(&prune(payload.as_bytes(), &Limits::default()).unwrap()).unwrap();
    let kept = v["url"].as_str().unwrap();
    assert!(
        kept.starts_with(&url[..4096]),
        "whole up to 4096 characters"
    );
    assert!(
        kept.ends_with(&format!("…[digest: {} more characters]", url.len() - 4096)),
        "{}",
        &kept[4090..]
    );
    assert_eq!(v["id"], 12345678901234567u64);
    // Below the depth cap an identifier string is bounded the same way.
    let deep = serde_json::json!({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"name": "x".repeat(5000), "spec": 1}}}}}}}}}).to_string();
    let out = prune(deep.as_bytes(), &Limits::default()).unwrap();
    assert!(out.contains("…[digest: 904 more characters]"), "{out}");
}

/// A digest over the bound is pruned again, more tightly, until it fits: a
/// 600 KB object of 20,000 members (which no bound of the spec cuts) and
/// long histories at every level.
#[test]
fn a_digest_over_its_bound_is_pruned_again_until_it_fits() {
    let wide: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| {
            (
                format!("k{i}"),
                Value::from(format!("value number {i} of many")),
            )
        })
        .collect();
    let wide = Value::Object(wide).to_string();
    let nested = Value::Array((0..40).map(|_| job_with_history(40)).collect()).to_string();
    for payload in [&wide, &nested] {
        for bound in [64 * 1024, 8_000, 1_000, 300] {
            let settings = Settings {
                passthrough_max: bound,
                ..Settings::default()
            };
            let d = route(payload, &settings).unwrap();
            assert_eq!(d.method, Method::StructuralJson);
            assert!(d.digest.len() <= bound, "{} > {bound}", d.digest.len());
            let v: Value = serde_json::from_str(&d.digest).unwrap();
            if payload == &wide && bound >= 1_000 {
                assert!(
                    v["_digest"]
                        .as_str()
                        .unwrap()
                        .ends_with("of 20000 fields omitted"),
                    "{v}"
                );
            }
        }
    }
    // A bound under everything but the last resort gets the last resort.
    let settings = Settings {
        passthrough_max: 120,
        ..Settings::default()
    };
    let d = route(&wide, &settings).unwrap();
    assert!(last_resort(&d), "{}", d.digest);
    assert!(
        d.digest.contains("an object of 20000 fields"),
        "{}",
        d.digest
    );
    // The ladder of tighter limits ends, and each step is tighter.
    let mut limits = Limits::default();
    let mut steps = 0;
    while let Some(next) = tighter(&limits) {
        assert!(next.array_head <= limits.array_head && next.max_depth <= limits.max_depth);
        assert_ne!(next, limits);
        limits = next;
        steps += 1;
    }
    assert!(steps <= 10, "{steps}");
    assert_eq!(
        (limits.array_head, limits.array_tail, limits.max_depth),
        (0, 0, 1)
    );
}

/// A text digest over the bound is cut shorter, and keeps its method.
#[test]
fn a_text_digest_over_its_bound_is_cut_shorter() {
    let prose = "a line of prose that is not JSON at all\n".repeat(5_000);
    let settings = Settings::default();
    let d = route(&prose, &settings).unwrap();
    let d = fit(&prose, d, &settings, |d| d.digest.len() <= 10_000);
    assert_eq!(d.method, Method::Passthrough);
    assert!(d.digest.len() <= 10_000);
    assert!(d.digest.ends_with("more bytes; retrieve_raw has them all]"));
    assert!(prose.starts_with(d.digest.split("\n[digest:").next().unwrap()));
    let summary = Digested {
        digest: "summary ".repeat(5_000),
        raw_bytes: prose.len(),
        method: Method::LlmFallback,
    };
    let d = fit(&prose, summary, &settings, |d| d.digest.len() <= 1_000);
    assert_eq!(d.method, Method::LlmFallback);
    assert!(
        d.digest.starts_with("summary summary") && d.digest.len() <= 1_000,
        "{}",
        d.digest
    );
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
