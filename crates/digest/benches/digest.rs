//! The digest against parsing the same bytes, on generated payloads of
//! 1, 10 and 50 MB: a Kubernetes-style listing, a deep tree, and a document
//! of long strings. Run with `cargo xtask bench digest`, which prints the
//! ratios; the baselines are `serde_json::from_slice::<Value>` and a
//! validating skip (`serde::de::IgnoredAny`).
//!
//! The text digests (`route` on a unified diff, a log, a CSV table and JSON
//! Lines of 1 and 10 MB) are measured against reading the same text's lines
//! once (`str::lines().count()`), and their sizes are printed.

#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::Duration;

use core_agent_digest::{Limits, Settings, prune, route};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::de::IgnoredAny;

const MB: usize = 1 << 20;

/// A pod listing of about `size` bytes.
fn listing(size: usize) -> String {
    let mut out = String::from(
        r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"1"},"items":["#,
    );
    let mut i = 0;
    while out.len() < size {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-{i}","namespace":"prod","uid":"5f1c-{i:08}","labels":{{"app":"web","tier":"frontend"}},"creationTimestamp":"2026-11-29T10:00:00Z"}},"spec":{{"nodeName":"node-{n}","containers":[{{"name":"web","image":"registry.example.com/web:1.42.0","env":[{{"name":"A","value":"1"}},{{"name":"B","value":"2"}}],"ports":[{{"containerPort":8080}}]}}]}},"status":{{"phase":"Running","podIP":"10.0.{a}.{b}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
            n = i % 7,
            a = i / 250 % 250,
            b = i % 250
        ));
        i += 1;
    }
    out.push_str("]}");
    out
}

/// A tree of nested objects, branching 4 ways, about `size` bytes.
fn deep_tree(size: usize) -> String {
    fn node(out: &mut String, depth: usize, id: &mut usize, budget: usize) {
        *id += 1;
        out.push_str(&format!(
            r#"{{"id":"n{id}","name":"node {id}","weight":{w},"children":["#,
            w = *id % 97
        ));
        if depth < 14 {
            for k in 0..4 {
                if out.len() >= budget {
                    break;
                }
                if k > 0 {
                    out.push(',');
                }
                node(out, depth + 1, id, budget);
            }
        }
        out.push_str("]}");
    }
    let mut out = String::with_capacity(size + 1024);
    let mut id = 0;
    out.push('[');
    let mut first = true;
    while out.len() < size {
        if !first {
            out.push(',');
        }
        first = false;
        node(&mut out, 0, &mut id, size);
    }
    out.push(']');
    out
}

/// Records with long prose strings, about `size` bytes.
fn long_strings(size: usize) -> String {
    let para = "The digest keeps what a model needs and can always give back the rest. ".repeat(80);
    let mut out = String::from(r#"{"documents":["#);
    let mut i = 0;
    while out.len() < size {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"id":{i},"title":"Document {i}","body":"{para}","summary":"{}"}}"#,
            &para[..700]
        ));
        i += 1;
    }
    out.push_str("]}");
    out
}

/// A `git diff` of about `size` bytes: files of a few hunks each.
fn diff(size: usize) -> String {
    let mut out = String::from("Diff with HEAD~30:\n");
    let mut f = 0;
    while out.len() < size {
        out.push_str(&format!(
            "diff --git a/src/m{m}/file_{f}.rs b/src/m{m}/file_{f}.rs\nindex 1111111..2222222 100644\n--- a/src/m{m}/file_{f}.rs\n+++ b/src/m{m}/file_{f}.rs\n",
            m = f % 20
        ));
        for h in 0..4 {
            out.push_str(&format!("@@ -{0},7 +{0},8 @@ fn f{h}() {{\n", h * 40 + 1));
            out.push_str("     let a = compute(1);\n     let b = compute(2);\n     let c = compute(3);\n-    let d = old(4);\n+    let d = new(4);\n+    let e = new(5);\n     let f = compute(6);\n     let g = compute(7);\n     let h = compute(8);\n");
        }
        f += 1;
    }
    out
}

