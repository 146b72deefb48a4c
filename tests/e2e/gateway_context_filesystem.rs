//! server-filesystem behind `core-agent serve`, seen by the official Python
//! and TypeScript SDK clients and the MCP Inspector's CLI, directly and
//! through the gateway (over stdio and HTTP).
//!
//! server-filesystem 2026.8.31 offers tools only: no resources, resource
//! templates, prompts, completion or logging (`resources/list` and
//! `prompts/list` are "Method not found" directly). So what is compared is
//! its tools (names behind the `filesystem_` prefix, input schemas and
//! annotations kept, `readOnlyHint` being the class core-agent decided; the
//! gateway passes on no output schema), the results of its read tools, the refusal of a path
//! outside its directory, and that the gateway does not make up resources or
//! prompts for it. Its allowed directories can also come from the client's
//! roots (started without a directory), and change with them
//! (`notifications/roots/list_changed`): that is compared too.

use core_agent_e2e::{Project, filesystem_js, node};
use serde_json::{Value, json};

use crate::gateway_clients::{HttpGateway, TOKEN};
use crate::gateway_context::{inspect, observe, observe_ts, serve_over_stdio};

const PREFIX: &str = "filesystem_";

/// The directory server-filesystem may read (canonical, as it reports
/// it), with a file, a subdirectory and a file in it; and a file outside.
struct Files {
    dir: String,
    other: String,
    outside: String,
}

fn files(p: &Project) -> Files {
    p.write("files/notes.txt", "first line\nsecond line\n");
    p.write("files/sub/deep.md", "# deep\n");
    p.write("other/notes.txt", "other notes\n");
    p.write("other/sub/deep.md", "# other\n");
    p.write("outside.txt", "secret\n");
    let canonical = |name: &str| {
        std::fs::canonicalize(p.path().join(name))
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    Files {
        dir: canonical("files"),
        other: canonical("other"),
        outside: canonical("outside.txt"),
    }
}

/// A project with server-filesystem behind the gateway (started on `args`),
/// the gate allowing its read tools only.
fn project(args: impl Fn(&Files) -> Vec<String>) -> (Project, Files) {
    let p = Project::new(&json!({"version": 1, "servers": {}}));
    let f = files(&p);
    let mut all = vec![filesystem_js().to_str().unwrap().to_owned()];
    all.extend(args(&f));
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {
            "filesystem": {"transport": "stdio", "command": node(), "args": all},
        }})
        .to_string(),
    );
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": [
            "mcp:filesystem_read_*", "mcp:filesystem_list_*",
            "mcp:filesystem_directory_tree", "mcp:filesystem_search_files",
        ]}})
        .to_string(),
    );
    (p, f)
}

/// server-filesystem itself, over stdio, on `args`.
fn direct_target(p: &Project, args: &[&str]) -> Vec<String> {
    let mut target = vec![
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        node().to_str().unwrap().to_owned(),
        filesystem_js().to_str().unwrap().to_owned(),
    ];
    target.extend(args.iter().map(|s| (*s).to_owned()));
    target
}

/// The tools of server-filesystem among what a client of the gateway sees,
/// their prefix taken off.
fn unprefixed(tools: &Value) -> Value {
    let tools: Vec<Value> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?.strip_prefix(PREFIX)?;
            let mut t = t.clone();
            t["name"] = json!(name);
            Some(t)
        })
        .collect();
    json!(tools)
}

/// The tools, sorted by name.
fn by_name(tools: &Value) -> Vec<Value> {
    let mut tools = tools.as_array().unwrap().clone();
    tools.sort_by_key(|t| t["name"].as_str().unwrap_or_default().to_owned());
    tools
}

/// What the gateway keeps of each tool, whatever its order: the name, the
/// input schema and the read-only hint.
fn kept(tools: &Value) -> Vec<Value> {
    by_name(tools)
        .iter()
        .map(|t| {
            json!([
                t["name"],
                t["inputSchema"],
                t["annotations"]["readOnlyHint"]
            ])
        })
        .collect()
}

