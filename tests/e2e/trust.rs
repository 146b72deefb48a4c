//! The one trust rule, on real third-party servers: a tool reaches callers
//! below `creator` by default only when it is read-only or marked
//! `destructiveHint: false`, and not marked `openWorldHint: true`; every
//! report says why a tool is restricted.

use core_agent_e2e::{Project, deps, filesystem_js, node, python};
use serde_json::{Value, json};

use crate::by_name;

const MUTATING: &str = "mutating, not marked non-destructive";

/// `@cyanheads/git-mcp-server` (npm): annotates every tool with
/// `readOnlyHint` alone, `true` for its 8 read tools, `false` for the rest.
fn cyanheads_git() -> Value {
    let js = deps().join("npm/node_modules/@cyanheads/git-mcp-server/dist/index.js");
    json!({"transport": "stdio", "command": node(), "args": [js]})
}

const CYANHEADS_READS: [&str; 8] = [
    "git_blame",
    "git_changelog_analyze",
    "git_diff",
    "git_log",
    "git_reflog",
    "git_show",
    "git_status",
    "git_wrapup_instructions",
];

/// The server tools of `tools --json` at `level`: name → the whole entry.
fn tools_at(p: &Project, level: &str) -> Vec<Value> {
    let run = p.run(&["tools", "--json", "--trust-level", level]);
    run.expect_code(0);
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["server"].is_null())
        .cloned()
        .collect()
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["tool"].as_str().unwrap()).collect()
}

fn entry<'a>(tools: &'a [Value], tool: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["tool"] == tool)
        .unwrap_or_else(|| panic!("no tool `{tool}` in {tools:#?}"))
}

#[test]
fn an_honest_server_that_says_read_only_is_not_punished() {
    let p = Project::new(&json!({"version": 1, "servers": {"git": cyanheads_git()}}));
    let creator = tools_at(&p, "creator");
    assert_eq!(creator.len(), 28, "{:?}", names(&creator));
    // Its read tools say `readOnlyHint: true` and nothing about the open
    // world: open to every level, git_status included.
    for level in ["agent", "user", "public"] {
        assert_eq!(names(&tools_at(&p, level)), CYANHEADS_READS, "{level}");
    }
    let status = entry(&creator, "git_status");
    assert_eq!(
        (&status["trust_levels"], &status["why_restricted"]),
        (&json!(["creator", "agent", "user", "public"]), &Value::Null)
    );
    // The rest say `readOnlyHint: false` and not `destructiveHint: false`.
    for t in creator
        .iter()
        .filter(|t| !CYANHEADS_READS.contains(&t["tool"].as_str().unwrap()))
    {
        assert_eq!(
            (&t["trust_levels"], &t["why_restricted"]),
            (&json!(["creator"]), &json!(MUTATING)),
            "{t}"
        );
    }

    // `mcp list` names each restricted tool and why, in JSON and in words.
    let run = p.run(&["mcp", "list", "--json", "--trust-level", "user"]);
    run.expect_code(0);
    let git = by_name(&run.json(), "git");
    assert_eq!(
        (git["tools"].as_u64(), git["restricted"].as_u64()),
        (Some(8), Some(20))
    );
    let restricted = git["restricted_tools"].as_array().unwrap();
    assert_eq!(restricted.len(), 20);
    let commit = restricted
        .iter()
        .find(|t| t["tool"] == "git_commit")
        .unwrap();
    assert_eq!(
        commit,
        &json!({"name": "git_git_commit", "tool": "git_commit", "trust_levels": ["creator"], "why": MUTATING})
    );
    let run = p.run(&["mcp", "list", "--trust-level", "public"]);
    run.expect_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        lines[0].ends_with(" connected  8 tools (20 restricted at this trust level)"),
        "{}",
        run.stdout
    );
    assert!(
        lines[1].starts_with(&format!(
            "    creator only ({MUTATING}): git_add, git_branch, git_checkout, "
        )),
        "{}",
        run.stdout
    );
    // `tools` says it beside the tool.
    let run = p.run(&["tools"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&format!(
            "\ngit_git_commit  [mutating; creator only ({MUTATING})]\n"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\ngit_git_status  [read-only; creator, agent, user, public]\n"),
        "{}",
        run.stdout
    );
    // A caller below creator cannot call a restricted tool.
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "agent",
        "git_git_commit",
        r#"{"message": "x"}"#,
    ]);
    run.expect_code(1);
    assert!(
        run.stderr.contains(
            "`git_git_commit` is not available at trust level `agent`; it allows `creator`"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn the_operator_widens_a_restricted_tool_with_a_tool_policy() {
    let p = Project::empty();
    let mut server = cyanheads_git();
    server.as_object_mut().unwrap().remove("transport");
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"git": server},
                "auggy": {"servers": {"git": {
                    "allowedTrustLevels": ["creator", "agent"],
                    "toolPolicies": {"git_commit": {"allowedTrustLevels": ["creator", "agent", "user"]}}}}}})
        .to_string(),
    );
    let creator = tools_at(&p, "creator");
    let commit = entry(&creator, "git_commit");
    assert_eq!(
        (&commit["trust_levels"], &commit["why_restricted"]),
        (
            &json!(["creator", "agent", "user"]),
            &json!("its toolPolicies entry")
        )
    );
    let status = entry(&creator, "git_status");
    assert_eq!(
        (&status["trust_levels"], &status["why_restricted"]),
        (
            &json!(["creator", "agent"]),
            &json!("the server's allowedTrustLevels")
        )
    );
    // The server's levels replace the default: they widen a mutating
    // git_add to agent as they narrow git_status.
    assert_eq!(
        entry(&creator, "git_add")["trust_levels"],
        json!(["creator", "agent"])
    );
    assert_eq!(names(&tools_at(&p, "user")), ["git_commit"]);
}

