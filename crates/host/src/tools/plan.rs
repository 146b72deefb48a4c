//! `record_plan`: records the session's plan and lifts plan-first.

use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::session::Session;
use crate::tools::{self};
use crate::{Error, Result};

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
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "plan recorded; mutating tools may run from now on in this session",
        )]))
    }
}
