//! What `mcp list`, the startup lines and doctor print about each server:
//! the file it came from, and counts in the right number.

use core_agent_e2e::Project;
use serde_json::json;

use crate::{by_name, demo_server, fixture};

#[test]
fn mcp_list_json_names_the_config_file_of_each_server() {
    let p = Project::new(&json!({"version": 1, "servers": {"core": demo_server()}}));
    let mut peer = demo_server();
    peer.as_object_mut().unwrap().remove("transport");
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {
            "peer": peer,
            "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        }})
        .to_string(),
    );
    let user = p.write(
        "home/.agents/mcp.json",
        &json!({"version": 1, "servers": {"mine": demo_server()}}).to_string(),
    );
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    let list = run.json();
    let source = |name: &str| by_name(&list, name)["source"].clone();
    assert_eq!(source("core"), ".agents/mcp.json");
    assert_eq!(source("peer"), "./.mcp.json");
    assert_eq!(source("mine"), json!(user.display().to_string()));
    // A server that was left out still says where it was written.
    assert_eq!(by_name(&list, "legacy")["status"], "left-out");
    assert_eq!(source("legacy"), "./.mcp.json");
}

#[test]
fn counts_of_one_are_singular() {
    let mut one = demo_server();
    one["tools"] = json!(["divide"]);
    let p = Project::new(&json!({"version": 1, "servers": {"one": one, "four": demo_server()}}));

    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(
        run.stderr
            .contains("core-agent: mcp: one (stdio): 1 tool (3 left out by the allowlist) in "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("core-agent: mcp: four (stdio): 4 tools in "),
        "{}",
        run.stderr
    );

    let run = p.run(&["mcp", "list"]);
    run.expect_code(0);
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            format!(
                "{:<20} {:<6} {:<8} {:<10} 4 tools",
                "four", "stdio", "project", "connected"
            ),
            format!(
                "{:<20} {:<6} {:<8} {:<10} 1 tool (3 left out by the allowlist)",
                "one", "stdio", "project", "connected"
            ),
        ]
    );

    let run = p.run(&["mcp", "doctor"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("server  one (stdio): connected, 1 tool (3 left out by the allowlist) in "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\ntools   5 tools, about "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with("doctor: 0 errors, 0 warnings\n"),
        "{}",
        run.stdout
    );

    // Warnings that count a limit of one say so in the singular too.
    let mut paged = fixture("paged");
    paged["limits"] = json!({"max_pages": 1, "max_tools": 1});
    let p = Project::new(&json!({"version": 1, "servers": {"pg": paged}}));
    let run = p.run(&["mcp", "list", "--json"]);
    run.expect_code(0);
    assert_eq!(
        run.json()[0]["warnings"],
        json!([
            "pg: only the first tool is published (max_tools); left out: page1_b",
            "pg: stopped listing tools after 1 page (max_pages); tools on later pages are not published"
        ])
    );
}
