//! The survey tools (`list_dir`, `glob`, `grep`, `read_many_files`), run
//! on a blocking thread under a timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use core_agent_mcp_config::{Limits, TrustLevel};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::host::SurveyOptions;
use crate::pipeline::{ToolRoute, shape};
use crate::session::Session;
use crate::tools::{self, GLOB, GREP, Handler, HostTool, LIST_DIR, READ_MANY_FILES};
use crate::{Error, Result};

/// A survey tool's declaration: read-only (plan-first never holds it
/// back), gated under the `builtin` namespace, digested like a server's
/// results, described by `core-agent-survey`.
macro_rules! survey_tool {
    ($name:expr, $tool:ident) => {
        HostTool {
            name: $name,
            description: || core_agent_survey::Tool::$tool.description(),
            schema: || core_agent_survey::input_schema(core_agent_survey::Tool::$tool),
            read_only: true,
            gated: true,
            needs_digest: false,
            handler: Handler::Survey(core_agent_survey::Tool::$tool),
        }
    };
}

/// `list_dir`: lists a directory of the project.
pub(crate) const LIST_DIR_TOOL: HostTool = survey_tool!(LIST_DIR, ListDir);
/// `glob`: finds the project's files matching a glob.
pub(crate) const GLOB_TOOL: HostTool = survey_tool!(GLOB, Glob);
/// `grep`: searches the project's files for a regular expression.
pub(crate) const GREP_TOOL: HostTool = survey_tool!(GREP, Grep);
/// `read_many_files`: reads several of the project's files.
pub(crate) const READ_MANY_FILES_TOOL: HostTool = survey_tool!(READ_MANY_FILES, ReadManyFiles);

/// How long a survey call may take when the host sets no `call_timeout`.
pub(crate) const SURVEY_TIMEOUT: Duration = Duration::from_secs(30);

impl Session {
    /// Runs a survey tool on a blocking thread, under the host's call
    /// timeout (30 s when none is set), cancelled when the call's future is
    /// dropped or the time is up. Its output, as JSON text, is shaped like a
    /// server's result (digest, then the cap); what the survey refuses (a
    /// path outside the root, a bad pattern, bad arguments) is a tool error.
    pub(crate) async fn survey(
        &self,
        tool: core_agent_survey::Tool,
        arguments: JsonObject,
    ) -> Result<CallToolResult> {
        let Some(surveys) = self.host.survey.clone() else {
            return Err(Error::UnknownTool {
                name: tool.name().to_owned(),
                suggestions: Vec::new(),
            });
        };
        // Below the creator, secrets and core-agent's own files are hidden.
        let survey = if self.level == TrustLevel::Creator {
            surveys.full.clone()
        } else {
            surveys.hidden.clone()
        };
        let timeout = self.host.options.call_timeout.unwrap_or(SURVEY_TIMEOUT);
        let caller = self.owner.clone().unwrap_or_else(|| self.key.clone());
        // Held by the blocking task, so a call that timed out still counts
        // until its work has stopped.
        let Some(slot) = surveys.slot(&caller) else {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "`{}` is busy: {} survey calls run at once ({} per caller); retry when one of yours has ended",
                tool.name(),
                surveys.max_calls,
                surveys.max_per_caller
            ))]));
        };
        let cancel = core_agent_survey::Cancel::new();
        // Set when this future ends, however it ends: the walk stops soon after.
        let _stop = CancelOnDrop(cancel.clone());
        let task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            survey
                .call(tool, Value::Object(arguments), &cancel)
                .map(|out| serde_json::to_string(&out))
        });
        let result = match tokio::time::timeout(timeout, task).await {
            Err(_) => {
                return Err(Error::TimedOut {
                    name: tool.name().to_owned(),
                    after: timeout,
                });
            }
            Ok(Err(joined)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "`{}` failed: {joined}",
                tool.name()
            ))]),
            Ok(Ok(Ok(Ok(json)))) => CallToolResult::success(vec![ContentBlock::text(json)]),
            Ok(Ok(Ok(Err(e)))) => CallToolResult::error(vec![ContentBlock::text(format!(
                "`{}`: cannot serialize the output: {e}",
                tool.name()
            ))]),
            Ok(Ok(Err(e))) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        let route = ToolRoute {
            server: usize::MAX,
            server_name: tools::HOST_SERVER.to_owned(),
            tool: tool.name().to_owned(),
            read_only: true,
            trust_levels: TrustLevel::ALL.to_vec(),
            timeout,
            max_result_bytes: Limits::default().max_result_bytes,
            digest: true,
        };
        Ok(shape(result, self.digest.as_ref(), &route).await)
    }
}

