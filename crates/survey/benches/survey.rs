//! The survey tools beside the command-line tools on the same generated
//! tree: `grep` for a literal and a regex beside `rg -n` (or `grep -rn` when
//! rg is not on PATH), `list_dir` (the whole tree) beside `find`, and `glob`
//! beside `find -name`. Run with `cargo xtask bench survey`, which prints
//! the ratios.
//!
//! The tree has `SURVEY_BENCH_FILES` files (default 5,000) of about 10 KB
//! each, 50 to a directory, two levels deep: 20,000 files make ~200 MB.
//! It is built once per run in a temp dir; the first timed runs warm the
//! page cache, so every tool is measured reading from memory.
//!
//! A grep of about 50,000 matching lines (at 5,000 files) is also timed
//! with its output digested as the host digests it (serialized, then
//! `core_agent_digest::route` with the default settings), beside the grep
//! alone: the digest must come in under the threshold and add less than
//! the search itself.
//!
//! Each pair is measured twice: by criterion, one after the other, and
//! interleaved (the two sides taking turns for a few rounds, medians
//! written to `survey_interleaved.tsv`), which holds up better when other
//! work shares the machine.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use core_agent_survey::{Cancel, GlobInput, GrepInput, Limits, ListDirInput, Root, Survey};
use criterion::{Criterion, criterion_group, criterion_main};

/// A literal that a line in about 97 holds.
const LITERAL: &str = "needle_in_haystack";
/// A regex both Rust's and POSIX ERE read the same way.
const REGEX: &str = r"fn [a-z]+_[0-9]*7[0-9]\(";
/// About one line in eighteen: ~50,000 matching lines at 5,000 files.
const MANY: &str = r"dog [0-9]*[0-5]1\b";

const FILE_BYTES: usize = 10 * 1024;
/// Turns each pair takes in the interleaved measurement.
const ROUNDS: usize = 15;

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn files() -> usize {
    std::env::var("SURVEY_BENCH_FILES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000)
}

/// Writes `files` files of about 10 KB under `root`.
fn generate(root: &Path, files: usize) -> u64 {
    let mut bytes = 0;
    let mut line_no = 0_u64;
    for i in 0..files {
        let dir = root.join(format!("d{:03}/e{}", i / 500, (i / 50) % 10));
        std::fs::create_dir_all(&dir).unwrap();
        let ext = ["rs", "txt", "md", "rs"][i % 4];
        let mut text = String::with_capacity(FILE_BYTES + 128);
        while text.len() < FILE_BYTES {
            line_no += 1;
            let n = line_no;
            match n % 5 {
                0 => writeln!(
                    text,
                    "fn item_{n}(x: u32) -> u32 {{ x.wrapping_mul({}) }}",
                    n % 13
                ),
                1 => writeln!(
                    text,
                    "    // the quick brown fox jumps over the lazy dog {n}"
                ),
                2 => writeln!(
                    text,
                    "    let value_{n} = compute(&state, {}, \"label-{n}\");",
                    n % 101
                ),
                3 => writeln!(
                    text,
                    "    if value > {n} {{ return Err(Error::TooLarge); }}"
                ),
                _ => writeln!(
                    text,
                    "    log::debug!(\"step {n} of the pipeline is done\");"
                ),
            }
            .unwrap();
            if n.is_multiple_of(97) {
                writeln!(text, "    // {LITERAL} {n}").unwrap();
            }
        }
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("f{i:05}.{ext}")), text).unwrap();
    }
    bytes
}

fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs a command to completion, its output captured (as a host would).
fn run(cmd: &mut Command) -> usize {
    let out = cmd.output().unwrap();
    // grep exits 1 when nothing matches; anything else is a broken baseline.
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{cmd:?}: {out:?}"
    );
    out.stdout.len()
}

