//! Output into a pipe whose reader has gone.

use super::*;

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
