//! The command line: the clap types of every subcommand and flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use core_agent_mcp_config::TrustLevel;
use core_agent_permissions::Mode;

/// An MCP host for AI agents: mount MCP servers, see their tools, call them.
#[derive(Debug, Parser)]
#[command(
    name = "core-agent",
    // The version, and the git commit when built from a checkout (build.rs).
    version = env!("CORE_AGENT_VERSION"),
    about,
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Args)]
pub(crate) struct Global {
    /// The project's agents directory; `<DIR>/mcp.json` is the project config.
    #[arg(long, global = true, value_name = "DIR", default_value = ".agents")]
    pub(crate) agents_dir: PathBuf,
    /// Read this file instead of `~/.agents/mcp.json` as the user config.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) user_config: Option<PathBuf>,
    /// Limit on each server's start (spawn or connect, initialize, list tools), in seconds.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30.0)]
    pub(crate) start_timeout: f64,
    /// Limit on each tool call, in seconds (overrides every server's `call_timeout_ms`);
    /// the request is cancelled on the server past it.
    #[arg(long, global = true, value_name = "SECS")]
    pub(crate) call_timeout: Option<f64>,
    /// The caller's trust level: which tools it may see and call.
    #[arg(long, global = true, value_enum, default_value_t = TrustArg::Creator)]
    pub(crate) trust_level: TrustArg,
    /// Turn the digest of large MCP results off (and `retrieve_raw` with it).
    #[arg(long, global = true)]
    pub(crate) no_mcp_digest: bool,
    /// Turn the survey tools (list_dir, glob, grep, read_many_files over the
    /// project directory) off; `"survey": false` in mcp.json also does.
    #[arg(long, global = true)]
    pub(crate) no_survey: bool,
    /// Keep raw payloads and digest telemetry in this SQLite file (default: in memory).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) session_db: Option<PathBuf>,
    /// The session id (default: a new one per run); reuse one to add to its telemetry.
    #[arg(long, global = true, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Let an LLM summarize results the structural digest cannot get under the
    /// threshold (needs CORE_AGENT_LLM_BASE_URL; `agentic_wrap_llm: true` also enables it).
    #[arg(long, global = true, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) mcp_agentic_wrap_llm: Option<bool>,
    /// The model of the LLM second chance (over `agentic_wrap_model`).
    #[arg(long, global = true, value_name = "MODEL")]
    pub(crate) mcp_agentic_wrap_model: Option<String>,
    /// The small model used when no MCP-specific model is set.
    #[arg(long, global = true, value_name = "MODEL")]
    pub(crate) agentic_small_model: Option<String>,
    /// The session's LLM spend never passes this many US dollars: a summary
    /// starts only when the ceiling covers its worst case.
    #[arg(long, global = true, value_name = "USD")]
    pub(crate) cost_ceiling: Option<f64>,
    /// Say more: `call` reports every server's start even when nothing failed.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    /// Do not print the config's and catalog's warnings (each is otherwise
    /// printed once on stderr, whatever the command); `doctor`, `mcp list
    /// --json` and `config show` still list them.
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TrustArg {
    Creator,
    Agent,
    User,
    Public,
}

impl TrustArg {
    pub(crate) fn level(self) -> TrustLevel {
        match self {
            TrustArg::Creator => TrustLevel::Creator,
            TrustArg::Agent => TrustLevel::Agent,
            TrustArg::User => TrustLevel::User,
            TrustArg::Public => TrustLevel::Public,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ModeArg {
    Ask,
    Allowlist,
    Yolo,
}

impl ModeArg {
    pub(crate) fn mode(self) -> Mode {
        match self {
            ModeArg::Ask => Mode::Ask,
            ModeArg::Allowlist => Mode::Allowlist,
            ModeArg::Yolo => Mode::Yolo,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Inspect, check and edit the configured MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Show the effective config, or the JSON Schema of mcp.json.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// List the namespaced tools the model would see.
    Tools {
        /// Print a JSON array of {name, server, tool, description, input_schema, read_only, trust_levels, why_restricted}.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool by its namespaced name, through the permission gate.
    Call(CallCommand),
    /// Print the raw payload of a digested result, from `--session-db`.
    Raw {
        /// The `call_id` from the digest.
        call_id: String,
        /// Print only the part at this JSON pointer (such as /items/42).
        #[arg(long)]
        pointer: Option<String>,
        /// Read it from a fleet's shared store (PostgreSQL) instead of --session-db.
        #[arg(
            long,
            value_name = "URL",
            env = "CORE_AGENT_STORE",
            hide_env_values = true
        )]
        store: Option<String>,
    },
    /// Print a session's digest telemetry, from `--session-db`.
    Usage {
        /// Print JSON: {"session", "digest_methods", "digest_savings"}.
        #[arg(long)]
        json: bool,
        /// Read it from a fleet's shared store (PostgreSQL) instead of --session-db.
        #[arg(
            long,
            value_name = "URL",
            env = "CORE_AGENT_STORE",
            hide_env_values = true
        )]
        store: Option<String>,
    },
    /// Serve every configured server's tools as one MCP server: on stdin/stdout
    /// (one client), or over streamable HTTP with --http (many clients).
    ///
    /// Every client session gets the allowlists, trust levels, notes, permission gate
    /// (asks become elicitations), plan-first, limits and the digest with retrieve_raw.
    /// Over HTTP a bearer token is required: CORE_AGENT_GATEWAY_TOKEN, the tokens of
    /// config.json's gateway.tokens, or one generated and printed at start.
    Serve(ServeCommand),
    /// Serve the built-in demo MCP server on stdin/stdout.
    DemoServer,
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    ///
    /// Written where the shell looks, it completes every subcommand and flag, such as
    /// `core-agent completions bash > ~/.local/share/bash-completion/completions/core-agent`;
    /// the README says where zsh and fish look.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write it and one page per subcommand with --dir.
    ///
    /// `core-agent man | man -l -` shows it; `core-agent man --dir ~/.local/share/man/man1`
    /// installs core-agent(1) and the pages it names, such as core-agent-mcp-list(1).
    Man {
        /// Write core-agent.1 and a page per subcommand (core-agent-mcp-list.1, …) into DIR.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Internal: run a stdio server under supervision, so that nothing it
    /// starts outlives core-agent (core-agent starts each stdio server this way):
    /// `__supervise <parent-pid> <grace-ms> <command> [<args>…]`.
    #[command(name = "__supervise", hide = true)]
    Supervise {
        /// The parent's pid, the kill grace in milliseconds, the command and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
        words: Vec<std::ffi::OsString>,
    },
}

// `core-agent call`'s arguments (its help text is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct CallCommand {
    /// The namespaced tool name, as `core-agent tools` lists it.
    #[arg(required_unless_present = "batch")]
    pub(crate) name: Option<String>,
    /// The arguments as a JSON object (default `{}`); `-` reads them from stdin.
    pub(crate) args: Option<String>,
    /// Print the whole MCP CallToolResult as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Run a turn of calls: JSON lines `{"name": …, "arguments": {…}}` from FILE (`-`: stdin);
    /// prints one JSON line per call, in input order.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["name", "args"])]
    pub(crate) batch: Option<String>,
    /// Override the configured permission mode.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<ModeArg>,
    /// Approve every call the gate would ask about.
    #[arg(long)]
    pub(crate) yes: bool,
}

// `core-agent serve`'s arguments (its help text is the variant's doc comment).
#[derive(Debug, Args)]
pub(crate) struct ServeCommand {
    /// Listen for MCP over streamable HTTP at this address, such as 127.0.0.1:8940
    /// (the endpoint is /mcp; the sessions API and /health share the listener).
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// Accept HTTP requests without a token (loopback addresses only; for experiments).
    #[arg(long, requires = "http")]
    pub(crate) no_auth: bool,
    /// Also accept this name in the Host header (repeatable; loopback names always are).
    #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
    pub(crate) allow_host: Vec<String>,
    /// Also accept this Origin header, scheme://host or scheme://host:port (repeatable;
    /// requests without one pass; loopback origins are accepted when bound to loopback).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http", value_parser = origin)]
    pub(crate) allow_origin: Vec<String>,
    /// Open MCP sessions at most, over every token (default 512, or
    /// gateway.max_sessions); past it, the session idle the longest is closed.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sessions: Option<u32>,
    /// Open MCP sessions at most per token (default 128, or
    /// gateway.max_sessions_per_token); past it, that token's session idle the longest is closed.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sessions_per_token: Option<u32>,
    /// Close an MCP session idle this many seconds (default 1800, or
    /// gateway.session_idle_timeout_secs).
    #[arg(long, value_name = "SECS", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) session_idle_timeout: Option<u32>,
    /// Override the configured permission mode for every session.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<ModeArg>,
    /// The parent model whose input price values the tokens the digest saved
    /// (GET /sessions/{id}/context; a request may name another with ?model=).
    #[arg(long, value_name = "MODEL")]
    pub(crate) parent_model: Option<String>,
    /// Serve only this configured server, its tools under their own names
    /// (no `<server>_` prefix), still gated, pinned and digested.
    #[arg(long, value_name = "NAME")]
    pub(crate) server: Option<String>,
    /// Write every decision (calls allowed, denied, asked, refused; refused
    /// sign-ins) as JSON lines to FILE, rotated by size; `-` writes to stdout
    /// (HTTP only: on stdio, stdout is the MCP channel). Overrides gateway.audit's path.
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<std::path::PathBuf>,
    /// Write the audit trail into the shared store (--store), table
    /// audit_lines, one trail for every replica. Overrides gateway.audit's path.
    #[arg(long, conflicts_with = "audit_log")]
    pub(crate) audit_store: bool,
    /// Also serve the Prometheus metrics, GET /metrics without a token, on a
    /// listener of their own at this address, such as 127.0.0.1:9464 (with
    /// --http they are also at /metrics on the gateway's listener, behind the token).
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    /// Share state with the other replicas in this PostgreSQL database
    /// (postgres://USER:PASSWORD@HOST:PORT/DATABASE): raw payloads,
    /// digest ledgers, sessions, "always" answers, plans. Overrides gateway.store.
    #[arg(
        long,
        value_name = "URL",
        env = "CORE_AGENT_STORE",
        hide_env_values = true
    )]
    pub(crate) store: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// One line per configured server: transport, scope, status, tool count, error.
    List {
        /// Print a JSON array of {name, transport, scope, status, tools, error, restricted, restricted_tools, warnings, source}.
        #[arg(long)]
        json: bool,
    },
    /// Check the config and the servers; exit 1 when something is wrong.
    Doctor {
        /// Also check what a cloud deployment cannot run.
        #[arg(long)]
        cloud: bool,
        /// Do not connect to the servers.
        #[arg(long)]
        offline: bool,
        /// Print a JSON object of {findings, servers, tools, token_estimate, errors, warnings}.
        #[arg(long)]
        json: bool,
    },
    /// Add a server: `add NAME -- COMMAND [ARGS…]` (stdio) or `add NAME --url URL` (http).
    Add {
        /// The server's name (its tool prefix).
        name: String,
        /// Which file to write: project (`<agents-dir>/mcp.json`) or user.
        #[arg(long, value_enum, default_value_t = ScopeArg::Project)]
        scope: ScopeArg,
        /// A stdio server's environment variable, `K=V` (repeatable; `${NAME}` placeholders allowed).
        #[arg(long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// A streamable HTTP server's URL.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// An HTTP header, `'K: V'` (repeatable; `${NAME}` placeholders allowed).
        #[arg(long = "header", value_name = "K: V", requires = "url")]
        headers: Vec<String>,
        /// The stdio command and its arguments, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Remove a server from the file that declares it.
    Remove {
        /// The server's name.
        name: String,
        /// Only look in this scope's file.
        #[arg(long, value_enum)]
        scope: Option<ScopeArg>,
    },
    /// Create `<agents-dir>/mcp.json` with no servers, unless it exists.
    Init,
    /// Log in to an HTTP server that uses OAuth: open its authorization page
    /// (or print the URL), receive the redirect on 127.0.0.1, and store the
    /// credentials in ~/.agents/credentials (mode 0600).
    Login {
        /// The server's name.
        name: String,
        /// Print the authorization URL instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
        /// Seconds to wait for the authorization.
        #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
        timeout: f64,
    },
    /// Remove a server's stored OAuth credentials.
    Logout {
        /// The server's name.
        name: String,
    },
    /// Accept a server's tool definitions as they are now into `<agents-dir>/mcp.lock`:
    /// one tool, or every tool it lists (pins of tools it no longer lists are dropped).
    Trust {
        /// The server.
        server: String,
        /// Only this tool (the server's own name for it).
        tool: Option<String>,
        /// Print a JSON array of {tool, status, change}; status is new, changed, unchanged or removed.
        #[arg(long)]
        json: bool,
        /// Accept into the pins a fleet shares in this PostgreSQL database
        /// (every replica then serves the tool) instead of mcp.lock. Overrides gateway.store.
        #[arg(
            long,
            value_name = "URL",
            env = "CORE_AGENT_STORE",
            hide_env_values = true
        )]
        store: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the effective merged config, with where each value came from.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema (draft 2020-12) of a dialect, for editors.
    Schema {
        /// `core` (mcp.json) or `mcpServers` (.mcp.json).
        #[arg(long, value_enum, default_value_t = DialectArg::Core)]
        dialect: DialectArg,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ScopeArg {
    Project,
    User,
}

impl ScopeArg {
    pub(crate) fn scope(self) -> core_agent_mcp_config::Scope {
        match self {
            ScopeArg::Project => core_agent_mcp_config::Scope::Project,
            ScopeArg::User => core_agent_mcp_config::Scope::User,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DialectArg {
    Core,
    #[value(name = "mcpServers")]
    McpServers,
}

/// `--allow-origin`: `scheme://host` or `scheme://host:port`, as a browser
/// sends it (no path).
fn origin(text: &str) -> Result<String, String> {
    match text.split_once("://") {
        Some((scheme, rest))
            if !scheme.is_empty()
                && !rest.is_empty()
                && !rest.contains(['/', '?', '#', '@', ' ']) =>
        {
            Ok(text.to_owned())
        }
        _ => Err(
            "expected scheme://host or scheme://host:port, such as https://app.example.com"
                .to_owned(),
        ),
    }
}
