//! What a client loses by putting `core-agent serve` in front of a server:
//! nothing of its resources, resource templates, subscriptions, prompts,
//! completions and log messages. The official Python SDK client
//! (`tests/fixture/context_client.py`) runs the same scenario against
//! server-everything directly and through `core-agent serve` (over stdio and
//! HTTP), and the two are compared here, names and URIs mapped
//! (`everything_<prompt>`, `core-agent://everything/<uri>`). Trust levels and
//! the per-server switches hide a server's resources and prompts, and a large
//! resource comes back as a digest whose raw payload is the server's text.

use std::process::Command;

use core_agent_e2e::{
    Project, bin, everything_js, hermetic, inspector_cli, node, python, root, ts_sdk,
};
use serde_json::{Value, json};

use crate::everything_stdio;
use crate::gateway_clients::{HttpGateway, TOKEN};

const PREFIX: &str = "everything_";
const URI_PREFIX: &str = "core-agent://everything/";

/// Runs the Python SDK's context client with `options` against `target`
/// (`stdio DIR COMMAND ARGS…` or `http URL TOKEN`) and returns what it saw.
pub(crate) fn observe(dir: &std::path::Path, options: Value, target: &[String]) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg(root().join("tests/fixture/context_client.py"));
    run_client(cmd, dir, options, target)
}

/// Runs the TypeScript SDK's context client the same way.
pub(crate) fn observe_ts(dir: &std::path::Path, options: Value, target: &[String]) -> Value {
    let mut cmd = Command::new(node());
    cmd.arg(root().join("tests/fixture/context_client.mjs"))
        .env("MCP_SDK_DIR", ts_sdk());
    run_client(cmd, dir, options, target)
}

/// Runs `client` (an interpreter and its script) with `options` and
/// `target`, at most 150 s, and returns the JSON it printed.
fn run_client(client: Command, dir: &std::path::Path, options: Value, target: &[String]) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("150")
        .arg(client.get_program())
        .args(client.get_args());
    for (key, value) in client.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    hermetic(&mut cmd)
        .arg(options.to_string())
        .args(target)
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env_remove("CORE_AGENT_GATEWAY_TOKEN");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}), {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        )
    });
    assert!(
        out.status.success() && json.get("fatal").is_none(),
        "the client failed ({}): {}\nstderr:\n{stderr}",
        out.status,
        json["fatal"].as_str().unwrap_or_default()
    );
    json
}

