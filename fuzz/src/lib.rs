//! A small, std-only, time-bounded mutation fuzzer, and core-agent's parsers
//! as its targets (`cargo xtask fuzz <target|all> [--seconds N]`).
//!
//! The engine ([`run`]) takes a [`Target`]'s seeds (golden fixtures and test
//! configs from the repository, plus the target's own), mutates a random one
//! — bits flipped, tokens of the target's grammar inserted, bytes deleted,
//! spliced from another seed, cut — and hands each input to the target's
//! check, under `catch_unwind`. A check fails on a panic or on a broken
//! invariant (an error without a position, output that is not valid JSON, …);
//! the failing input is saved in the temporary directory and reported. Some
//! inputs that pass become seeds themselves, so mutations compound.
//!
//! The targets are in [`targets`]; each states what it asserts.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use core_agent_fuzz::{Target, run};
//!
//! /// A parser that must never panic on any string.
//! struct Digits;
//! impl Target for Digits {
//!     fn name(&self) -> &'static str { "digits" }
//!     fn seeds(&self) -> Vec<Vec<u8>> { vec![b"12".to_vec(), b"-7".to_vec()] }
//!     fn tokens(&self) -> &'static [&'static [u8]] { &[b"-", b"9"] }
//!     fn check(&mut self, input: &[u8]) -> Result<(), String> {
//!         let _ = String::from_utf8_lossy(input).parse::<i64>();
//!         Ok(())
//!     }
//! }
//!
//! let outcome = run(&mut Digits, Duration::from_millis(50), 1).unwrap();
//! assert!(outcome.inputs > 0);
//! ```

#![allow(clippy::print_stderr)]

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub mod targets;

/// xorshift64*: small, fast, deterministic for a given seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed` (any value; 0 is made odd).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// Something to fuzz: its seeds, the tokens of its grammar, and the check
/// every input must pass.
pub trait Target {
    /// The name `cargo xtask fuzz` knows it by.
    fn name(&self) -> &'static str;
    /// Inputs to start from (the engine adds nothing if this is empty but
    /// the empty input).
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// Fragments worth inserting: the grammar's punctuation and keywords.
    fn tokens(&self) -> &'static [&'static [u8]];
    /// Runs the code under test on `input`; `Err` says which invariant broke.
    /// A panic inside is caught and counts as a failure.
    fn check(&mut self, input: &[u8]) -> Result<(), String>;
    /// A line of statistics for the summary (what kinds of input were seen).
    fn stats(&self) -> String {
        String::new()
    }
    /// Whether inputs are JSON: then half the mutations edit the parsed
    /// document (replace, delete or add a value, rename a key, with parts
    /// of the seeds), so that more inputs get past the syntax check.
    fn json(&self) -> bool {
        false
    }
}

/// How a run ended without a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// How many inputs were checked.
    pub inputs: u64,
    /// How long it ran.
    pub elapsed: Duration,
}

/// A failing input: why, and where it was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The broken invariant, or the panic's message.
    pub why: String,
    /// The input.
    pub input: Vec<u8>,
    /// Where the input was saved, when it could be.
    pub saved: Option<PathBuf>,
    /// How many inputs passed before it.
    pub after: u64,
}

/// Inputs are cut to this many bytes: large inputs are slow and rarely
/// find more.
pub const MAX_INPUT: usize = 64 * 1024;

