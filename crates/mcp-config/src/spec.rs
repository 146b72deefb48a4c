use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::Template;

/// The merged configuration: every server from every file, plus the
/// non-server settings resolved along the precedence list.
///
/// [`load`](crate::load) builds it from the files; an embedding host or a
/// test builds one in code from [`Config::default`] and the `with_*`
/// methods:
///
/// ```
/// use core_agent_mcp_config::{Config, ServerEntry};
///
/// let servers: Vec<ServerEntry> = Vec::new();
/// let config = Config::default().with_servers(servers);
/// assert!(config.server("demo").is_none());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Config {
    /// Servers to start, sorted by name. A name appears once: the project
    /// entry wins.
    pub servers: Vec<ServerEntry>,
    /// Servers that are configured but not to be started (`"disabled": true`,
    /// `"type": "sse"`, …), sorted by name. A name is in `servers` or here,
    /// never both: the highest file that names it decides.
    pub left_out: Vec<LeftOut>,
    /// Things the files say that core-agent does not use, one per server
    /// (or file) and kind, in file order.
    pub warnings: Vec<ConfigWarning>,
    /// The `agentic_wrap*` settings (the digest).
    pub wrap: crate::WrapSettings,
    /// `survey`: whether the host offers the survey tools (`list_dir`,
    /// `glob`, `grep`, `read_many_files`) over the project directory; unset
    /// means on.
    pub survey: Option<Setting<bool>>,
    /// Which built-in survey tools are offered, and to whom: the entry under
    /// the reserved server name [`BUILTIN`] (`servers.builtin.tools` in
    /// `mcp.json`, `auggy.servers.builtin` in `.mcp.json`). The highest file
    /// that has one wins; unset means all four, to every trust level.
    pub builtin: Option<BuiltinTools>,
    /// The files that were looked at, highest precedence first.
    pub files: Vec<ConfigFile>,
    /// Variables from the project's `.env`, for interpolation.
    pub dotenv: crate::DotEnv,
    /// `<agentsDir>/mcp.lock`, where the tool definitions each server showed
    /// are pinned (next to the project's `mcp.json`; it need not exist);
    /// `None` pins nothing.
    pub lock: Option<PathBuf>,
}

impl Config {
    /// The servers to start (sorted by name, each name once).
    #[must_use]
    pub fn with_servers(mut self, servers: Vec<ServerEntry>) -> Config {
        self.servers = servers;
        self
    }

    /// The `agentic_wrap*` settings (the digest).
    #[must_use]
    pub fn with_wrap(mut self, wrap: crate::WrapSettings) -> Config {
        self.wrap = wrap;
        self
    }

    /// Whether the host offers the survey tools (`None`: on).
    #[must_use]
    pub fn with_survey(mut self, survey: Option<Setting<bool>>) -> Config {
        self.survey = survey;
        self
    }

    /// Which built-in survey tools are offered, and to whom (`None`: all
    /// four, to every trust level).
    #[must_use]
    pub fn with_builtin(mut self, builtin: Option<BuiltinTools>) -> Config {
        self.builtin = builtin;
        self
    }

    /// Variables for interpolation, under the process environment.
    #[must_use]
    pub fn with_dotenv(mut self, dotenv: crate::DotEnv) -> Config {
        self.dotenv = dotenv;
        self
    }

    /// Where the tool definitions each server showed are pinned (`None`
    /// pins nothing).
    #[must_use]
    pub fn with_lock(mut self, lock: Option<PathBuf>) -> Config {
        self.lock = lock;
        self
    }

    /// The server called `name`, if any.
    pub fn server(&self, name: &str) -> Option<&ServerEntry> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// This config with only the server called `name` to start (the left-out
    /// servers dropped too), for a front end that serves or checks one.
    ///
    /// # Errors
    /// [`Error::UnknownServer`](crate::Error::UnknownServer) when no server
    /// of that name is to be started: it names the files read, the servers
    /// they configure (with the closest name), or why that one is left out.
    pub fn only(&self, name: &str) -> crate::Result<Config> {
        if self.server(name).is_none() {
            let configured: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
            return Err(crate::Error::UnknownServer {
                name: name.to_owned(),
                files: self
                    .files
                    .iter()
                    .filter(|f| f.found)
                    .map(|f| f.path.clone())
                    .collect(),
                closest: crate::closest(name, &configured).map(str::to_owned),
                configured: configured.iter().map(|s| (*s).to_owned()).collect(),
                left_out: self.left_out_entry(name).cloned().map(Box::new),
            });
        }
        let mut only = self.clone();
        only.servers.retain(|s| s.name == name);
        only.left_out.clear();
        Ok(only)
    }

