//! Golden digests of realistic payloads (refresh with `UPDATE_EXPECT=1` and
//! read the diff) and the bounds of the envelope's inputs; the properties
//! over arbitrary JSON are unit tests (`src/props.rs`).

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::Path;

use core_agent_digest::{
    Digested, Limits, Method, Settings, fit, passthrough, prune, route, tighter,
};
use serde_json::Value;

mod text;

/// Whether `d` is `fit`'s last resort: a one-line summary of shape.
fn last_resort(d: &Digested) -> bool {
    serde_json::from_str::<String>(&d.digest)
        .is_ok_and(|s| s.starts_with("[digest: ") && s.ends_with("retrieve_raw has it whole]"))
        && d.digest.len() < 160
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
            let settings = Settings::default().with_passthrough_max(bound);
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
    let settings = Settings::default().with_passthrough_max(120);
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
