//! The passthrough: cuts on a character boundary, and is what a wrapper of
//! one long text gets.

use core_agent_digest::{Method, Settings, passthrough, route};
use serde_json::Value;

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
