//! What the store costs per digested payload: the digest's [`Store`] on
//! PostgreSQL ([`core_agent_fleet::Postgres`], on a throwaway cluster)
//! beside [`SqliteStore`] (`--session-db`, a file in a temporary
//! directory), measured in the same run. Run with
//! `cargo xtask bench fleet`, which prints the PostgreSQL/SQLite ratios.
//!
//! The payload is JSON as a tool returns it (an array of inventory-like
//! records), 50 KB and 1 MB. Groups, each with the benches `postgres` and
//! `sqlite`; one iteration is one operation:
//!
//! - `fleet_store_put_<size>`: `Store::put` of a payload under a new
//!   `call_id` (PostgreSQL: one transaction, the payload in 256 KiB chunks);
//! - `fleet_store_get_<size>`: `Store::get` of a stored payload, whole
//!   (what `retrieve_raw` reads);
//! - `fleet_store_record`: `Store::record` of one digest event (the
//!   telemetry each digested call adds);
//! - `fleet_store_digested_<size>`: what the host writes for one digested
//!   call, `put` then `record`.
//!
//! Durability is the same on both sides: the cluster runs with `fsync` on
//! (the test fixture turns it off) and `synchronous_commit` on, and SQLite
//! runs in WAL mode with its default `synchronous = FULL`, so each commit
//! reaches the disk on both. PostgreSQL is on 127.0.0.1 (TCP), as a
//! replica would reach a database on another machine at its fastest.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use core_agent_digest::{DigestEvent, Method, RawRecord, SqliteStore, Store};
use core_agent_e2e::Postgres as Cluster;
use core_agent_fleet::{Options, Postgres};
use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::json;

/// The payload sizes, with their names in the group ids.
const SIZES: &[(&str, usize)] = &[("50kb", 50 * 1024), ("1mb", 1024 * 1024)];

fn main() {
    let mut c = Criterion::default().configure_from_args();
    store(&mut c);
    c.final_summary();
}

/// A JSON array of inventory records, about `bytes` long.
fn payload(bytes: usize) -> String {
    let mut items = Vec::new();
    let mut len = 2;
    let mut i = 0;
    while len < bytes {
        let warehouse = ["north", "south", "east", "west"][i % 4];
        let item = json!({
            "sku": format!("SKU-{i:05}"),
            "name": format!("Widget model {i} with a descriptive name"),
            "warehouse": warehouse,
            "quantity": (i * 37) % 1000,
            "price_cents": 199 + (i * 13) % 5000,
            "tags": ["hardware", "in-stock", format!("batch-{}", i % 17)],
            "updated": format!("2026-01-{:02}T10:{:02}:00Z", 1 + i % 28, i % 60),
        })
        .to_string();
        len += item.len() + 1;
        items.push(item);
        i += 1;
    }
    format!("[{}]", items.join(","))
}

fn record(call_id: String, payload: &str) -> RawRecord {
    RawRecord {
        call_id,
        session_id: "bench-session".to_owned(),
        server: "demo".to_owned(),
        tool: "list_inventory".to_owned(),
        created_ms: 1_767_225_600_000,
        payload: payload.to_owned(),
    }
}

fn event(raw: usize) -> DigestEvent {
    DigestEvent::new(Method::StructuralJson, raw, 4_000)
}

fn store(c: &mut Criterion) {
    // Durable commits, as in production (the fixture trades them away).
    let cluster = Cluster::with_settings(&[("fsync", "on"), ("full_page_writes", "on")]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pg = rt
        .block_on(Postgres::connect(&cluster.url(), Options::default()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("sessions.db")).unwrap();
    let stores: [(&str, &dyn Store); 2] = [("postgres", &pg), ("sqlite", &sqlite)];
    // Every put has a call_id of its own.
    let next = AtomicU64::new(0);
    let new_id = || format!("call-{}", next.fetch_add(1, Ordering::Relaxed));

    // Both stores answer alike before anything is timed.
    for (name, store) in stores {
        let text = payload(1000);
        store.put(record("check".to_owned(), &text)).unwrap();
        let back = store.get("check").unwrap().expect(name);
        assert_eq!(back.payload, text, "{name}");
        store.record("bench-session", &event(text.len())).unwrap();
        assert_eq!(
            store
                .usage("bench-session")
                .unwrap()
                .digest_savings
                .structural_calls,
            1,
            "{name}"
        );
    }

    for (size, bytes) in SIZES {
        let text = payload(*bytes);
        for (_, store) in stores {
            store.put(record(format!("stored-{size}"), &text)).unwrap();
        }
        // 1 MB puts write ~1 MB each: fewer samples keep the files small.
        let (samples, seconds) = if *bytes > 100_000 { (20, 4) } else { (30, 3) };
        for (op, what) in [("put", 0), ("get", 1), ("digested", 2)] {
            let mut g = c.benchmark_group(format!("fleet_store_{op}_{size}"));
            g.sample_size(samples)
                .warm_up_time(Duration::from_secs(1))
                .measurement_time(Duration::from_secs(seconds))
                .throughput(Throughput::Bytes(text.len() as u64));
            for (name, store) in stores {
                g.bench_function(BenchmarkId::from_parameter(name), |b| match what {
                    0 => b.iter(|| store.put(record(new_id(), &text)).unwrap()),
                    1 => b.iter(|| {
                        let back = store.get(&format!("stored-{size}")).unwrap().unwrap();
                        black_box(back.payload.len())
                    }),
                    _ => b.iter(|| {
                        store.put(record(new_id(), &text)).unwrap();
                        store.record("bench-session", &event(text.len())).unwrap();
                    }),
                });
            }
            g.finish();
        }
    }

    let mut g = c.benchmark_group("fleet_store_record");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    for (name, store) in stores {
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| store.record("bench-session", &event(50_000)).unwrap())
        });
    }
    g.finish();

    drop(pg);
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(cluster);
}
