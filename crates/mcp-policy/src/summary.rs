use std::collections::BTreeMap;
use std::fmt;

/// Why a server's tools were left out of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LeftOutBy {
    /// Not on the allowlist (`tools` / `allowedTools`).
    Allowlist,
    /// On the blocklist (`blockedTools`).
    Blocklist,
    /// Input schema over `max_input_schema_bytes`.
    SchemaSize,
    /// Past `max_tools`.
    MaxTools,
    /// Changed since `mcp.lock` pinned it, under `pin: "strict"`.
    Quarantine,
    /// Its name is not a valid MCP tool name (1–128 characters of
    /// `A-Z a-z 0-9 _ - .`).
    InvalidName,
}

impl LeftOutBy {
    /// How a person reads the reason: "the allowlist", "max_tools", …
    pub fn as_str(self) -> &'static str {
        match self {
            LeftOutBy::Allowlist => "the allowlist",
            LeftOutBy::Blocklist => "the blocklist",
            LeftOutBy::SchemaSize => "max_input_schema_bytes",
            LeftOutBy::MaxTools => "max_tools",
            LeftOutBy::Quarantine => "the pin (mcp.lock)",
            LeftOutBy::InvalidName => "an invalid name",
        }
    }
}

/// How many of a server's listed tools the catalog publishes, and why the
/// others were left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSummary {
    /// How many tools the server listed.
    pub listed: usize,
    /// How many the catalog publishes (at any trust level).
    pub published: usize,
    /// How many were left out, by reason.
    pub left_out: BTreeMap<LeftOutBy, usize>,
}

impl ServerSummary {
    /// The left-out counts keyed by their reason as a person reads it
    /// (`"the allowlist"`, …), the shape reports serialize.
    pub fn left_out_by_reason(&self) -> BTreeMap<String, usize> {
        self.left_out
            .iter()
            .map(|(by, n)| (by.as_str().to_owned(), *n))
            .collect()
    }
}

impl fmt::Display for ServerSummary {
    /// `2 tools (15 left out by the allowlist)`, `17 tools`, or `1 tool`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.published == 1 { "tool" } else { "tools" };
        write!(f, "{} {noun}", self.published)?;
        if !self.left_out.is_empty() {
            let parts: Vec<String> = self
                .left_out
                .iter()
                .map(|(by, n)| format!("{n} left out by {}", by.as_str()))
                .collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}
