//! The host tools beside the MCP tools: `record_plan`, `wait_and_verify`,
//! `retrieve_raw` and the survey tools (`list_dir`, `glob`, `grep`,
//! `read_many_files`, from `core-agent-survey`), each declared
//! ([`HOST_TOOLS`]) so that calls to them go through the same pipeline as
//! calls to a server's tools.

use std::time::Duration;

use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use serde_json::{Value, json};

use crate::{Error, Result, ToolReport};

/// Records the plan; lifts plan-first for the rest of the session.
pub const RECORD_PLAN: &str = "record_plan";
/// Polls a tool until a condition on its result holds.
pub const WAIT_AND_VERIFY: &str = "wait_and_verify";
/// Gives back a digested result's raw payload (registered when the digest is on).
pub const RETRIEVE_RAW: &str = "retrieve_raw";

/// Lists a directory of the project (a survey tool).
pub const LIST_DIR: &str = "list_dir";
/// Finds the project's files matching a glob (a survey tool).
pub const GLOB: &str = "glob";
/// Searches the project's files for a regular expression (a survey tool).
pub const GREP: &str = "grep";
/// Reads several of the project's files (a survey tool).
pub const READ_MANY_FILES: &str = "read_many_files";

/// The server name the digest records for a host tool's results (what
/// `retrieve_raw` checks a payload's producer against).
pub(crate) const HOST_SERVER: &str = "builtin";

/// The names of the built-ins: reserved, so no server's tool can take one.
pub(crate) const BUILTINS: [&str; 7] = [
    RECORD_PLAN,
    WAIT_AND_VERIFY,
    RETRIEVE_RAW,
    LIST_DIR,
    GLOB,
    GREP,
    READ_MANY_FILES,
];

/// A host tool's declaration: what the model is told, and what the call
/// pipeline needs (class, gating, whether it exists without the digest).
/// Every host tool is open to every trust level; what a call may reach
/// through it is checked by the tool (`wait_and_verify` admits the tool it
/// polls, `retrieve_raw` the tool that produced the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTool {
    /// The name the model calls.
    pub name: &'static str,
    /// The dispatch class.
    pub read_only: bool,
    /// Whether the permission gate decides it (under the `builtin`
    /// namespace). `record_plan` and `wait_and_verify` are not gated
    /// themselves: one changes nothing outside the session, the other's
    /// polled tool goes through the gate.
    pub gated: bool,
    /// Whether it exists only while the digest is on.
    pub needs_digest: bool,
    /// The survey operation it runs (it then exists only while the survey
    /// tools are on).
    pub survey: Option<core_agent_survey::Tool>,
}

/// A survey tool's declaration: read-only (plan-first never holds it
/// back), gated under the `builtin` namespace, digested like a server's
/// results.
const fn survey_tool(tool: core_agent_survey::Tool, name: &'static str) -> HostTool {
    HostTool {
        name,
        read_only: true,
        gated: true,
        needs_digest: false,
        survey: Some(tool),
    }
}

/// The host tools, in the order listings show them.
pub const HOST_TOOLS: [HostTool; 7] = [
    HostTool {
        name: RECORD_PLAN,
        read_only: false,
        gated: false,
        needs_digest: false,
        survey: None,
    },
    HostTool {
        name: WAIT_AND_VERIFY,
        read_only: false,
        gated: false,
        needs_digest: false,
        survey: None,
    },
    HostTool {
        name: RETRIEVE_RAW,
        read_only: true,
        gated: true,
        needs_digest: true,
        survey: None,
    },
    survey_tool(core_agent_survey::Tool::ListDir, LIST_DIR),
    survey_tool(core_agent_survey::Tool::Glob, GLOB),
    survey_tool(core_agent_survey::Tool::Grep, GREP),
    survey_tool(core_agent_survey::Tool::ReadManyFiles, READ_MANY_FILES),
];

