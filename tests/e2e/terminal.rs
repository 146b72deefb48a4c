//! The terminal a person sees: the binary under a pseudo-terminal
//! (expectrl), against server-everything and the fixture server.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use core_agent_e2e::{Project, alive, bin, group_members, hermetic, live_processes, recorded_pids};
use expectrl::process::unix::WaitStatus;
use expectrl::session::OsSession;
use expectrl::{Eof, Expect, Session};
use serde_json::json;

use crate::{everything_stdio, fixture};

/// `core-agent ARGS` in the project, on a pseudo-terminal of its own
/// (stdin, stdout and stderr), 120 columns wide.
fn pty(p: &Project, args: &[&str]) -> OsSession {
    let mut cmd = Command::new(bin("core-agent"));
    hermetic(&mut cmd)
        .args(args)
        .current_dir(p.path())
        .env("HOME", p.path().join("home"))
        .env("TERM", "xterm-256color");
    let mut session = Session::spawn(cmd).unwrap();
    session.get_process_mut().set_window_size(120, 40).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session
}

/// Waits for `text` on the terminal; panics with what came instead.
fn expect(s: &mut OsSession, text: &str) -> String {
    match s.expect(text) {
        Ok(found) => String::from_utf8_lossy(found.before()).into_owned(),
        Err(e) => panic!("`{text}` never appeared on the terminal: {e}"),
    }
}

/// Reads the terminal to the end; the rest of the output and the exit code.
fn finish(mut s: OsSession) -> (String, i32) {
    let rest = s.expect(Eof).unwrap();
    let rest = String::from_utf8_lossy(rest.as_bytes()).into_owned();
    match s.get_process().wait().unwrap() {
        WaitStatus::Exited(_, code) => (rest, code),
        other => panic!("core-agent did not exit normally: {other:?}\n{rest}"),
    }
}

fn everything() -> Project {
    Project::new(&json!({"version": 1, "servers": {"everything": everything_stdio()}}))
}

const LONG: &str = "everything_trigger_long_running_operation";
const DONE: &str = "Long running operation completed. Duration: 2 seconds, Steps: 2.";

#[test]
fn a_slow_call_shows_a_progress_line_on_a_terminal_only() {
    let p = everything();
    let args = ["call", "--yes", LONG, r#"{"duration": 2, "steps": 2}"#];
    let mut s = pty(&p, &args);
    // While it starts, the server's state is shown live.
    expect(&mut s, "core-agent: mcp: everything (stdio): starting…");
    // Past a second: the tool, the time so far, then the server's own progress.
    let before = expect(&mut s, "1/2");
    assert!(before.contains(LONG), "{before}");
    expect(&mut s, DONE);
    let (_, code) = finish(s);
    assert_eq!(code, 0);

    // Piped: the result alone, and a quiet stderr (nothing failed).
    let run = p.run(&args);
    run.expect_code(0);
    assert_eq!(run.stdout, format!("{DONE}\n"));
    assert_eq!(run.stderr, "");

    // --json on a terminal: no live lines either.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (out, code) = finish(pty(&p, &json_args));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(DONE), "{out}");
    for live in ["1/2", "starting…", LONG] {
        assert!(!out.contains(live), "`{live}` drawn around --json: {out}");
    }
}

#[test]
fn a_slow_batch_shows_one_progress_line_naming_the_call() {
    let p = everything();
    let call = json!({"name": LONG, "arguments": {"duration": 2, "steps": 2}});
    let batch = p.write("batch.jsonl", &format!("{call}\n{call}\n"));
    let mut s = pty(&p, &["call", "--yes", "--batch", batch.to_str().unwrap()]);
    let before = expect(&mut s, &format!("{LONG}: 1/2"));
    assert!(before.contains("batch of 2 calls"), "{before}");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches(r#""ok":true"#).count(), 2, "{out}");
}

#[test]
fn ctrl_c_cancels_the_call_on_the_server_and_leaves_no_process() {
    let p = Project::empty();
    let pid_file = p.path().join("pids");
    let mut probe = fixture("cancel-probe");
    probe["env"] = json!({"FIXTURE_PID_FILE": pid_file});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"probe": probe}}).to_string(),
    );
    let marker = p.path().join("cancelled");
    let arguments = json!({"path": marker}).to_string();
    let mut s = pty(&p, &["call", "--yes", "probe_wait_cancel", &arguments]);
    // The server has the call before the interrupt.
    wait_for(&p.path().join("cancelled.entered"));
    s.send(expectrl::ControlCode::EndOfText).unwrap();
    let (out, code) = finish(s);
    assert_eq!(code, 130, "{out}");
    assert!(
        out.contains("core-agent: interrupted: stopping the servers"),
        "{out}"
    );
    // The server heard `notifications/cancelled` for it before it was stopped.
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "cancelled: request abandoned by the caller"
    );
    let pids = recorded_pids(&pid_file);
    assert_eq!(pids.len(), 1);
    assert!(!alive(pids[0]), "the server outlived core-agent");
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const ELICIT: &str = "everything_trigger_elicitation_request";
const DOWN: &str = "\x1b[B";

