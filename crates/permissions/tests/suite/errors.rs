//! Errors that name the file, line, column and field.

use super::*;

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
