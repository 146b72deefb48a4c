//! Text that is not prose, digested by its structure end to end through
//! the binary: a `git diff` of a real 30-commit history from PyPI's
//! `mcp-server-git`, and a large CSV and log read by `server-filesystem`.

use std::path::Path;
use std::process::Command;

use core_agent_e2e::{Project, filesystem_js, node, python};
use serde_json::{Value, json};

/// Runs `git` in `dir`, which must succeed.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=e2e", "-c", "user.email=e2e@example.com"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository of 31 commits: 120 source files, then 30 commits each
/// rewriting lines of a fifth of them, adding two files and (every third
/// commit) deleting one.
fn history(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    let body = |f: usize, rev: usize| -> String {
        (0..140)
            .map(|l| {
                let changed = (l + f) % 10 < rev % 4 + 1;
                format!(
                    "    let value_{l} = compute(\"{f}-{l}\", {});\n",
                    if changed { rev } else { 0 }
                )
            })
            .collect()
    };
    for f in 0..120 {
        let path = dir.join(format!("src/module_{}/file_{f}.rs", f % 12));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body(f, 0)).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
    for rev in 1..=30 {
        for f in (0..120).filter(|f| (f + rev) % 5 == 0) {
            let path = dir.join(format!("src/module_{}/file_{f}.rs", f % 12));
            if path.exists() {
                std::fs::write(path, body(f, rev)).unwrap();
            }
        }
        for k in 0..2 {
            let path = dir.join(format!("docs/added_{rev}_{k}.md"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                path,
                format!("# Note {rev}.{k}\n\nAdded in commit {rev}.\n"),
            )
            .unwrap();
        }
        if rev % 3 == 0 {
            let f = rev * 3 + 1;
            let _ = std::fs::remove_file(dir.join(format!("src/module_{}/file_{f}.rs", f % 12)));
        }
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", &format!("change {rev}")]);
    }
}

/// The start of an envelope, for a failure message.
fn short(e: &Value) -> String {
    let text = e.to_string();
    text[..text.floor_char_boundary(600)].to_owned()
}

/// The envelope a one-shot `call` printed.
fn envelope(p: &Project, tool: &str, args: Value) -> Value {
    let run = p.run(&["call", "--yes", tool, &args.to_string()]);
    run.expect_code(0);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

#[test]
fn a_git_diff_from_mcp_server_git_names_every_file_with_its_counts() {
    let p = Project::empty();
    let repo = p.path().join("repo");
    history(&repo);
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"git": {
            "transport": "stdio",
            "command": python(),
            "args": ["-m", "mcp_server_git", "--repository", repo],
        }}})
        .to_string(),
    );
    let run = p.run(&["tools", "--json"]);
    run.expect_code(0);
    assert!(run.stdout.contains("\"git_git_diff\""), "{}", run.stdout);

    let e = envelope(
        &p,
        "git_git_diff",
        json!({"repo_path": repo, "target": "HEAD~30"}),
    );
    assert_eq!(e["method"], "structural_diff", "{}", short(&e));
    let digest = e["digest"].as_str().unwrap();
    let raw = e["raw_bytes"].as_u64().unwrap();
    assert!(raw > 500_000, "a large diff: {raw} bytes");
    // Every file git counts, with its counts, whatever fitted of the hunks.
    let numstat = git(&repo, &["diff", "--numstat", "HEAD~30"]);
    let files: Vec<&str> = numstat.lines().collect();
    assert!(files.len() > 100, "{} files", files.len());
    for line in &files {
        let mut cols = line.split('\t');
        let (added, removed, path) = (
            cols.next().unwrap(),
            cols.next().unwrap(),
            cols.next().unwrap(),
        );
        let entry = format!("\n+{added} -{removed} {path}");
        assert!(digest.contains(&entry), "{entry:?} missing from the digest");
    }
    assert!(digest.starts_with(&format!(
        "[digest: unified diff, {raw} bytes: {} files, ",
        files.len()
    )));
    assert!(digest.contains("\nDiff with HEAD~30:\n"));
    assert!(digest.contains("\nfirst hunks:\n--- "));
    assert!(
        digest
            .lines()
            .last()
            .unwrap()
            .ends_with(" left out; retrieve_raw has the whole diff]"),
        "the rest is counted"
    );
    eprintln!(
        "mcp-server-git diff: {raw} bytes → digest {} bytes, envelope {} bytes ({} files)",
        digest.len(),
        e.to_string().len(),
        files.len()
    );
}

