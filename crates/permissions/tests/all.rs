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
fn the_gateway_section_is_kept_as_written_project_first() {
    let (_d, p, u) = files(
        Some("{\n  \"gateway\": {\"tokens\": 1}\n}"),
        Some(r#"{"permissions": {}, "gateway": []}"#),
    );
    let c = PermissionsConfig::load(&p, Some(&u)).unwrap();
    let sections: Vec<(&std::path::Path, &str, String)> = c
        .gateway
        .iter()
        .map(|s| (s.path.as_path(), s.pointer.as_str(), s.value.to_string()))
        .collect();
    assert_eq!(
        sections,
        [
            (p.as_path(), "/gateway", r#"{"tokens":1}"#.to_owned()),
            (u.as_path(), "/gateway", "[]".to_owned()),
        ]
    );
    // Its reader places its problems in its file.
    let mut problems = c.gateway[0].problems();
    problems.push(
        None,
        "/gateway/tokens",
        "expected a JSON object",
        "write {…}",
    );
    assert_eq!(
        problems.into_problems()[0].to_string(),
        format!(
            "{}:2:15: /gateway/tokens: expected a JSON object; write {{…}}",
            p.display()
        )
    );
    let (_d, p, _u) = files(Some("{}"), None);
    assert!(
        PermissionsConfig::load(&p, None)
            .unwrap()
            .gateway
            .is_empty()
    );
}
