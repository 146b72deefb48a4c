use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::namespaced;

/// A tool as a server described it, reduced to what the catalog needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredTool {
    /// The server's own name for the tool.
    pub name: String,
    /// The server's description (empty when it gave none).
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: Value,
}

impl DiscoveredTool {
    /// A tool with a name, a description and an input schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        DiscoveredTool {
            name: name.into(),
            description: description.into(),
            input_schema,
        }
    }
}

/// One tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// The namespaced name (`<server>_<tool>`, sanitized).
    pub name: String,
    /// The server's key in `mcp.json`.
    pub server: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The description the model reads.
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: Value,
}

/// Something the operator should hear about while building the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// Two (server, tool) pairs sanitize to the same namespaced name; the
    /// first one (in server order) keeps it and the other is not published.
    NameCollision {
        /// The contested name.
        name: String,
        /// The (server, tool) pair that kept the name.
        kept: (String, String),
        /// The (server, tool) pair that was dropped.
        dropped: (String, String),
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::NameCollision {
                name,
                kept,
                dropped,
            } => write!(
                f,
                "{}: tool `{}` is not published: its name `{name}` is already taken by tool `{}` of server `{}`; rename one of the servers",
                dropped.0, dropped.1, kept.1, kept.0
            ),
        }
    }
}

/// The namespaced tools of every server, sorted by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    warnings: Vec<Warning>,
}

impl Catalog {
    /// Builds the catalog from each server's discovered tools, given in the
    /// order servers should win name collisions.
    pub fn build<'a>(
        servers: impl IntoIterator<Item = (&'a str, &'a [DiscoveredTool])>,
    ) -> Catalog {
        let mut by_name: BTreeMap<String, CatalogEntry> = BTreeMap::new();
        let mut warnings = Vec::new();
        for (server, tools) in servers {
            for tool in tools {
                let name = namespaced(server, &tool.name);
                if let Some(kept) = by_name.get(&name) {
                    warnings.push(Warning::NameCollision {
                        name,
                        kept: (kept.server.clone(), kept.tool.clone()),
                        dropped: (server.to_owned(), tool.name.clone()),
                    });
                    continue;
                }
                by_name.insert(
                    name.clone(),
                    CatalogEntry {
                        name,
                        server: server.to_owned(),
                        tool: tool.name.clone(),
                        description: tool.description.clone(),
                        input_schema: tool.input_schema.clone(),
                    },
                );
            }
        }
        Catalog {
            entries: by_name.into_values().collect(),
            warnings,
        }
    }

    /// Every entry, sorted by namespaced name.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
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
    use serde_json::json;

    use super::*;

    fn tools(names: &[&str]) -> Vec<DiscoveredTool> {
        names
            .iter()
            .map(|n| DiscoveredTool::new(*n, "", json!({})))
            .collect()
    }

    #[test]
    fn entries_are_sorted_and_map_back() {
        let a = tools(&["b-tool", "a"]);
        let b = tools(&["x"]);
        let catalog = Catalog::build([("srv", a.as_slice()), ("other", b.as_slice())]);
        let names: Vec<_> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["other_x", "srv_a", "srv_b_tool"]);
        assert_eq!(
            catalog.get("srv_b_tool").map(|e| e.tool.as_str()),
            Some("b-tool")
        );
        assert!(catalog.get("srv_b-tool").is_none());
        assert!(catalog.warnings().is_empty());
    }

    #[test]
    fn collisions_keep_the_first_and_warn() {
        let a = tools(&["t"]);
        let b = tools(&["t"]);
        let catalog = Catalog::build([("my-server", a.as_slice()), ("my_server", b.as_slice())]);
        assert_eq!(catalog.entries().len(), 1);
        assert_eq!(catalog.entries()[0].server, "my-server");
        assert_eq!(
            catalog.warnings()[0].to_string(),
            "my_server: tool `t` is not published: its name `my_server_t` is already taken by tool `t` of server `my-server`; rename one of the servers"
        );
    }
}