/// server-everything behind the gateway, with a digest threshold under its
/// architecture document, and the gate allowing its tools (the scenario
/// starts its simulated updates and logging with them).
fn project() -> Project {
    let p = Project::new(&json!({
        "version": 1,
        "agentic_wrap_threshold": 1000,
        "servers": {"everything": everything_stdio()},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:everything_*", "builtin:retrieve_raw"]}})
            .to_string(),
    );
    p
}

pub(crate) fn serve_over_stdio(p: &Project, extra: &[&str]) -> Vec<String> {
    let agents = p.path().join(".agents");
    let mut target = vec![
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        bin("core-agent").to_str().unwrap().to_owned(),
        "--agents-dir".to_owned(),
        agents.to_str().unwrap().to_owned(),
        "serve".to_owned(),
    ];
    target.extend(extra.iter().map(|s| (*s).to_owned()));
    target
}

fn direct(p: &Project) -> Value {
    let target = [
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        node().to_str().unwrap().to_owned(),
        everything_js().to_str().unwrap().to_owned(),
        "stdio".to_owned(),
    ];
    observe(p.path(), json!({"updates": true, "logs": true}), &target)
}

fn through() -> Value {
    json!({"updates": true, "logs": true, "prefix": PREFIX, "uri_prefix": URI_PREFIX})
}

/// The public name of one of server-everything's prompts.
fn named(name: &str) -> String {
    format!("{PREFIX}{}", name.replace('-', "_"))
}

/// Everything the client saw directly is there through the gateway, under
/// mapped names, with the first resource digested, its updates and the log
/// messages.
fn compare(direct: &Value, gateway: &Value) {
    compare_core(direct, gateway, true);
    let why = format!("direct: {direct}\ngateway: {gateway}");
    // A subscription's updates and the log messages come through, the log
    // messages tagged with their server.
    assert_eq!(
        gateway["updated"][0],
        json!(format!(
            "{URI_PREFIX}{}",
            direct["updated"][0].as_str().unwrap()
        )),
        "{why}"
    );
    let loggers: Vec<&Value> = gateway["log_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["logger"])
        .collect();
    assert!(!loggers.is_empty(), "{why}");
    assert!(
        loggers.iter().all(|l| l
            .as_str()
            .is_some_and(|l| l == "everything" || l.starts_with("everything/"))),
        "{why}"
    );
}

/// The resources, templates, reads, prompts, completions and errors a
/// client saw directly are there through the gateway, under mapped names;
/// the first resource read is a digest when `digested`, else the text.
fn compare_core(direct: &Value, gateway: &Value, digested: bool) {
    let brief = |v: &Value| {
        let mut v = v.clone();
        v["read"]["text"] = json!(
            v["read"]["text"]
                .as_str()
                .map(|t| t.chars().take(60).collect::<String>())
        );
        v.as_object_mut().map(|o| o.remove("raw"));
        v
    };
    let why = format!("direct: {}\ngateway: {}", brief(direct), brief(gateway));
    assert_eq!(direct["capabilities"], gateway["capabilities"], "{why}");
    assert_eq!(direct["subscribe"], json!(true), "{why}");
    assert_eq!(gateway["subscribe"], json!(true), "{why}");
    // Resources: every one, its URI behind the server's prefix, names kept.
    let mapped: Vec<Value> = direct["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!({"uri": format!("{URI_PREFIX}{}", r["uri"].as_str().unwrap()),
                   "name": r["name"], "mimeType": r["mimeType"]})
        })
        .collect();
    assert_eq!(json!(mapped), gateway["resources"], "{why}");
    assert!(mapped.len() >= 7, "{why}");
    let templates: Vec<String> = direct["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{URI_PREFIX}{}", t.as_str().unwrap()))
        .collect();
    assert_eq!(json!(templates), gateway["templates"], "{why}");
    // A read through a template's URI comes from the server.
    assert_eq!(
        gateway["read_template"]["uri"],
        json!(format!("{URI_PREFIX}demo://resource/dynamic/text/7")),
        "{why}"
    );
    assert!(
        gateway["read_template"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Resource 7: This is a plaintext resource")),
        "{why}"
    );
    // The first resource is over the threshold: a digest, whose raw payload
    // is the server's text byte for byte.
    let text = direct["read"]["text"].as_str().unwrap();
    assert!(text.len() > 1000, "{why}");
    if digested {
        assert!(gateway["digest"]["call_id"].is_string(), "{why}");
        assert_eq!(gateway["raw"].as_str(), Some(text), "{why}");
    } else {
        assert_eq!(gateway["read"]["text"].as_str(), Some(text), "{why}");
        assert_eq!(
            gateway["read"]["mimeType"], direct["read"]["mimeType"],
            "{why}"
        );
    }
    // Prompts, named like tools, their arguments kept.
    let prompts: Vec<Value> = direct["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!({"name": named(p["name"].as_str().unwrap()), "arguments": p["arguments"]}))
        .collect();
    assert_eq!(json!(prompts), gateway["prompts"], "{why}");
    assert_eq!(direct["args_prompt"], gateway["args_prompt"], "{why}");
    assert_eq!(direct["completion"], gateway["completion"], "{why}");
    assert_eq!(gateway["completion"], json!(["Sales", "Support"]), "{why}");
    // A resource template's argument completes through its public URI,
    // answered by the server.
    assert_eq!(
        direct["template_completion"], gateway["template_completion"],
        "{why}"
    );
    assert_eq!(
        gateway["template_completion"],
        json!({"7": ["7"], "x": []}),
        "{why}"
    );
    // Errors name what is wrong.
    let error = |key: &str| gateway[key].as_str().unwrap_or_default().to_owned();
    assert!(error("missing_argument").contains("`city`"), "{why}");
    assert!(
        error("unknown_prompt").contains(&format!("did you mean `{}`", named("args-prompt"))),
        "{why}"
    );
    assert!(
        error("unknown_resource").contains("demo://no/such/thing"),
        "{why}"
    );
    // Completing an argument of a prompt that does not exist: a protocol
    // error, as directly, naming the close match.
    assert!(
        direct["unknown_completion"]
            .as_str()
            .is_some_and(|e| e.contains("completable_promt")),
        "{why}"
    );
    assert!(
        error("unknown_completion")
            .contains(&format!("did you mean `{}`", named("completable-prompt"))),
        "{why}"
    );
}

#[test]
fn a_client_of_serve_over_stdio_sees_what_it_sees_directly() {
    let p = project();
    let direct = direct(&p);
    let gateway = observe(p.path(), through(), &serve_over_stdio(&p, &[]));
    compare(&direct, &gateway);
}

#[test]
fn a_client_of_serve_over_http_sees_what_it_sees_directly() {
    let p = project();
    let direct = direct(&p);
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let seen = observe(p.path(), through(), &target);
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
    compare(&direct, &seen);
}

#[test]
fn trust_levels_and_switches_hide_a_servers_resources_and_prompts() {
    // `shown` offers both to everyone; `creators` only to creators (its
    // `allowedTrustLevels`, in `.mcp.json`'s policy); `quiet` switches
    // both off.
    let p = Project::new(&json!({
        "version": 1,
        "servers": {
            "shown": everything_stdio(),
            "quiet": {"transport": "stdio", "command": node(), "args": [everything_js(), "stdio"],
                      "resources": false, "prompts": false},
        },
    }));
    p.write(
        ".mcp.json",
        &json!({
            "mcpServers": {"creators": {"command": node(), "args": [everything_js(), "stdio"]}},
            "auggy": {"servers": {"creators": {"allowedTrustLevels": ["creator"]}}},
        })
        .to_string(),
    );
    let options = json!({"list_only": true, "try_read": "core-agent://creators/demo://resource/static/document/architecture.md"});
    let as_user = observe(
        p.path(),
        options.clone(),
        &serve_over_stdio(&p, &["--trust-level", "user"]),
    );
    let servers_of = |seen: &Value, key: &str, field: &str| -> Vec<String> {
        let mut servers: Vec<String> = seen[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let v = r[field].as_str().unwrap();
                match v.strip_prefix("core-agent://") {
                    Some(rest) => rest.split('/').next().unwrap().to_owned(),
                    None => v.split('_').next().unwrap().to_owned(),
                }
            })
            .collect();
        servers.sort();
        servers.dedup();
        servers
    };
    assert_eq!(
        servers_of(&as_user, "resources", "uri"),
        ["shown"],
        "{as_user}"
    );
    assert_eq!(
        servers_of(&as_user, "prompts", "name"),
        ["shown"],
        "{as_user}"
    );
    assert!(
        as_user["read_error"]
            .as_str()
            .is_some_and(|e| e.contains("no server `creators` offers resources")),
        "{as_user}"
    );
    let as_creator = observe(p.path(), options, &serve_over_stdio(&p, &[]));
    assert_eq!(
        servers_of(&as_creator, "resources", "uri"),
        ["creators", "shown"],
        "{as_creator}"
    );
    assert_eq!(
        servers_of(&as_creator, "prompts", "name"),
        ["creators", "shown"],
        "{as_creator}"
    );
    assert!(as_creator["read_error"].is_null(), "{as_creator}");
}

