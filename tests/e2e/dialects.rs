//! The `.mcp.json` dialect, `.env`, `config show`, `config schema`, and the
//! editing commands, from the CLI.

use core_agent_e2e::{Project, bin};
use serde_json::{Value, json};

fn fixture_server() -> String {
    bin("fixture-server").display().to_string()
}

#[test]
fn a_dot_mcp_json_with_env_from_dotenv_works_end_to_end() {
    let p = Project::empty();
    p.write(
        ".mcp.json",
        &json!({
            "mcpServers": {
                "fx": {"command": fixture_server(), "args": ["ok"],
                       "env": {"FROM_FILE": "${CA_E2E_DOTENV}", "DEFAULTED": "${CA_E2E_UNSET:-fallback}",
                               "ESCAPED": "$${CA_E2E_DOTENV}", "OVERRIDDEN": "${CA_E2E_BOTH}"}}
            },
            "auggy": {"servers": {"fx": {"allowedTools": ["env", "echo"]}}}
        })
        .to_string(),
    );
    // Values under 6 bytes: longer ones are secrets, redacted from what
    // core-agent prints (the fixture's answer included).
    p.write(".env", "CA_E2E_DOTENV=file\nCA_E2E_BOTH=dotv\n");
    let call = |name: &str| {
        let mut cmd = p.command(&[
            "call",
            "--yes",
            "fx_env",
            &json!({"name": name}).to_string(),
        ]);
        cmd.env("CA_E2E_BOTH", "real")
            .env_remove("CA_E2E_UNSET")
            .env_remove("CA_E2E_DOTENV");
        let run = p.run_with(cmd);
        run.expect_code(0);
        run.stdout
    };
    assert_eq!(call("FROM_FILE"), "file\n");
    assert_eq!(call("DEFAULTED"), "fallback\n");
    assert_eq!(call("ESCAPED"), "${CA_E2E_DOTENV}\n");
    assert_eq!(
        call("OVERRIDDEN"),
        "real\n",
        "the real environment wins over .env"
    );

    let run = p.run(&["mcp", "list", "--json"]);
    assert_eq!(run.json()[0]["scope"], "project");
}

#[test]
fn agents_mcp_json_wins_over_dot_mcp_json() {
    let p = Project::new(
        &json!({"version": 1, "servers": {"fx": {"transport": "stdio", "command": fixture_server(), "args": ["ok"]}}}),
    );
    p.write(".mcp.json", &json!({"mcpServers": {"fx": {"command": "/nonexistent/loser"}, "other": {"command": fixture_server(), "args": ["ok"]}}}).to_string());
    let run = p.run(&["config", "show", "--json"]);
    run.expect_code(0);
    let report = run.json();
    let servers = report["servers"].as_array().unwrap();
    let fx = servers.iter().find(|s| s["name"] == "fx").unwrap();
    assert_eq!(fx["source"], ".agents/mcp.json");
    assert_eq!(fx["dialect"], "core");
    let other = servers.iter().find(|s| s["name"] == "other").unwrap();
    assert_eq!(other["source"], "./.mcp.json");
    assert_eq!(other["dialect"], "mcpServers");
    let files: Vec<(&str, bool)> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["found"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        files[..2],
        [(".agents/mcp.json", true), ("./.mcp.json", true)]
    );
}

#[test]
fn config_show_masks_interpolated_values_and_names_sources() {
    let p = Project::new(
        &json!({"version": 1, "agentic_wrap_threshold": 4000, "servers": {
            "api": {"transport": "http", "url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": "Bearer ${CA_E2E_SECRET}", "X-Static": "visible"}},
        }}),
    );
    let mut cmd = p.command(&["config", "show", "--json"]);
    cmd.env("CA_E2E_SECRET", "hunter2-secret-value");
    let run = p.run_with(cmd);
    run.expect_code(0);
    let report = run.json();
    assert_eq!(
        report["servers"][0]["headers"],
        json!({"Authorization": "***", "X-Static": "visible"})
    );
    assert_eq!(
        report["settings"]["agentic_wrap_threshold"],
        json!({"value": 4000, "source": ".agents/mcp.json"})
    );
    assert_eq!(report["settings"]["agentic_wrap"], Value::Null);

    let mut cmd = p.command(&["config", "show"]);
    cmd.env("CA_E2E_SECRET", "hunter2-secret-value");
    let human = p.run_with(cmd);
    human.expect_code(0);
    assert!(
        human
            .stdout
            .contains("agentic_wrap_threshold = 4000 (from .agents/mcp.json)"),
        "{}",
        human.stdout
    );
    for out in [&run.stdout, &run.stderr, &human.stdout, &human.stderr] {
        assert!(!out.contains("hunter2"), "a secret leaked: {out}");
    }
    // Nor does any other command print it, even when the server fails.
    let mut cmd = p.command(&["mcp", "doctor"]);
    cmd.env("CA_E2E_SECRET", "hunter2-secret-value");
    let doctor = p.run_with(cmd);
    assert!(!doctor.stdout.contains("hunter2") && !doctor.stderr.contains("hunter2"));
}

