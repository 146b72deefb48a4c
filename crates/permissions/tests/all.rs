//! Loading `config.json` files: precedence, merged lists, and errors that
//! name the file and the field.

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::PathBuf;

use core_agent_permissions::{Mode, PermissionsConfig};

fn files(project: Option<&str>, user: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("project.json");
    let u = dir.path().join("user.json");
    if let Some(t) = project {
        std::fs::write(&p, t).unwrap();
    }
    if let Some(t) = user {
        std::fs::write(&u, t).unwrap();
    }
    (dir, p, u)
}

#[test]
fn project_wins_for_scalars_and_lists_from_both_apply() {
    let (_d, p, u) = files(
        Some(r#"{"permissions": {"mode": "allowlist", "allow": ["mcp:a_*"]}}"#),
        Some(
            r#"{"permissions": {"mode": "yolo", "require_plan_artifact": true, "allow": ["mcp:b"], "deny": ["mcp:c"]},
                 "tools": {"wait_and_verify": {"poll_allow": ["mcp:jobs_*"]}}}"#,
        ),
    );
    let c = PermissionsConfig::load(&p, Some(&u)).unwrap();
    assert_eq!(c.mode, Mode::Allowlist);
    assert_eq!(c.mode_source.as_deref(), Some(p.as_path()));
    assert!(
        c.require_plan_artifact,
        "the user file sets what the project leaves unset"
    );
    let allow: Vec<&str> = c.allow.iter().map(|p| p.as_str()).collect();
    assert_eq!(allow, ["mcp:a_*", "mcp:b"]);
    assert_eq!(c.deny[0].as_str(), "mcp:c");
    assert_eq!(c.deny[0].source(), u.as_path());
    assert_eq!(c.poll_allow[0].as_str(), "mcp:jobs_*");
}

#[test]
fn missing_files_give_the_defaults() {
    let (_d, p, u) = files(None, None);
    let c = PermissionsConfig::load(&p, Some(&u)).unwrap();
    assert_eq!(
        (c.mode, c.require_plan_artifact, c.allow.len()),
        (Mode::Ask, false, 0)
    );
}

#[test]
fn errors_name_the_file_line_column_and_field_in_file_order() {
    let (_d, p, u) = files(
        Some(
            r#"{
  "permissions": {
    "mode": "sometimes",
    "alow": [],
    "deny": ["nocolon", 3],
    "require_plan_artifact": "yes"
  },
  "tool": {}
}"#,
        ),
        Some(
            r#"{"permissions": {"a/b~": 1}, "tools": {"wait_and_verify": {"poll_allow": "mcp:x"}}}"#,
        ),
    );
    let err = PermissionsConfig::load(&p, Some(&u))
        .unwrap_err()
        .to_string();
    let (f, g) = (p.display(), u.display());
    assert_eq!(
        err,
        format!(
            "{f}:3:5: /permissions/mode: unknown mode \"sometimes\"; use \"ask\", \"allowlist\" or \"yolo\"\n\
             {f}:4:5: /permissions/alow: unknown field `alow`; did you mean `allow`?\n\
             {f}:5:14: /permissions/deny/0: `nocolon` has no namespace; write `namespace:glob`, such as \"mcp:filesystem_read_*\"\n\
             {f}:5:25: /permissions/deny/1: expected a string; write the pattern in double quotes\n\
             {f}:6:5: /permissions/require_plan_artifact: expected true or false; write true or false without quotes\n\
             {f}:8:3: /tool: unknown field `tool`; did you mean `tools`?\n\
             {g}:1:18: /permissions/a~1b~0: unknown field `a/b~`; valid fields here are `mode`, `allow`, `deny`, `require_plan_artifact`\n\
             {g}:1:60: /tools/wait_and_verify/poll_allow: expected an array of patterns; write [\"mcp:server_tool\", \"mcp:server_*\"]"
        )
    );
}

