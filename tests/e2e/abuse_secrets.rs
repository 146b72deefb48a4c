//! Secrets stay with core-agent (issue 29, part 1): a stdio server's
//! environment holds neither core-agent's credentials nor another server's
//! secrets (`env_inherit`), and a backend that echoes a secret it was given
//! shows `***` wherever core-agent prints, reports or answers it.

use core_agent_e2e::{Project, bin, bin_dir};
use serde_json::{Value, json};

use crate::gateway_clients::{HttpGateway, TOKEN};
use crate::gateway_stateless::Client;
use crate::{everything_stdio, fixture};

const BOT_TOKEN: &str = "e2e-public-bot-token-0123456789abcdef";
const REMOTE_KEY: &str = "remote-header-secret-4242";
const LEAKY_TOKEN: &str = "leaky-env-secret-8686";
const SHELL_VAR: &str = "operator-shell-value-1313";
const DOTENV_KEY: &str = "dotenv-secret-value-5757";

/// `server` with `env` and, when given, `env_inherit`.
fn with(mut server: Value, env: Value, inherit: Option<Value>) -> Value {
    server["env"] = env;
    if let Some(inherit) = inherit {
        server["env_inherit"] = inherit;
    }
    server
}

/// The servers of a gateway with three kinds of secret around
/// server-everything: a header placeholder of an HTTP server, an `env`
/// placeholder of a stdio one, and the gateway's own tokens.
fn gateway_project() -> Project {
    let p = Project::new(&json!({"version": 1, "servers": {
        "everything": with(everything_stdio(), json!({"OWN_SETTING": "own-setting-visible"}), None),
        "remote": {"transport": "http", "url": "http://127.0.0.1:9/mcp",
                   "headers": {"Authorization": "Bearer ${E2E_REMOTE_KEY}"}},
        "leaky": with(fixture("leaky"), json!({"LEAKY_TOKEN": "${E2E_LEAKY_TOKEN}"}), None),
    }}));
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"allow": ["mcp:everything_get_env", "mcp:leaky_whoami", "mcp:leaky_rejected"]},
            "gateway": {"tokens": {"bot": {"env": "E2E_BOT_TOKEN", "trust_level": "public"}}}
        })
        .to_string(),
    );
    p
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_caller_reads_no_secret_of_the_gateway_or_of_another_server() {
    let p = gateway_project();
    let gateway = HttpGateway::start_with(
        &p,
        &[],
        &[
            ("E2E_BOT_TOKEN", BOT_TOKEN),
            ("E2E_REMOTE_KEY", REMOTE_KEY),
            ("E2E_LEAKY_TOKEN", LEAKY_TOKEN),
            ("E2E_SHELL_VAR", SHELL_VAR),
        ],
    );
    let bot = Client::with_token(&gateway.url, BOT_TOKEN);
    let result = bot
        .result("tools/call", call("everything_get_env", json!({})))
        .await;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let env: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {result}"));
    for secret in [TOKEN, BOT_TOKEN, REMOTE_KEY, LEAKY_TOKEN, SHELL_VAR] {
        assert!(!text.contains(secret), "get-env shows {secret:?}:\n{text}");
    }
    for name in [
        "CORE_AGENT_GATEWAY_TOKEN",
        "E2E_BOT_TOKEN",
        "E2E_REMOTE_KEY",
        "E2E_LEAKY_TOKEN",
        // serve's default is the minimal environment: no operator's shell.
        "E2E_SHELL_VAR",
    ] {
        assert!(env.get(name).is_none(), "get-env has {name}:\n{text}");
    }
    // What its own entry names, and the minimal set, it does get.
    assert_eq!(env["OWN_SETTING"], "own-setting-visible", "{text}");
    assert!(env["PATH"].is_string(), "{text}");

    // A backend that echoes its credentials: `***` in its result and in
    // the tool error the client gets.
    let whoami = bot
        .result(
            "tools/call",
            call("leaky_whoami", json!({"name": "LEAKY_TOKEN"})),
        )
        .await;
    assert_eq!(
        whoami["content"][0]["text"], "signed in with ***",
        "{whoami}"
    );
    let rejected = bot
        .result(
            "tools/call",
            call("leaky_rejected", json!({"name": "LEAKY_TOKEN"})),
        )
        .await;
    assert_eq!(rejected["isError"], true, "{rejected}");
    let said = rejected["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("token=\\\"***\\\"") || said.contains("token=\"***\""),
        "{rejected}"
    );
    assert!(!rejected.to_string().contains(LEAKY_TOKEN), "{rejected}");
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130);
    for secret in [TOKEN, BOT_TOKEN, REMOTE_KEY, LEAKY_TOKEN] {
        assert!(
            !stderr.contains(secret),
            "serve's stderr shows {secret:?}:\n{stderr}"
        );
    }
}