    /// The left-out server called `name`, if any.
    pub fn left_out_entry(&self, name: &str) -> Option<&LeftOut> {
        self.left_out.iter().find(|s| s.name == name)
    }
}

/// A server that is configured but not to be started, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The key in `mcpServers`.
    pub name: String,
    /// The scope of the file it came from.
    pub scope: Scope,
    /// The file it came from.
    pub source: PathBuf,
    /// Why it is not started.
    pub reason: LeftOutReason,
}

impl fmt::Display for LeftOut {
    /// `.mcp.json: server `x`: disabled ("disabled": true); …`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: server `{}`: {}",
            self.source.display(),
            self.name,
            self.reason
        )
    }
}

/// Why a configured server is not started.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeftOutReason {
    /// `"disabled": true`, as Cline, Roo Code and Windsurf write it.
    Disabled,
    /// A transport core-agent does not speak: `"type": "sse"` (or Cline's
    /// `"transportType": "sse"`).
    UnsupportedTransport {
        /// The transport as written (`sse`).
        transport: String,
    },
    /// `"cwd"`: the server must start in a directory of its own, which
    /// core-agent cannot do yet; started elsewhere, relative paths in its
    /// `command` or `args` would point at the wrong files.
    WorkingDirectory {
        /// The directory as written.
        cwd: String,
    },
    /// The entry starts this gateway again on the same project (`core-agent
    /// serve`, as `claude mcp add -s project core-agent -- core-agent serve`
    /// writes it): started, it would start another, without end. See
    /// [`Config::leave_out_own`].
    OwnGateway {
        /// The command line as written.
        command: String,
    },
}

impl LeftOutReason {
    /// A stable id for the reason (`disabled`, `unsupported-transport`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            LeftOutReason::Disabled => "disabled",
            LeftOutReason::UnsupportedTransport { .. } => "unsupported-transport",
            LeftOutReason::WorkingDirectory { .. } => "working-directory",
            LeftOutReason::OwnGateway { .. } => "own-gateway",
        }
    }
}

impl fmt::Display for LeftOutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeftOutReason::Disabled => f.write_str(
                "disabled (\"disabled\": true); set it to false or remove it to start the server",
            ),
            LeftOutReason::UnsupportedTransport { transport } if transport == "sse" => f.write_str(
                "uses the legacy SSE transport, which core-agent does not speak; \
                 ask the server for its streamable HTTP endpoint (often the same URL ending in /mcp) \
                 and write \"type\": \"http\"",
            ),
            LeftOutReason::UnsupportedTransport { transport } => write!(
                f,
                "uses the {transport:?} transport, which core-agent does not speak; \
                 use a stdio command or a streamable HTTP endpoint (\"type\": \"http\")"
            ),
            LeftOutReason::WorkingDirectory { cwd } => write!(
                f,
                "must start in its own working directory (\"cwd\": {cwd:?}), which core-agent \
                 cannot do yet; remove \"cwd\" and give absolute paths in \"command\" and \"args\""
            ),
            LeftOutReason::OwnGateway { command } => write!(
                f,
                "`{command}` is this gateway: core-agent reads this file too, and the entry would \
                 start core-agent again without end, so core-agent leaves it out (agents such as \
                 Claude Code still start it). To silence this, keep the entry in the agent's own \
                 config instead (`claude mcp add -s local` or `-s user`)"
            ),
        }
    }
}

/// Something a file says that core-agent reads but does not use, or reads
/// in a way worth a second look. Loading goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file it is about.
    pub file: PathBuf,
    /// The server it is about, when it is about one.
    pub server: Option<String>,
    /// What kind of warning it is; key on this, not on `message`.
    pub kind: ConfigWarningKind,
    /// What it says, with what to do about it when there is something to do.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    /// `.mcp.json: server `x`: ignored keys other tools use: autoApprove, alwaysAllow`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        if let Some(server) = &self.server {
            write!(f, "server `{server}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The kinds of [`ConfigWarning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigWarningKind {
    /// Keys other tools write and core-agent ignores (`autoApprove`, …).
    IgnoredKeys,
    /// A `timeout` that could be seconds or milliseconds.
    TimeoutUnits,
    /// A server defined in two project files: the lower one's entry (and
    /// its `auggy` policy) is dropped.
    Shadowed,
}