/// Runs the elicitation tool on a terminal and waits for the first question.
fn elicitation(p: &Project) -> OsSession {
    let mut s = pty(p, &["call", "--yes", ELICIT]);
    expect(
        &mut s,
        "core-agent: mcp: everything asks: Please provide inputs for the following fields:",
    );
    expect(&mut s, "Answer?");
    s
}

#[test]
fn elicitation_on_a_terminal_is_asked_field_by_field() {
    let p = everything();
    let mut s = elicitation(&p);
    s.send("\r").unwrap(); // fill in the form
    expect(&mut s, "Your full, legal name");
    s.send_line("Ada Lovelace").unwrap();
    expect(&mut s, "Agree to the terms and conditions");
    s.send("y").unwrap();
    // A default is offered; Enter takes it.
    expect(&mut s, "It was a dark and stormy night.");
    s.send_line("").unwrap();
    // A value the schema refuses is asked again, with the reason.
    expect(&mut s, "Your email address");
    s.send_line("not-an-email").unwrap();
    expect(&mut s, "must be an email address");
    s.send_line("ada@example.com").unwrap();
    expect(&mut s, "Portfolio / personal website");
    s.send_line("https://ada.example.com").unwrap();
    expect(&mut s, "Your date of birth");
    s.send_line("1815-12-10").unwrap();
    expect(&mut s, "[an integer from 1 to 100]");
    s.send_line("500").unwrap();
    expect(&mut s, "must be at most 100");
    s.send_line("7").unwrap();
    expect(&mut s, "Favorite number");
    s.send_line("").unwrap(); // its default, 3.14
    // Enums are choices: the second friend.
    expect(&mut s, "Choose your favorite friend");
    s.send(DOWN).unwrap();
    s.send("\r").unwrap();
    expect(&mut s, "Choose your favorite instruments");
    s.send("\r").unwrap(); // the default: Guitar
    expect(&mut s, "Choose your favorite hero");
    s.send("\r").unwrap();
    expect(&mut s, "Choose your favorite types of fish");
    s.send("\r").unwrap();
    expect(&mut s, "Choose your favorite type of pet");
    s.send("\r").unwrap();
    // The server echoes what it got.
    expect(&mut s, "User provided the requested information!");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    for line in [
        "- Name: Ada Lovelace",
        "- Agreed to terms: true",
        "- Email: ada@example.com",
        "- Homepage: https://ada.example.com",
        "- Birthdate: 1815-12-10",
        "- Favorite Integer: 7",
        "- Favorite Number: 3.14",
        r#""untitledSingleSelectEnum": "Rachel""#,
        r#""firstLine": "It was a dark and stormy night.""#,
        r#""legacyTitledEnum": "pet-1""#,
    ] {
        assert!(out.contains(line), "`{line}` missing from: {out}");
    }
}

