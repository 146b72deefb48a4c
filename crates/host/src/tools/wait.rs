//! `wait_and_verify`: polls a tool until a condition on its result holds.

use std::sync::Arc;
use std::time::Duration;

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};

use crate::cap::cap_result;
use crate::host::Published;
use crate::pipeline::{Route, ToolRoute, suggest};
use crate::session::Session;
use crate::tools::{self, Handler, HostTool, WAIT_AND_VERIFY};
use crate::{Error, Result};

/// `wait_and_verify`'s declaration: not gated itself (the tool it polls
/// goes through the gate), decided when the batch is planned.
pub(crate) const TOOL: HostTool = HostTool {
    name: WAIT_AND_VERIFY,
    description: || "Call a tool repeatedly until a condition on its result holds, then report the attempts. `until` is {\"pointer\": \"/status\", \"equals\": \"ok\"} (a JSON pointer into the result's structured content or its JSON text) or {\"contains\": \"text\"}. An attempt whose server crashed, is restarting or timed out counts as unmet and polling goes on; a server that is down ends the poll. The report lists each attempt's outcome. Only read-only tools, or those listed in tools.wait_and_verify.poll_allow, can be polled.",
    schema: || {
        json!({"type": "object", "properties": {
            "tool": {"type": "string", "description": "The namespaced tool to poll."},
            "arguments": {"type": "object", "description": "Its arguments."},
            "until": {"type": "object", "description": "{\"pointer\": \"/status\", \"equals\": \"ok\"} or {\"contains\": \"text\"}"},
            "max_attempts": {"type": "integer", "minimum": 1, "default": 10},
            "interval_ms": {"type": "integer", "minimum": 0, "default": 1000}
        }, "required": ["tool", "until"]})
    },
    read_only: false,
    gated: false,
    needs_digest: false,
    handler: Handler::WaitAndVerify,
};

impl Session {
    /// Decides a `wait_and_verify` call when the batch is planned: its
    /// arguments, whether the tool may be polled, and the tool's own trust
    /// and gate decision, asked about once for every attempt.
    pub(crate) async fn plan_wait(
        &self,
        published: &Published,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<(Arc<ToolRoute>, tools::WaitArgs)> {
        let args = tools::WaitArgs::parse(arguments)?;
        let catalog = &published.catalog;
        let Some(entry) = catalog.get(&args.tool) else {
            return Err(Error::UnknownTool {
                name: args.tool.clone(),
                suggestions: suggest(catalog, &args.tool, level),
            });
        };
        let (may_poll, config_file) = self
            .gate
            .read()
            .map(|g| (g.may_poll(&entry.name, entry.read_only), g.config_file()))
            .unwrap_or((false, String::new()));
        if !may_poll {
            return Err(Error::BadArguments {
                name: tools::WAIT_AND_VERIFY.to_owned(),
                message: format!(
                    "refuses to poll `{}`: it changes state, and polling repeats it; list it in tools.wait_and_verify.poll_allow in {config_file} to allow polling it",
                    entry.name
                ),
            });
        }
        match self
            .admit(published, &entry.name, &args.arguments, level)
            .await?
        {
            Route::Mcp(route) => Ok((route, args)),
            Route::Host(tool) => Err(Error::BadArguments {
                name: tools::WAIT_AND_VERIFY.to_owned(),
                message: format!("cannot poll `{}`, a host tool", tool.name),
            }),
        }
    }

    /// Polls an admitted tool until a condition on its result holds.
    ///
    /// An attempt whose server crashed, is being restarted or did not answer
    /// in time is an unmet attempt: the poll goes on. A server that is down
    /// (past its restart limit) ends the poll with its reason; other call
    /// errors end it as errors. The report lists every attempt's outcome.
    pub(crate) async fn wait_and_verify(
        &self,
        entry: &ToolRoute,
        args: tools::WaitArgs,
    ) -> Result<CallToolResult> {
        let mut last = Value::Null;
        let mut outcomes = Vec::new();
        for attempt in 1..=args.max_attempts {
            // The condition reads the whole result, not its digest.
            match self.dispatch_raw(entry, args.arguments.clone(), None).await {
                Ok(result) => {
                    last = serde_json::to_value(cap_result(result.clone(), 64 * 1024))
                        .unwrap_or(Value::Null);
                    if args.until.holds(&result) {
                        outcomes.push(json!({"attempt": attempt, "outcome": "met"}));
                        let report = json!({"satisfied": true, "attempts": attempt, "outcomes": outcomes, "result": last});
                        return Ok(CallToolResult::success(vec![ContentBlock::text(
                            report.to_string(),
                        )]));
                    }
                    outcomes.push(json!({"attempt": attempt, "outcome": "unmet"}));
                }
                Err(Error::Call(err)) if attempt_may_recover(&err) => {
                    outcomes.push(
                        json!({"attempt": attempt, "outcome": "failed", "error": err.to_string()}),
                    );
                }
                Err(Error::Call(err @ core_agent_mcp_transport::Error::Down { .. })) => {
                    let reason = err.to_string();
                    outcomes.push(
                        json!({"attempt": attempt, "outcome": "down", "error": reason.clone()}),
                    );
                    let report = json!({"satisfied": false, "attempts": attempt, "stopped": reason, "outcomes": outcomes, "result": last});
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        report.to_string(),
                    )]));
                }
                Err(other) => return Err(other),
            }
            if attempt < args.max_attempts {
                tokio::time::sleep(args.interval).await;
            }
        }
        let report = json!({"satisfied": false, "attempts": args.max_attempts, "outcomes": outcomes, "result": last});
        Ok(CallToolResult::error(vec![ContentBlock::text(
            report.to_string(),
        )]))
    }
}

