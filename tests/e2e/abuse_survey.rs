//! The survey tools served to a hostile `public` caller by `core-agent
//! serve --http`: secrets, version control, ignored files and the audit
//! trail stay hidden (the creator still reads them), and regex bombs are
//! refused before they take memory.

use core_agent_e2e::Project;
use serde_json::{Value, json};

use crate::gateway_clients::HttpGateway;
use crate::gateway_stateless::Client;

const PUBLIC_TOKEN: &str = "e2e-public-token-0123456789abcdef";
/// What the creator passes in a call, which `arguments: true` writes into
/// the audit trail.
const CREATOR_ARGUMENT: &str = "CREATORS-OWN-ARGUMENT";

fn project() -> Project {
    let p = Project::new(&json!({"version": 1, "servers": {}}));
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"mode": "allowlist", "allow": ["builtin:*"]},
            "gateway": {
                "tokens": {"web": {"env": "E2E_PUBLIC_TOKEN", "trust_level": "public"}},
                // Relative: lands in .agents/, inside the project.
                "audit": {"path": "audit.jsonl", "arguments": true},
                "survey_hidden": ["*.pem"]
            }
        })
        .to_string(),
    );
    p.write(".env", "API_KEY=SECRET-dotenv\n");
    p.write(".env.production", "API_KEY=SECRET-dotenv-prod\n");
    p.write(".git/config", "[remote \"origin\"]\n  url = SECRET-git\n");
    p.write(".gitignore", "local/\n");
    p.write("local/notes.txt", "SECRET-ignored\n");
    p.write("certs/server.pem", "SECRET-pem\n");
    p.write("src/lib.rs", "pub fn visible() {} // SECRET-not\n");
    p
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// A survey call's text (its result or its error).
async fn survey(client: &Client, name: &str, arguments: Value) -> (bool, String) {
    let result = client.result("tools/call", call(name, arguments)).await;
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (result["isError"] == json!(true), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_caller_cannot_read_secrets_or_the_audit_trail_and_the_creator_can() {
    let p = project();
    let gateway = HttpGateway::start_with(&p, &[], &[("E2E_PUBLIC_TOKEN", PUBLIC_TOKEN)]);
    let creator = Client::new(&gateway.url);
    let public = Client::with_token(&gateway.url, PUBLIC_TOKEN);
    // The creator's call, with its arguments, goes into .agents/audit.jsonl.
    let (_, _) = survey(&creator, "grep", json!({"pattern": CREATOR_ARGUMENT})).await;
    assert!(
        std::fs::read_to_string(p.path().join(".agents/audit.jsonl"))
            .unwrap()
            .contains(CREATOR_ARGUMENT)
    );
    let secrets = [
        "SECRET-dotenv",
        "SECRET-git",
        "SECRET-ignored",
        "SECRET-pem",
        CREATOR_ARGUMENT,
    ];
    let reads = [
        ("grep", json!({"pattern": "SECRET|CREATORS"})),
        (
            "grep",
            json!({"pattern": "SECRET|CREATORS", "path": ".agents"}),
        ),
        ("grep", json!({"pattern": "SECRET", "path": ".git/config"})),
        ("grep", json!({"pattern": "SECRET", "path": "local"})),
        ("list_dir", json!({"depth": 4})),
        ("glob", json!({"pattern": "**/*"})),
        ("glob", json!({"pattern": ".agents/*"})),
        ("read_many_files", json!({"glob": "**/*"})),
        ("read_many_files", json!({"glob": ".*"})),
        (
            "read_many_files",
            json!({"paths": [".env", ".env.production", ".git/config", ".agents/audit.jsonl",
                             ".agents/config.json", "local/notes.txt", "certs/server.pem", "src/lib.rs"]}),
        ),
    ];
    for (name, arguments) in &reads {
        let (_, text) = survey(&public, name, arguments.clone()).await;
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "public {name} {arguments} read {secret}:\n{text}"
            );
        }
    }
    // What is not hidden is still there, and named paths say why not.
    let (_, text) = survey(&public, "read_many_files", reads[9].1.clone()).await;
    assert!(text.contains("SECRET-not"), "{text}");
    assert!(text.contains("\"reason\":\"hidden\""), "{text}");
    let (error, text) = survey(&public, "list_dir", json!({"path": ".agents"})).await;
    assert!(
        error && text.contains("is hidden from this caller"),
        "{text}"
    );

    // The creator reads them all; the values of `.env` show as `***`, as
    // everywhere a known secret would leave core-agent.
    let (_, text) = survey(&creator, "read_many_files", reads[9].1.clone()).await;
    for secret in secrets {
        let shown = if secret == "SECRET-dotenv" {
            "API_KEY=***"
        } else {
            secret
        };
        assert!(
            text.contains(shown),
            "the creator did not read {secret}:\n{text}"
        );
    }
    assert!(!text.contains("SECRET-dotenv"), "{text}");
    assert_eq!(gateway.stop(), 130);
}

/// `VmHWM` (peak resident memory) of a process, in bytes.
fn peak_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or_else(|| panic!("no VmHWM in:\n{status}"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

/// Before the limits, four of these took the gateway to 711 MB and kept
/// compiling after the callers gave up.
const PEAK_BOUND: u64 = 160 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_regex_bombs_are_refused_and_keep_the_gateway_small() {
    let p = project();
    let gateway = HttpGateway::start_with(&p, &[], &[("E2E_PUBLIC_TOKEN", PUBLIC_TOKEN)]);
    let public = Client::with_token(&gateway.url, PUBLIC_TOKEN);
    let bomb = || survey(&public, "grep", json!({"pattern": r"\w{500}{50}"}));
    let (a, b, c, d) = tokio::join!(bomb(), bomb(), bomb(), bomb());
    let answers = [a, b, c, d];
    for (error, text) in &answers {
        assert!(*error, "{text}");
        assert!(
            text.contains("(the limit)") || text.contains("is busy"),
            "{text}"
        );
    }
    assert!(
        answers.iter().any(|(_, text)| text.contains("(the limit)")),
        "{answers:?}"
    );
    let peak = peak_rss(gateway.pid());
    assert!(
        peak < PEAK_BOUND,
        "the gateway peaked at {peak} bytes (bound {PEAK_BOUND})"
    );
    // A long pattern is refused before it is compiled, and an ordinary one runs.
    let (error, text) = survey(&public, "grep", json!({"pattern": "a".repeat(5000)})).await;
    assert!(error && text.contains("over the limit of 1024"), "{text}");
    let (error, text) = survey(&public, "grep", json!({"pattern": "visible"})).await;
    assert!(!error && text.contains("src/lib.rs"), "{text}");
    eprintln!("peak RSS after four regex bombs: {peak} bytes");
    assert_eq!(gateway.stop(), 130);
}
