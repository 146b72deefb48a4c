//! `core-agent mcp doctor`: static checks, the connect phase, and preflight.

use core_agent_e2e::{Background, Project, bin};
use serde_json::{Value, json};

use crate::{demo_server, fixture};

/// (check, server, field-suffix) of every finding, for compact assertions.
fn findings(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let field = f["field"].as_str().unwrap_or_default();
            let pointer = field.rsplit(' ').next().unwrap_or_default();
            (
                f["check"].as_str().unwrap().to_owned(),
                f["server"].as_str().unwrap_or_default().to_owned(),
                pointer.to_owned(),
            )
        })
        .collect()
}

fn finding<'a>(report: &'a Value, check: &str, server: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check && f["server"] == server)
        .unwrap_or_else(|| panic!("no {check} finding for {server} in {report:#}"))
}

#[test]
fn static_checks_report_each_problem_by_server_and_field() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "gh": {"transport": "http", "url": "https://api.example.com/mcp",
               "headers": {"Authorization": "Bearer ${CA_DOCTOR_MISSING}", "X-Fallback": "${CA_DOCTOR_MISSING2:-ok}"}},
        "leaky": {"transport": "stdio", "command": "sh",
                  "env": {"GITHUB_TOKEN": "ghp_0123456789abcdefghijklmnopqrstuvwxyz01"}},
        "plain-http": {"transport": "http", "url": "http://mcp.example.com/mcp",
                       "headers": {"Authorization": "Bearer sk-live-0123456789abcdef"}},
        "local-ok": {"transport": "http", "url": "http://127.0.0.1:9/mcp", "cloud": "localOnly"},
        "gone": {"transport": "stdio", "command": "definitely-not-installed-mcp", "cloud": "localOnly"},
    }}));
    let mut cmd = p.command(&["mcp", "doctor", "--offline", "--cloud", "--json"]);
    cmd.env_remove("CA_DOCTOR_MISSING")
        .env_remove("CA_DOCTOR_MISSING2");
    let run = p.run_with(cmd);
    run.expect_code(1);
    let report = run.json();
    let mut got = findings(&report);
    got.sort();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        got,
        [
            s("cloud-http", "plain-http", "/servers/plain-http/url"),
            s("cloud-stdio", "leaky", "/servers/leaky"),
            s("command-not-found", "gone", "command"),
            s("literal-secret", "leaky", "/servers/leaky/env/GITHUB_TOKEN"),
            s(
                "literal-secret",
                "plain-http",
                "/servers/plain-http/headers/Authorization"
            ),
            s("missing-env", "gh", "/servers/gh/headers/Authorization"),
        ]
    );
    let missing = finding(&report, "missing-env", "gh");
    assert_eq!(missing["severity"], "error");
    assert_eq!(
        missing["message"],
        "`CA_DOCTOR_MISSING` is set neither in the environment nor in .env, so it expands to nothing"
    );
    assert_eq!(
        finding(&report, "literal-secret", "leaky")["severity"],
        "warning"
    );
    assert_eq!(
        (report["errors"].as_u64(), report["warnings"].as_u64()),
        (Some(4), Some(2))
    );
    assert_eq!(
        report["servers"],
        json!([]),
        "--offline connects to nothing"
    );
    // The secret itself is never printed.
    assert!(
        !run.stdout.contains("ghp_0123") && !run.stdout.contains("sk-live"),
        "{}",
        run.stdout
    );
}

