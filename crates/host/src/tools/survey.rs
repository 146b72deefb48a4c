//! The survey tools (`list_dir`, `glob`, `grep`, `read_many_files`), run
//! on a blocking thread under a timeout.

use std::sync::Arc;
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
        let Some(survey) = self.host.survey.clone() else {
            return Err(Error::UnknownTool {
                name: tool.name().to_owned(),
                suggestions: Vec::new(),
            });
        };
        let timeout = self.host.options.call_timeout.unwrap_or(SURVEY_TIMEOUT);
        let cancel = core_agent_survey::Cancel::new();
        // Set when this future ends, however it ends: the walk stops soon after.
        let _stop = CancelOnDrop(cancel.clone());
        let task = tokio::task::spawn_blocking(move || {
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

/// The survey over the configured root, or why it cannot be used.
pub(crate) fn open_survey(
    options: Option<&SurveyOptions>,
) -> (Option<Arc<core_agent_survey::Survey>>, Option<String>) {
    let Some(options) = options else {
        return (None, None);
    };
    match core_agent_survey::Root::new(&options.root) {
        Ok(root) => (
            Some(Arc::new(core_agent_survey::Survey::with_limits(
                root,
                options.limits.clone(),
            ))),
            None,
        ),
        Err(e) => (None, Some(format!("the survey tools are off: {e}"))),
    }
}
