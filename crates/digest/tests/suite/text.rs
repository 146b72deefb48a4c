//! The text digests: a unified diff, a log, a CSV/TSV table and JSON Lines
//! are each digested by their structure, near the threshold and never past
//! their bound whatever the input's shape, and prose keeps the passthrough.

use std::fmt::Write;
use std::path::Path;

use core_agent_digest::{DigestEvent, Method, Settings, Usage, route};
use serde_json::Value;

/// A `git diff` of `files` files, file `i` with one hunk of `i % 7 + 1`
/// added lines and `i % 3` removed ones (and a second hunk every fifth file).
fn git_diff(files: usize) -> String {
    let mut out = String::from("Diff with HEAD~30:\n");
    for i in 0..files {
        let path = format!("src/dir{}/file_{i}.rs", i % 10);
        let (added, removed) = (i % 7 + 1, i % 3);
        let _ = writeln!(
            out,
            "diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n@@ -10,{} +10,{} @@ fn f() {{",
            removed + 2,
            added + 2
        );
        out.push_str(" context before\n");
        for k in 0..removed {
            let _ = writeln!(out, "-old line {k}");
        }
        for k in 0..added {
            let _ = writeln!(out, "+new line {k}");
        }
        out.push_str(" context after\n");
        if i % 5 == 0 {
            out.push_str("@@ -90,1 +90,2 @@\n context\n+one more\n");
        }
    }
    out
}

fn digest(text: &str) -> core_agent_digest::Digested {
    route(text, &Settings::default()).unwrap()
}

#[test]
fn a_diff_names_every_file_with_its_counts_then_first_hunks() {
    let text = git_diff(200);
    let d = digest(&text);
    assert_eq!(d.method, Method::StructuralDiff);
    for i in 0..200 {
        let added = i % 7 + 1 + usize::from(i % 5 == 0);
        let entry = format!("\n+{added} -{} src/dir{}/file_{i}.rs\n", i % 3, i % 10);
        assert!(d.digest.contains(&entry), "{entry:?} missing");
    }
    assert!(d.digest.starts_with("[digest: unified diff, "));
    assert!(d.digest.contains(": 200 files, +"));
    assert!(d.digest.contains("\nfirst hunks:\n--- src/dir0/file_0.rs\n@@ -10,2 +10,3 @@ fn f() {\n context before\n+new line 0\n"));
    assert!(d.digest.contains("\nDiff with HEAD~30:\n"));
    // The rest is counted: 200 files and 240 hunks, a few shown.
    let last = d.digest.lines().last().unwrap();
    assert!(
        last.starts_with("[digest: first hunk of ")
            && last.contains(" of 200 files shown; ")
            && last.ends_with(" left out; retrieve_raw has the whole diff]"),
        "{last}"
    );
    assert!(d.digest.len() <= Settings::default().passthrough_max);
}

#[test]
fn a_small_diff_is_shown_whole_within_the_threshold() {
    let text = git_diff(40);
    let d = digest(&text);
    assert_eq!(d.method, Method::StructuralDiff);
    let settings = Settings::default();
    assert!(d.digest.len() <= settings.threshold, "{}", d.digest.len());
    assert!(
        d.digest.len() * 2 >= settings.threshold,
        "near the threshold: {}",
        d.digest.len()
    );
}