/// Whether a polled call that failed this way may succeed on a later
/// attempt: its server crashed (and may be restarted), is being restarted,
/// or did not answer in time.
pub(crate) fn attempt_may_recover(err: &core_agent_mcp_transport::Error) -> bool {
    matches!(
        err,
        core_agent_mcp_transport::Error::Crashed { .. }
            | core_agent_mcp_transport::Error::Restarting { .. }
            | core_agent_mcp_transport::Error::Timeout { .. }
            | core_agent_mcp_transport::Error::Busy { .. }
    )
}

/// The condition `wait_and_verify` waits for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Until {
    /// The value at a JSON pointer equals a value.
    Equals { pointer: String, value: Value },
    /// Some text content contains a string.
    Contains(String),
}

impl Until {
    /// Whether `result` satisfies the condition. The pointer is looked up in
    /// the structured content, else in each text block parsed as JSON.
    pub(crate) fn holds(&self, result: &CallToolResult) -> bool {
        let texts = || {
            result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        };
        match self {
            Until::Contains(needle) => texts().any(|t| t.contains(needle.as_str())),
            Until::Equals { pointer, value } => {
                let structured = result
                    .structured_content
                    .as_ref()
                    .and_then(|s| s.pointer(pointer));
                structured == Some(value)
                    || texts().any(|t| {
                        serde_json::from_str::<Value>(t)
                            .ok()
                            .is_some_and(|v| v.pointer(pointer) == Some(value))
                    })
            }
        }
    }
}

/// Parsed arguments of `wait_and_verify`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WaitArgs {
    pub(crate) tool: String,
    pub(crate) arguments: JsonObject,
    pub(crate) until: Until,
    pub(crate) max_attempts: u32,
    pub(crate) interval: Duration,
}

impl WaitArgs {
    pub(crate) fn parse(args: &JsonObject) -> Result<WaitArgs> {
        let bad = |message: &str| Error::BadArguments {
            name: WAIT_AND_VERIFY.to_owned(),
            message: message.to_owned(),
        };
        let tool = args
            .get("tool")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`tool` (the tool to poll) is required"))?;
        let arguments = match args.get("arguments") {
            None => JsonObject::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(bad("`arguments` must be an object")),
        };
        let until = match args.get("until") {
            Some(Value::Object(u)) => {
                match (u.get("pointer"), u.get("equals"), u.get("contains")) {
                    (Some(Value::String(p)), Some(v), None) => Until::Equals {
                        pointer: p.clone(),
                        value: v.clone(),
                    },
                    (None, None, Some(Value::String(c))) => Until::Contains(c.clone()),
                    _ => {
                        return Err(bad(
                            "`until` must be {\"pointer\": \"/status\", \"equals\": …} or {\"contains\": \"text\"}",
                        ));
                    }
                }
            }
            _ => {
                return Err(bad(
                    "`until` is required: {\"pointer\": \"/status\", \"equals\": …} or {\"contains\": \"text\"}",
                ));
            }
        };
        let max_attempts = match args.get("max_attempts") {
            None => 10,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| bad("`max_attempts` must be a whole number ≥ 1"))?,
        };
        let interval_ms = match args.get("interval_ms") {
            None => 1000,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| bad("`interval_ms` must be a whole number of milliseconds"))?,
        };
        Ok(WaitArgs {
            tool: tool.to_owned(),
            arguments,
            until,
            max_attempts,
            interval: Duration::from_millis(interval_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_transport::model::ContentBlock;

    use super::*;

    pub(crate) fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn conditions_read_structured_content_or_json_text() {
        let text = CallToolResult::success(vec![ContentBlock::text(r#"{"status": "ok", "n": 3}"#)]);
        let cases = [
            (
                Until::Equals {
                    pointer: "/status".into(),
                    value: json!("ok"),
                },
                true,
            ),
            (
                Until::Equals {
                    pointer: "/n".into(),
                    value: json!(3),
                },
                true,
            ),
            (
                Until::Equals {
                    pointer: "/status".into(),
                    value: json!("done"),
                },
                false,
            ),
            (Until::Contains("\"ok\"".into()), true),
            (Until::Contains("missing".into()), false),
        ];
        for (until, want) in cases {
            assert_eq!(until.holds(&text), want, "{until:?}");
        }
        let mut structured = CallToolResult::success(vec![ContentBlock::text("not json")]);
        structured.structured_content = Some(json!({"status": "ok"}));
        assert!(
            Until::Equals {
                pointer: "/status".into(),
                value: json!("ok")
            }
            .holds(&structured)
        );
    }

    #[test]
    fn arguments_are_checked() {
        let ok = WaitArgs::parse(&obj(json!({"tool": "t", "until": {"contains": "x"}}))).unwrap();
        assert_eq!((ok.max_attempts, ok.interval), (10, Duration::from_secs(1)));
        let err = |v: Value| WaitArgs::parse(&obj(v)).unwrap_err().to_string();
        assert_eq!(
            err(json!({"until": {"contains": "x"}})),
            "`wait_and_verify`: `tool` (the tool to poll) is required"
        );
        assert!(err(json!({"tool": "t"})).contains("`until` is required"));
        assert!(err(json!({"tool": "t", "until": {"pointer": "/a"}})).contains("`until` must be"));
        assert!(
            err(json!({"tool": "t", "until": {"contains": "x"}, "max_attempts": 0}))
                .contains("max_attempts")
        );
    }
}