/// The host tool called `name`, if there is one (with the digest
/// `digest_on` or off, the survey tools `survey_on` or off).
pub fn host_tool(name: &str, digest_on: bool, survey_on: bool) -> Option<&'static HostTool> {
    HOST_TOOLS
        .iter()
        .find(|t| t.name == name && t.available(digest_on, survey_on))
}

impl HostTool {
    /// Whether it exists with the digest `digest_on` or off, the survey
    /// tools `survey_on` or off.
    pub fn available(&self, digest_on: bool, survey_on: bool) -> bool {
        (digest_on || !self.needs_digest) && (survey_on || self.survey.is_none())
    }
}

pub(crate) fn report(tool: &HostTool) -> ToolReport {
    if let Some(survey) = tool.survey {
        return ToolReport {
            name: tool.name.to_owned(),
            server: None,
            tool: tool.name.to_owned(),
            description: survey.description().to_owned(),
            input_schema: core_agent_survey::input_schema(survey),
            read_only: tool.read_only,
            trust_levels: vec!["creator", "agent", "user", "public"],
            why_restricted: None,
        };
    }
    let (description, schema) = match tool.name {
        RECORD_PLAN => (
            "Record your plan for this session before changing anything. With plan-first on (permissions.require_plan_artifact), tools that change state are refused until a plan is recorded.",
            json!({"type": "object", "properties": {"plan": {"type": "string", "description": "The steps you will take."}}, "required": ["plan"]}),
        ),
        RETRIEVE_RAW => (
            "Get back the raw payload of a digested result: pass the `call_id` from the digest; add a JSON `pointer` (such as /items/42) to get just that part. A payload larger than the result limit comes back in pages: the answer then ends with {\"offset\", \"returned_bytes\", \"total_bytes\", \"next_offset\"}; call again with `offset` set to `next_offset` for the next page.",
            json!({"type": "object", "properties": {
                "call_id": {"type": "string", "description": "The call_id of the digest."},
                "pointer": {"type": "string", "description": "Optional JSON pointer into the payload, such as /items/42."},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte offset of the page to return (default 0)."},
                "length": {"type": "integer", "minimum": 1, "description": "Most bytes to return (default: as many as the result limit allows)."}
            }, "required": ["call_id"]}),
        ),
        _ => (
            "Call a tool repeatedly until a condition on its result holds, then report the attempts. `until` is {\"pointer\": \"/status\", \"equals\": \"ok\"} (a JSON pointer into the result's structured content or its JSON text) or {\"contains\": \"text\"}. An attempt whose server crashed, is restarting or timed out counts as unmet and polling goes on; a server that is down ends the poll. The report lists each attempt's outcome. Only read-only tools, or those listed in tools.wait_and_verify.poll_allow, can be polled.",
            json!({"type": "object", "properties": {
                "tool": {"type": "string", "description": "The namespaced tool to poll."},
                "arguments": {"type": "object", "description": "Its arguments."},
                "until": {"type": "object", "description": "{\"pointer\": \"/status\", \"equals\": \"ok\"} or {\"contains\": \"text\"}"},
                "max_attempts": {"type": "integer", "minimum": 1, "default": 10},
                "interval_ms": {"type": "integer", "minimum": 0, "default": 1000}
            }, "required": ["tool", "until"]}),
        ),
    };
    ToolReport {
        name: tool.name.to_owned(),
        server: None,
        tool: tool.name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
        read_only: tool.read_only,
        trust_levels: vec!["creator", "agent", "user", "public"],
        why_restricted: None,
    }
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

    fn obj(v: Value) -> JsonObject {
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
    fn survey_tools_are_declared_under_the_survey_crate_names() {
        for tool in core_agent_survey::Tool::ALL {
            let declared = host_tool(tool.name(), false, true).unwrap();
            assert_eq!(declared.survey, Some(tool));
            assert!(declared.read_only && declared.gated && !declared.needs_digest);
            assert_eq!(host_tool(tool.name(), true, false), None);
            let report = report(declared);
            assert_eq!(report.description, tool.description());
            assert_eq!(report.input_schema, core_agent_survey::input_schema(tool));
        }
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