#[test]
fn filesystem_reads_reach_every_level_and_writes_say_why() {
    let p = Project::empty();
    let root = p.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "hello").unwrap();
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fs": {"transport": "stdio", "command": node(), "args": [filesystem_js(), &root]}}})
            .to_string(),
    );
    let user = tools_at(&p, "user");
    let read = entry(&user, "read_text_file");
    assert_eq!(read["why_restricted"], Value::Null);
    // create_directory says `destructiveHint: false`: open although it writes.
    assert_eq!(entry(&user, "create_directory")["read_only"], false);
    assert!(!names(&user).contains(&"write_file"));
    let run = p.run(&[
        "call",
        "--yes",
        "--trust-level",
        "public",
        "fs_read_text_file",
        &json!({"path": root.join("a.txt")}).to_string(),
    ]);
    run.expect_code(0);
    assert_eq!(run.stdout, "hello\n");

    let run = p.run(&["mcp", "list", "--json", "--trust-level", "user"]);
    run.expect_code(0);
    let fs = by_name(&run.json(), "fs");
    let restricted: Vec<(&str, &str)> = fs["restricted_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tool"].as_str().unwrap(), t["why"].as_str().unwrap()))
        .collect();
    assert_eq!(
        restricted,
        [
            ("edit_file", MUTATING),
            ("move_file", MUTATING),
            ("write_file", MUTATING)
        ]
    );

    // Doctor says the same, per server.
    let run = p.run(&["mcp", "doctor", "--json"]);
    run.expect_code(0);
    let servers = run.json()["servers"].clone();
    assert_eq!(servers[0]["restricted_tools"], fs["restricted_tools"]);
    let run = p.run(&["mcp", "doctor"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&format!(
            "\n        creator only ({MUTATING}): edit_file, move_file, write_file\n"
        )),
        "{}",
        run.stdout
    );
}

#[test]
fn mcp_server_git_is_judged_by_its_own_hints_whatever_read_only_says() {
    // mcp-server-git (PyPI) annotates every tool: reads `readOnlyHint: true`,
    // git_commit and git_add `destructiveHint: false`, git_reset
    // `destructiveHint: true`, all `openWorldHint: false`.
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    for read_only in [false, true] {
        let server = json!({"transport": "stdio", "command": python(),
            "args": ["-m", "mcp_server_git", "--repository", repo.path()],
            "read_only": read_only});
        let p = Project::new(&json!({"version": 1, "servers": {"git": server}}));
        let public = tools_at(&p, "public");
        let visible = names(&public);
        for tool in ["git_status", "git_log", "git_diff", "git_commit", "git_add"] {
            assert!(visible.contains(&tool), "{tool} at public: {visible:?}");
        }
        // A server-level read_only cannot launder a tool that says it destroys.
        assert!(!visible.contains(&"git_reset"), "read_only {read_only}");
        let creator = tools_at(&p, "creator");
        let reset = entry(&creator, "git_reset");
        assert_eq!(
            (&reset["read_only"], &reset["why_restricted"]),
            (&json!(false), &json!(MUTATING))
        );
        let run = p.run(&[
            "call",
            "--yes",
            "--trust-level",
            "public",
            "git_git_status",
            &json!({"repo_path": repo.path()}).to_string(),
        ]);
        run.expect_code(0);
        assert!(run.stdout.contains("No commits yet"), "{}", run.stdout);
    }
}

/// A server on the Python SDK whose tools say little: the server's
/// `read_only` decides for the tools that published no annotations.
const QUIET_SERVER: &str = r#"
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("quiet")

@mcp.tool(structured_output=False)
def lookup() -> str:
    """No annotations at all."""
    return "looked up"

@mcp.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def status() -> str:
    """Read-only, silent about the open world."""
    return "ok"

@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True), structured_output=False)
def search_web() -> str:
    """Read-only and open-world."""
    return "found"

@mcp.tool(annotations=ToolAnnotations(title="Tag"), structured_output=False)
def tag() -> str:
    """An annotation block without hints: it has answered, so it is mutating."""
    return "tagged"

mcp.run("stdio")
"#;

#[test]
fn the_servers_read_only_opens_only_the_tools_that_said_nothing() {
    let p = Project::empty();
    let script = p.write("quiet.py", QUIET_SERVER);
    for (read_only, open) in [(false, vec!["status"]), (true, vec!["lookup", "status"])] {
        p.write(
            ".agents/mcp.json",
            &json!({"version": 1, "servers": {"q": {"transport": "stdio", "command": python(),
                "args": [&script], "read_only": read_only}}})
            .to_string(),
        );
        assert_eq!(names(&tools_at(&p, "user")), open, "read_only {read_only}");
        let creator = tools_at(&p, "creator");
        let why = |tool: &str| entry(&creator, tool)["why_restricted"].clone();
        assert_eq!(why("search_web"), json!("open-world"));
        assert_eq!(why("tag"), json!(MUTATING));
        let lookup = if read_only {
            Value::Null
        } else {
            json!(MUTATING)
        };
        assert_eq!(why("lookup"), lookup);
    }
}
