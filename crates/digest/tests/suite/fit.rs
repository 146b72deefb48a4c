//! Fitting a digest to its bound: an identifier key's pruning, digests over
//! the bound pruned or cut again until they fit, and input too deep for a
//! recursive walk.

use core_agent_digest::{Digested, Limits, Method, Settings, fit, prune, route, tighter};
use serde_json::Value;

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
