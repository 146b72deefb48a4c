use std::fmt;

use crate::pin::Change;

/// Something the operator should hear about while the catalog is built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// `tools` / `allowedTools` names tools the server does not expose.
    UnknownAllowed {
        /// The server.
        server: String,
        /// The names it does not expose.
        names: Vec<String>,
        /// What it does expose.
        exposed: Vec<String>,
    },
    /// `tool_notes` names tools the server does not expose.
    UnknownNotes {
        /// The server.
        server: String,
        /// The names it does not expose.
        names: Vec<String>,
        /// What it does expose.
        exposed: Vec<String>,
    },
    /// `tool_notes` names tools the allowlist or blocklist excluded.
    ExcludedNotes {
        /// The server.
        server: String,
        /// The excluded names.
        names: Vec<String>,
    },
    /// A tool's input schema is over `max_input_schema_bytes`; the tool is left out.
    SchemaTooLarge {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Its schema's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// More tools than `max_tools`; the rest are left out.
    TooManyTools {
        /// The server.
        server: String,
        /// The limit.
        limit: usize,
        /// The tools left out.
        dropped: Vec<String>,
    },
    /// Two (server, tool) pairs would share a name; each got a suffix.
    NameCollision {
        /// The contested name.
        name: String,
        /// Each pair and the name it was given.
        renamed: Vec<(String, String, String)>,
    },
    /// A tool's name would be a built-in's (`record_plan`, …); it got a suffix.
    ReservedName {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The built-in's name.
        reserved: String,
        /// The name it was given.
        name: String,
    },
    /// A tool no longer matches its pin in `mcp.lock`: kept with this
    /// warning (`pin: "warn"`) or quarantined (`pin: "strict"`).
    ToolChanged {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What changed.
        change: Change,
        /// Whether it was left out of the catalog.
        quarantined: bool,
    },
    /// `pin: "strict"` and `mcp.lock` could not be read: the server's tools
    /// cannot be checked, so they are quarantined.
    Unverified {
        /// The server.
        server: String,
        /// The tools left out.
        tools: Vec<String>,
    },
    /// Tools whose names are not valid MCP tool names (1–128 characters
    /// of `A-Z a-z 0-9 _ - .`) are left out.
    InvalidNames {
        /// The server.
        server: String,
        /// How many were left out.
        count: usize,
        /// The first few names, each cut to a short prefix with its size
        /// and hash ([`elide`](crate::elide)).
        examples: Vec<String>,
    },
    /// A name longer than 64 characters was shortened.
    Shortened {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The name it was given.
        name: String,
    },
}

impl Warning {
    /// A stable id for the kind of warning (`unknown-allowed`, `name-shortened`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Warning::UnknownAllowed { .. } => "unknown-allowed",
            Warning::UnknownNotes { .. } => "unknown-notes",
            Warning::ExcludedNotes { .. } => "excluded-notes",
            Warning::SchemaTooLarge { .. } => "schema-size",
            Warning::TooManyTools { .. } => "max-tools",
            Warning::NameCollision { .. } => "name-collision",
            Warning::ReservedName { .. } => "reserved-name",
            Warning::Shortened { .. } => "name-shortened",
            Warning::InvalidNames { .. } => "invalid-name",
            Warning::ToolChanged {
                quarantined: false, ..
            } => "tool-changed",
            Warning::ToolChanged {
                quarantined: true, ..
            } => "tool-quarantined",
            Warning::Unverified { .. } => "pin-unverified",
        }
    }

    /// Whether this warning left out of the catalog the tool that would be
    /// published as `name` (quarantined by its pin, unverifiable, a schema
    /// too large, past `max_tools`), so a call to `name` can say why.
    pub fn withholds(&self, name: &str) -> bool {
        self.withholds_under(name, crate::Naming::Prefixed)
    }

    /// [`Warning::withholds`] in a catalog named by `naming`.
    pub fn withholds_under(&self, name: &str, naming: crate::Naming) -> bool {
        let is = |server: &str, tool: &str| naming.name(server, tool) == name;
        match self {
            Warning::ToolChanged {
                server,
                tool,
                quarantined: true,
                ..
            }
            | Warning::SchemaTooLarge { server, tool, .. } => is(server, tool),
            Warning::Unverified { server, tools } => tools.iter().any(|t| is(server, t)),
            Warning::TooManyTools {
                server, dropped, ..
            } => dropped.iter().any(|t| is(server, t)),
            _ => false,
        }
    }

    /// The server the warning is about, when it is about one.
    pub fn server(&self) -> Option<&str> {
        match self {
            Warning::UnknownAllowed { server, .. }
            | Warning::UnknownNotes { server, .. }
            | Warning::ExcludedNotes { server, .. }
            | Warning::SchemaTooLarge { server, .. }
            | Warning::TooManyTools { server, .. }
            | Warning::ReservedName { server, .. }
            | Warning::ToolChanged { server, .. }
            | Warning::Unverified { server, .. }
            | Warning::Shortened { server, .. }
            | Warning::InvalidNames { server, .. } => Some(server),
            Warning::NameCollision { .. } => None,
        }
    }
}