#[test]
fn a_file_that_is_not_an_object_or_not_json() {
    let (_d, p, _u) = files(Some("\n  []"), None);
    assert_eq!(
        PermissionsConfig::load(&p, None).unwrap_err().to_string(),
        format!(
            "{}:2:3: /: expected a JSON object; write {{…}}",
            p.display()
        )
    );
    let (_d, p, _u) = files(Some("{\"permissions\": [}"), None);
    assert!(
        PermissionsConfig::load(&p, None)
            .unwrap_err()
            .to_string()
            .contains(":1:18: invalid JSON")
    );
}

#[test]
fn gateway_tokens_map_names_to_env_vars_and_trust_levels_project_first() {
    let (_d, p, u) = files(
        Some(r#"{"gateway": {"tokens": {"bot": {"env": "CA_BOT", "trust_level": "public"}}}}"#),
        Some(
            r#"{"gateway": {"tokens": {"bot": {"env": "CA_OTHER", "trust_level": "creator"},
                                        "me": {"env": "CA_ME", "trust_level": "creator"}}}}"#,
        ),
    );
    let c = PermissionsConfig::load(&p, Some(&u)).unwrap();
    let tokens: Vec<(&str, &str, &str)> = c
        .gateway_tokens
        .iter()
        .map(|t| (t.name.as_str(), t.env.as_str(), t.trust_level.as_str()))
        .collect();
    assert_eq!(
        tokens,
        [("bot", "CA_BOT", "public"), ("me", "CA_ME", "creator")]
    );
}

#[test]
fn gateway_session_limits_are_read_project_first() {
    let (_d, p, u) = files(
        Some(r#"{"gateway": {"max_sessions": 40, "session_idle_timeout_secs": 90}}"#),
        Some(r#"{"gateway": {"max_sessions": 7, "max_sessions_per_token": 5}}"#),
    );
    let c = PermissionsConfig::load(&p, Some(&u)).unwrap();
    assert_eq!(
        c.gateway_limits,
        core_agent_permissions::GatewayLimits {
            max_sessions: Some(40),
            max_sessions_per_token: Some(5),
            session_idle_timeout_secs: Some(90),
        }
    );
    let (_d, p, _u) = files(Some("{}"), None);
    let c = PermissionsConfig::load(&p, None).unwrap();
    assert_eq!(c.gateway_limits, Default::default());
}

#[test]
fn a_bad_gateway_session_limit_names_the_field_and_the_fix() {
    let (_d, p, _u) = files(
        Some(
            r#"{"gateway": {"max_sessions": 0, "max_sessions_per_token": "10", "session_idle_timeout_secs": 1.5, "max_session": 3}}"#,
        ),
        None,
    );
    let err = PermissionsConfig::load(&p, None).unwrap_err().to_string();
    for want in [
        "/gateway/max_sessions: expected a whole number of at least 1, not 0",
        "/gateway/max_sessions_per_token: expected a whole number of at least 1, not \"10\"",
        "write \"max_sessions_per_token\": 100 (no quotes)",
        "/gateway/session_idle_timeout_secs: expected a whole number of at least 1, not 1.5",
        "/gateway/max_session: unknown field `max_session`; did you mean `max_sessions`?",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}

#[test]
fn a_bad_gateway_token_names_the_field_and_the_fix() {
    let (_d, p, _u) = files(
        Some(
            r#"{"gateway": {"tokens": {"a": {"env": "X", "trust_level": "admin"}, "b": {"trust_level": "user"}, "c": {"env": "Y"}}, "token": 1}}"#,
        ),
        None,
    );
    let err = PermissionsConfig::load(&p, None).unwrap_err().to_string();
    for want in [
        "/gateway/tokens/a/trust_level: unknown trust level \"admin\"",
        "use one of \"creator\", \"agent\", \"user\", \"public\"",
        "/gateway/tokens/b/env: expected the name of the environment variable",
        "/gateway/tokens/c/trust_level: every gateway token needs a trust level",
        "/gateway/token: unknown field `token`; did you mean `tokens`?",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}
