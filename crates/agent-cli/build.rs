//! Sets `CORE_AGENT_VERSION`, what `core-agent --version` prints after the
//! name: the package version, and the git commit it was built from when it
//! was built from a git checkout (`0.1.0 (1a2b3c4)`, `0.1.0 (1a2b3c4-dirty)`
//! with uncommitted changes to tracked files). Built from a `.crate` (crates.io,
//! `cargo package`) or without git, it is the version alone: this script
//! never fails the build.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let version = env_var("CARGO_PKG_VERSION").unwrap_or_default();
    let manifest_dir = PathBuf::from(env_var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shown = match commit(&manifest_dir) {
        Some(commit) => format!("{version} ({commit})"),
        None => version,
    };
    println!("cargo:rustc-env=CORE_AGENT_VERSION={shown}");
    println!("cargo:rerun-if-changed=build.rs");
    // A commit, a checkout or `git add` changes these; an edit alone does not,
    // so `-dirty` says what the tree was when this script last ran.
    for path in watched(&manifest_dir) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `git <args>` in `dir`: its trimmed stdout when it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}

/// Whether `dir` is this package in a git checkout: not an unpacked
/// `.crate` (cargo writes `Cargo.toml.orig` into each), and its manifest
/// tracked by the repository around it (a copy under another checkout is
/// not built from that checkout's commit).
fn in_checkout(dir: &Path) -> bool {
    !dir.join("Cargo.toml.orig").exists()
        && git(dir, &["ls-files", "--error-unmatch", "Cargo.toml"]).is_some()
}

/// The short commit of `HEAD`, with `-dirty` when tracked files differ
/// from it; `None` outside a checkout.
fn commit(dir: &Path) -> Option<String> {
    if !in_checkout(dir) {
        return None;
    }
    let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
    if hash.is_empty() {
        return None;
    }
    let status = git(
        dir,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    );
    Some(match status {
        Some(changes) if !changes.is_empty() => format!("{hash}-dirty"),
        _ => hash,
    })
}

/// The files whose change means another commit or another state of the
/// tree: `HEAD`, the branch it points to (or `packed-refs`), the index.
/// Worktrees keep `HEAD` and the index apart from the shared refs, so git
/// is asked where each is; only files that exist are watched (cargo would
/// rerun this script on every build for a missing one).
fn watched(dir: &Path) -> Vec<PathBuf> {
    if !in_checkout(dir) {
        return Vec::new();
    }
    let mut names = vec![
        "HEAD".to_owned(),
        "index".to_owned(),
        "packed-refs".to_owned(),
    ];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        names.push(branch);
    }
    names
        .iter()
        .filter_map(|name| git(dir, &["rev-parse", "--git-path", name]))
        // Relative to `dir` when git answers with a relative path.
        .map(|path| dir.join(path))
        .filter(|path| path.is_file())
        .collect()
}