#[test]
fn a_backends_sampling_goes_through_the_gate_to_the_client_and_the_clients_roots_reach_it() {
    let p = project();
    // The roots change once they were seen: the client says so
    // (`notifications/roots/list_changed`) and server-everything's next
    // `roots/list` has the new ones.
    let change = json!({"roots_change": ["file:///tmp/core-agent-e2e-root-2"],
                        "roots_change_expect": "core-agent-e2e-root-2"});
    let mut options = json!({"sampling": true, "roots": true, "list_only": true,
                             "try_read": "none", "prefix": PREFIX});
    options
        .as_object_mut()
        .unwrap()
        .extend(change.as_object().unwrap().clone());
    let target = [
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        node().to_str().unwrap().to_owned(),
        everything_js().to_str().unwrap().to_owned(),
        "stdio".to_owned(),
    ];
    let mut direct_options =
        json!({"sampling": true, "roots": true, "list_only": true, "try_read": "none"});
    direct_options
        .as_object_mut()
        .unwrap()
        .extend(change.as_object().unwrap().clone());
    let direct = observe(p.path(), direct_options, &target);
    assert!(
        direct["roots_after"]
            .as_str()
            .is_some_and(|t| t.contains("file:///tmp/core-agent-e2e-root-2")),
        "{direct}"
    );
    assert!(
        direct["sampled"].as_str().is_some_and(
            |t| t.contains("sampled: Resource trigger-sampling-request context: hello model")
        ),
        "{direct}"
    );
    // The gate asks about `sampling:everything`, and this client answers
    // no elicitation: refused, saying how to allow it; the roots pass.
    let refused = observe(p.path(), options.clone(), &serve_over_stdio(&p, &[]));
    let sampled = refused["sampled"].as_str().unwrap_or_default();
    assert!(
        sampled.starts_with("error:") && sampled.contains("\"sampling:everything\""),
        "{refused}"
    );
    assert!(
        refused["sampling_requests"].is_null(),
        "the client was not asked: {refused}"
    );
    assert_eq!(refused["roots"], direct["roots"], "{refused}");
    assert_eq!(refused["roots_after"], direct["roots_after"], "{refused}");
    // Allowed: the client's model answers the backend, as it does directly.
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:everything_*", "builtin:retrieve_raw", "sampling:everything"]}})
            .to_string(),
    );
    let allowed = observe(p.path(), options, &serve_over_stdio(&p, &[]));
    assert_eq!(allowed["sampled"], direct["sampled"], "{allowed}");
    assert_eq!(
        allowed["sampling_requests"], direct["sampling_requests"],
        "{allowed}"
    );
    // Allowed, but this client did not declare sampling: never forwarded.
    let undeclared = observe(
        p.path(),
        json!({"sample_undeclared": true, "list_only": true, "try_read": "none", "prefix": PREFIX}),
        &serve_over_stdio(&p, &[]),
    );
    let sampled = undeclared["sampled"].as_str().unwrap_or_default();
    assert!(
        sampled.starts_with("error:") && sampled.contains("did not declare sampling"),
        "{undeclared}"
    );
}

