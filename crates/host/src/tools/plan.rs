//! `record_plan`: records the session's plan and lifts plan-first.

use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};

use crate::session::Session;
use crate::tools::{self, Handler, HostTool, RECORD_PLAN};
use crate::{Error, Result};

/// `record_plan`'s declaration: not gated (it changes nothing outside the
/// session), and taking effect for the calls after it in the same turn.
pub(crate) const TOOL: HostTool = HostTool {
    name: RECORD_PLAN,
    description: || "Record your plan for this session before changing anything. With plan-first on (permissions.require_plan_artifact), tools that change state are refused until a plan is recorded.",
    schema: || json!({"type": "object", "properties": {"plan": {"type": "string", "description": "The steps you will take."}}, "required": ["plan"]}),
    read_only: false,
    gated: false,
    needs_digest: false,
    handler: Handler::RecordPlan,
};

impl Session {
    pub(crate) fn record_plan(&self, arguments: &JsonObject) -> Result<CallToolResult> {
        let Some(plan) = arguments
            .get("plan")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
        else {
            return Err(Error::BadArguments {
                name: tools::RECORD_PLAN.to_owned(),
                message: "pass {\"plan\": \"<the steps you will take>\"}".to_owned(),
            });
        };
        if let Ok(mut gate) = self.gate.write() {
            gate.record_plan();
        }
        if let Ok(mut slot) = self.plan.lock() {
            *slot = Some(plan.to_owned());
        }
        if let Some(memory) = &self.memory
            && let Err(e) = memory.remember(&self.key, crate::Fact::Plan(plan))
        {
            tracing::warn!(
                "cannot keep session {}'s plan ({e}); another process continuing it will ask for one again",
                self.key
            );
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "plan recorded; mutating tools may run from now on in this session",
        )]))
    }
}
