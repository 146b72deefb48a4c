//! The binary on its own, with nothing configured: it answers `--version`,
//! prints the config schema, and refuses bad usage with exit 2. (The
//! end-to-end tests in `tests/` drive it against real servers; this target
//! also makes `cargo test --workspace` build the binary they run.)

#![allow(clippy::unwrap_used, missing_docs)]

use std::process::Command;

mod stdout;
mod usage;

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