impl ConfigWarningKind {
    /// A stable id: `ignored-keys`, `timeout-units` or `shadowed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigWarningKind::IgnoredKeys => "ignored-keys",
            ConfigWarningKind::TimeoutUnits => "timeout-units",
            ConfigWarningKind::Shadowed => "shadowed",
        }
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
    /// The format the file is written in, when it was found.
    pub dialect: Option<Dialect>,
}

/// The two file formats core-agent reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `{"version": 1, "servers": {…}}`, core-agent's own.
    #[default]
    Core,
    /// `{"mcpServers": {…}, "auggy": {…}}`, as Claude Code, Cursor and Auggy write it.
    McpServers,
}

impl Dialect {
    /// `"core"` or `"mcpServers"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Core => "core",
            Dialect::McpServers => "mcpServers",
        }
    }

    /// The key that holds the servers: `servers` or `mcpServers`.
    pub fn servers_key(self) -> &'static str {
        match self {
            Dialect::Core => "servers",
            Dialect::McpServers => "mcpServers",
        }
    }

    /// The dialect a parsed file is written in, told by its keys.
    pub fn detect(root: &serde_json::Value) -> Dialect {
        match root.as_object() {
            Some(o) if o.contains_key("mcpServers") || o.contains_key("auggy") => {
                Dialect::McpServers
            }
            _ => Dialect::Core,
        }
    }
}

/// Who a call comes from, most trusted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrustLevel {
    /// The agent's creator (the operator).
    Creator,
    /// The agent itself.
    Agent,
    /// A user of the agent.
    User,
    /// Anyone.
    Public,
}

impl TrustLevel {
    /// Every level, most trusted first.
    pub const ALL: [TrustLevel; 4] = [
        TrustLevel::Creator,
        TrustLevel::Agent,
        TrustLevel::User,
        TrustLevel::Public,
    ];

    /// The level's name in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            TrustLevel::Creator => "creator",
            TrustLevel::Agent => "agent",
            TrustLevel::User => "user",
            TrustLevel::Public => "public",
        }
    }

    /// The level called `name`.
    pub fn parse(name: &str) -> Option<TrustLevel> {
        TrustLevel::ALL.into_iter().find(|l| l.as_str() == name)
    }
}

/// `cloud`: how a cloud deployment treats a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cloud {
    /// `"disabled"`: not run in the cloud.
    Disabled,
    /// `"localOnly"`: only run locally.
    LocalOnly,
}

impl Cloud {
    /// The value's name in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Disabled => "disabled",
            Cloud::LocalOnly => "localOnly",
        }
    }
}

/// `pin`: what happens when a server's tool no longer matches the
/// definition pinned for it in `mcp.lock`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PinMode {
    /// `"warn"` (the default): the tool stays, with a warning and a diff.
    #[default]
    Warn,
    /// `"strict"`: the changed tool is quarantined (left out of the catalog)
    /// until `core-agent mcp trust` accepts the new definition.
    Strict,
    /// `"off"`: nothing is pinned or checked.
    Off,
}

impl PinMode {
    /// Every mode, as config files spell them.
    pub const ALL: [PinMode; 3] = [PinMode::Warn, PinMode::Strict, PinMode::Off];