#[test]
fn a_hostile_backend_is_bounded_and_the_other_servers_are_unaffected() {
    let p = Project::new(&json!({
        "version": 1,
        "agentic_wrap_threshold": 4000,
        "servers": {"everything": everything_stdio(), "hostile": crate::fixture("hostile")},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:*"]}}).to_string(),
    );
    let seen = observe(
        p.path(),
        json!({"hostile": true}),
        &serve_over_stdio(&p, &[]),
    );
    // An endless list stops at max_pages (20) pages of 100.
    assert_eq!(seen["hostile_resources"], json!(2000), "{seen}");
    assert_eq!(seen["everything_resources"], json!(7), "{seen}");
    // 50 MB is past max_message_bytes: refused, naming the server and the
    // limit (the server is restarted).
    let huge = seen["huge_error"].as_str().unwrap_or_default();
    assert!(
        huge.contains("server `hostile`") && huge.contains("max_message_bytes"),
        "{seen}"
    );
    // 200 KB of JSON comes back as a digest.
    let big = seen["big"]["text"].as_str().unwrap_or_default();
    assert!(big.len() < 20_000 && big.contains("call_id"), "{seen}");
    // 5000 log messages and 5000 updates in a burst: at most 50 a second
    // reach the client, and one warning says how many were dropped.
    assert_eq!(seen["flooded"], json!("flooded"), "{seen}");
    let seconds = seen["flood_seconds"].as_f64().unwrap();
    let heard = seen["log_messages"].as_array().unwrap();
    let updates = seen["updated"].as_array().unwrap().len();
    let limit = (50.0 * (seconds + 1.0)) as usize;
    assert!(
        heard.len() + updates <= limit + 2,
        "{} messages and {updates} updates in {seconds:.1} s",
        heard.len()
    );
    assert!(
        heard.iter().any(|m| m["logger"] == "core-agent"
            && m["level"] == "warning"
            && m["data"]
                .as_str()
                .is_some_and(|d| d.contains("were dropped"))),
        "no warning about the dropped notices: {seen}"
    );
    assert!(
        heard.iter().any(|m| m["logger"] == "hostile/flood"),
        "{seen}"
    );
    // server-everything is still served.
    assert!(
        seen["everything_after"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Features")),
        "{seen}"
    );
}

#[test]
fn the_typescript_sdk_client_sees_through_serve_what_it_sees_directly_over_stdio_and_http() {
    // The default threshold: server-everything's documents come back whole.
    let p = Project::new(&json!({"version": 1, "servers": {"everything": everything_stdio()}}));
    let direct = observe_ts(
        p.path(),
        json!({}),
        &[
            "stdio".to_owned(),
            p.path().to_str().unwrap().to_owned(),
            node().to_str().unwrap().to_owned(),
            everything_js().to_str().unwrap().to_owned(),
            "stdio".to_owned(),
        ],
    );
    let through = json!({"prefix": PREFIX, "uri_prefix": URI_PREFIX});
    let over_stdio = observe_ts(p.path(), through.clone(), &serve_over_stdio(&p, &[]));
    compare_core(&direct, &over_stdio, false);
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let over_http = observe_ts(p.path(), through, &target);
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
    compare_core(&direct, &over_http, false);
}

#[test]
fn serve_for_one_server_carries_its_resources_and_prompts_under_their_own_names() {
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"everything": everything_stdio(), "demo": crate::demo_server()},
    }));
    let direct = observe_ts(
        p.path(),
        json!({}),
        &[
            "stdio".to_owned(),
            p.path().to_str().unwrap().to_owned(),
            node().to_str().unwrap().to_owned(),
            everything_js().to_str().unwrap().to_owned(),
            "stdio".to_owned(),
        ],
    );
    let through = observe_ts(
        p.path(),
        json!({}),
        &serve_over_stdio(&p, &["--server", "everything"]),
    );
    let why = format!("direct: {direct}\ngateway: {through}");
    for key in [
        "capabilities",
        "subscribe",
        "resources",
        "templates",
        "prompts",
        "args_prompt",
        "completion",
    ] {
        assert_eq!(direct[key], through[key], "{key}: {why}");
    }
    assert_eq!(direct["read"], through["read"], "{why}");
    assert_eq!(
        through["read_template"]["uri"],
        json!("demo://resource/dynamic/text/7"),
        "{why}"
    );
}

