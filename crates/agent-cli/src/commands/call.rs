//! `core-agent call`: one call, or a turn of calls with `--batch`.

use std::io::Read;
use std::sync::Arc;

use anyhow::Context;
use core_agent_host::{BatchLine, CallRequest, OutcomeLine, Session};
use core_agent_mcp_transport::ProgressSink;
use core_agent_mcp_transport::model::JsonObject;
use core_agent_permissions::{ApproveAll, RefuseAll};

use crate::cli::{CallCommand, Global, ModeArg};
use crate::render::{clean, print_json, print_result, render_error};
use crate::setup::{
    Launch, Setup, Waits, can_prompt, restart_policy, session_options, with_session,
};
use crate::term::{self, CallLine, Screen};
use crate::{FAILED, USAGE};

pub(crate) async fn run(global: &Global, call: CallCommand) -> u8 {
    // Arguments are checked before any server starts.
    let calls = match &call {
        CallCommand {
            name: Some(name),
            args,
            ..
        } => match parse_call_args(args.as_deref()) {
            Ok(arguments) => vec![CallRequest {
                name: name.clone(),
                arguments,
            }],
            Err(e) => {
                errln!("core-agent: {e:#}");
                return USAGE;
            }
        },
        CallCommand {
            batch: Some(file), ..
        } => match parse_batch(file) {
            Ok(calls) => calls,
            Err(e) => {
                errln!("core-agent: {e:#}");
                return USAGE;
            }
        },
        _ => Vec::new(),
    };
    let Some(setup) = Setup::new(global) else {
        return USAGE;
    };
    // Live lines on stderr only for a person watching both streams, and
    // never around JSON output.
    let screen = Screen::new(Screen::wanted(call.json));
    let mut session = session_options(global);
    session.mode = call.mode.map(ModeArg::mode);
    if global.session_db.is_none() {
        session.digest_note = Some(memory_only_note());
    }
    session.prompter = if call.yes {
        Arc::new(ApproveAll)
    } else if can_prompt() {
        Arc::new(term::TtyPrompter {
            screen: screen.clone(),
        })
    } else {
        Arc::new(RefuseAll)
    };
    let mut launch = match Launch::new(global, &setup, &screen) {
        Ok(launch) => launch,
        Err(code) => return code,
    };
    let batch = call.batch.is_some();
    // Long-lived runs bring a crashed server back; a one-shot call does not.
    if batch {
        launch.options.start.restart = Some(restart_policy());
    }
    let json = call.json;
    let session_db = global.session_db.clone();
    with_session(
        global,
        launch,
        &screen,
        session,
        Waits::ForItsServers,
        async |session| {
            if batch {
                run_batch(session, calls, &screen).await
            } else {
                run_one(session, calls, json, &screen, session_db.as_deref()).await
            }
        },
    )
    .await
}

/// `call --batch`: one turn, one JSON line per call in input order.
async fn run_batch(session: &Session, calls: Vec<CallRequest>, screen: &Arc<Screen>) -> u8 {
    let label = match calls.len() {
        1 => "batch of 1 call".to_owned(),
        n => format!("batch of {n} calls"),
    };
    let line = CallLine::start(screen, &label);
    let sinks: Vec<ProgressSink> = calls.iter().map(|c| line.sink(Some(&c.name))).collect();
    let outcomes = session.call_batch_with_progress(calls, &sinks).await;
    drop(line);
    let mut failed = false;
    for outcome in outcomes {
        let line = OutcomeLine::new(outcome, render_error);
        failed |= !line.ok;
        match serde_json::to_string(&line) {
            Ok(text) => outln!("{text}"),
            Err(e) => errln!("core-agent: cannot render JSON: {e}"),
        }
    }
    if failed { FAILED } else { 0 }
}

/// `call NAME [ARGS]`: the result as text (or `--json`).
async fn run_one(
    session: &Session,
    calls: Vec<CallRequest>,
    json: bool,
    screen: &Arc<Screen>,
    session_db: Option<&std::path::Path>,
) -> u8 {
    let Some(CallRequest { name, arguments }) = calls.into_iter().next() else {
        return USAGE;
    };
    let line = CallLine::start(screen, &name);
    let called = session
        .call_with_progress(&name, arguments, &line.sink(None))
        .await;
    drop(line);
    match called {
        Ok(result) => {
            if json {
                print_json(&result);
            } else {
                print_result(&result);
            }
            if let (Some(db), Some(call_id), Some(id)) =
                (session_db, digest_call_id(&result), session.id())
            {
                errln!(
                    "core-agent: digested; the raw payload is `{call_id}` of session `{id}`: \
                     `core-agent raw {call_id} --session-db {db}` prints it, and the model's \
                     retrieve_raw reaches it in a run with `--session {id} --session-db {db}`",
                    db = db.display()
                );
            }
            if result.is_error == Some(true) {
                errln!("core-agent: `{name}` reported an error");
                FAILED
            } else {
                0
            }
        }
        Err(
            e @ (core_agent_host::Error::UnknownTool { .. }
            | core_agent_host::Error::Withheld { .. }),
        ) => {
            errln!("core-agent: {}", render_error(&e));
            USAGE
        }
        Err(e) => {
            errln!("core-agent: {}", clean(&render_error(&e)));
            FAILED
        }
    }
}

/// The `call_id` of a digested result's envelope (its first text block, a
/// JSON object with `call_id`), if it is one.
fn digest_call_id(result: &core_agent_mcp_transport::model::CallToolResult) -> Option<String> {
    let text = result.content.first()?.as_text()?;
    let envelope: serde_json::Value = serde_json::from_str(&text.text).ok()?;
    envelope.get("digest")?;
    envelope.get("call_id")?.as_str().map(str::to_owned)
}

/// What a digest of a run without `--session-db` says of its raw payload:
/// it is kept in memory, so it dies with the process (a batch is read whole
/// before it runs, so none of its calls can name a `call_id` it returns);
/// how to keep it.
pub(crate) fn memory_only_note() -> String {
    "the raw payload is kept in memory only and is gone when this run ends; to keep raw payloads, run with --session-db PATH, then `core-agent raw <call_id> --session-db PATH` prints it whole".to_owned()
}

pub(crate) fn parse_call_args(raw: Option<&str>) -> anyhow::Result<JsonObject> {
    let text = match raw {
        None => return Ok(JsonObject::new()),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the arguments from stdin")?;
            s
        }
        Some(s) => s.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(&text).context(
        "the arguments are not valid JSON; pass an object such as '{\"path\": \"/tmp\"}'",
    )?;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        other => anyhow::bail!(
            "the arguments must be a JSON object, not {other}; pass an object such as '{{\"path\": \"/tmp\"}}'"
        ),
    }
}

/// Reads a batch: one JSON object `{"name": …, "arguments": {…}}` per line.
pub(crate) fn parse_batch(file: &str) -> anyhow::Result<Vec<CallRequest>> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the batch from stdin")?;
        s
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the batch file {file}"))?
    };
    let mut calls = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let call =
            BatchLine::parse(line).map_err(|e| anyhow::anyhow!("batch line {}: {e}", i + 1))?;
        calls.push(call);
    }
    Ok(calls)
}
