//! The host tools beside the MCP tools: `record_plan`, `wait_and_verify`,
//! `retrieve_raw` and the survey tools (`list_dir`, `glob`, `grep`,
//! `read_many_files`, from `core-agent-survey`), each declared
//! ([`HOST_TOOLS`]) so that calls to them go through the same pipeline as
//! calls to a server's tools.

pub(crate) mod plan;
pub(crate) mod retrieve_raw;
pub(crate) mod survey;
pub(crate) mod wait;

pub(crate) use survey::open_survey;
pub(crate) use wait::WaitArgs;

use serde_json::Value;

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

/// A host tool's declaration: what the model is told, what the call
/// pipeline needs (class, gating, whether it exists without the digest),
/// and the handler that runs it. Each tool declares itself in its own file
/// ([`plan::TOOL`], [`wait::TOOL`], [`retrieve_raw::TOOL`], the survey
/// tools in [`survey`]). Every host tool is open to every trust level;
/// what a call may reach through it is checked by the tool
/// (`wait_and_verify` admits the tool it polls, `retrieve_raw` the tool
/// that produced the payload).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostTool {
    /// The name the model calls.
    pub(crate) name: &'static str,
    /// What the model reads about it.
    pub(crate) description: fn() -> &'static str,
    /// The JSON Schema of its arguments.
    pub(crate) schema: fn() -> Value,
    /// The dispatch class.
    pub(crate) read_only: bool,
    /// Whether the permission gate decides it (under the `builtin`
    /// namespace). `record_plan` and `wait_and_verify` are not gated
    /// themselves: one changes nothing outside the session, the other's
    /// polled tool goes through the gate.
    pub(crate) gated: bool,
    /// Whether it exists only while the digest is on.
    pub(crate) needs_digest: bool,
    /// What runs a call of it.
    pub(crate) handler: Handler,
}

/// What runs a host tool's call: when the batch is planned
/// ([`Handler::RecordPlan`] takes effect then, [`Handler::WaitAndVerify`] is
/// decided then for the tool it polls) or when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handler {
    /// `record_plan` ([`plan`]).
    RecordPlan,
    /// `wait_and_verify` ([`wait`]).
    WaitAndVerify,
    /// `retrieve_raw` ([`retrieve_raw`]).
    RetrieveRaw,
    /// A survey operation ([`survey`]); the tool then exists only while
    /// the survey tools are on.
    Survey(core_agent_survey::Tool),
}

/// Two declarations are the same tool when they have the same name (names
/// are unique among the host tools).
impl PartialEq for HostTool {
    fn eq(&self, other: &HostTool) -> bool {
        self.name == other.name
    }
}

impl Eq for HostTool {}

/// The host tools, in the order listings show them.
pub(crate) const HOST_TOOLS: [HostTool; 7] = [
    plan::TOOL,
    wait::TOOL,
    retrieve_raw::TOOL,
    survey::LIST_DIR_TOOL,
    survey::GLOB_TOOL,
    survey::GREP_TOOL,
    survey::READ_MANY_FILES_TOOL,
];

/// The host tool called `name`, if there is one (with the digest
/// `digest_on` or off, the survey tools `survey_on` or off).
pub(crate) fn host_tool(name: &str, digest_on: bool, survey_on: bool) -> Option<&'static HostTool> {
    HOST_TOOLS
        .iter()
        .find(|t| t.name == name && t.available(digest_on, survey_on))
}

impl HostTool {
    /// The survey operation it runs, if it is a survey tool.
    pub(crate) fn survey(&self) -> Option<core_agent_survey::Tool> {
        match self.handler {
            Handler::Survey(tool) => Some(tool),
            _ => None,
        }
    }

    /// Whether it exists with the digest `digest_on` or off, the survey
    /// tools `survey_on` or off.
    pub(crate) fn available(&self, digest_on: bool, survey_on: bool) -> bool {
        (digest_on || !self.needs_digest) && (survey_on || self.survey().is_none())
    }
}

/// What a listing shows of a host tool (open to every level until the
/// survey tools' entry narrows them).
pub(crate) fn report(tool: &HostTool) -> ToolReport {
    ToolReport {
        name: tool.name.to_owned(),
        server: None,
        tool: tool.name.to_owned(),
        description: (tool.description)().to_owned(),
        input_schema: (tool.schema)(),
        read_only: tool.read_only,
        trust_levels: core_agent_mcp_config::TrustLevel::ALL.to_vec(),
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
            assert_eq!(declared.survey(), Some(tool));
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