/// A service log of about `size` bytes, in four levels.
fn log(size: usize) -> String {
    let mut out = String::with_capacity(size + 128);
    let mut i = 0usize;
    while out.len() < size {
        let t = format!(
            "2026-12-01T10:{:02}:{:02}.{:03}Z",
            i / 60 % 60,
            i % 60,
            i % 1000
        );
        let line = match i % 20 {
            0..10 => format!("{t} INFO http: GET /api/items/{i} 200 {}ms\n", i % 90),
            10..16 => format!("{t} DEBUG cache: hit key=user:{}\n", i % 997),
            16..19 => format!("{t} WARN http: slow request took {}ms\n", 500 + i % 900),
            _ => format!("{t} ERROR db: connection to 10.0.0.{} refused\n", i % 9),
        };
        out.push_str(&line);
        i += 1;
    }
    out
}

/// A CSV table of about `size` bytes.
fn csv(size: usize) -> String {
    let mut out = String::from("order_id,customer,country,amount,status,note\n");
    let mut i = 0usize;
    while out.len() < size {
        out.push_str(&format!(
            "{i},customer-{},{},{}.{:02},paid,\"delivered, signed\"\n",
            i % 977,
            ["FR", "DE", "US", "JP"][i % 4],
            i % 500,
            i % 100
        ));
        i += 1;
    }
    out
}

/// JSON Lines of about `size` bytes.
fn jsonl(size: usize) -> String {
    let mut out = String::new();
    let mut i = 0usize;
    while out.len() < size {
        out.push_str(&format!(
            r#"{{"ts":"2026-12-01T10:00:{:02}Z","level":"info","msg":"request {i} handled","path":"/api/v1/items/{i}","latency_ms":{}}}"#,
            i % 60,
            i % 97
        ));
        out.push('\n');
        i += 1;
    }
    out
}

/// Peak resident memory of this process so far, in bytes (Linux).
fn peak_rss() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn inputs() -> Vec<(&'static str, usize, String)> {
    let mut v = Vec::new();
    for size in [MB, 10 * MB, 50 * MB] {
        v.push(("listing", size, listing(size)));
        v.push(("deep_tree", size, deep_tree(size)));
        v.push(("long_strings", size, long_strings(size)));
    }
    v
}

fn bench(c: &mut Criterion) {
    // Peak memory of the digest, measured before anything else allocates
    // much: the 50 MB listing is built, then pruned.
    let big = listing(50 * MB);
    let before = peak_rss();
    let out = prune(big.as_bytes(), &Limits::default()).unwrap();
    let after = peak_rss();
    println!(
        "digest peak memory on the 50 MB listing: {:.2} MB above the input ({:.3}× the input); output {} bytes",
        after.saturating_sub(before) as f64 / MB as f64,
        after.saturating_sub(before) as f64 / big.len() as f64,
        out.len()
    );
    drop((big, out));

    for (name, size, text) in inputs() {
        let mut group = c.benchmark_group(format!("{name}_{}mb", size / MB));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        group.throughput(Throughput::Bytes(text.len() as u64));
        let bytes = text.as_bytes();
        group.bench_function(BenchmarkId::from_parameter("digest"), |b| {
            b.iter(|| prune(black_box(bytes), &Limits::default()).unwrap())
        });
        group.bench_function(BenchmarkId::from_parameter("parse_value"), |b| {
            b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(bytes)).unwrap())
        });
        group.bench_function(BenchmarkId::from_parameter("skip_ignored_any"), |b| {
            b.iter(|| serde_json::from_slice::<IgnoredAny>(black_box(bytes)).unwrap())
        });
        group.finish();
    }
}

fn bench_text(c: &mut Criterion) {
    let settings = Settings::default();
    for size in [MB, 10 * MB] {
        for (name, text) in [
            ("diff", diff(size)),
            ("log", log(size)),
            ("csv", csv(size)),
            ("jsonl", jsonl(size)),
        ] {
            let d = route(&text, &settings).unwrap();
            println!(
                "text digest, {name} of {} bytes: {} ({} bytes, {:.0}× smaller)",
                text.len(),
                d.method,
                d.digest.len(),
                text.len() as f64 / d.digest.len() as f64
            );
            let mut group = c.benchmark_group(format!("text_{name}_{}mb", size / MB));
            group
                .sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3));
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(BenchmarkId::from_parameter("digest"), |b| {
                b.iter(|| route(black_box(&text), &settings).unwrap())
            });
            group.bench_function(BenchmarkId::from_parameter("scan_lines"), |b| {
                b.iter(|| black_box(&text).lines().count())
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench, bench_text);
criterion_main!(benches);