/// A log of 2000 lines: 1000 health checks (numbers differ), 600 debug
/// lines, 300 warnings, 100 errors.
fn service_log() -> String {
    let mut out = String::new();
    for i in 0..2000 {
        let t = format!(
            "2026-12-01T10:{:02}:{:02}.{:03}Z",
            i / 60 % 60,
            i % 60,
            i * 7 % 1000
        );
        let line = match i % 20 {
            0..10 => format!("{t} INFO http: GET /health 200 {}ms", i % 9 + 1),
            10..16 => format!("{t} DEBUG cache: hit key=user:{}", i * 13 % 997),
            16..19 => format!(
                "{t} WARN http: slow request /api/items/{i} took {}ms",
                500 + i
            ),
            _ => format!("{t} ERROR db: connection to 10.0.0.{} refused", i % 9),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn a_log_keeps_its_ends_collapses_repeats_and_counts_levels() {
    let text = service_log();
    let d = digest(&text);
    assert_eq!(d.method, Method::StructuralLog);
    let first = d.digest.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "[digest: log, {} bytes: 2000 lines; ERROR 100, WARN 300, INFO 1000, DEBUG 600]",
            text.len()
        )
    );
    assert!(
        d.digest
            .contains("\n×1000 2026-12-01T10:00:00.000Z INFO http: GET /health 200 1ms\n")
    );
    assert!(
        d.digest
            .contains("\n×100 2026-12-01T10:00:19.133Z ERROR db: connection to 10.0.0.1 refused\n")
    );
    assert!(
        d.digest
            .contains("\nfirst errors:\n20: 2026-12-01T10:00:19.133Z ERROR")
    );
    assert!(d.digest.contains("\nfirst lines:\n2026-12-01T10:00:00.000Z INFO http: GET /health 200 1ms\n[… ×9 more like the line above]\n"));
    let last_line = text.lines().last().unwrap();
    assert!(
        d.digest.contains(&format!("\n{last_line}\n")),
        "the last line"
    );
    assert!(d.digest.ends_with(
        " of 2000 lines left out of the first and last lines; retrieve_raw has them all]"
    ));
    let settings = Settings::default();
    assert!(d.digest.len() <= settings.threshold);
    assert!(
        d.digest.len() * 10 >= settings.threshold * 7,
        "near the threshold: {}",
        d.digest.len()
    );
}

#[test]
fn a_table_keeps_its_header_first_and_last_rows_and_counts() {
    let mut text = String::from("id,name,region,price\n");
    for i in 0..5000 {
        let _ = writeln!(text, "{i},\"Widget {i}, large\",eu,{}.50", i % 90);
    }
    let d = digest(&text);
    assert_eq!(d.method, Method::StructuralCsv);
    assert!(d.digest.starts_with(&format!(
        "[digest: CSV (comma-separated), {} bytes: a header and 5000 rows, 4 columns]\nheader: id,name,region,price\nfirst rows:\n0,\"Widget 0, large\",eu,0.50\n",
        text.len()
    )), "{}", &d.digest[..200]);
    assert!(
        d.digest
            .contains("\n4999,\"Widget 4999, large\",eu,49.50\n[")
    );
    assert!(d.digest.contains(" rows left out]\nlast rows:\n"));
    let settings = Settings::default();
    assert!(d.digest.len() <= settings.threshold);
    assert!(
        d.digest.len() * 10 >= settings.threshold * 7,
        "near the threshold: {}",
        d.digest.len()
    );

    let tsv = "pod\tstatus\trestarts\n".to_owned() + &"web-1\tRunning\t0\n".repeat(1000);
    let d = digest(&tsv);
    assert_eq!(d.method, Method::StructuralCsv);
    assert!(d.digest.starts_with("[digest: TSV (tab-separated), "));
}

#[test]
fn json_lines_are_pruned_as_an_array() {
    let text: String = (0..300)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"level\":\"info\",\"msg\":\"{}\"}}\n",
                "m".repeat(i % 50 + 600)
            )
        })
        .collect();
    let d = digest(&text);
    assert_eq!(d.method, Method::StructuralJsonl);
    let v: Value = serde_json::from_str(&d.digest).unwrap();
    let items = v.as_array().unwrap();
    assert_eq!(items.first().unwrap()["id"], 0);
    assert_eq!(items.last().unwrap()["id"], 299);
    assert!(items.iter().any(|i| {
        i.as_str()
            .is_some_and(|s| s.ends_with(" of 300 items omitted]"))
    }));
    assert!(d.digest.len() <= Settings::default().threshold);
    // A line that is not one JSON value makes it something else.
    let broken = text.replacen("}\n", "}, \n", 1);
    assert_ne!(digest(&broken).method, Method::StructuralJsonl);
}

