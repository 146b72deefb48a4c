//! Peers' config files as they are written: the placeholders Claude Code
//! and Cursor expand in a `.mcp.json` entry's `command`, `args` and `url`,
//! what VS Code writes that core-agent cannot honour, `mcp add` into the
//! project's only file, and a project found from a subdirectory.

use core_agent_e2e::{Background, Project, bin};
use serde_json::{Value, json};

use crate::by_name;
use crate::own_gateway::claude_in;

/// A project whose only config is `.mcp.json`, with `.env`.
fn project(mcp_json: &Value, dotenv: &str) -> Project {
    let p = Project::empty();
    std::fs::create_dir_all(p.path().join("home")).unwrap();
    p.write(
        ".mcp.json",
        &serde_json::to_string_pretty(mcp_json).unwrap(),
    );
    p.write(".env", dotenv);
    p
}

#[test]
fn claude_codes_placeholders_expand_in_command_args_and_url() {
    let everything = Background::everything();
    let port = everything.port;
    let p = project(
        &json!({"mcpServers": {
            // ${VAR} in command, ${VAR:-default} in args (Claude Code's docs).
            "fx": {"command": "${FIXTURE_BIN}", "args": ["${FIXTURE_MODE:-ok}"]},
            // ${VAR} in url: the port from .env.
            "web": {"type": "http", "url": "http://127.0.0.1:${WEB_PORT}/mcp"},
        }}),
        &format!(
            "FIXTURE_BIN={}\nWEB_PORT={port}\n",
            bin("fixture-server").display()
        ),
    );
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    assert_eq!(by_name(&list, "fx")["status"], "connected", "{list:#}");
    assert_eq!(by_name(&list, "web")["status"], "connected", "{list:#}");
    // The files as written: `config show` prints placeholders, not values.
    let run = p.run(&["config", "show"]);
    run.expect_code(0);
    assert!(run.stdout.contains("${WEB_PORT}"), "{}", run.stdout);
    assert!(!run.stdout.contains(&format!(":{port}/")), "{}", run.stdout);
}

#[test]
fn an_entry_the_real_claude_cli_writes_with_a_placeholder_starts() {
    let p = project(&json!({"mcpServers": {}}), "");
    p.write(
        ".env",
        &format!("FIXTURE_BIN={}\n", bin("fixture-server").display()),
    );
    claude_in(
        p.path(),
        &[
            "mcp",
            "add",
            "-s",
            "project",
            "fx",
            "--",
            "${FIXTURE_BIN}",
            "ok",
        ],
    );
    let written = std::fs::read_to_string(p.path().join(".mcp.json")).unwrap();
    assert!(written.contains("${FIXTURE_BIN}"), "{written}");
    let run = p.run(&["tools"]);
    run.expect_code(0);
    assert!(run.stdout.contains("fx_"), "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn cursors_workspace_folder_and_env_prefix_expand() {
    let p = project(
        &json!({"mcpServers": {
            "fx": {"command": "${workspaceFolder}/bin/fx", "args": ["${env:FIXTURE_MODE}"]},
        }}),
        "FIXTURE_MODE=ok\n",
    );
    std::fs::create_dir_all(p.path().join("bin")).unwrap();
    std::os::unix::fs::symlink(bin("fixture-server"), p.path().join("bin/fx")).unwrap();
    let run = p.run(&["tools"]);
    run.expect_code(0);
    assert!(run.stdout.contains("fx_"), "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn doctor_names_a_placeholder_left_unexpanded() {
    let p = project(
        &json!({"mcpServers": {
            "web": {"type": "http", "url": "http://127.0.0.1:${WEB_PORT}/mcp"},
            "vs": {"command": "srv", "args": ["--token", "${input:token}"]},
        }}),
        "",
    );
    let run = p.run(&["mcp", "doctor", "--offline", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let findings: Vec<(String, String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] != "command-not-found")
        .map(|f| {
            (
                f["check"].as_str().unwrap().to_owned(),
                f["server"].as_str().unwrap_or_default().to_owned(),
                f["field"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        findings,
        [
            (
                "unsupported-placeholder".to_owned(),
                "vs".to_owned(),
                "./.mcp.json /mcpServers/vs/args/1".to_owned()
            ),
            (
                "missing-env".to_owned(),
                "web".to_owned(),
                "./.mcp.json /mcpServers/web/url".to_owned()
            ),
        ],
        "{report:#}"
    );
}

#[test]
fn mcp_add_writes_into_the_projects_only_file_and_a_subdirectory_finds_the_project() {
    let p = project(&json!({"mcpServers": {}}), "");
    let fixture = bin("fixture-server");
    let run = p.run(&["mcp", "add", "fx", "--", fixture.to_str().unwrap(), "ok"]);
    run.expect_code(0);
    assert!(
        !p.path().join(".agents/mcp.json").exists(),
        "a second file was created"
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(p.path().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(written["mcpServers"]["fx"]["args"], json!(["ok"]));

    let deep = p.path().join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    let mut cmd = p.command(&["tools"]);
    cmd.current_dir(&deep);
    let run = p.run_with(cmd);
    run.expect_code(0);
    assert!(run.stdout.contains("fx_"), "{}\n{}", run.stdout, run.stderr);
}