/// Fuzzes `target` for `duration`, from the generator seed `seed`.
///
/// Every seed is checked first, unmutated. Panics inside the target are
/// caught (the panic hook is silenced meanwhile) and reported as failures.
pub fn run(target: &mut dyn Target, duration: Duration, seed: u64) -> Result<Outcome, Failure> {
    let mut rng = Rng::new(seed);
    let mut seeds: Vec<Vec<u8>> = target
        .seeds()
        .into_iter()
        .map(|mut s| {
            s.truncate(MAX_INPUT);
            s
        })
        .collect();
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    let tokens = target.tokens();
    let donors = if target.json() {
        Donors::of(&seeds)
    } else {
        Donors::default()
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let deadline = started + duration;
    let mut inputs = 0u64;
    let mut failure = None;
    let initial = seeds.len();
    while failure.is_none() {
        let input = if (inputs as usize) < initial {
            seeds[inputs as usize].clone()
        } else {
            if Instant::now() >= deadline {
                break;
            }
            let mut input = seeds[rng.below(seeds.len())].clone();
            if donors.keys.is_empty() || rng.below(2) == 0 || !donors.mutate(&mut rng, &mut input) {
                mutate(&mut rng, &mut input, &seeds, tokens);
            }
            input.truncate(MAX_INPUT);
            input
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| target.check(&input))) {
            Ok(Ok(())) => {
                if rng.below(64) == 0 && seeds.len() < 4096 {
                    seeds.push(input);
                }
                inputs += 1;
            }
            Ok(Err(why)) => failure = Some((why, input)),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                failure = Some((format!("panicked: {message}"), input));
            }
        }
    }
    std::panic::set_hook(hook);
    match failure {
        None => Ok(Outcome {
            inputs,
            elapsed: started.elapsed(),
        }),
        Some((why, input)) => {
            let file = std::env::temp_dir().join(format!(
                "core-agent-fuzz-{}-{seed}-{inputs}.bin",
                target.name()
            ));
            let saved = std::fs::write(&file, &input).ok().map(|()| file);
            Err(Failure {
                why,
                input,
                saved,
                after: inputs,
            })
        }
    }
}

/// Applies one to four random edits to `input`: flip a bit, insert a token,
/// delete a short run, cut the tail, splice in a slice of another seed, or
/// duplicate a slice of itself.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[Vec<u8>], tokens: &[&[u8]]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 | 2 if !tokens.is_empty() => {
                let i = rng.below(len + 1);
                let t = tokens[rng.below(tokens.len())];
                input.splice(i..i, t.iter().copied());
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let j = (i + 1 + rng.below(16)).min(len);
                input.drain(i..j);
            }
            4 if len > 0 => input.truncate(rng.below(len)),
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + rng.below(256)).min(other.len());
                    let i = rng.below(len + 1);
                    input.splice(i..i, other[a..b].iter().copied());
                }
            }
            6 if len > 0 => {
                let a = rng.below(len);
                let b = (a + rng.below(64)).min(len);
                let copy = input[a..b].to_vec();
                let i = rng.below(len + 1);
                input.splice(i..i, copy);
            }
            _ => {}
        }
    }
}

/// Parts of the JSON seeds, for structural mutations.
#[derive(Debug, Default)]
pub struct Donors {
    values: Vec<serde_json::Value>,
    keys: Vec<String>,
}