#[test]
fn server_filesystem_reads_of_a_csv_and_a_log_are_digested_by_structure() {
    let p = Project::empty();
    let root = p.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let mut csv = String::from("order_id,customer,country,amount,status\n");
    for i in 0..20_000 {
        csv.push_str(&format!(
            "{i},customer-{},{},{}.{:02},{}\n",
            i % 977,
            ["FR", "DE", "US", "JP"][i % 4],
            i % 500,
            i % 100,
            if i % 13 == 0 { "refunded" } else { "paid" }
        ));
    }
    std::fs::write(root.join("orders.csv"), &csv).unwrap();
    let mut log = String::new();
    for i in 0..20_000 {
        let t = format!(
            "2026-12-01 10:{:02}:{:02},{:03}",
            i / 60 % 60,
            i % 60,
            i % 1000
        );
        let line = match i % 50 {
            0 => format!(
                "{t} ERROR worker-{}: job {i} failed: timeout after 30s",
                i % 4
            ),
            1..=5 => format!(
                "{t} WARNING scheduler: queue depth {} over 100",
                100 + i % 50
            ),
            6..=20 => format!("{t} DEBUG worker-{}: heartbeat", i % 4),
            _ => format!("{t} INFO worker-{}: job {i} done in {}ms", i % 4, i % 300),
        };
        log.push_str(&line);
        log.push('\n');
    }
    std::fs::write(root.join("worker.log"), &log).unwrap();
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"fs": {"transport": "stdio", "command": node(), "args": [filesystem_js(), root]}}})
            .to_string(),
    );

    let e = envelope(
        &p,
        "fs_read_text_file",
        json!({"path": root.join("orders.csv")}),
    );
    assert_eq!(e["method"], "structural_csv", "{}", short(&e));
    assert_eq!(e["raw_bytes"], csv.len());
    let digest = e["digest"].as_str().unwrap();
    assert!(digest.starts_with(&format!(
        "[digest: CSV (comma-separated), {} bytes: a header and 20000 rows, 5 columns]\nheader: order_id,customer,country,amount,status\nfirst rows:\n0,customer-0,FR,0.00,refunded\n",
        csv.len()
    )), "{}", short(&e));
    assert!(
        digest.contains("\n19999,customer-459,JP,499.99,paid\n"),
        "the last row"
    );
    assert!(digest.contains(" rows left out]\nlast rows:\n"));
    assert!(digest.len() <= 8000);
    eprintln!(
        "server-filesystem CSV: {} bytes → digest {} bytes",
        csv.len(),
        digest.len()
    );

    let e = envelope(
        &p,
        "fs_read_text_file",
        json!({"path": root.join("worker.log")}),
    );
    assert_eq!(e["method"], "structural_log", "{}", short(&e));
    let digest = e["digest"].as_str().unwrap();
    assert_eq!(
        digest.lines().next().unwrap(),
        format!(
            "[digest: log, {} bytes: 20000 lines; ERROR 400, WARN 2000, INFO 11600, DEBUG 6000]",
            log.len()
        )
    );
    assert!(digest.contains("\nfirst errors:\n1: 2026-12-01 10:00:00,000 ERROR worker-0: job 0 failed: timeout after 30s\n"));
    assert!(
        digest.contains("\n×11600 2026-12-01 10:00:21,021 INFO worker-1: job 21 done in 21ms\n"),
        "{}",
        short(&e)
    );
    assert!(
        digest.contains(&format!("\n{}\n", log.lines().last().unwrap())),
        "the last line"
    );
    assert!(digest.len() <= 8000);
    eprintln!(
        "server-filesystem log: {} bytes → digest {} bytes",
        log.len(),
        digest.len()
    );
}

/// With the LLM second chance on, a text digest is kept, not summarized
/// (a summary would lose what it keeps whole); prose still goes to the LLM.
#[test]
fn the_llm_second_chance_leaves_text_digests_alone() {
    let llm = core_agent_e2e::Background::fake_llm();
    let p = Project::new(
        &json!({"version": 1, "agentic_wrap_model": "small-model", "servers": {"fx": {
            "transport": "stdio", "command": core_agent_e2e::bin("fixture-server"), "args": ["ok"]
        }}}),
    );
    let log: String = (0..400)
        .map(|i| format!("2026-12-01 10:00:{:02} INFO job {i} done\n", i % 60))
        .collect();
    let prose = "Widgets are small. ".repeat(600);
    for (text, method) in [(log, "structural_log"), (prose, "llm_fallback")] {
        let mut cmd = p.command(&[
            "call",
            "--yes",
            "fx_echo",
            &json!({"text": text}).to_string(),
            "--mcp-agentic-wrap-llm",
        ]);
        cmd.env(
            "CORE_AGENT_LLM_BASE_URL",
            format!("http://127.0.0.1:{}/v1", llm.port),
        );
        let run = p.run_with(cmd);
        run.expect_code(0);
        let e: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(e["method"], method, "{}", short(&e));
    }
}