/// What a client saw of server-filesystem directly is what it sees through
/// the gateway: the same tools, the same results of its calls, and no
/// resources or prompts.
fn compare(direct: &Value, gateway: &Value, f: &Files) {
    let why = format!("direct: {direct}\ngateway: {gateway}");
    // Tools only directly; the gateway adds logging (always offered), and
    // no resources, prompts or completion it has none of.
    assert_eq!(direct["capabilities"], json!(["tools"]), "{why}");
    assert_eq!(
        gateway["capabilities"],
        json!(["logging", "tools"]),
        "{why}"
    );
    assert_eq!(direct["tools"].as_array().map(Vec::len), Some(14), "{why}");
    assert_eq!(
        kept(&direct["tools"]),
        kept(&unprefixed(&gateway["tools"])),
        "{why}"
    );
    for (direct, gateway) in by_name(&direct["tools"])
        .iter()
        .zip(by_name(&unprefixed(&gateway["tools"])))
    {
        let why = format!("direct: {direct}\ngateway: {gateway}");
        // The gateway's `readOnlyHint` is the class it decided (with
        // `destructiveHint: false` on a read-only tool); every other hint
        // and the title are the server's. The output schema is not passed
        // on (a digested result cannot match it; the structured content
        // of one that is not digested is).
        let hint = |t: &Value, h: &str| t["annotations"][h].clone();
        let read_only = hint(&gateway, "readOnlyHint") == json!(true);
        for h in ["idempotentHint", "openWorldHint", "title"] {
            assert_eq!(hint(direct, h), hint(&gateway, h), "{h}: {why}");
        }
        if read_only {
            assert_ne!(hint(direct, "destructiveHint"), json!(true), "{why}");
            assert_eq!(hint(&gateway, "destructiveHint"), json!(false), "{why}");
        } else {
            assert_eq!(
                hint(direct, "destructiveHint"),
                hint(&gateway, "destructiveHint"),
                "{why}"
            );
        }
        assert!(
            gateway["outputSchema"].is_null() || gateway["outputSchema"] == direct["outputSchema"],
            "{why}"
        );
    }
    assert_eq!(direct["calls"], gateway["calls"], "{why}");
    let calls = direct["calls"].as_array().unwrap();
    assert_eq!(
        calls[1]["text"],
        json!("first line\nsecond line\n"),
        "{why}"
    );
    let denied = calls.last().unwrap();
    assert_eq!(denied["is_error"], json!(true), "{why}");
    assert!(
        denied["text"]
            .as_str()
            .is_some_and(|t| t.contains("outside allowed directories") && t.contains(&f.outside)),
        "{why}"
    );
    for key in ["resource_list", "template_list", "prompt_list"] {
        assert!(
            direct[key]
                .as_str()
                .is_some_and(|e| e.contains("Method not found")),
            "{key}: {why}"
        );
        // Through the gateway: refused the same way, or an empty list.
        assert!(
            gateway[key].as_str().is_some() || gateway[key] == json!([]),
            "{key}: {why}"
        );
    }
}

