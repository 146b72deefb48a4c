//! `--version`, `config schema`, a usage error, and `tools` with nothing
//! configured.

use super::*;

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
