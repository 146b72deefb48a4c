//! The gateway never starts itself: the entry Claude Code's own CLI writes
//! for core-agent (`claude mcp add -s project core-agent -- core-agent
//! serve`) lands in the `.mcp.json` that core-agent reads too.

use std::path::{Path, PathBuf};
use std::process::Command;

use core_agent_e2e::{Project, bin, deps, hermetic};
use serde_json::{Value, json};

use crate::{by_name, fixture};

/// Claude Code's CLI, from the test dependencies (the platform package's
/// binary: the npm wrapper's launcher is put in place by an install script,
/// which the tests do not run).
fn claude() -> PathBuf {
    deps().join("npm/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}

/// `claude ARGS` in `project`, with its `HOME` (Claude Code keeps its own
/// state there) and nothing of the test's environment.
pub(crate) fn claude_in(project: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(claude());
    hermetic(&mut cmd)
        .args(args)
        .current_dir(project)
        .env("HOME", project.join("home"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "claude {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `PATH` whose first directory holds `core-agent` (as an installed one
/// would be), then the system's.
fn path_with_core_agent() -> String {
    let dir = bin("core-agent").parent().unwrap().to_path_buf();
    format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display())
}

#[test]
fn the_entry_claude_code_writes_is_left_out_and_named_by_doctor() {
    let p = Project::empty();
    std::fs::create_dir_all(p.path().join("home")).unwrap();
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fx": fixture("ok")}}).to_string(),
    );
    claude_in(
        p.path(),
        &[
            "mcp",
            "add",
            "-s",
            "project",
            "core-agent",
            "--",
            "core-agent",
            "serve",
        ],
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(p.path().join(".mcp.json")).unwrap())
            .unwrap();
    assert_eq!(written["mcpServers"]["core-agent"]["command"], "core-agent");

    let mut cmd = p.command(&["mcp", "list", "--json"]);
    cmd.env("PATH", path_with_core_agent());
    let run = p.run_with(cmd);
    run.expect_code(0);
    let list = run.json();
    assert_eq!(by_name(&list, "fx")["status"], "connected", "{list:#}");
    let own = by_name(&list, "core-agent");
    assert_eq!(own["status"], "left-out", "{list:#}");
    let why = own["error"].as_str().unwrap_or_default();
    assert!(why.contains("`core-agent serve` is this gateway"), "{why}");
    // The warning names the file, the server and the fix.
    let warning = run
        .stderr
        .lines()
        .find(|l| l.contains("server `core-agent`"))
        .unwrap_or_else(|| panic!("no warning about the entry:\n{}", run.stderr));
    assert!(warning.contains(".mcp.json"), "{warning}");
    assert!(warning.contains("claude mcp add -s local"), "{warning}");

    // Doctor flags it.
    let mut cmd = p.command(&["mcp", "doctor", "--json"]);
    cmd.env("PATH", path_with_core_agent());
    let run = p.run_with(cmd);
    run.expect_code(0);
    let report = run.json();
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "own-gateway")
        .cloned()
        .unwrap_or_else(|| panic!("doctor did not flag the entry: {report:#}"));
    assert_eq!(finding["server"], "core-agent");
    assert_eq!(finding["severity"], "warning");

    // Through the gateway the agent sees the other server's tools, and
    // nothing started a second gateway (the command would be on PATH).
    let mut cmd = p.command(&["tools", "--json"]);
    cmd.env("PATH", path_with_core_agent());
    let run = p.run_with(cmd);
    run.expect_code(0);
    assert!(run.stdout.contains("fx_"), "{}", run.stdout);
}

#[test]
fn a_wrapped_entry_stops_one_level_down_and_says_why() {
    // `sh -c` hides the command from the first check: the core-agent it
    // starts finds its own project in its lineage and starts nothing.
    let p = Project::empty();
    let log = p.path().join("started.log");
    let wrapped = format!(
        "echo started >> {}; exec {} serve",
        log.display(),
        bin("core-agent").display()
    );
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {
            "gateway": {"command": "sh", "args": ["-c", wrapped]},
            "fx": {"command": bin("fixture-server"), "args": ["ok"]},
        }})
        .to_string(),
    );
    let run = p.run(&["mcp", "list", "--json"]);
    // One server failed to start: a listing still lists.
    let list = run.json();
    assert_eq!(by_name(&list, "fx")["status"], "connected", "{list:#}");
    let gateway = by_name(&list, "gateway");
    assert_ne!(gateway["status"], "connected", "{list:#}");
    let said = gateway.to_string();
    assert!(
        said.contains("reads the same project"),
        "the refusal is in the server's report: {list:#}"
    );
    let starts = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        starts.lines().count(),
        1,
        "started once, not again and again"
    );
}

#[test]
fn another_projects_gateway_may_be_chained() {
    // A gateway over another project is a chain, not a loop: it starts, and
    // its tools come through this one.
    let inner = Project::empty();
    inner.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fx": fixture("ok")}}).to_string(),
    );
    let outer = Project::empty();
    let agents = inner.path().join(".agents");
    outer.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"inner": {
            "transport": "stdio",
            "command": bin("core-agent"),
            "args": ["--agents-dir", agents, "serve"],
        }}})
        .to_string(),
    );
    let run = outer.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("inner_fx_"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}