/// Runs the MCP Inspector's CLI with `args` (its target, then `--method …`)
/// and returns the JSON it prints.
pub(crate) fn inspect(dir: &std::path::Path, args: &[String]) -> Value {
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(node());
    hermetic(&mut cmd)
        .arg(inspector_cli().join("index.js"))
        .args(args)
        .current_dir(inspector_cli())
        .env("HOME", dir.join("home"))
        .env_remove("CORE_AGENT_GATEWAY_TOKEN");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "inspector {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("inspector {args:?} printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

// No completion step: the pinned Inspector CLI (inspector-cli 1.0.3) has
// no `completion/complete`; its `--method` takes tools/list, tools/call,
// resources/list, resources/read, resources/templates/list, prompts/list,
// prompts/get and logging/setLevel only (`build/index.js`). Completion
// through serve is compared with the Python and TypeScript SDK clients.
#[test]
fn the_inspector_cli_lists_and_reads_resources_and_gets_prompts_through_serve() {
    let p = Project::new(&json!({"version": 1, "servers": {"everything": everything_stdio()}}));
    let direct: Vec<String> = vec![
        node().to_str().unwrap().to_owned(),
        everything_js().to_str().unwrap().to_owned(),
        "stdio".to_owned(),
    ];
    let stdio: Vec<String> = serve_over_stdio(&p, &[])[2..].to_vec();
    let gateway = HttpGateway::start(&p);
    let http: Vec<String> = vec![
        gateway.url.clone(),
        "--transport".to_owned(),
        "http".to_owned(),
        "--header".to_owned(),
        format!("Authorization: Bearer {TOKEN}"),
    ];
    let method = |target: &[String], extra: &[&str]| {
        let mut args = target.to_vec();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        inspect(p.path(), &args)
    };
    let doc = "demo://resource/static/document/architecture.md";
    let direct_list = method(&direct, &["--method", "resources/list"]);
    let direct_read = method(&direct, &["--method", "resources/read", "--uri", doc]);
    let direct_templates = method(&direct, &["--method", "resources/templates/list"]);
    let direct_prompts = method(&direct, &["--method", "prompts/list"]);
    let args = ["--prompt-args", "city=Lyon", "state=Rhone"];
    let direct_prompt = method(
        &direct,
        &[
            &["--method", "prompts/get", "--prompt-name", "args-prompt"][..],
            &args,
        ]
        .concat(),
    );
    let public = format!("{URI_PREFIX}{doc}");
    for target in [&stdio, &http] {
        let list = method(target, &["--method", "resources/list"]);
        let uris: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap())
            .collect();
        let expected: Vec<String> = direct_list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| format!("{URI_PREFIX}{}", r["uri"].as_str().unwrap()))
            .collect();
        assert_eq!(uris, expected, "{target:?}");
        let read = method(target, &["--method", "resources/read", "--uri", &public]);
        assert_eq!(
            read["contents"][0]["text"], direct_read["contents"][0]["text"],
            "{target:?}"
        );
        assert_eq!(read["contents"][0]["uri"], json!(public), "{target:?}");
        let templates = method(target, &["--method", "resources/templates/list"]);
        assert_eq!(
            templates["resourceTemplates"].as_array().map(Vec::len),
            direct_templates["resourceTemplates"]
                .as_array()
                .map(Vec::len),
            "{target:?}"
        );
        let prompts = method(target, &["--method", "prompts/list"]);
        assert_eq!(
            prompts["prompts"].as_array().map(Vec::len),
            direct_prompts["prompts"].as_array().map(Vec::len),
            "{target:?}"
        );
        let name = format!("{PREFIX}args_prompt");
        let prompt = method(
            target,
            &[
                &["--method", "prompts/get", "--prompt-name", name.as_str()][..],
                &args,
            ]
            .concat(),
        );
        assert_eq!(prompt["messages"], direct_prompt["messages"], "{target:?}");
    }
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
}