impl Donors {
    /// Every value and key of the seeds that parse as JSON (at most a few
    /// thousand, small ones).
    pub fn of(seeds: &[Vec<u8>]) -> Donors {
        fn walk(v: &serde_json::Value, d: &mut Donors) {
            if d.values.len() < 4096 && v.to_string().len() < 512 {
                d.values.push(v.clone());
            }
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        if d.keys.len() < 4096 {
                            d.keys.push(k.clone());
                        }
                        walk(v, d);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, d)),
                _ => {}
            }
        }
        let mut d = Donors::default();
        for seed in seeds {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(seed) {
                walk(&v, &mut d);
            }
        }
        d
    }

    /// One structural edit of `input`, if it parses as JSON: a random node
    /// is replaced by a donor value, removed, renamed (objects' members) or
    /// given a new member or element. False when `input` is not JSON.
    pub fn mutate(&self, rng: &mut Rng, input: &mut Vec<u8>) -> bool {
        let Ok(mut root) = serde_json::from_slice::<serde_json::Value>(input) else {
            return false;
        };
        let count = count_nodes(&root);
        let mut n = rng.below(count);
        let Some(node) = nth_node(&mut root, &mut n) else {
            return false;
        };
        let donor = || {
            self.values
                .get(rng.clone().below(self.values.len()))
                .cloned()
        };
        let value = donor().unwrap_or(serde_json::Value::Null);
        let key = self.keys[rng.below(self.keys.len())].clone();
        match (rng.below(4), node) {
            (0, node) => *node = value,
            (1, serde_json::Value::Object(m)) if !m.is_empty() => {
                let victim = m
                    .keys()
                    .nth(rng.below(m.len()))
                    .cloned()
                    .unwrap_or_default();
                if rng.below(2) == 0 {
                    m.shift_remove(&victim);
                } else if let Some(v) = m.shift_remove(&victim) {
                    m.insert(key, v);
                }
            }
            (1, serde_json::Value::Array(a)) if !a.is_empty() => {
                let i = rng.below(a.len());
                a.remove(i);
            }
            (2, serde_json::Value::Object(m)) => {
                m.insert(key, value);
            }
            (2, serde_json::Value::Array(a)) => a.push(value),
            (_, node) => *node = value,
        }
        let _ = rng.next_u64();
        *input = if rng.below(2) == 0 {
            serde_json::to_vec(&root)
        } else {
            serde_json::to_vec_pretty(&root)
        }
        .unwrap_or_default();
        true
    }
}

fn count_nodes(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Object(m) => m.values().map(count_nodes).sum(),
        serde_json::Value::Array(a) => a.iter().map(count_nodes).sum(),
        _ => 0,
    }
}

/// The `n`th node of `v` in pre-order.
fn nth_node<'a>(v: &'a mut serde_json::Value, n: &mut usize) -> Option<&'a mut serde_json::Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        serde_json::Value::Object(m) => m.values_mut().find_map(|c| nth_node(c, n)),
        serde_json::Value::Array(a) => a.iter_mut().find_map(|c| nth_node(c, n)),
        _ => None,
    }
}

/// The repository's root (this crate is `<root>/fuzz`).
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The files under `dir` (relative to the repository root) whose names end
/// with one of `suffixes`, read whole, sorted by path.
pub fn files(dir: &str, suffixes: &[&str]) -> Vec<Vec<u8>> {
    let dir = repo_root().join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| suffixes.iter().any(|s| n.ends_with(s)))
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PanicsOn(u8);

    impl Target for PanicsOn {
        fn name(&self) -> &'static str {
            "panics-on"
        }
        fn seeds(&self) -> Vec<Vec<u8>> {
            vec![b"aaaa".to_vec()]
        }
        fn tokens(&self) -> &'static [&'static [u8]] {
            &[b"!"]
        }
        fn check(&mut self, input: &[u8]) -> Result<(), String> {
            assert!(!input.contains(&self.0), "found the byte");
            Ok(())
        }
    }

    #[test]
    fn a_panic_is_caught_reported_and_its_input_saved() {
        let failure = run(&mut PanicsOn(b'!'), Duration::from_secs(30), 7).unwrap_err();
        assert_eq!(failure.why, "panicked: found the byte");
        assert!(failure.input.contains(&b'!'));
        let saved = failure.saved.unwrap();
        assert_eq!(std::fs::read(&saved).unwrap(), failure.input);
        let _ = std::fs::remove_file(saved);
        // The hook is back: a later panic elsewhere still reports normally.
        let ok = run(&mut PanicsOn(0xff), Duration::from_millis(20), 7).unwrap();
        assert!(ok.inputs > 1);
    }

    #[test]
    fn mutation_is_deterministic_for_a_seed() {
        let seeds = vec![b"{\"a\": [1, 2]}".to_vec()];
        let once = |seed| {
            let mut rng = Rng::new(seed);
            let mut input = seeds[0].clone();
            for _ in 0..50 {
                mutate(&mut rng, &mut input, &seeds, &[b"{", b"}"]);
            }
            input
        };
        assert_eq!(once(3), once(3));
        assert_ne!(once(3), once(4));
    }
}
