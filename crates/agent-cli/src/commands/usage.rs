//! `core-agent usage`: a session's digest telemetry, from `--session-db` or a fleet's shared store (`--store`).

use core_agent_host::UsageReport;

use super::open_store;
use crate::cli::Global;
use crate::render::{count, print_json};
use crate::setup::Setup;
use crate::{FAILED, USAGE};

pub(crate) async fn run(global: &Global, json: bool, store: Option<String>) -> u8 {
    // Bad --start-timeout or --call-timeout values are refused here too.
    if Setup::new(global).is_none() {
        return USAGE;
    }
    let store = match open_store(global.session_db.as_deref(), store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let session = match global.session.as_deref() {
        Some(s) => s.to_owned(),
        None => match store.sessions().map(|s| s.last().cloned()) {
            Ok(Some(last)) => last,
            Ok(None) => {
                errln!("core-agent: the database has no digest telemetry yet");
                return FAILED;
            }
            Err(e) => {
                errln!("core-agent: {e}");
                return FAILED;
            }
        },
    };
    let usage = match store.usage(&session) {
        Ok(u) => u,
        Err(e) => {
            errln!("core-agent: {e}");
            return FAILED;
        }
    };
    if json {
        print_json(&UsageReport::new(session, usage));
        return 0;
    }
    outln!("session {session}");
    // The JSON lists every method (the spec's shape); the text only those used.
    for (method, calls) in usage.digest_methods.counts.iter().filter(|(_, n)| **n > 0) {
        let saved = usage
            .digest_methods
            .bytes_saved
            .get(method)
            .copied()
            .unwrap_or(0);
        let calls = count(usize::try_from(*calls).unwrap_or(usize::MAX), "call");
        outln!("  {method:<16} {calls}, {saved} bytes saved");
    }
    let s = &usage.digest_savings;
    outln!(
        "  structural {} / agentic {} calls; ~{} parent tokens saved; subagent {} in / {} out tokens, ${:.6}",
        s.structural_calls,
        s.agentic_calls,
        s.parent_tokens_saved,
        s.subagent_input_tokens,
        s.subagent_output_tokens,
        s.subagent_cost_usd
    );
    let llm_events = [
        (s.subagent_cached_input_tokens, "input tokens cached"),
        (s.ceiling_skips, "skipped at the cost ceiling"),
        (s.subagent_failures, "LLM call(s) failed"),
        (
            s.subagent_not_smaller,
            "summary(ies) dropped as not smaller",
        ),
        (
            s.subagent_worst_case_calls,
            "LLM call(s) billed at their worst case",
        ),
    ];
    let said: Vec<String> = llm_events
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !said.is_empty() {
        outln!("  {}", said.join("; "));
    }
    0
}