/// At most this many names in one warning's list; the rest are counted.
const LISTED: usize = 20;

/// `names` joined, at most [`LISTED`] of them (each cut to 128 bytes), so a
/// warning stays short however many names a server sends.
fn list(names: &[String]) -> String {
    let mut out = names
        .iter()
        .take(LISTED)
        .map(|n| crate::elide(n, crate::MAX_TOOL_NAME))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED {
        out.push_str(&format!(" and {} more", names.len() - LISTED));
    }
    out
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownAllowed {
                server,
                names,
                exposed,
            } => write!(
                f,
                "{server}: tools allowlist names {} tool(s) this server does not expose: {}; it exposes: {}",
                names.len(),
                list(names),
                list(exposed)
            ),
            Warning::UnknownNotes {
                server,
                names,
                exposed,
            } => write!(
                f,
                "{server}: tool_notes names {} tool(s) this server does not expose: {}; it exposes: {}",
                names.len(),
                list(names),
                list(exposed)
            ),
            Warning::ExcludedNotes { server, names } => write!(
                f,
                "{server}: tool_notes names {} tool(s) the allowlist excluded, so the note describes nothing: {}",
                names.len(),
                list(names)
            ),
            Warning::SchemaTooLarge {
                server,
                tool,
                bytes,
                limit,
            } => write!(
                f,
                "{server}: tool `{tool}` is left out: its input schema is {bytes} bytes, over max_input_schema_bytes ({limit})"
            ),
            Warning::TooManyTools {
                server,
                limit,
                dropped,
            } => {
                let first = match limit {
                    1 => "only the first tool is".to_owned(),
                    n => format!("only the first {n} tools are"),
                };
                write!(
                    f,
                    "{server}: {first} published (max_tools); left out: {}",
                    list(dropped)
                )
            }
            Warning::NameCollision { name, renamed } => {
                write!(
                    f,
                    "tools of different servers would all be named `{name}`, so each got a suffix:"
                )?;
                for (i, (server, tool, new)) in renamed.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(f, "{sep}{server}/{tool} → `{new}`")?;
                }
                Ok(())
            }
            Warning::ReservedName {
                server,
                tool,
                reserved,
                name,
            } => write!(
                f,
                "{server}: tool `{tool}` would be named `{reserved}`, the name of a built-in tool; it is published as `{name}`"
            ),
            Warning::ToolChanged { .. } | Warning::Unverified { .. } => {
                f.write_str(&self.describe(&|_, _| None))
            }
            Warning::InvalidNames {
                server,
                count,
                examples,
            } => write!(
                f,
                "{server}: {count} tool(s) are left out because their names are not valid MCP tool names (1–128 characters of A-Z a-z 0-9 _ - .): {}",
                list(examples)
            ),
            Warning::Shortened { server, tool, name } => {
                write!(
                    f,
                    "{server}: the name of tool `{tool}` is over 64 characters; it is published as `{name}`"
                )
            }
        }
    }
}

impl Warning {
    /// The warning in words, naming `trust_command(server, tool)` where it
    /// asks its reader to accept a server's current tool definitions into
    /// mcp.lock: the front end's command for that step (`tool` is `None`
    /// for all of the server's tools), or `None` to say the step in words,
    /// as [`Display`](fmt::Display) does.
    pub fn describe(&self, trust_command: &dyn Fn(&str, Option<&str>) -> Option<String>) -> String {
        let step = |server: &str, tool: Option<&str>, words: &str| {
            trust_command(server, tool)
                .map(|command| format!("run `{command}`"))
                .unwrap_or_else(|| words.to_owned())
        };
        match self {
            Warning::ToolChanged {
                server,
                tool,
                change,
                quarantined: false,
            } => format!(
                "{server}: tool `{tool}` changed since it was pinned in mcp.lock ({change}); \
                 review it, then {} to pin the new definition",
                step(server, Some(tool), "trust it")
            ),
            Warning::ToolChanged {
                server,
                tool,
                change,
                quarantined: true,
            } => format!(
                "{server}: tool `{tool}` is quarantined (pin: \"strict\"): it changed since it was \
                 pinned in mcp.lock ({change}); review it, then {} to admit the new definition",
                step(server, Some(tool), "trust it")
            ),
            Warning::Unverified { server, tools } => format!(
                "{server}: {} tool(s) are quarantined (pin: \"strict\"): mcp.lock cannot be read, so \
                 they cannot be checked; fix or delete mcp.lock, then {}: {}",
                tools.len(),
                step(server, None, "trust the server's tools again"),
                list(tools)
            ),
            other => other.to_string(),
        }
    }
}