#[test]
fn config_schema_prints_both_schemas() {
    let p = Project::empty();
    for (args, title) in [
        (&["config", "schema"][..], "core-agent mcp.json"),
        (
            &["config", "schema", "--dialect", "mcpServers"][..],
            ".mcp.json (mcpServers dialect)",
        ),
    ] {
        let run = p.run(args);
        run.expect_code(0);
        let schema = run.json();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["title"], title);
    }
}

#[test]
fn add_remove_and_init_edit_files_in_place() {
    let p = Project::empty();
    let run = p.run(&["mcp", "init"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "created .agents/mcp.json\n");
    assert_eq!(
        std::fs::read_to_string(p.path().join(".agents/mcp.json")).unwrap(),
        "{\n  \"version\": 1,\n  \"servers\": {}\n}\n"
    );
    assert_eq!(
        p.run(&["mcp", "init"]).stdout,
        ".agents/mcp.json already exists; left as it is\n"
    );

    // An existing file keeps its other servers, fields and key order.
    p.write(
        ".agents/mcp.json",
        "{\n  \"servers\": {\n    \"zeta\": {\"transport\": \"stdio\", \"command\": \"z\"}\n  },\n  \"version\": 1\n}\n",
    );
    let fx = fixture_server();
    let run = p.run(&[
        "mcp",
        "add",
        "fx",
        "--env",
        "GREETING=hi ${USER_NAME:-there}",
        "--",
        &fx,
        "ok",
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "added server `fx` to .agents/mcp.json\n");
    let run = p.run(&[
        "mcp",
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "Authorization: Bearer ${TOKEN}",
    ]);
    run.expect_code(0);
    let text = std::fs::read_to_string(p.path().join(".agents/mcp.json")).unwrap();
    let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&text)
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["servers", "version"]);
    let servers: Vec<String> = serde_json::from_str::<Value>(&text).unwrap()["servers"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(servers, ["zeta", "fx", "web"]);

    // What was added works.
    let run = p.run(&[
        "call",
        "--yes",
        "fx_env",
        r#"{"name": "GREETING"}"#,
        "--start-timeout",
        "10",
    ]);
    assert_eq!(run.stdout, "hi there\n");

    let run = p.run(&["mcp", "add", "fx", "--", "x"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("a server named `fx` already exists"),
        "{}",
        run.stderr
    );

    let run = p.run(&[
        "mcp",
        "add",
        "secret",
        "--env",
        "KEY=ghp_0123456789abcdefghijklmnopqrstuvwxyz01",
        "--",
        "x",
    ]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("warning: `KEY` holds a GitHub token"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("ghp_0123"),
        "the warning never repeats the secret"
    );

    let run = p.run(&["mcp", "remove", "fx"]);
    run.expect_code(0);
    assert_eq!(run.stdout, "removed server `fx` from .agents/mcp.json\n");
    let run = p.run(&["mcp", "remove", "fx"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr,
        "core-agent: no server named `fx`; configured servers: zeta, web, secret\n"
    );

    // --scope user writes the user file.
    let run = p.run(&["mcp", "add", "mine", "--scope", "user", "--", "x"]);
    run.expect_code(0);
    assert!(p.path().join("home/.agents/mcp.json").exists());

    let run = p.run(&["mcp", "add", "nothing"]);
    run.expect_code(2);
}
