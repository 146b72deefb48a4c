//! `core-agent call`: one call, or a turn of calls with `--batch`.

use std::io::Read;

use anyhow::Context;
use core_agent_host::{BatchLine, CallRequest};
use core_agent_mcp_transport::model::JsonObject;

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
