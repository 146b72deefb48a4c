//! A time-bounded mutation fuzzer for the pruner (`cargo xtask fuzz digest
//! [--seconds N]`). It needs nothing but std: seeds (the golden payloads and
//! generated JSON) are mutated — bytes flipped, inserted, deleted, spliced,
//! cut — and every input must leave the pruner without a panic, and valid
//! JSON must be accepted and pruned into valid JSON.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    missing_docs
)]

use std::path::Path;
use std::time::{Duration, Instant};

use core_agent_digest::{Limits, prune};

/// xorshift64*: small, fast, deterministic for a given seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\\u00",
    b"null",
    b"-1e9",
    b"\"id\"",
    b"\"name\":",
    b"\xc3\xa9",
    b"\xff",
    b" ",
];

fn generate(rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    match rng.below(if depth > 12 { 4 } else { 7 }) {
        0 => out.extend_from_slice(b"null"),
        1 => out.extend_from_slice(format!("{}", rng.next() as i64 % 100_000).as_bytes()),
        2 => {
            let n = rng.below(40) * if rng.below(10) == 0 { 30 } else { 1 };
            out.push(b'"');
            for _ in 0..n {
                out.push(b"ab\\ \xc3\xa9"[rng.below(6)].max(b'a'));
            }
            out.push(b'"');
        }
        3 => out.extend_from_slice(b"true"),
        4 | 5 => {
            out.push(b'[');
            let max = if rng.below(4) == 0 { 60 } else { 5 };
            for i in 0..rng.below(max) {
                if i > 0 {
                    out.push(b',');
                }
                generate(rng, depth + 1, out);
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            for i in 0..rng.below(6) {
                if i > 0 {
                    out.push(b',');
                }
                let key =
                    ["id", "name", "status", "x", "self_url", "owner_id", "data"][rng.below(7)];
                out.extend_from_slice(format!("\"{key}{i}\":").as_bytes());
                generate(rng, depth + 1, out);
            }
            out.push(b'}');
        }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(6) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                let t = TOKENS[rng.below(TOKENS.len())];
                input.splice(i..i, t.iter().copied());
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let j = (i + 1 + rng.below(16)).min(len);
                input.drain(i..j);
            }
            3 if len > 0 => input.truncate(rng.below(len)),
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + rng.below(256)).min(other.len());
                    let i = rng.below(len + 1);
                    input.splice(i..i, other[a..b].iter().copied());
                }
            }
            _ => {}
        }
    }
}

fn check(input: &[u8], limits: &Limits) -> Result<(), String> {
    let out = std::panic::catch_unwind(|| prune(input, limits))
        .map_err(|_| "the pruner panicked".to_owned())?;
    let valid = serde_json::from_slice::<serde_json::Value>(input).is_ok();
    match out {
        Ok(text) if valid => serde_json::from_str::<serde_json::Value>(&text)
            .map(|_| ())
            .map_err(|e| format!("invalid output ({e}): {text}")),
        Err(_) if valid => Err("valid JSON was rejected".to_owned()),
        // Input serde_json rejects may still be grammatical JSON (a number
        // like 1e7774 is out of f64's range); only the absence of a panic counts.
        _ => Ok(()),
    }
}

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_cafe);
    let mut rng = Rng(seed | 1);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&golden)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "input"))
        .filter_map(|p| std::fs::read(p).ok())
        .map(|b| b[..b.len().min(20_000)].to_vec())
        .collect();
    for _ in 0..32 {
        let mut v = Vec::new();
        generate(&mut rng, 0, &mut v);
        seeds.push(v);
    }
    let small = Limits {
        max_string_chars: 3,
        array_head: 2,
        array_tail: 1,
        max_depth: 3,
    };
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut runs = 0u64;
    while Instant::now() < deadline {
        let mut input = seeds[rng.below(seeds.len())].clone();
        mutate(&mut rng, &mut input, &seeds);
        for limits in [Limits::default(), small] {
            if let Err(why) = check(&input, &limits) {
                let file =
                    std::env::temp_dir().join(format!("digest-fuzz-crash-{seed}-{runs}.json"));
                let _ = std::fs::write(&file, &input);
                eprintln!("fuzz: {why}; input saved to {}", file.display());
                std::process::exit(1);
            }
        }
        if rng.below(50) == 0 && input.len() < 100_000 {
            seeds.push(input);
        }
        runs += 1;
    }
    println!("fuzz digest: {runs} inputs in {seconds} s, no failure");
}