#[test]
fn server_filesystem_behind_serve_shows_the_sdk_clients_and_the_inspector_what_it_shows_directly() {
    let (p, f) = project(|f| vec![f.dir.clone()]);
    let options = json!({"filesystem": {"dir": f.dir, "outside": f.outside}});
    let through = json!({"filesystem": {"dir": f.dir, "outside": f.outside}, "prefix": PREFIX});
    let direct = direct_target(&p, &[&f.dir]);
    let py_direct = observe(p.path(), options.clone(), &direct);
    let ts_direct = observe_ts(p.path(), options, &direct);
    // Both SDKs see the same server.
    assert_eq!(py_direct["calls"], ts_direct["calls"]);
    let stdio = serve_over_stdio(&p, &[]);
    compare(&py_direct, &observe(p.path(), through.clone(), &stdio), &f);
    compare(
        &ts_direct,
        &observe_ts(p.path(), through.clone(), &stdio),
        &f,
    );
    let gateway = HttpGateway::start(&p);
    let http = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    compare(&py_direct, &observe(p.path(), through.clone(), &http), &f);
    compare(&ts_direct, &observe_ts(p.path(), through, &http), &f);

    // The Inspector's CLI: its tool list and calls, directly, through serve
    // over stdio and over HTTP.
    let inspector_http: Vec<String> = vec![
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
    let notes = format!("path={}/notes.txt", f.dir);
    let outside = format!("path={}", f.outside);
    let calls = |target: &[String], prefix: &str| -> Vec<Value> {
        [
            ("list_allowed_directories", None),
            ("read_text_file", Some(notes.as_str())),
            ("read_text_file", Some(outside.as_str())),
        ]
        .into_iter()
        .map(|(tool, arg)| {
            let name = format!("{prefix}{tool}");
            let mut extra = vec!["--method", "tools/call", "--tool-name", name.as_str()];
            if let Some(arg) = arg {
                extra.extend(["--tool-arg", arg]);
            }
            method(target, &extra)
        })
        .collect()
    };
    let inspector_direct = direct[2..].to_vec();
    let listed = method(&inspector_direct, &["--method", "tools/list"]);
    let called = calls(&inspector_direct, "");
    assert_eq!(listed["tools"].as_array().map(Vec::len), Some(14));
    assert_eq!(
        called[1]["content"][0]["text"],
        json!("first line\nsecond line\n")
    );
    assert_eq!(called[2]["isError"], json!(true), "{:?}", called[2]);
    for target in [&serve_over_stdio(&p, &[])[2..].to_vec(), &inspector_http] {
        let tools = method(target, &["--method", "tools/list"]);
        assert_eq!(
            kept(&listed["tools"]),
            kept(&unprefixed(&tools["tools"])),
            "{target:?}"
        );
        assert_eq!(called, calls(target, PREFIX), "{target:?}");
    }
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
}

#[test]
fn server_filesystem_behind_serve_takes_its_directories_from_the_clients_roots_as_they_change() {
    // Started without a directory: server-filesystem asks its client for
    // roots, and again on `notifications/roots/list_changed`.
    let (p, f) = project(|_| vec![]);
    let options = |prefix: &str| {
        json!({
            "roots": true,
            "roots_uris": [format!("file://{}", f.dir)],
            "roots_tool": "list_allowed_directories",
            "roots_expect": format!("Allowed directories:\n{}", f.dir),
            "roots_change": [format!("file://{}", f.other)],
            "roots_change_expect": format!("Allowed directories:\n{}", f.other),
            "filesystem": {"dir": f.other, "outside": format!("{}/notes.txt", f.dir)},
            "prefix": prefix,
        })
    };
    let direct = observe(p.path(), options(""), &direct_target(&p, &[]));
    let check = |seen: &Value| {
        let why = format!("direct: {direct}\ngateway: {seen}");
        for key in ["roots", "roots_after"] {
            assert_eq!(seen[key], direct[key], "{key}: {why}");
        }
        assert_eq!(
            seen["roots_after"],
            json!(format!("Allowed directories:\n{}", f.other)),
            "{why}"
        );
        // The calls after the change see the new directory only.
        assert_eq!(seen["calls"], direct["calls"], "{why}");
        assert_eq!(seen["calls"][1]["text"], json!("other notes\n"), "{why}");
        assert_eq!(
            seen["calls"].as_array().unwrap().last().unwrap()["is_error"],
            json!(true),
            "{why}"
        );
    };
    check(&observe(
        p.path(),
        options(PREFIX),
        &serve_over_stdio(&p, &[]),
    ));
    let gateway = HttpGateway::start(&p);
    let http = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    check(&observe(p.path(), options(PREFIX), &http));
    let stderr = gateway.stderr();
    assert_eq!(gateway.stop(), 130, "{stderr}");
}