/// Cancels a survey operation when dropped.
pub(crate) struct CancelOnDrop(core_agent_survey::Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The survey tools over their root: as the creator sees it, as everyone
/// else does (hidden paths left out), and the calls running.
#[derive(Debug)]
pub(crate) struct Surveys {
    /// For the creator: nothing hidden.
    pub(crate) full: Arc<core_agent_survey::Survey>,
    /// For every other level.
    pub(crate) hidden: Arc<core_agent_survey::Survey>,
    max_calls: usize,
    max_per_caller: usize,
    /// Calls running, per caller; their sum is at most `max_calls`.
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl Surveys {
    /// A slot for one call of `caller`, or `None` when all the slots (or
    /// the caller's) are taken.
    fn slot(&self, caller: &str) -> Option<Slot> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let total: usize = running.values().sum();
        let mine = running.get(caller).copied().unwrap_or(0);
        if total >= self.max_calls || mine >= self.max_per_caller {
            return None;
        }
        running.insert(caller.to_owned(), mine + 1);
        Some(Slot {
            running: self.running.clone(),
            caller: caller.to_owned(),
        })
    }
}

/// A running survey call's place; given back when dropped.
struct Slot {
    running: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = running.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.caller);
            }
        }
    }
}

/// The survey over the configured root, or why it cannot be used.
pub(crate) fn open_survey(
    options: Option<&SurveyOptions>,
) -> (Option<Arc<Surveys>>, Option<String>) {
    let Some(options) = options else {
        return (None, None);
    };
    let mut hidden = core_agent_survey::Hidden::new();
    for pattern in &options.hidden {
        hidden = match hidden.with_pattern(pattern) {
            Ok(hidden) => hidden,
            Err(e) => return (None, Some(format!("the survey tools are off: {e}"))),
        };
    }
    for file in &options.hidden_files {
        hidden = hidden.with_file(file);
    }
    match core_agent_survey::Root::new(&options.root) {
        Ok(root) => {
            let survey = |root| {
                Arc::new(core_agent_survey::Survey::with_limits(
                    root,
                    options.limits.clone(),
                ))
            };
            let surveys = Surveys {
                full: survey(root.clone()),
                hidden: survey(root.with_hidden(hidden)),
                max_calls: options.max_calls.max(1),
                max_per_caller: options.max_calls_per_caller.max(1),
                running: Arc::default(),
            };
            (Some(Arc::new(surveys)), None)
        }
        Err(e) => (None, Some(format!("the survey tools are off: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survey_calls_are_capped_per_caller_and_in_all() {
        let dir = tempfile::tempdir().unwrap();
        let options = SurveyOptions::new(dir.path()).with_max_calls(2, 1);
        let (surveys, warning) = open_survey(Some(&options));
        assert_eq!(warning, None);
        let surveys = surveys.unwrap();
        let a = surveys.slot("a").unwrap();
        assert!(surveys.slot("a").is_none(), "one per caller");
        let b = surveys.slot("b").unwrap();
        assert!(surveys.slot("c").is_none(), "two in all");
        drop(a);
        let _c = surveys.slot("c").unwrap();
        assert!(surveys.slot("a").is_none(), "two in all again");
        drop(b);
        let _a = surveys.slot("a").unwrap();
        assert!(surveys.hidden.root().hidden().is_some());
        assert!(surveys.full.root().hidden().is_none());
    }
}
