//! Loading, merging, validation and interpolation, seen from the CLI.

use core_agent_e2e::{Background, Project};
use serde_json::json;

use crate::{by_name, demo_server, fixture};

#[test]
fn a_mixed_transport_server_is_rejected_before_anything_starts() {
    let p = Project::empty();
    let marker = p.path().join("spawned");
    let config = json!({"version": 1, "servers": {
        "good": {"transport": "stdio", "command": "sh", "args": ["-c", format!("touch {}", marker.display())]},
        "mixed": {"transport": "stdio", "command": "x", "url": "http://127.0.0.1:1/mcp"}
    }});
    p.write(".agents/mcp.json", &config.to_string());
    let run = p.run(&["mcp", "list"]);
    run.expect_code(2);
    // Paths are shown as given (here relative to the working directory),
    // with the line and column of the offending key.
    assert_eq!(
        run.stderr,
        "core-agent: bad config:\n.agents/mcp.json:1:158: server `mixed`: /servers/mixed/url: a stdio server cannot have `url`: a server uses exactly one transport; remove `url`, or make this an http server and remove the stdio fields\n"
    );
    assert!(
        !marker.exists(),
        "no server may be spawned when the config is invalid"
    );
}

#[test]
fn config_errors_name_file_server_field_and_fix() {
    let p = Project::empty();
    p.write(
        ".agents/mcp.json",
        r#"{"version": 1, "servers": {
            "a": {"transport": "carrier-pigeon"},
            "b": {"transport": "http"},
            "c": {"transport": "stdio", "comand": "x"}
        }}"#,
    );
    let run = p.run(&["mcp", "list"]);
    run.expect_code(2);
    let expected = "core-agent: bad config:\n\
         .agents/mcp.json:2:19: server `a`: /servers/a/transport: unsupported value \"carrier-pigeon\" in `transport`; use one of \"stdio\", \"http\"\n\
         .agents/mcp.json:3:13: server `b`: /servers/b/url: an http server needs `url`, its streamable HTTP endpoint; add \"url\": \"https://…/mcp\"\n\
         .agents/mcp.json:4:41: server `c`: /servers/c/comand: unknown field `comand`; did you mean `command`?\n";
    assert_eq!(run.stderr, expected);
}

#[test]
fn malformed_json_names_line_and_column() {
    let p = Project::empty();
    p.write(
        ".agents/mcp.json",
        "{\n  \"version\": 1,\n  \"servers\": {\n    \"a\": {\"transport\": \"stdio\",}\n  }\n}\n",
    );
    let run = p.run(&["tools"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        "core-agent: bad config:\n.agents/mcp.json:4:32: invalid JSON: trailing comma; fix the syntax at that position\n"
    );
}

#[test]
fn version_must_be_one() {
    let p = Project::new(&json!({"version": 2, "servers": {}}));
    let run = p.run(&["mcp", "list"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("/version: unsupported value 2 in `version`; set \"version\": 1"),
        "{}",
        run.stderr
    );
}

#[test]
fn no_config_means_no_servers() {
    let p = Project::empty();
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json(), json!([]));
    assert_eq!(
        p.run(&["mcp", "list"]).stdout,
        "no MCP servers configured\n"
    );
}

#[test]
fn user_and_project_configs_merge_with_the_project_winning() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "shared": demo_server(),
        "project-only": fixture("ok"),
    }}));
    p.write(
        "home/.agents/mcp.json",
        &json!({"version": 1, "servers": {
            "shared": {"transport": "stdio", "command": "/nonexistent/user-version"},
            "user-only": demo_server(),
        }})
        .to_string(),
    );
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["project-only", "shared", "user-only"]);
    assert_eq!(by_name(&list, "shared")["scope"], "project");
    assert_eq!(
        by_name(&list, "shared")["status"],
        "connected",
        "the project entry replaced the user one"
    );
    assert_eq!(by_name(&list, "user-only")["scope"], "user");

    // --user-config replaces ~/.agents/mcp.json.
    let other = p.write(
        "other.json",
        &json!({"servers": {"alt": demo_server()}}).to_string(),
    );
    let run = p.run(&[
        "mcp",
        "list",
        "--json",
        "--user-config",
        other.to_str().unwrap(),
    ]);
    let names: Vec<String> = run
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["alt", "project-only", "shared"]);
}

#[test]
fn env_placeholders_reach_a_stdio_server_environment() {
    let p = Project::new(&json!({"version": 1, "servers": {"fx": {
        "transport": "stdio",
        "command": core_agent_e2e::bin("fixture-server"),
        "args": ["ok"],
        "env": {"GREETING": "hello ${env:CA_E2E_NAME}!", "EMPTY": "[${env:CA_E2E_UNSET}]"}
    }}}));
    let mut cmd = p.command(&["call", "--yes", "fx_env", r#"{"name": "GREETING"}"#]);
    cmd.env("CA_E2E_NAME", "world").env_remove("CA_E2E_UNSET");
    let run = p.run_with(cmd);
    run.expect_code(0);
    assert_eq!(run.stdout, "hello world!\n");

    let run = p.run(&["call", "--yes", "fx_env", r#"{"name": "EMPTY"}"#]);
    assert_eq!(
        run.stdout, "[]\n",
        "an unset variable expands to the empty string"
    );
}

#[test]
fn env_placeholders_reach_an_http_server_headers() {
    let server = Background::python();
    let p = Project::new(&json!({"version": 1, "servers": {"py": {
        "transport": "http",
        "url": server.url(),
        "headers": {"X-Test-Token": "Bearer ${env:CA_E2E_TOKEN}"}
    }}}));
    let mut cmd = p.command(&[
        "call",
        "--yes",
        "py_get_header",
        r#"{"name": "x-test-token"}"#,
    ]);
    cmd.env("CA_E2E_TOKEN", "s3cret-value");
    let run = p.run_with(cmd);
    run.expect_code(0);
    // It arrived: the server's echo of it is redacted as a known secret.
    assert_eq!(run.stdout, "Bearer ***\n");
    assert!(
        !run.stderr.contains("s3cret-value"),
        "secrets never reach stderr: {}",
        run.stderr
    );
}