    /// The mode's name in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::Warn => "warn",
            PinMode::Strict => "strict",
            PinMode::Off => "off",
        }
    }

    /// The mode called `name`.
    pub fn parse(name: &str) -> Option<PinMode> {
        PinMode::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// Bounds on what one server may cost, with the Auggy spec's defaults.
///
/// ```
/// use core_agent_mcp_config::Limits;
///
/// let limits = Limits::default().with_max_tools(8).with_call_timeout_ms(5_000);
/// assert_eq!((limits.max_tools, limits.max_pages), (8, 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Limits {
    /// Tools past this many are dropped, with a warning naming them (64).
    pub max_tools: usize,
    /// `tools/list` pages read at most (20).
    pub max_pages: usize,
    /// A tool whose input schema is larger is quarantined (16 KiB).
    pub max_input_schema_bytes: usize,
    /// A result longer than this is cut, with a marker saying how much (128 KiB).
    pub max_result_bytes: usize,
    /// A call is cancelled on the server past this many milliseconds (30 000).
    pub call_timeout_ms: u64,
    /// Calls in flight to the server at most (4).
    pub max_concurrent_calls: usize,
    /// One message from the server (a stdio line, an HTTP body or SSE
    /// event) longer than this stops the server (16 MiB).
    pub max_message_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tools: 64,
            max_pages: 20,
            max_input_schema_bytes: 16 * 1024,
            max_result_bytes: 128 * 1024,
            call_timeout_ms: 30_000,
            max_concurrent_calls: 4,
            max_message_bytes: 16 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// Tools past this many are dropped.
    #[must_use]
    pub fn with_max_tools(mut self, tools: usize) -> Limits {
        self.max_tools = tools;
        self
    }

    /// `tools/list` pages read at most.
    #[must_use]
    pub fn with_max_pages(mut self, pages: usize) -> Limits {
        self.max_pages = pages;
        self
    }

    /// A tool whose input schema is larger is quarantined.
    #[must_use]
    pub fn with_max_input_schema_bytes(mut self, bytes: usize) -> Limits {
        self.max_input_schema_bytes = bytes;
        self
    }

    /// A result longer than this is cut.
    #[must_use]
    pub fn with_max_result_bytes(mut self, bytes: usize) -> Limits {
        self.max_result_bytes = bytes;
        self
    }

    /// A call is cancelled on the server past this many milliseconds.
    #[must_use]
    pub fn with_call_timeout_ms(mut self, ms: u64) -> Limits {
        self.call_timeout_ms = ms;
        self
    }

    /// Calls in flight to the server at most.
    #[must_use]
    pub fn with_max_concurrent_calls(mut self, calls: usize) -> Limits {
        self.max_concurrent_calls = calls;
        self
    }

    /// One message from the server longer than this stops the server.
    #[must_use]
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Limits {
        self.max_message_bytes = bytes;
        self
    }

    /// These limits with every field that `json` (a `limits` object) sets replaced.
    pub fn overlaid(mut self, json: Option<&serde_json::Value>) -> Limits {
        let Some(obj) = json.and_then(serde_json::Value::as_object) else {
            return self;
        };
        let get = |k: &str| obj.get(k).and_then(serde_json::Value::as_u64);
        let size = |k: &str, current: usize| {
            get(k)
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(current)
        };
        self.max_tools = size("max_tools", self.max_tools);
        self.max_pages = size("max_pages", self.max_pages);
        self.max_input_schema_bytes = size("max_input_schema_bytes", self.max_input_schema_bytes);
        self.max_result_bytes = size("max_result_bytes", self.max_result_bytes);
        self.call_timeout_ms = get("call_timeout_ms").unwrap_or(self.call_timeout_ms);
        self.max_concurrent_calls = size("max_concurrent_calls", self.max_concurrent_calls);
        self.max_message_bytes = size("max_message_bytes", self.max_message_bytes);
        self
    }
}

/// One model's price in US dollars per million tokens (`agentic_wrap_pricing`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// Input tokens.
    pub input: f64,
    /// Cached input tokens (the input price when not given).
    pub cached_input: f64,
    /// Output tokens.
    pub output: f64,
}

/// Model name → price.
pub type ModelPrices = BTreeMap<String, ModelPrice>;

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
    /// The format of that file.
    pub dialect: Dialect,
    /// The server's settings.
    pub spec: ServerSpec,
}