#[test]
fn elicitation_on_a_terminal_can_be_declined_or_cancelled() {
    let p = everything();
    let mut s = elicitation(&p);
    s.send(DOWN).unwrap();
    s.send("\r").unwrap(); // decline
    expect(
        &mut s,
        "User declined to provide the requested information.",
    );
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(r#""action": "decline""#), "{out}");

    let mut s = elicitation(&p);
    s.send("\x1b").unwrap(); // Esc: cancel
    expect(&mut s, "User cancelled the elicitation dialog.");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(r#""action": "cancel""#), "{out}");
}

#[test]
fn ctrl_c_at_an_elicitation_prompt_stops_everything() {
    let p = everything();
    let mut s = elicitation(&p);
    // The server core-agent started (its child, in a group of its own).
    let me = s.get_process().pid().as_raw();
    let groups: Vec<i32> = live_processes()
        .into_iter()
        .filter(|c| c.ppid == me)
        .map(|c| c.pgrp)
        .collect();
    assert_eq!(groups.len(), 1, "one server process");
    s.send(expectrl::ControlCode::EndOfText).unwrap();
    let (out, code) = finish(s);
    assert_eq!(code, 130, "{out}");
    assert!(
        out.contains("core-agent: interrupted: stopping the servers"),
        "{out}"
    );
    assert_eq!(group_members(groups[0]), Vec::<i32>::new());
}

#[test]
fn a_url_elicitation_shows_the_url_and_waits_for_the_go_ahead() {
    let p = everything();
    let arguments = json!({"url": "https://example.com/consent", "elicitationId": "e2e-1"});
    let mut s = pty(
        &p,
        &[
            "call",
            "--yes",
            "everything_trigger_url_elicitation",
            &arguments.to_string(),
        ],
    );
    expect(&mut s, "core-agent: mcp: everything asks you to open a URL");
    expect(&mut s, "https://example.com/consent");
    expect(&mut s, "Answer?");
    s.send("\r").unwrap();
    expect(&mut s, "User completed the URL elicitation flow.");
    let (out, code) = finish(s);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Elicitation ID: e2e-1"), "{out}");
}

/// The gate's ask on a terminal: the question on the terminal, `y` runs
/// the call, `n` refuses it with the advice, `a` approves the tool for the
/// rest of the run (a batch asks once for two calls).
#[test]
fn the_gate_asks_on_a_terminal_and_the_answer_decides() {
    let p = Project::new(&json!({"version": 1, "servers": {"demo": crate::demo_server()}}));
    let note = ["call", "demo_add_note", r#"{"text": "hi"}"#];
    let mut s = pty(&p, &note);
    expect(&mut s, "core-agent: allow ");
    expect(&mut s, "[y]es / [n]o / [a]lways this session: ");
    s.send_line("y").unwrap();
    let (rest, code) = finish(s);
    assert_eq!(code, 0, "{rest}");
    assert!(rest.contains("saved note #1: hi"), "{rest}");

    let mut s = pty(&p, &note);
    expect(&mut s, "[y]es / [n]o / [a]lways this session: ");
    s.send_line("n").unwrap();
    let (rest, code) = finish(s);
    assert_eq!(code, 1, "{rest}");
    assert!(
        rest.contains("permission denied: `demo_add_note` needs approval"),
        "{rest}"
    );
    assert!(!rest.contains("saved note"), "{rest}");

    // `always`: one question for both calls of the batch.
    let batch = p.path().join("batch.jsonl");
    std::fs::write(
        &batch,
        "{\"name\": \"demo_add_note\", \"arguments\": {\"text\": \"one\"}}\n\
         {\"name\": \"demo_add_note\", \"arguments\": {\"text\": \"two\"}}\n",
    )
    .unwrap();
    let mut s = pty(&p, &["call", "--batch", batch.to_str().unwrap()]);
    expect(&mut s, "[y]es / [n]o / [a]lways this session: ");
    s.send_line("a").unwrap();
    let (rest, code) = finish(s);
    assert_eq!(code, 0, "{rest}");
    assert!(!rest.contains("[y]es / [n]o"), "asked twice: {rest}");
    assert!(
        rest.contains("saved note #1: one") && rest.contains("saved note #2: two"),
        "{rest}"
    );
}
