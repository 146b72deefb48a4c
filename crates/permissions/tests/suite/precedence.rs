//! Precedence: the project's scalars win, both files' lists apply, missing files
//! give the defaults, and the gateway section is kept as written.

use super::*;

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