/// A validated `ServerSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// How to reach the server.
    pub transport: Transport,
    /// `tools` / `allowedTools`: allowlist of tool names as the server spells
    /// them; empty means all.
    pub tools: Vec<String>,
    /// `blockedTools`: tool names never published.
    pub blocked_tools: Vec<String>,
    /// `allowedTrustLevels`: the trust levels that may see this server's
    /// tools; `None` leaves each tool's default.
    pub allowed_trust_levels: Option<Vec<TrustLevel>>,
    /// `toolPolicies.<tool>.allowedTrustLevels`: explicit levels per tool.
    pub tool_policies: BTreeMap<String, Vec<TrustLevel>>,
    /// `cloud`: whether a cloud deployment runs this server.
    pub cloud: Option<Cloud>,
    /// `limits`: the server's own, over the file's top-level ones, over the defaults.
    pub limits: Limits,
    /// `read_only`: the operator's word that unannotated tools do not mutate.
    pub read_only: bool,
    /// `agentic_never`: opt this server out of the digest.
    pub agentic_never: bool,
    /// `tool_notes`: tool name → text appended to its description.
    pub tool_notes: BTreeMap<String, String>,
    /// `pin`: how a tool that changed since `mcp.lock` pinned it is treated.
    pub pin: PinMode,
    /// `resources`: whether its resources reach a gateway's clients (default true).
    pub resources: bool,
    /// `prompts`: whether its prompts reach a gateway's clients (default true).
    pub prompts: bool,
    /// `required`: a gateway is ready only while this server is up (default false).
    pub required: bool,
    /// `env_inherit` (stdio): which of the parent's variables the server
    /// gets; `None` leaves it to the front end (the CLI: all, `serve`:
    /// minimal).
    pub env_inherit: Option<EnvInherit>,
}

/// `env_inherit`: which of core-agent's own environment variables a stdio
/// server inherits, under its own `env`. Whatever it says, a variable that
/// another server's placeholder or the `.env` file supplies, or one of the
/// front end's credentials, is inherited only when this entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvInherit {
    /// `"all"`: every variable.
    All,
    /// `"minimal"`: the MCP SDKs' default set, [`EnvInherit::MINIMAL`] and `LC_*`.
    Minimal,
    /// A list of names: only these.
    Names(Vec<String>),
}

impl EnvInherit {
    /// The variables of `"minimal"`, besides every `LC_*`.
    pub const MINIMAL: &[&str] = &[
        "HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER",
    ];

    /// True for a variable of the minimal set (`PATH`, `LC_ALL`, …).
    pub fn is_minimal(name: &str) -> bool {
        EnvInherit::MINIMAL.contains(&name) || name.starts_with("LC_")
    }

    /// Whether a variable called `name` passes.
    pub fn admits(&self, name: &str) -> bool {
        match self {
            EnvInherit::All => true,
            EnvInherit::Minimal => EnvInherit::is_minimal(name),
            EnvInherit::Names(names) => names.iter().any(|n| n == name),
        }
    }

    /// Parses `"all"`, `"minimal"` or an array of names.
    pub fn parse(value: &serde_json::Value) -> Option<EnvInherit> {
        match value {
            serde_json::Value::String(s) if s == "all" => Some(EnvInherit::All),
            serde_json::Value::String(s) if s == "minimal" => Some(EnvInherit::Minimal),
            serde_json::Value::Array(items) => Some(EnvInherit::Names(
                items
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            )),
            _ => None,
        }
    }
}

impl ServerEntry {
    /// The names this entry gives itself: its `env` keys, the variables its
    /// placeholders read, and the names its `env_inherit` lists.
    pub fn named_variables(&self) -> std::collections::BTreeSet<String> {
        let mut out = self.placeholder_variables();
        if let Transport::Stdio(stdio) = &self.spec.transport {
            out.extend(stdio.env.keys().cloned());
        }
        if let Some(EnvInherit::Names(names)) = &self.spec.env_inherit {
            out.extend(names.iter().cloned());
        }
        out
    }

    /// The variables this entry's placeholders read.
    pub fn placeholder_variables(&self) -> std::collections::BTreeSet<String> {
        crate::secrets::templates(self)
            .into_iter()
            .flat_map(|t| t.variables().map(str::to_owned))
            .chain(self.launch_variables())
            .collect()
    }
}

impl Config {
    /// The variables whose values are secrets: every variable a server's
    /// placeholder reads and every `.env` entry, except the minimal set
    /// ([`EnvInherit::is_minimal`]), which is no secret.
    pub fn secret_variables(&self) -> std::collections::BTreeSet<String> {
        self.servers
            .iter()
            .flat_map(ServerEntry::placeholder_variables)
            .chain(self.dotenv.vars.keys().cloned())
            .filter(|n| !EnvInherit::is_minimal(n))
            .collect()
    }
}

