//! Golden digests of realistic payloads in `tests/golden/` (refresh with
//! `UPDATE_EXPECT=1` and read the diff).

use std::path::Path;

use core_agent_digest::{Method, Settings, route};
use serde_json::Value;

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
