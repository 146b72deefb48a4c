use std::collections::BTreeMap;
use std::fmt;

use core_agent_mcp_config::{ServerSpec, TrustLevel};
use serde_json::Value;

use crate::builder::CatalogBuilder;
use crate::summary::ServerSummary;
use crate::warning::Warning;

/// What a server says about a tool (the MCP `annotations` block).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    /// `readOnlyHint`.
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`.
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`.
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`.
    pub open_world_hint: Option<bool>,
}

/// A tool as a server described it, reduced to what the catalog needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredTool {
    /// The server's own name for the tool.
    pub name: String,
    /// The server's description (empty when it gave none).
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: Value,
    /// The annotation block, when the server sent one.
    pub annotations: Option<Annotations>,
}

impl DiscoveredTool {
    /// A tool with a name, a description and an input schema, and no annotations.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        DiscoveredTool {
            name: name.into(),
            description: description.into(),
            input_schema,
            annotations: None,
        }
    }

    /// The same tool with an annotation block.
    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = Some(annotations);
        self
    }
}

/// One server's discovered tools and its config, the input of [`CatalogBuilder::build`].
#[derive(Debug, Clone, Copy)]
pub struct ServerTools<'a> {
    /// The server's key in the config.
    pub name: &'a str,
    /// Its config: allowlist, blocklist, notes, read-only, trust, limits.
    pub spec: &'a ServerSpec,
    /// What it listed, in its order.
    pub tools: &'a [DiscoveredTool],
}

/// One tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// The name the model calls: `^[A-Za-z0-9_]{1,64}$`, unique in the catalog.
    pub name: String,
    /// The server's key in the config.
    pub server: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The server's description, with the operator's note appended after a blank line.
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: Value,
    /// The dispatch class: true for read-only, false for mutating.
    pub read_only: bool,
    /// The trust levels that may see and call it, most trusted first.
    pub trust_levels: Vec<TrustLevel>,
    /// Why it is not open to every trust level (empty when it is).
    pub restricted: Vec<Restricted>,
}

/// Why a tool is not open to every trust level: its Display is what
/// `tools`, `mcp list` and doctor print beside the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Restricted {
    /// Neither read-only (by its own `readOnlyHint`, or by its server's
    /// `read_only` when it published no annotations) nor marked
    /// `destructiveHint: false`: creator-only by default.
    Mutating,
    /// Marked `openWorldHint: true`: creator-only by default.
    OpenWorld,
    /// The server's `allowedTrustLevels` leaves out levels the default allows.
    ServerPolicy,
    /// A `toolPolicies.<tool>.allowedTrustLevels` entry set its levels.
    ToolPolicy,
}

impl Restricted {
    /// How a person reads the reason (`mutating, not marked non-destructive`, `open-world`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Restricted::Mutating => "mutating, not marked non-destructive",
            Restricted::OpenWorld => "open-world",
            Restricted::ServerPolicy => "the server's allowedTrustLevels",
            Restricted::ToolPolicy => "its toolPolicies entry",
        }
    }

    /// Several reasons as one phrase: `mutating, not marked non-destructive; open-world`.
    pub fn join(reasons: &[Restricted]) -> String {
        let words: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
        words.join("; ")
    }
}

impl fmt::Display for Restricted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CatalogEntry {
    /// Whether a caller of `level` may see and call the tool.
    pub fn allows(&self, level: TrustLevel) -> bool {
        self.trust_levels.contains(&level)
    }
}

/// The namespaced tools of every server, sorted by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    warnings: Vec<Warning>,
    summaries: BTreeMap<String, ServerSummary>,
    naming: crate::Naming,
}

impl Catalog {
    /// A [`CatalogBuilder`] that reserves no name and has no pin verdicts.
    pub fn builder() -> CatalogBuilder {
        CatalogBuilder::default()
    }

    /// The catalog of these entries, sorted by name so that [`Catalog::get`]
    /// can search them.
    pub(crate) fn new(
        mut entries: Vec<CatalogEntry>,
        warnings: Vec<Warning>,
        summaries: BTreeMap<String, ServerSummary>,
        naming: crate::Naming,
    ) -> Catalog {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Catalog {
            entries,
            warnings,
            summaries,
            naming,
        }
    }

    /// How its tools were named.
    pub fn naming(&self) -> crate::Naming {
        self.naming
    }

    /// The warning that left out of the catalog the tool that would be
    /// published as `name` under its naming (see [`Warning::withholds`]).
    pub fn withheld(&self, name: &str) -> impl Iterator<Item = &Warning> {
        self.warnings
            .iter()
            .filter(move |w| w.withholds_under(name, self.naming))
    }

    /// How many of `server`'s tools are published and why the others are
    /// not; `None` for a server that was not part of the build.
    pub fn summary(&self, server: &str) -> Option<&ServerSummary> {
        self.summaries.get(server)
    }

    /// Every entry, sorted by namespaced name.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// The entries a caller of `level` may see and call.
    pub fn visible(&self, level: TrustLevel) -> impl Iterator<Item = &CatalogEntry> {
        self.entries.iter().filter(move |e| e.allows(level))
    }

    /// How many of `server`'s tools a caller of `level` may not see.
    pub fn restricted(&self, server: &str, level: TrustLevel) -> usize {
        self.entries
            .iter()
            .filter(|e| e.server == server && !e.allows(level))
            .count()
    }

    /// The entry published as `name`.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// What the operator should be told about.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restriction_reasons_read_in_the_issues_words() {
        assert_eq!(
            Restricted::Mutating.to_string(),
            "mutating, not marked non-destructive"
        );
        assert_eq!(Restricted::OpenWorld.to_string(), "open-world");
        assert_eq!(
            Restricted::join(&[Restricted::Mutating, Restricted::OpenWorld]),
            "mutating, not marked non-destructive; open-world"
        );
    }
}
