//! The binary on its own, with nothing configured: it answers `--version`,
//! prints the config schema, and refuses bad usage with exit 2. (The
//! end-to-end tests in `tests/` drive it against real servers; this target
//! also makes `cargo test --workspace` build the binary they run.)

#![allow(clippy::unwrap_used, missing_docs)]

use std::process::Command;

/// The binary, without the variables of this process that configure it,
/// Google's credentials or OpenTelemetry (the developer's or CI's own).
fn bare() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_core-agent"));
    core_agent_e2e::hermetic(&mut cmd);
    cmd
}

fn core_agent(args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    bare()
        .args(args)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap()
}

#[test]
fn version_schema_and_usage_errors() {
    let out = core_agent(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    // The version, then ` (1a2b3c4)` or ` (1a2b3c4-dirty)` when built from git.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("core-agent {}\n", env!("CORE_AGENT_VERSION"))
    );
    let commit = env!("CORE_AGENT_VERSION")
        .strip_prefix(env!("CARGO_PKG_VERSION"))
        .unwrap();
    assert!(
        commit.is_empty() || commit.starts_with(" (") && commit.ends_with(')'),
        "{commit}"
    );

    let out = core_agent(&["config", "schema"]);
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );

    let out = core_agent(&["call", "x", "not json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the arguments are not valid JSON"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = core_agent(&["tools"]);
    assert_eq!(out.status.code(), Some(0), "no config means no servers");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.starts_with("record_plan  ["), "{listed}");
}

/// `core-agent … | head` closes stdout early: the command neither panics nor
/// fails because of it.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = bare()
        .args(["config", "schema"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
