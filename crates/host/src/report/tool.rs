//! Each tool a caller sees, as `Host::tool_reports` gives it.

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_policy::{CatalogEntry, Restricted};
use serde::Serialize;
use serde_json::Value;

use crate::host::Host;
use crate::tools::{self};

/// One tool, as `core-agent tools --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolReport {
    /// The name the model calls.
    pub name: String,
    /// The server's key in `mcp.json` (`null` for a built-in).
    pub server: Option<String>,
    /// The server's own name for the tool.
    pub tool: String,
    /// The description the model reads, notes included.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub input_schema: Value,
    /// The dispatch class: read-only calls run concurrently.
    pub read_only: bool,
    /// The trust levels that may see and call it (their words in JSON:
    /// `["creator", "agent"]`).
    #[serde(serialize_with = "super::words")]
    pub trust_levels: Vec<TrustLevel>,
    /// Why it is not open to every trust level (`mutating, not marked
    /// non-destructive`, `open-world`, …), or `null` when it is.
    pub why_restricted: Option<String>,
}

impl From<&CatalogEntry> for ToolReport {
    fn from(e: &CatalogEntry) -> Self {
        ToolReport {
            name: e.name.clone(),
            server: Some(e.server.clone()),
            tool: e.tool.clone(),
            description: e.description.clone(),
            input_schema: e.input_schema.clone(),
            read_only: e.read_only,
            trust_levels: e.trust_levels.clone(),
            why_restricted: (!e.restricted.is_empty()).then(|| Restricted::join(&e.restricted)),
        }
    }
}

impl Host {
    /// What a caller of `level` sees: the built-ins, then the catalog.
    pub fn tool_reports(&self, level: TrustLevel) -> Vec<ToolReport> {
        let digest_on = self.options.digest.is_some();
        let survey = self.survey_access();
        let mut reports: Vec<ToolReport> = tools::HOST_TOOLS
            .iter()
            .filter(|t| t.available(digest_on, survey.is_some()))
            .filter_map(|t| {
                let mut report = tools::report(t);
                if t.survey().is_some() {
                    let levels = survey.and_then(|a| a.levels(t.name))?;
                    if !levels.contains(&level) {
                        return None;
                    }
                    report.trust_levels = levels.clone();
                    if levels.len() < TrustLevel::ALL.len() {
                        let by_policy =
                            survey.is_some_and(|a| a.tool_policies.contains_key(t.name));
                        let why = if by_policy {
                            Restricted::ToolPolicy
                        } else {
                            Restricted::ServerPolicy
                        };
                        report.why_restricted = Some(why.to_string());
                    }
                }
                Some(report)
            })
            .collect();
        reports.extend(self.catalog().visible(level).map(ToolReport::from));
        reports
    }
}