#[test]
fn a_client_without_a_session_sees_over_http_what_a_session_sees_directly() {
    // The default threshold: server-everything's documents come back whole.
    let p = Project::new(&json!({"version": 1, "servers": {"everything": everything_stdio()}}));
    let direct = observe(
        p.path(),
        json!({}),
        &[
            "stdio".to_owned(),
            p.path().to_str().unwrap().to_owned(),
            node().to_str().unwrap().to_owned(),
            everything_js().to_str().unwrap().to_owned(),
            "stdio".to_owned(),
        ],
    );
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    // `server/discover` (protocol 2026-07-28): every request stands alone.
    let stateless = observe(
        p.path(),
        json!({"discover": true, "prefix": PREFIX, "uri_prefix": URI_PREFIX}),
        &target,
    );
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
    compare_core(&direct, &stateless, false);
}

#[test]
fn a_clients_log_level_reaches_a_backend_on_2026_07_28_in_each_calls_meta() {
    // The reference server speaks 2026-07-28 to the gateway, where there
    // is no `logging/setLevel`: its `test_logging_tool` logs at the level
    // the call's `_meta` carries.
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"ref": {"transport": "stdio", "command": bin("ref-server"), "args": ["stdio"]}},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:*"]}}).to_string(),
    );
    let seen = observe(
        p.path(),
        json!({"log_tool": "test_logging_tool"}),
        &serve_over_stdio(&p, &["--server", "ref"]),
    );
    assert_eq!(seen["called"], json!("Logging tool done"), "{seen}");
    let logs = seen["log_messages"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|m| m["level"] == "debug" && m["logger"] == "ref/ref-server"),
        "{seen}"
    );
}

