use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::Template;

/// The merged configuration: every server from every file, plus the
/// non-server settings resolved along the precedence list.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Servers, sorted by name. A name appears once: the project entry wins.
    pub servers: Vec<ServerEntry>,
    /// `agentic_wrap`: whether large results are digested.
    pub agentic_wrap: Option<Setting<bool>>,
    /// `agentic_wrap_threshold`: result size in bytes above which the digest runs.
    pub agentic_wrap_threshold: Option<Setting<u64>>,
    /// `agentic_wrap_llm`: whether the LLM second chance is enabled.
    pub agentic_wrap_llm: Option<Setting<bool>>,
    /// `agentic_wrap_model`: the model of the LLM second chance.
    pub agentic_wrap_model: Option<Setting<String>>,
    /// The files that were looked at, highest precedence first.
    pub files: Vec<ConfigFile>,
}

impl Config {
    /// The server called `name`, if any.
    pub fn server(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// A config file that was looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// Where it is.
    pub path: PathBuf,
    /// Which scope it stands for.
    pub scope: Scope,
    /// False when the file does not exist (which is not an error).
    pub found: bool,
}

/// A value together with the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// The file that set it.
    pub source: PathBuf,
}

/// Where a server was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `<agentsDir>/mcp.json`, checked in with the project.
    Project,
    /// `~/.agents/mcp.json`, following the user into every project.
    User,
}

impl Scope {
    /// `"project"` or `"user"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server, as merged: its name, where it came from and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// The key in `servers`; it becomes the tool namespace prefix.
    pub name: String,
    /// The scope of the file it came from.
    pub scope: Scope,
    /// The file it came from.
    pub source: PathBuf,
    /// The server's settings.
    pub spec: ServerSpec,
}

/// A validated `ServerSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// How to reach the server.
    pub transport: Transport,
    /// `tools`: allowlist of tool names as the server spells them; empty means all.
    pub tools: Vec<String>,
    /// `read_only`: the operator's word that unannotated tools do not mutate.
    pub read_only: bool,
    /// `agentic_never`: opt this server out of the digest.
    pub agentic_never: bool,
    /// `tool_notes`: tool name → text appended to its description.
    pub tool_notes: BTreeMap<String, String>,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio(StdioSpec),
    /// A streamable HTTP endpoint.
    Http(HttpSpec),
}

impl Transport {
    /// `"stdio"` or `"http"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
        }
    }
}

/// `transport: "stdio"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioSpec {
    /// Executable to spawn (looked up on `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables layered on top of the parent environment.
    pub env: BTreeMap<String, Template>,
}

/// `transport: "http"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSpec {
    /// The streamable HTTP endpoint.
    pub url: String,
    /// Headers sent with every request.
    pub headers: BTreeMap<String, Template>,
    /// A token strategy that manages `Authorization` instead of a static header.
    pub auth: Option<AuthSpec>,
}

/// `auth`: how tokens are obtained for an HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthSpec {
    /// `google_oauth`: Google access tokens from Application Default Credentials.
    GoogleOAuth {
        /// OAuth 2.0 scopes to request; never empty.
        scopes: Vec<String>,
    },
}