impl ServerSpec {
    /// A server reached by `transport`, with every other setting at its default.
    pub fn new(transport: Transport) -> ServerSpec {
        ServerSpec {
            transport,
            tools: Vec::new(),
            blocked_tools: Vec::new(),
            allowed_trust_levels: None,
            tool_policies: BTreeMap::new(),
            cloud: None,
            limits: Limits::default(),
            read_only: false,
            agentic_never: false,
            tool_notes: BTreeMap::new(),
            pin: PinMode::Warn,
            resources: true,
            prompts: true,
            required: false,
            env_inherit: None,
        }
    }
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
    /// `oauth`: MCP OAuth 2.1 (authorization code with PKCE), logged in with
    /// `core-agent mcp login` and refreshed automatically.
    OAuth(OAuthSpec),
    /// `token_exchange`: each call carries a token of the user it is made
    /// for, obtained by OAuth 2.0 Token Exchange (RFC 8693) at the server's
    /// authorization server with the user's own token as the subject. Only
    /// a front end that signs its users in (the gateway) has such a token;
    /// the connection itself (handshake, listings) uses `headers`.
    TokenExchange(TokenExchangeSpec),
}

/// Where a token exchange is sent: the token endpoint itself, or the
/// issuer whose metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExchangeEndpoint {
    /// `token_endpoint`: the URL the exchange is posted to.
    TokenEndpoint(String),
    /// `issuer`: the authorization server; its token endpoint is read from
    /// its metadata (RFC 8414, then OpenID Connect Discovery).
    Issuer(String),
}

/// `auth.token_exchange`: how a user's token is exchanged for one the
/// server accepts (RFC 8693).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchangeSpec {
    /// The token endpoint, or the issuer that names it.
    pub endpoint: ExchangeEndpoint,
    /// The client the exchange authenticates as.
    pub client_id: String,
    /// Its secret (HTTP Basic), expanded at start; `None`: a public client.
    pub client_secret: Option<Template>,
    /// `audience`: the logical name of the server at its authorization server.
    pub audience: Option<String>,
    /// `resource` (RFC 8707); `None` with no `audience` means the server's `url`.
    pub resource: Option<String>,
    /// The scopes asked for; empty leaves them to the authorization server.
    pub scopes: Vec<String>,
}

/// `auth.oauth`: every field is optional; an empty object means "discover
/// everything from the server".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthSpec {
    /// Scopes to request; empty means the ones the server advertises (its
    /// `WWW-Authenticate` challenge, then its protected-resource metadata).
    pub scopes: Vec<String>,
    /// A client registered with the authorization server out of band; when
    /// absent, a client ID metadata document or dynamic registration is used.
    pub client_id: Option<String>,
    /// The secret of `client_id`, expanded at login and at start.
    pub client_secret: Option<Template>,
    /// HTTPS URL of a client ID metadata document, used as the client ID when
    /// the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// The loopback port the login redirect comes back to; `None` picks a free one.
    pub callback_port: Option<u16>,
}

/// The reserved server name under which the built-in tools' allowlist and
/// trust levels are written (also the permission gate's namespace for
/// them: `builtin:grep`). No server can be called this.
pub const BUILTIN: &str = "builtin";

/// The allowlist and trust levels of the built-in survey tools, written
/// like a server's under the reserved name [`BUILTIN`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuiltinTools {
    /// Offer only these (`tools` / `allowedTools`); empty offers all.
    pub tools: Vec<String>,
    /// Never offer these (`blockedTools`).
    pub blocked_tools: Vec<String>,
    /// The trust levels that may call them (`allowedTrustLevels`); `None`
    /// is every level.
    pub allowed_trust_levels: Option<Vec<TrustLevel>>,
    /// Per-tool trust levels (`toolPolicies`), over `allowed_trust_levels`.
    pub tool_policies: BTreeMap<String, Vec<TrustLevel>>,
    /// The file it came from.
    pub source: PathBuf,
}

impl BuiltinTools {
    /// The trust levels that may call the built-in tool `name`, or `None`
    /// when it is not offered at all.
    pub fn levels(&self, name: &str) -> Option<Vec<TrustLevel>> {
        let listed = self.tools.is_empty() || self.tools.iter().any(|t| t == name);
        if !listed || self.blocked_tools.iter().any(|t| t == name) {
            return None;
        }
        let levels = self
            .tool_policies
            .get(name)
            .or(self.allowed_trust_levels.as_ref())
            .cloned()
            .unwrap_or_else(|| TrustLevel::ALL.to_vec());
        (!levels.is_empty()).then_some(levels)
    }
}