fn bench(c: &mut Criterion) {
    let files = files();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bytes = generate(root, files);
    let rg = on_path("rg");
    let baseline = if rg { "rg" } else { "grep -r" };

    let survey = Survey::with_limits(
        Root::new(root).unwrap(),
        Limits::default().with_max_depth(16),
    );
    let cancel = Cancel::new();
    let grep_input = |pattern: &str| GrepInput {
        pattern: pattern.to_owned(),
        path: None,
        glob: None,
        case_insensitive: false,
        context: None,
    };

    // Agree on the counts before timing anything.
    let literal = survey.grep(&grep_input(LITERAL), &cancel).unwrap();
    let regex = survey.grep(&grep_input(REGEX), &cancel).unwrap();
    let many = survey.grep(&grep_input(MANY), &cancel).unwrap();
    let settings = core_agent_digest::Settings::default();
    let digested = || {
        let out = survey.grep(&grep_input(MANY), &cancel).unwrap();
        let payload = serde_json::to_string(&out).unwrap();
        core_agent_digest::route(&payload, &settings).expect("over the threshold")
    };
    let sample = digested();
    assert!(
        sample.digest.len() < settings.threshold,
        "the digest of {} matches is {} bytes, over the threshold",
        many.total,
        sample.digest.len()
    );
    let baseline_cmd = |pattern: &str| {
        let mut cmd = if rg {
            let mut cmd = Command::new("rg");
            cmd.args(["-n", "--no-heading", "--color", "never", "-e", pattern]);
            cmd
        } else {
            let mut cmd = Command::new("grep");
            cmd.args(["-rnE", "-e", pattern]);
            cmd
        };
        cmd.arg(root);
        cmd
    };
    let lines = |pattern: &str| {
        let out = baseline_cmd(pattern).output().unwrap();
        out.stdout.iter().filter(|&&b| b == b'\n').count()
    };
    assert_eq!(
        literal.total,
        lines(LITERAL),
        "literal: survey vs {baseline}"
    );
    assert_eq!(regex.total, lines(REGEX), "regex: survey vs {baseline}");

    let summary = format!(
        "files\t{files}\nbytes\t{bytes}\nbaseline\t{baseline}\nliteral_matches\t{}\nregex_matches\t{}\nmany_matches\t{}\nraw_bytes\t{}\ndigest_bytes\t{}\nthreads\t{}\n",
        literal.total,
        regex.total,
        many.total,
        sample.raw_bytes,
        sample.digest.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    println!(
        "\nsurvey bench tree: {}",
        summary.replace(['\n', '\t'], " ")
    );
    let criterion_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("criterion");
    std::fs::create_dir_all(&criterion_dir).unwrap();
    std::fs::write(criterion_dir.join("survey_tree.tsv"), summary).unwrap();

    // The same pairs taking turns, so a change in the machine's load hits
    // both sides alike: `name ours_median_ns baseline_median_ns`.
    let rs = GlobInput {
        pattern: "**/*.rs".into(),
        path: None,
    };
    let whole = ListDirInput {
        path: None,
        depth: Some(16),
    };
    type Job<'a> = Box<dyn Fn() + 'a>;
    let pairs: Vec<(&str, Job<'_>, Job<'_>)> = vec![
        (
            "grep_literal",
            Box::new(|| {
                black_box(survey.grep(&grep_input(LITERAL), &cancel).unwrap());
            }),
            Box::new(|| {
                black_box(run(&mut baseline_cmd(LITERAL)));
            }),
        ),
        (
            "grep_regex",
            Box::new(|| {
                black_box(survey.grep(&grep_input(REGEX), &cancel).unwrap());
            }),
            Box::new(|| {
                black_box(run(&mut baseline_cmd(REGEX)));
            }),
        ),
        (
            "digested_vs_search",
            Box::new(|| {
                black_box(digested());
            }),
            Box::new(|| {
                black_box(survey.grep(&grep_input(MANY), &cancel).unwrap());
            }),
        ),
        (
            "list_dir",
            Box::new(|| {
                black_box(survey.list_dir(&whole, &cancel).unwrap());
            }),
            Box::new(|| {
                black_box(run(Command::new("find").arg(root)));
            }),
        ),
        (
            "glob",
            Box::new(|| {
                black_box(survey.glob(&rs, &cancel).unwrap());
            }),
            Box::new(|| {
                black_box(run(Command::new("find").arg(root).args(["-name", "*.rs"])));
            }),
        ),
    ];
    let mut table = String::new();
    for (name, ours, theirs) in &pairs {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            // Alternate who goes first.
            let order: [(&Job<'_>, &mut Vec<f64>); 2] = if round.is_multiple_of(2) {
                [(ours, &mut a), (theirs, &mut b)]
            } else {
                [(theirs, &mut b), (ours, &mut a)]
            };
            for (job, times) in order {
                let started = Instant::now();
                job();
                times.push(started.elapsed().as_nanos() as f64);
            }
        }
        writeln!(table, "{name}\t{}\t{}", median(&mut a), median(&mut b)).unwrap();
    }
    std::fs::write(criterion_dir.join("survey_interleaved.tsv"), table).unwrap();

    let mut group = c.benchmark_group("survey_grep");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    group.bench_function("literal", |b| {
        b.iter(|| black_box(survey.grep(&grep_input(LITERAL), &cancel).unwrap().total))
    });
    group.bench_function("baseline_literal", |b| {
        b.iter(|| black_box(run(&mut baseline_cmd(LITERAL))))
    });
    group.bench_function("regex", |b| {
        b.iter(|| black_box(survey.grep(&grep_input(REGEX), &cancel).unwrap().total))
    });
    group.bench_function("baseline_regex", |b| {
        b.iter(|| black_box(run(&mut baseline_cmd(REGEX))))
    });
    group.bench_function("many", |b| {
        b.iter(|| black_box(survey.grep(&grep_input(MANY), &cancel).unwrap().total))
    });
    group.bench_function("many_digested", |b| {
        b.iter(|| black_box(digested().raw_bytes))
    });
    group.finish();

    let mut group = c.benchmark_group("survey_walk");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("list_dir", |b| {
        b.iter(|| black_box(survey.list_dir(&whole, &cancel).unwrap().total))
    });
    group.bench_function("find", |b| {
        b.iter(|| black_box(run(Command::new("find").arg(root))))
    });
    group.bench_function("glob", |b| {
        b.iter(|| black_box(survey.glob(&rs, &cancel).unwrap().count))
    });
    group.bench_function("find_name", |b| {
        b.iter(|| black_box(run(Command::new("find").arg(root).args(["-name", "*.rs"]))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