#[test]
fn cloud_checks_follow_the_cloud_markers() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "plain": {"transport": "http", "url": "http://mcp.example.com/mcp"},
        "plain-off": {"transport": "http", "url": "http://mcp.example.com/mcp", "cloud": "disabled"},
        "loop": {"transport": "http", "url": "http://127.0.0.1:9/mcp"},
        "loop-tls": {"transport": "http", "url": "https://localhost:8443/mcp"},
        "loop-local": {"transport": "http", "url": "http://127.0.0.1:9/mcp", "cloud": "localOnly"},
        "remote": {"transport": "http", "url": "https://mcp.example.com/mcp"},
        "local": {"transport": "stdio", "command": "sh"},
        "local-off": {"transport": "stdio", "command": "sh", "cloud": "disabled"},
    }}));
    let run = p.run(&["mcp", "doctor", "--offline", "--cloud", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let mut got = findings(&report);
    got.sort();
    let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    // A marked server is not run in the cloud, whatever its transport; an
    // unmarked loopback server is one a cloud deployment cannot reach.
    assert_eq!(
        got,
        [
            s("cloud-http", "plain", "/servers/plain/url"),
            s("cloud-loopback", "loop", "/servers/loop/url"),
            s("cloud-loopback", "loop-tls", "/servers/loop-tls/url"),
            s("cloud-stdio", "local", "/servers/local"),
        ]
    );
    assert_eq!(
        finding(&report, "cloud-loopback", "loop")["message"],
        "`http://127.0.0.1:9/mcp` is a loopback address: a cloud deployment cannot reach a server on this machine"
    );
    // Without --cloud, none of it is checked.
    let run = p.run(&["mcp", "doctor", "--offline", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json()["findings"], json!([]));
}

#[test]
fn a_variable_from_dotenv_is_not_missing() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "demo": {"transport": "stdio", "command": bin("core-agent"), "args": ["demo-server"],
                 "env": {"TOKEN": "${CA_DOCTOR_FROM_DOTENV}"}},
    }}));
    p.write(".env", "CA_DOCTOR_FROM_DOTENV=abc\n");
    let run = p.run(&["mcp", "doctor", "--offline", "--json"]);
    run.expect_code(0);
    assert_eq!(run.json()["findings"], json!([]));
}

#[test]
fn an_invalid_config_is_reported_by_server_and_field() {
    let p = Project::new(
        &json!({"version": 1, "servers": {"bad": {"transport": "sse", "url": "https://x/sse"}}}),
    );
    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let f = finding(&report, "invalid-config", "bad");
    assert_eq!(f["field"], ".agents/mcp.json:5:7 /servers/bad/transport");
    assert_eq!(f["message"], "unsupported value \"sse\" in `transport`");
    assert_eq!(
        f["fix"],
        "core-agent speaks streamable HTTP only, not the legacy SSE transport; point `url` at the server's streamable HTTP endpoint and use \"http\""
    );
}

#[test]
fn the_connect_phase_names_the_reason_for_each_failure() {
    let unauthorized = Background::unauthorized();
    let p = Project::new(&json!({"version": 1, "servers": {
        "demo": demo_server(),
        "noisy": fixture("garbage"),
        "crashes": fixture("exit"),
        "locked": {"transport": "http", "url": unauthorized.url()},
    }}));
    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let status = |name: &str| {
        report["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("demo"), "connected");
    assert_eq!(status("noisy"), "connected");
    assert_eq!(status("crashes"), "error");
    assert_eq!(status("locked"), "error");

    let noisy = finding(&report, "stdout-noise", "noisy");
    assert_eq!(noisy["severity"], "warning");
    assert_eq!(
        noisy["message"],
        "it wrote non-protocol text to stdout: `Starting fixture server v1.0 ... listening on stdio`"
    );
    assert_eq!(
        finding(&report, "connect", "crashes")["message"],
        "exited during start (exit status: 3); its stderr ended with:\n    fixture: fatal: cannot open database /nonexistent/db.sqlite"
    );
    let locked = finding(&report, "connect", "locked")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        locked.contains("requires authorization (HTTP 401, WWW-Authenticate: Bearer realm=\"fixture\", error=\"invalid_token\")"),
        "{locked}"
    );
    assert_eq!(report["tools"], 4 + 4, "demo and the noisy fixture");
    assert!(report["token_estimate"].as_u64().unwrap() > 100);

    // The human report says the same, one finding per entry.
    let run = p.run(&["mcp", "doctor"]);
    run.expect_code(1);
    assert!(
        run.stdout.contains("warning: stdout-noise [noisy]"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("server  demo (stdio): connected, 4 tools in "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with("doctor: 2 errors, 1 warning\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn names_too_long_for_model_apis_are_shortened_and_reported() {
    let long = "a_server_name_long_enough_that_its_tool_names_pass_the_limit"; // 60 characters
    let p = Project::new(&json!({"version": 1, "servers": {long: demo_server()}}));
    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(0);
    let report = run.json();
    let long_names: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "name-shortened")
        .map(|f| f["server"].as_str().unwrap())
        .collect();
    assert_eq!(
        long_names, [long; 4],
        "every `{long}_<tool>` is over 64 characters"
    );
    let message = report["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "is over 64 characters; it is published as `a_server_name_long_enough_that_its_tool_names_pass_the_"
        ),
        "{message}"
    );
    let run = p.run(&["tools", "--json"]);
    for tool in run.json().as_array().unwrap() {
        assert!(tool["name"].as_str().unwrap().len() <= 64, "{tool}");
    }
}
