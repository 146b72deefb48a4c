//! The host tools beside the MCP tools: `record_plan`, `wait_and_verify`,
//! `retrieve_raw` and the survey tools (`list_dir`, `glob`, `grep`,
//! `read_many_files`, from `core-agent-survey`), each declared
//! ([`HOST_TOOLS`]) so that calls to them go through the same pipeline as
//! calls to a server's tools.

mod plan;
mod retrieve_raw;
mod survey;
mod wait;

pub(crate) use survey::open_survey;
pub(crate) use wait::WaitArgs;

use serde_json::json;

use crate::ToolReport;

/// Records the plan; lifts plan-first for the rest of the session.
pub(crate) const RECORD_PLAN: &str = "record_plan";
/// Polls a tool until a condition on its result holds.
pub(crate) const WAIT_AND_VERIFY: &str = "wait_and_verify";
/// Gives back a digested result's raw payload (registered when the digest is on).
pub(crate) const RETRIEVE_RAW: &str = "retrieve_raw";

/// Lists a directory of the project (a survey tool).
pub(crate) const LIST_DIR: &str = "list_dir";
/// Finds the project's files matching a glob (a survey tool).
pub(crate) const GLOB: &str = "glob";
/// Searches the project's files for a regular expression (a survey tool).
pub(crate) const GREP: &str = "grep";
/// Reads several of the project's files (a survey tool).
pub(crate) const READ_MANY_FILES: &str = "read_many_files";

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
pub(crate) struct HostTool {
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
pub(crate) const HOST_TOOLS: [HostTool; 7] = [
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
pub(crate) fn host_tool(name: &str, digest_on: bool, survey_on: bool) -> Option<&'static HostTool> {
    HOST_TOOLS
        .iter()
        .find(|t| t.name == name && t.available(digest_on, survey_on))
}

impl HostTool {
    /// Whether it exists with the digest `digest_on` or off, the survey
    /// tools `survey_on` or off.
    pub(crate) fn available(&self, digest_on: bool, survey_on: bool) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn host_tools_are_declared_and_retrieve_raw_needs_the_digest() {
        assert_eq!(
            host_tool("retrieve_raw", true, false).map(|t| (t.read_only, t.gated)),
            Some((true, true))
        );
        assert_eq!(host_tool("retrieve_raw", false, true), None);
        assert_eq!(
            host_tool("record_plan", false, false).map(|t| t.gated),
            Some(false)
        );
        assert_eq!(host_tool("demo_divide", true, true), None);
        assert_eq!(
            host_tool("grep", false, true).map(|t| (t.read_only, t.gated)),
            Some((true, true))
        );
        assert_eq!(host_tool("grep", true, false), None);
        let names: Vec<&str> = HOST_TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(names, BUILTINS, "every reserved name is a declared tool");
    }
}