#[test]
fn text_digests_stay_bounded_whatever_the_shape() {
    let settings = Settings::default();
    let huge_line = "x".repeat(3 << 20);
    let wide_header: String = (0..10_000)
        .map(|i| format!("column_{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let wide_row: String = (0..10_000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let cases: Vec<(&str, String, Method, usize)> = vec![
        (
            "a diff of 10,000 files",
            git_diff(10_000),
            Method::StructuralDiff,
            settings.passthrough_max,
        ),
        (
            "a diff of one huge line",
            format!(
                "diff --git a/m.js b/m.js\n--- a/m.js\n+++ b/m.js\n@@ -1 +1 @@\n-{huge_line}\n+{huge_line}\n"
            ),
            Method::StructuralDiff,
            settings.threshold,
        ),
        (
            "a CSV of 10,000 columns",
            format!("{wide_header}\n{}", format!("{wide_row}\n").repeat(20)),
            Method::StructuralCsv,
            settings.threshold,
        ),
        (
            "a CSV with a huge field",
            format!("a,b\n{}1,{huge_line}\n2,y\n", "1,x\n".repeat(10)),
            Method::StructuralCsv,
            settings.threshold,
        ),
        (
            "a log of huge lines",
            (0..20)
                .map(|i| format!("2026-12-01 10:00:{i:02} INFO {}\n", &huge_line[..200_000]))
                .collect(),
            Method::StructuralLog,
            settings.threshold,
        ),
        (
            "a log of 200,000 distinct lines",
            (0..200_000)
                .map(|i| format!("2026-12-01 10:00:00 WARN {}\n", word(i)))
                .collect(),
            Method::StructuralLog,
            settings.threshold,
        ),
        (
            "JSON Lines of 10,000 keys each",
            (0..5)
                .map(|_| {
                    let keys: Vec<String> = (0..10_000).map(|k| format!("\"k{k}\":{k}")).collect();
                    format!("{{{}}}\n", keys.join(","))
                })
                .collect(),
            Method::StructuralJsonl,
            settings.threshold,
        ),
        (
            "JSON Lines of 500 keys each",
            (0..50)
                .map(|_| {
                    let keys: Vec<String> = (0..500).map(|k| format!("\"k{k}\":{k}")).collect();
                    format!("{{{}}}\n", keys.join(","))
                })
                .collect(),
            Method::StructuralJsonl,
            settings.passthrough_max,
        ),
    ];
    for (name, text, method, bound) in cases {
        let d = digest(&text);
        assert_eq!(d.method, method, "{name}");
        if name == "a CSV of 10,000 columns" {
            assert!(
                d.digest.contains(" more columns]\n"),
                "{name}: the header says what it cut"
            );
        }
        assert!(
            d.digest.len() <= bound,
            "{name}: {} bytes over {bound}",
            d.digest.len()
        );
    }
}

/// A word of letters only, distinct for each `i` (so no two lines share a
/// shape once numbers are read as `#`).
fn word(mut i: usize) -> String {
    let mut w = String::new();
    loop {
        w.push(char::from(b'a' + (i % 26) as u8));
        i /= 26;
        if i == 0 {
            return w;
        }
    }
}

#[test]
fn prose_and_docs_keep_the_passthrough() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in ["README.md", "ARCHITECTURE.md", "crates/digest/src/prune.rs"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        assert!(
            text.len() >= Settings::default().threshold,
            "{doc} is long enough"
        );
        assert_eq!(digest(&text).method, Method::Passthrough, "{doc}");
    }
}

#[test]
fn every_method_has_a_name_telemetry_counts() {
    let mut usage = Usage::default();
    for m in Method::ALL {
        assert_eq!(Method::parse(m.as_str()), Some(m));
        usage.record(&DigestEvent::new(m, 1000, 100));
    }
    for name in [
        "structural_diff",
        "structural_log",
        "structural_csv",
        "structural_jsonl",
    ] {
        assert_eq!(usage.digest_methods.counts[name], 1, "{name}");
        assert!(Method::parse(name).unwrap().is_structural());
    }
    assert_eq!(usage.digest_savings.structural_calls, 6);
    assert_eq!(usage.digest_savings.agentic_calls, 1);
}

/// Lines from every format, mixed with noise.
fn mixed_line() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        "[ -~]{0,120}",
        "[a-z,\"\t]{0,40}",
        Just("diff --git a/x.rs b/x.rs".to_owned()),
        Just("--- a/x.rs".to_owned()),
        Just("+++ b/x.rs".to_owned()),
        (0usize..5, 0usize..5).prop_map(|(a, b)| format!("@@ -1,{a} +1,{b} @@")),
        "[+ -\\\\][ -~]{0,60}",
        "2026-12-01 10:00:0[0-9] (INFO|WARN|ERROR|debug) [ -~]{0,60}",
        "[0-9]{1,4},[a-z]{1,8},\"[a-z, ]{0,10}\"",
        Just(r#"{"id":1,"level":"info"}"#.to_owned()),
        "é{0,300}",
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Whatever the mix, the router never panics and a text digest stays
    /// within its bound.
    #[test]
    fn text_digests_stay_bounded_on_any_mix(lines in proptest::collection::vec(mixed_line(), 0..300), repeat in 1usize..20) {
        let settings = Settings::default().with_threshold(1500).with_passthrough_max(4096);
        let text = lines.join("\n").repeat(repeat);
        if let Some(d) = route(&text, &settings) {
            let bound = match d.method {
                Method::StructuralLog | Method::StructuralCsv => settings.threshold,
                Method::StructuralDiff | Method::StructuralJsonl => settings.passthrough_max,
                _ => usize::MAX,
            };
            proptest::prop_assert!(d.digest.len() <= bound, "{}: {} bytes", d.method, d.digest.len());
            if d.method == Method::StructuralJsonl {
                proptest::prop_assert!(serde_json::from_str::<Value>(&d.digest).is_ok() || d.digest.starts_with("[digest: JSON Lines"));
            }
        }
    }
}