#[test]
fn resource_and_prompt_list_changes_reach_a_session_through_serve_over_stdio_and_http() {
    // server-everything's gzip-file-as-resource adds a session resource
    // (`notifications/resources/list_changed`); the reference server's
    // `test_trigger_prompt_change` says its prompts changed.
    let p = Project::new(&json!({
        "version": 1,
        "servers": {
            "everything": everything_stdio(),
            "ref": {"transport": "stdio", "command": bin("ref-server"), "args": ["stdio"]},
        },
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:*"]}}).to_string(),
    );
    let direct_everything = observe(
        p.path(),
        json!({"changes": {"gzip": "gzip-file-as-resource"}}),
        &[
            "stdio".to_owned(),
            p.path().to_str().unwrap().to_owned(),
            node().to_str().unwrap().to_owned(),
            everything_js().to_str().unwrap().to_owned(),
            "stdio".to_owned(),
        ],
    );
    let direct_ref = observe(
        p.path(),
        json!({"changes": {"prompt_trigger": "test_trigger_prompt_change"}}),
        &[
            "stdio".to_owned(),
            p.path().to_str().unwrap().to_owned(),
            bin("ref-server").to_str().unwrap().to_owned(),
            "stdio".to_owned(),
        ],
    );
    let why = format!("{direct_everything}\n{direct_ref}");
    assert!(
        direct_everything["resources_changed"].as_u64() >= Some(1),
        "{why}"
    );
    assert!(direct_ref["prompts_changed"].as_u64() >= Some(1), "{why}");
    let new = direct_everything["new_resources"].as_array().unwrap();
    assert_eq!(new.len(), 1, "{why}");
    let public = json!([format!("{URI_PREFIX}{}", new[0].as_str().unwrap())]);
    let options = json!({"changes": {"gzip": "everything_gzip_file_as_resource",
                                      "prompt_trigger": "ref_test_trigger_prompt_change"}});
    let check = |seen: &Value| {
        let why = format!("{seen}\ndirectly: {why}");
        assert!(
            seen["gzipped"]
                .as_str()
                .is_some_and(|t| !t.starts_with("error")),
            "{why}"
        );
        assert!(seen["resources_changed"].as_u64() >= Some(1), "{why}");
        assert_eq!(seen["new_resources"], public, "{why}");
        assert!(seen["prompts_changed"].as_u64() >= Some(1), "{why}");
    };
    check(&observe(
        p.path(),
        options.clone(),
        &serve_over_stdio(&p, &[]),
    ));
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    check(&observe(p.path(), options, &target));
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
}

#[test]
fn two_sessions_hear_a_backends_log_message_outside_any_call_each_at_its_own_level() {
    // `log_later` logs at info and at error half a second after it
    // answered, when no call is in flight: every session hears it, each as
    // its own `logging/setLevel` lets through, tagged with the server.
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"logs": {"transport": "stdio", "command": node(),
                             "args": [root().join("tests/fixture/log_backend.mjs")],
                             "env": {"MCP_SDK_DIR": ts_sdk()}}},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:logs_*"]}}).to_string(),
    );
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let seen = observe(
        p.path(),
        json!({"two_sessions": {"levels": ["debug", "error"], "tool": "logs_log_later", "wait": 2}}),
        &target,
    );
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
    assert_eq!(seen["called"], json!("later"), "{seen}");
    // In any order: rmcp hands each notification it receives to a task of
    // its own, so two sent back to back may pass each other.
    let heard = |i: usize| -> Vec<Value> {
        let mut heard: Vec<Value> = seen["logs"][i]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["logger"] == "logs/log-backend")
            .map(|m| json!([m["level"], m["data"]]))
            .collect();
        heard.sort_by_key(|m| m.to_string());
        heard
    };
    assert_eq!(
        heard(0),
        [
            json!(["error", "error after the call"]),
            json!(["info", "info after the call"])
        ],
        "{seen}"
    );
    assert_eq!(
        heard(1),
        [json!(["error", "error after the call"])],
        "{seen}"
    );
    // Nothing under `error` reached the second session from anywhere.
    assert!(
        seen["logs"][1].as_array().unwrap().iter().all(|m| [
            "error",
            "critical",
            "alert",
            "emergency"
        ]
        .contains(&m["level"].as_str().unwrap_or_default())),
        "{seen}"
    );
}