/// `core-agent call --yes <server>_env '{"name": NAME}'`'s answer.
fn env_of(p: &Project, server: &str, name: &str) -> String {
    let mut cmd = p.command(&[
        "call",
        "--yes",
        &format!("{server}_env"),
        &json!({"name": name}).to_string(),
    ]);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("E2E_SHELL_VAR", SHELL_VAR)
        .env("E2E_OTHER_SECRET", LEAKY_TOKEN)
        .env("CORE_AGENT_GATEWAY_TOKEN", TOKEN);
    let run = p.run_with(cmd);
    run.expect_code(0);
    run.stdout.trim_end_matches('\n').to_owned()
}

#[test]
fn env_inherit_all_minimal_and_a_list_each_pass_what_they_say() {
    let ok = fixture("ok");
    // A bare command: the list leaves the server without PATH, and it is
    // found all the same (through the supervisor).
    let bare = json!({"transport": "stdio", "command": "fixture-server", "args": ["ok"]});
    assert!(bin("fixture-server").exists());
    let p = Project::new(&json!({"version": 1, "servers": {
        "cli": ok.clone(),
        "all": with(ok.clone(), json!({}), Some(json!("all"))),
        "minimal": with(ok.clone(), json!({}), Some(json!("minimal"))),
        "list": with(bare, json!({}), Some(json!(["E2E_SHELL_VAR"]))),
        "other": with(ok, json!({"X": "${E2E_OTHER_SECRET}"}), None),
    }}));
    // The CLI's default is "all", less the credentials and others' secrets.
    assert_eq!(env_of(&p, "cli", "E2E_SHELL_VAR"), SHELL_VAR);
    for server in ["cli", "all"] {
        assert_eq!(env_of(&p, server, "E2E_OTHER_SECRET"), "", "{server}");
        assert_eq!(
            env_of(&p, server, "CORE_AGENT_GATEWAY_TOKEN"),
            "",
            "{server}"
        );
    }
    assert_eq!(env_of(&p, "all", "E2E_SHELL_VAR"), SHELL_VAR);
    assert_eq!(env_of(&p, "minimal", "E2E_SHELL_VAR"), "");
    assert!(!env_of(&p, "minimal", "PATH").is_empty());
    assert_eq!(env_of(&p, "list", "E2E_SHELL_VAR"), SHELL_VAR);
    assert_eq!(env_of(&p, "list", "PATH"), "");
    assert_eq!(env_of(&p, "list", "HOME"), "");
}

#[test]
fn echoed_secrets_show_as_stars_in_call_output_list_and_doctor() {
    let p = Project::new(&json!({"version": 1, "servers": {
        "leaky": with(fixture("leaky"), json!({"LEAKY_TOKEN": "${E2E_LEAKY_TOKEN}"}), None),
        "broken": {"transport": "stdio", "command": "sh",
                   "args": ["-c", "echo \"rejected key $KEY\" >&2; exit 1"],
                   "env": {"KEY": "${E2E_DOTENV_KEY}"}},
    }}));
    // A `.env` value, used by a placeholder.
    p.write(".env", &format!("E2E_DOTENV_KEY={DOTENV_KEY}\n"));
    let run = |args: &[&str]| {
        let mut cmd = p.command(args);
        cmd.env("E2E_LEAKY_TOKEN", LEAKY_TOKEN);
        let run = p.run_with(cmd);
        for secret in [LEAKY_TOKEN, DOTENV_KEY] {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "{args:?} shows {secret:?}:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
        run
    };
    let whoami = run(&[
        "call",
        "--yes",
        "leaky_whoami",
        r#"{"name": "LEAKY_TOKEN"}"#,
    ]);
    whoami.expect_code(0);
    assert_eq!(whoami.stdout, "signed in with ***\n");
    let rejected = run(&[
        "call",
        "--yes",
        "--verbose",
        "leaky_rejected",
        r#"{"name": "LEAKY_TOKEN"}"#,
    ]);
    assert!(
        rejected.stdout.contains("token=\"***\"") || rejected.stderr.contains("token=\"***\""),
        "{}\n{}",
        rejected.stdout,
        rejected.stderr
    );
    let listed = run(&["tools"]);
    assert!(
        listed.stderr.contains("rejected key ***"),
        "{}",
        listed.stderr
    );
    let list = run(&["mcp", "list", "--json"]);
    assert!(list.stdout.contains("rejected key ***"), "{}", list.stdout);
    let doctor = run(&["mcp", "doctor", "--json"]);
    let report = doctor.json();
    assert!(
        doctor.stdout.contains("rejected key ***"),
        "{}",
        doctor.stdout
    );
    assert_eq!(
        report["secrets"],
        json!(["E2E_DOTENV_KEY", "E2E_LEAKY_TOKEN"]),
        "{report:#}"
    );
    let text = run(&["mcp", "doctor"]);
    assert!(
        text.stdout
            .contains("secrets 2 secrets kept from servers that do not name them, and redacted as ***: E2E_DOTENV_KEY, E2E_LEAKY_TOKEN"),
        "{}",
        text.stdout
    );
}
