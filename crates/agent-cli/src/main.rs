//! The `core-agent` command: parses arguments, wires the Host, prints.

#![allow(clippy::print_stderr)]

/// Writes a line to stdout. A closed stdout (`core-agent … | head`) is not
/// an error worth a panic: the rest of the output is dropped, and the
/// command still stops its servers and exits as it would have.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// [`outln!`] without the newline.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod elicit_form;
mod login;
mod serve;
mod term;
mod warnings;
mod words;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use core_agent_digest::{SqliteStore, Store};
use core_agent_gateway::GatewayOptions;
use core_agent_host::{
    BatchLine, CallRequest, DoctorOptions, DoctorReport, Host, HostConfig, HostOptions,
    OutcomeLine, Overrides, Session, SessionOptions, UsageReport, permission_files, project_root,
};
use core_agent_mcp_config::{ConfigPaths, Dialect, NewServer, Scope, TrustLevel};
use core_agent_mcp_policy::ServerSummary;
use core_agent_mcp_transport::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject,
};
use core_agent_mcp_transport::{BoxFuture, Elicitor, ProgressSink, describe_request};
use core_agent_permissions::{ApproveAll, Mode, PermissionsConfig, RefuseAll};
use term::{CallLine, Screen, Startup};

/// An MCP host for AI agents: mount MCP servers, see their tools, call them.
#[derive(Debug, Parser)]
#[command(name = "core-agent", version, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// The project's agents directory; `<DIR>/mcp.json` is the project config.
    #[arg(long, global = true, value_name = "DIR", default_value = ".agents")]
    agents_dir: PathBuf,
    /// Read this file instead of `~/.agents/mcp.json` as the user config.
    #[arg(long, global = true, value_name = "FILE")]
    user_config: Option<PathBuf>,
    /// Limit on each server's start (spawn or connect, initialize, list tools), in seconds.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30.0)]
    start_timeout: f64,
    /// Limit on each tool call, in seconds (overrides every server's `call_timeout_ms`);
    /// the request is cancelled on the server past it.
    #[arg(long, global = true, value_name = "SECS")]
    call_timeout: Option<f64>,
    /// The caller's trust level: which tools it may see and call.
    #[arg(long, global = true, value_enum, default_value_t = TrustArg::Creator)]
    trust_level: TrustArg,
    /// Turn the digest of large MCP results off (and `retrieve_raw` with it).
    #[arg(long, global = true)]
    no_mcp_digest: bool,
    /// Turn the survey tools (list_dir, glob, grep, read_many_files over the
    /// project directory) off; `"survey": false` in mcp.json also does.
    #[arg(long, global = true)]
    no_survey: bool,
    /// Keep raw payloads and digest telemetry in this SQLite file (default: in memory).
    #[arg(long, global = true, value_name = "PATH")]
    session_db: Option<PathBuf>,
    /// The session id (default: a new one per run); reuse one to add to its telemetry.
    #[arg(long, global = true, value_name = "ID")]
    session: Option<String>,
    /// Let an LLM summarize results the structural digest cannot get under the
    /// threshold (needs CORE_AGENT_LLM_BASE_URL; `agentic_wrap_llm: true` also enables it).
    #[arg(long, global = true, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    mcp_agentic_wrap_llm: Option<bool>,
    /// The model of the LLM second chance (over `agentic_wrap_model`).
    #[arg(long, global = true, value_name = "MODEL")]
    mcp_agentic_wrap_model: Option<String>,
    /// The small model used when no MCP-specific model is set.
    #[arg(long, global = true, value_name = "MODEL")]
    agentic_small_model: Option<String>,
    /// The session's LLM spend never passes this many US dollars: a summary
    /// starts only when the ceiling covers its worst case.
    #[arg(long, global = true, value_name = "USD")]
    cost_ceiling: Option<f64>,
    /// Say more: `call` reports every server's start even when nothing failed.
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Do not print the config's and catalog's warnings (each is otherwise
    /// printed once on stderr, whatever the command); `doctor`, `mcp list
    /// --json` and `config show` still list them.
    #[arg(short, long, global = true)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TrustArg {
    Creator,
    Agent,
    User,
    Public,
}

impl TrustArg {
    fn level(self) -> TrustLevel {
        match self {
            TrustArg::Creator => TrustLevel::Creator,
            TrustArg::Agent => TrustLevel::Agent,
            TrustArg::User => TrustLevel::User,
            TrustArg::Public => TrustLevel::Public,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModeArg {
    Ask,
    Allowlist,
    Yolo,
}

impl ModeArg {
    fn mode(self) -> Mode {
        match self {
            ModeArg::Ask => Mode::Ask,
            ModeArg::Allowlist => Mode::Allowlist,
            ModeArg::Yolo => Mode::Yolo,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
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
    Call {
        /// The namespaced tool name, as `core-agent tools` lists it.
        #[arg(required_unless_present = "batch")]
        name: Option<String>,
        /// The arguments as a JSON object (default `{}`); `-` reads them from stdin.
        args: Option<String>,
        /// Print the whole MCP CallToolResult as JSON.
        #[arg(long)]
        json: bool,
        /// Run a turn of calls: JSON lines `{"name": …, "arguments": {…}}` from FILE (`-`: stdin);
        /// prints one JSON line per call, in input order.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["name", "args"])]
        batch: Option<String>,
        /// Override the configured permission mode.
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        /// Approve every call the gate would ask about.
        #[arg(long)]
        yes: bool,
    },
    /// Print the raw payload of a digested result, from `--session-db`.
    Raw {
        /// The `call_id` from the digest.
        call_id: String,
        /// Print only the part at this JSON pointer (such as /items/42).
        #[arg(long)]
        pointer: Option<String>,
    },
    /// Print a session's digest telemetry, from `--session-db`.
    Usage {
        /// Print JSON: {"session", "digest_methods", "digest_savings"}.
        #[arg(long)]
        json: bool,
    },
    /// Serve every configured server's tools as one MCP server: on stdin/stdout
    /// (one client), or over streamable HTTP with --http (many clients).
    ///
    /// Every client session gets the allowlists, trust levels, notes, permission gate
    /// (asks become elicitations), plan-first, limits and the digest with retrieve_raw.
    /// Over HTTP a bearer token is required: CORE_AGENT_GATEWAY_TOKEN, the tokens of
    /// config.json's gateway.tokens, or one generated and printed at start.
    Serve {
        /// Listen for MCP over streamable HTTP at this address, such as 127.0.0.1:8940
        /// (the endpoint is /mcp; the sessions API and /health share the listener).
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Accept HTTP requests without a token (loopback addresses only; for experiments).
        #[arg(long, requires = "http")]
        no_auth: bool,
        /// Also accept this name in the Host header (repeatable; loopback names always are).
        #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
        allow_host: Vec<String>,
        /// Open MCP sessions at most, over every token (default 512, or
        /// gateway.max_sessions); past it, the session idle the longest is closed.
        #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions: Option<u32>,
        /// Open MCP sessions at most per token (default 128, or
        /// gateway.max_sessions_per_token); past it, that token's session idle the longest is closed.
        #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions_per_token: Option<u32>,
        /// Close an MCP session idle this many seconds (default 1800, or
        /// gateway.session_idle_timeout_secs).
        #[arg(long, value_name = "SECS", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
        session_idle_timeout: Option<u32>,
        /// Override the configured permission mode for every session.
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        /// The parent model whose input price values the tokens the digest saved
        /// (GET /sessions/{id}/context; a request may name another with ?model=).
        #[arg(long, value_name = "MODEL")]
        parent_model: Option<String>,
    },
    /// Serve the built-in demo MCP server on stdin/stdout.
    DemoServer,
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

#[derive(Debug, Subcommand)]
enum McpCommand {
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
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
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
enum ScopeArg {
    Project,
    User,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DialectArg {
    Core,
    #[value(name = "mcpServers")]
    McpServers,
}

/// Exit codes: 0 ok, 1 the work failed, 2 bad usage or bad config.
const FAILED: u8 = 1;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Supervise { words } = cli.command {
        // It runs a small runtime of its own, and nothing else.
        return supervise(words);
    }
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("core-agent: cannot start the async runtime: {e}");
            return ExitCode::from(FAILED);
        }
    };
    let code = runtime.block_on(run(cli));
    // Children were stopped by Host::shutdown; nothing is left to wait for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::from(code)
}

/// `core-agent __supervise …`: runs one stdio server under supervision.
fn supervise(words: Vec<std::ffi::OsString>) -> ExitCode {
    use core_agent_mcp_transport::supervise::{self, Exit, Plan};
    let exit = match Plan::parse(words) {
        Ok(plan) => supervise::run(&plan),
        Err(e) => Exit::usage(e),
    };
    if let Some(message) = &exit.message {
        eprintln!("core-agent {message}");
    }
    ExitCode::from(u8::try_from(exit.code).unwrap_or(FAILED))
}

/// How stdio servers are launched: through `core-agent __supervise`, so a
/// `kill -9` of core-agent still stops them (directly when the binary's
/// path cannot be found).
fn supervisor() -> Option<core_agent_mcp_transport::Supervisor> {
    match core_agent_mcp_transport::Supervisor::current_exe() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!(
                "core-agent: cannot find its own path ({e}); stdio servers are started without a supervisor"
            );
            None
        }
    }
}

/// Restarting crashed servers, for long-lived runs (`serve`, `call --batch`):
/// 1 s, 2 s, 4 s … at most 5 restarts in 10 minutes. The first delay can be
/// set in milliseconds with `CORE_AGENT_RESTART_DELAY_MS` (the tests do).
fn restart_policy() -> core_agent_mcp_transport::RestartPolicy {
    let mut policy = core_agent_mcp_transport::RestartPolicy::default();
    if let Some(ms) = std::env::var("CORE_AGENT_RESTART_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        policy.first_delay = Duration::from_millis(ms);
    }
    policy
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORE_AGENT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

async fn run(cli: Cli) -> u8 {
    if let Command::DemoServer = cli.command {
        return match core_agent_host::demo::serve_stdio().await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("core-agent: demo-server: {e}");
                FAILED
            }
        };
    }
    // Arguments are checked before any server starts.
    let calls = match &cli.command {
        Command::Call {
            name: Some(name),
            args,
            ..
        } => match parse_call_args(args.as_deref()) {
            Ok(arguments) => vec![CallRequest {
                name: name.clone(),
                arguments,
            }],
            Err(e) => {
                eprintln!("core-agent: {e:#}");
                return USAGE;
            }
        },
        Command::Call {
            batch: Some(file), ..
        } => match parse_batch(file) {
            Ok(calls) => calls,
            Err(e) => {
                eprintln!("core-agent: {e:#}");
                return USAGE;
            }
        },
        _ => Vec::new(),
    };
    let call_timeout = match cli.global.call_timeout {
        None => Some(None),
        Some(s) => seconds(s).map(Some),
    };
    let (Some(start_timeout), Some(call_timeout)) =
        (seconds(cli.global.start_timeout), call_timeout)
    else {
        eprintln!(
            "core-agent: --start-timeout and --call-timeout take a positive number of seconds"
        );
        return USAGE;
    };
    let paths = ConfigPaths::new(&cli.global.agents_dir, cli.global.user_config.clone());
    let overrides = Overrides {
        start_timeout: Some(start_timeout),
        call_timeout,
        no_digest: cli.global.no_mcp_digest,
        session_db: cli.global.session_db.clone(),
        llm: cli.global.mcp_agentic_wrap_llm,
        llm_model: cli.global.mcp_agentic_wrap_model.clone(),
        small_model: cli.global.agentic_small_model.clone(),
        cost_ceiling: cli.global.cost_ceiling,
        no_survey: cli.global.no_survey,
        survey_root: Some(project_root(&cli.global.agents_dir)),
    };
    // Live lines on stderr only for a person watching both streams, and
    // never around JSON output.
    let json_out = match &cli.command {
        Command::Call { json, .. }
        | Command::Tools { json }
        | Command::Mcp(McpCommand::List { json }) => *json,
        _ => true,
    };
    let screen = Screen::new(Screen::wanted(json_out));
    // Prompts read stdin and draw on stderr.
    let can_prompt = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut session =
        SessionOptions::new(cli.global.trust_level.level()).with_id(cli.global.session.clone());
    if let Command::Call { mode, yes, .. } = &cli.command {
        session.mode = mode.map(ModeArg::mode);
        if cli.global.session_db.is_none() {
            session.digest_note = Some(memory_only_note());
        }
        session.prompter = if *yes {
            Arc::new(ApproveAll)
        } else if can_prompt {
            Arc::new(term::TtyPrompter {
                screen: screen.clone(),
            })
        } else {
            Arc::new(RefuseAll)
        };
    }
    match &cli.command {
        Command::Config(ConfigCommand::Schema { dialect }) => {
            let dialect = match dialect {
                DialectArg::Core => Dialect::Core,
                DialectArg::McpServers => Dialect::McpServers,
            };
            out!("{}", core_agent_mcp_config::schema(dialect));
            return 0;
        }
        Command::Mcp(McpCommand::Add {
            name,
            scope,
            env,
            url,
            headers,
            command,
        }) => {
            return add(&paths, name, *scope, env, url.as_deref(), headers, command);
        }
        Command::Mcp(McpCommand::Remove { name, scope }) => return remove(&paths, name, *scope),
        Command::Raw { call_id, pointer } => {
            return raw(
                cli.global.session_db.as_deref(),
                call_id,
                pointer.as_deref(),
            );
        }
        Command::Usage { json } => {
            return usage(
                cli.global.session_db.as_deref(),
                cli.global.session.as_deref(),
                *json,
            );
        }
        Command::Mcp(McpCommand::Init) => return init(&paths),
        Command::Mcp(McpCommand::Logout { name }) => return login::logout(name),
        Command::Mcp(McpCommand::Login {
            name,
            no_browser,
            timeout,
        }) => {
            let Some(timeout) = seconds(*timeout) else {
                eprintln!("core-agent: --timeout takes a positive number of seconds");
                return USAGE;
            };
            let config = match core_agent_mcp_config::load(&paths) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("core-agent: bad config:\n{e}");
                    return USAGE;
                }
            };
            return login::login(&config, name, *no_browser, timeout).await;
        }
        Command::Mcp(McpCommand::Doctor {
            cloud,
            offline,
            json,
        }) => {
            let loaded = core_agent_mcp_config::load(&paths);
            let mut host = HostOptions {
                call_timeout,
                ..HostOptions::default()
            }
            .with_commands(Arc::new(words::commands::CliCommands));
            host.start.timeout = start_timeout;
            host.start.elicitor = Arc::new(NoticeDecline);
            host.start.supervisor = supervisor();
            host.start.credentials = core_agent_mcp_transport::oauth::CredentialsDir::user();
            let doctor_options = DoctorOptions::new(host)
                .with_cloud(*cloud)
                .with_offline(*offline);
            let mut stop = match StopSignals::install() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("core-agent: cannot catch SIGINT/SIGTERM: {e}");
                    return FAILED;
                }
            };
            let report = tokio::select! {
                report = core_agent_host::doctor(loaded.as_ref(), doctor_options) => report,
                signal = stop.next() => {
                    eprintln!("core-agent: {signal}: stopped the servers");
                    return 130;
                }
            };
            print_doctor(&report, *json);
            return if report.errors > 0 { FAILED } else { 0 };
        }
        _ => {}
    }
    let config = match core_agent_mcp_config::load(&paths) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("core-agent: bad config:\n{e}");
            return USAGE;
        }
    };
    if let Command::Config(ConfigCommand::Show { json }) = &cli.command {
        print_config(&config, *json);
        return 0;
    }
    // The gateway's section is checked with the rest of config.json, so
    // one run names every problem of the files.
    let (project_permissions, user_permissions) = permission_files(&cli.global.agents_dir);
    let permissions = match PermissionsConfig::load_checking(
        &project_permissions,
        user_permissions.as_deref(),
        &core_agent_gateway::GatewayConfig::problems,
    ) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("core-agent: bad config:\n{e}");
            return USAGE;
        }
    };
    let (gateway_tokens, gateway_limits) = match serve::gateway_config(&permissions) {
        Ok(g) => (g.tokens, g.limits),
        Err(e) => {
            eprintln!("core-agent: bad config:\n{e}");
            return USAGE;
        }
    };
    let HostConfig {
        mut options,
        notices,
        pricing,
    } = match HostConfig::from_config(&config, permissions, &overrides) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("core-agent: {e}");
            return USAGE;
        }
    };
    for notice in notices {
        eprintln!("core-agent: {notice}");
    }
    options.commands = Some(Arc::new(words::commands::CliCommands));
    options.start.elicitor = if can_prompt {
        Arc::new(term::TtyElicitor::new(screen.clone()))
    } else {
        Arc::new(NoticeDecline)
    };
    options.start.supervisor = supervisor();
    // Long-lived runs bring a crashed server back; a one-shot call does not.
    if matches!(
        cli.command,
        Command::Serve { .. } | Command::Call { batch: Some(_), .. }
    ) {
        options.start.restart = Some(restart_policy());
    }
    // An OAuth scope step-up mid-session shows its page to a person at a
    // terminal; elsewhere the call fails with the login command.
    if std::io::stderr().is_terminal() && std::io::stdin().is_terminal() {
        options.start.browser = Some(Arc::new(login::SystemBrowser::interactive()));
    }
    let env = config.dotenv.over_process();
    let warned = Arc::new(warnings::WarningLog::new(cli.global.quiet));
    // Signals are caught from before the first server is spawned until the
    // last one is stopped: an interrupt while starting drops the start, and
    // dropping a starting server kills its process group.
    let mut stop = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("core-agent: cannot catch SIGINT/SIGTERM: {e}");
            return FAILED;
        }
    };
    if let Command::Serve {
        http,
        no_auth,
        allow_host,
        max_sessions,
        max_sessions_per_token,
        session_idle_timeout,
        mode,
        parent_model,
    } = &cli.command
    {
        // Backends' elicitations go to the client whose call caused them.
        let elicitations = core_agent_gateway::ElicitRouter::new(Duration::from_secs(120));
        let mut options = options;
        options.start.elicitor = elicitations.clone();
        // Clients connect at once; a slow server's tools appear when it is ready.
        let host = Arc::new(Host::launch(&config, &env, options, Arc::new(report_ready)));
        let gateway = GatewayOptions {
            mode: mode.map(ModeArg::mode),
            cost_ceiling: cli.global.cost_ceiling,
            pricing,
            parent_model: parent_model.clone(),
            elicitations: Some(elicitations),
            ..GatewayOptions::default()
        };
        let args = serve::ServeArgs {
            http: *http,
            no_auth: *no_auth,
            allow_hosts: allow_host.clone(),
            // A flag wins over config.json.
            limits: core_agent_gateway::GatewayLimits {
                max_sessions: max_sessions
                    .map(|n| n as usize)
                    .or(gateway_limits.max_sessions),
                max_sessions_per_token: max_sessions_per_token
                    .map(|n| n as usize)
                    .or(gateway_limits.max_sessions_per_token),
                session_idle_timeout_secs: session_idle_timeout
                    .map(u64::from)
                    .or(gateway_limits.session_idle_timeout_secs),
            },
            level: cli.global.trust_level.level(),
            drain: call_timeout.unwrap_or(Duration::from_secs(30)),
            warned: warned.clone(),
        };
        let code = serve::serve(host.clone(), gateway, args, &gateway_tokens, &mut stop).await;
        host.shutdown().await;
        return code;
    }
    if let Command::Mcp(McpCommand::Trust { server, tool, json }) = &cli.command {
        return trust(
            &config,
            &env,
            options,
            server,
            tool.as_deref(),
            *json,
            &mut stop,
        )
        .await;
    }
    // A call waits only for the servers its tools can belong to; listings
    // wait for every server. A call reports a server's start only when it
    // failed (or with --verbose); listings report every one.
    let calling = matches!(cli.command, Command::Call { .. });
    let verbose = cli.global.verbose;
    let startup = Arc::new(Startup::new(
        screen.clone(),
        &config.servers,
        !calling || verbose,
    ));
    let host = if calling {
        let startup = startup.clone();
        let ready = move |s: &core_agent_mcp_transport::Server, summary: Option<&ServerSummary>| {
            startup.ready(s, summary)
        };
        Arc::new(Host::launch(&config, &env, options, Arc::new(ready)))
    } else {
        let ready = |s: &core_agent_mcp_transport::Server, summary: Option<&ServerSummary>| {
            startup.ready(s, summary)
        };
        tokio::select! {
            host = Host::start(&config, &env, options, &ready) => Arc::new(host),
            signal = stop.next() => {
                startup.finish();
                eprintln!("core-agent: {signal} while starting: stopped the servers");
                return 130;
            }
        }
    };
    // Every run says each warning once: listings now that every server has
    // started; a call what is known before it runs (the config's), then,
    // after it, what its servers' catalog brought.
    warned.print_new(&host);
    let session = host.session(session);
    let code = tokio::select! {
        code = execute(&session, &cli.command, calls, &screen) => code,
        signal = stop.next() => {
            startup.finish();
            let when = if host.all_started() { "" } else { " while starting" };
            eprintln!("core-agent: {signal}{when}: stopping the servers");
            130
        }
    };
    startup.finish();
    warned.print_new(&host);
    // Further signals are caught (and ignored) until every server is stopped.
    host.shutdown().await;
    code
}

async fn execute(
    session: &Session,
    command: &Command,
    calls: Vec<CallRequest>,
    screen: &Arc<Screen>,
) -> u8 {
    let host = session.host();
    let level = session.trust_level();
    match command {
        Command::Mcp(McpCommand::List { json }) => {
            let reports = host.server_reports(level);
            if *json {
                print_json(&reports);
            } else if reports.is_empty() {
                outln!("no MCP servers configured");
            } else {
                for r in reports {
                    let mut notes: Vec<String> = r
                        .left_out
                        .iter()
                        .map(|(by, n)| format!("{n} left out by {by}"))
                        .collect();
                    if r.restricted > 0 {
                        notes.push(format!("{} restricted at this trust level", r.restricted));
                    }
                    let mut detail = match &r.error {
                        Some(e) if r.status == core_agent_host::ServerStatus::Error => {
                            format!("error: {}", clean(first_line(e)))
                        }
                        Some(e) => clean(first_line(e)),
                        None if notes.is_empty() => count(r.tools, "tool"),
                        None => format!("{} ({})", count(r.tools, "tool"), notes.join(", ")),
                    };
                    // Only HTTP servers carry credentials.
                    if r.transport == core_agent_host::TransportKind::Http {
                        detail.push_str(&format!("; auth: {}", clean(&r.auth.to_string())));
                    }
                    outln!(
                        "{:<20} {:<6} {:<8} {:<10} {detail}",
                        r.name,
                        r.transport,
                        r.scope.as_str(),
                        r.status
                    );
                    for line in restricted_lines(&r.restricted_tools) {
                        outln!("    {line}");
                    }
                }
            }
            0
        }
        Command::Tools { json } => {
            let tools = host.tool_reports(level);
            if *json {
                print_json(&tools);
            } else {
                for t in tools {
                    let class = if t.read_only { "read-only" } else { "mutating" };
                    let trust = match &t.why_restricted {
                        Some(why) => format!("{} ({why})", levels_only(&t.trust_levels)),
                        None => t.trust_levels.join(", "),
                    };
                    outln!("{}  [{class}; {trust}]", t.name);
                    for line in clean(&t.description).lines() {
                        outln!("    {line}");
                    }
                }
            }
            0
        }
        Command::Call { batch: Some(_), .. } => {
            let label = match calls.len() {
                1 => "batch of 1 call".to_owned(),
                n => format!("batch of {n} calls"),
            };
            let line = CallLine::start(screen, &label);
            let sinks: Vec<ProgressSink> = calls.iter().map(|c| line.sink(Some(&c.name))).collect();
            let outcomes = session.call_batch_with_progress(calls, &sinks).await;
            drop(line);
            let mut failed = false;
            for outcome in outcomes {
                let line = OutcomeLine::new(outcome, render_error);
                failed |= !line.ok;
                match serde_json::to_string(&line) {
                    Ok(text) => outln!("{text}"),
                    Err(e) => eprintln!("core-agent: cannot render JSON: {e}"),
                }
            }
            if failed { FAILED } else { 0 }
        }
        Command::Call { json, .. } => {
            let Some(CallRequest { name, arguments }) = calls.into_iter().next() else {
                return USAGE;
            };
            let line = CallLine::start(screen, &name);
            let called = session
                .call_with_progress(&name, arguments, &line.sink(None))
                .await;
            drop(line);
            match called {
                Ok(result) => {
                    if *json {
                        print_json(&result);
                    } else {
                        print_result(&result);
                    }
                    if result.is_error == Some(true) {
                        eprintln!("core-agent: `{name}` reported an error");
                        FAILED
                    } else {
                        0
                    }
                }
                Err(
                    e @ (core_agent_host::Error::UnknownTool { .. }
                    | core_agent_host::Error::Withheld { .. }),
                ) => {
                    eprintln!("core-agent: {}", render_error(&e));
                    USAGE
                }
                Err(e) => {
                    eprintln!("core-agent: {}", clean(&render_error(&e)));
                    FAILED
                }
            }
        }
        Command::DemoServer
        | Command::Supervise { .. }
        | Command::Serve { .. }
        | Command::Config(_)
        | Command::Raw { .. }
        | Command::Usage { .. } => 0,
        Command::Mcp(_) => USAGE,
    }
}

fn add(
    paths: &ConfigPaths,
    name: &str,
    scope: ScopeArg,
    env: &[String],
    url: Option<&str>,
    headers: &[String],
    command: &[String],
) -> u8 {
    let server = match NewServer::from_args(url, headers, env, command) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("core-agent: {}", words::config::add_error(&e));
            return USAGE;
        }
    };
    let Some(path) = scope_file(paths, scope) else {
        eprintln!(
            "core-agent: HOME is not set, so there is no user config; pass --user-config FILE"
        );
        return USAGE;
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            eprintln!("core-agent: cannot read {}: {e}", path.display());
            return FAILED;
        }
    };
    let text = match core_agent_mcp_config::add_server(&path, existing.as_deref(), name, &server) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("core-agent: {}", words::config::config_error(&e));
            return USAGE;
        }
    };
    if let Err(e) = write_file(&path, &text) {
        eprintln!("core-agent: cannot write {}: {e}", path.display());
        return FAILED;
    }
    for (k, v) in server.pairs() {
        if !v.contains("${")
            && let Some(kind) = core_agent_mcp_config::secret_kind(k, v)
        {
            eprintln!(
                "core-agent: warning: `{k}` holds {kind}; put it in .env and write ${{{k}}} instead, so the file can be committed"
            );
        }
    }
    outln!("added server `{name}` to {}", path.display());
    0
}

fn remove(paths: &ConfigPaths, name: &str, scope: Option<ScopeArg>) -> u8 {
    let wanted = scope.map(|s| match s {
        ScopeArg::Project => Scope::Project,
        ScopeArg::User => Scope::User,
    });
    let everywhere = match core_agent_mcp_config::remove_from(paths, name, wanted) {
        Ok(core_agent_mcp_config::Removal::Removed { path, text }) => {
            if let Err(e) = write_file(&path, &text) {
                eprintln!("core-agent: cannot write {}: {e}", path.display());
                return FAILED;
            }
            outln!("removed server `{name}` from {}", path.display());
            return 0;
        }
        Ok(core_agent_mcp_config::Removal::NotFound { configured }) => configured,
        Err(e) => {
            eprintln!("core-agent: {e}");
            return USAGE;
        }
    };
    let known = if everywhere.is_empty() {
        "no servers are configured".to_owned()
    } else {
        format!("configured servers: {}", everywhere.join(", "))
    };
    eprintln!("core-agent: no server named `{name}`; {known}");
    USAGE
}

fn open_db(path: Option<&Path>) -> Result<SqliteStore, u8> {
    let Some(path) = path else {
        eprintln!(
            "core-agent: pass --session-db PATH: raw payloads and telemetry are only kept in a session database"
        );
        return Err(USAGE);
    };
    if !path.exists() {
        eprintln!(
            "core-agent: {} does not exist; it is created by a run with --session-db",
            path.display()
        );
        return Err(USAGE);
    }
    SqliteStore::open(path).map_err(|e| {
        eprintln!("core-agent: {e}");
        FAILED
    })
}

fn raw(db: Option<&Path>, call_id: &str, pointer: Option<&str>) -> u8 {
    let store = match open_db(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.get(call_id) {
        Ok(Some(record)) => match pointer {
            None => {
                outln!("{}", record.payload);
                0
            }
            Some(p) => match core_agent_digest::extract(&record.payload, p) {
                Ok(part) => {
                    outln!("{part}");
                    0
                }
                Err(e) => {
                    eprintln!("core-agent: {e}");
                    FAILED
                }
            },
        },
        Ok(None) => {
            eprintln!("core-agent: no raw payload is stored under `{call_id}`");
            FAILED
        }
        Err(e) => {
            eprintln!("core-agent: {e}");
            FAILED
        }
    }
}

fn usage(db: Option<&Path>, session: Option<&str>, json: bool) -> u8 {
    let store = match open_db(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let session = match session {
        Some(s) => s.to_owned(),
        None => match store.sessions().map(|s| s.last().cloned()) {
            Ok(Some(last)) => last,
            Ok(None) => {
                eprintln!("core-agent: the database has no digest telemetry yet");
                return FAILED;
            }
            Err(e) => {
                eprintln!("core-agent: {e}");
                return FAILED;
            }
        },
    };
    let usage = match store.usage(&session) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("core-agent: {e}");
            return FAILED;
        }
    };
    if json {
        print_json(&UsageReport::new(session, usage));
        return 0;
    }
    outln!("session {session}");
    // The JSON lists every method (the spec's shape); the text only those used.
    for (method, calls) in usage.digest_methods.counts.iter().filter(|(_, n)| **n > 0) {
        let saved = usage
            .digest_methods
            .bytes_saved
            .get(method)
            .copied()
            .unwrap_or(0);
        let calls = count(usize::try_from(*calls).unwrap_or(usize::MAX), "call");
        outln!("  {method:<16} {calls}, {saved} bytes saved");
    }
    let s = &usage.digest_savings;
    outln!(
        "  structural {} / agentic {} calls; ~{} parent tokens saved; subagent {} in / {} out tokens, ${:.6}",
        s.structural_calls,
        s.agentic_calls,
        s.parent_tokens_saved,
        s.subagent_input_tokens,
        s.subagent_output_tokens,
        s.subagent_cost_usd
    );
    let llm_events = [
        (s.subagent_cached_input_tokens, "input tokens cached"),
        (s.ceiling_skips, "skipped at the cost ceiling"),
        (s.subagent_failures, "LLM call(s) failed"),
        (
            s.subagent_not_smaller,
            "summary(ies) dropped as not smaller",
        ),
        (
            s.subagent_worst_case_calls,
            "LLM call(s) billed at their worst case",
        ),
    ];
    let said: Vec<String> = llm_events
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !said.is_empty() {
        outln!("  {}", said.join("; "));
    }
    0
}

/// `mcp trust`: starts only `server`, pins what it lists now (one tool or
/// all) and says what changed.
async fn trust(
    config: &core_agent_mcp_config::Config,
    env: &dyn core_agent_mcp_config::Env,
    options: HostOptions,
    server: &str,
    tool: Option<&str>,
    json: bool,
    stop: &mut StopSignals,
) -> u8 {
    if config.server(server).is_none() {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        let hint = match core_agent_mcp_config::closest(server, &names) {
            Some(n) => format!("did you mean `{n}`?"),
            None => "run `core-agent mcp list` to see the configured servers".to_owned(),
        };
        eprintln!("core-agent: no server named `{server}`; {hint}");
        return USAGE;
    }
    let Some(lock) = config.lock.clone() else {
        eprintln!("core-agent: this config has no mcp.lock");
        return USAGE;
    };
    let mut only = config.clone();
    only.servers.retain(|s| s.name == server);
    let host = tokio::select! {
        host = Host::start(&only, env, options, &report_ready) => host,
        signal = stop.next() => {
            eprintln!("core-agent: {signal} while starting: stopped the servers");
            return 130;
        }
    };
    let result = host.trust(server, tool);
    host.shutdown().await;
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("core-agent: mcp trust: {}", clean(&e.to_string()));
            return FAILED;
        }
    };
    if json {
        print_json(&report);
        return 0;
    }
    for t in &report {
        match &t.change {
            Some(change) => outln!("{server}/{}: {} ({})", t.tool, t.status, clean(change)),
            None => outln!("{server}/{}: {}", t.tool, t.status),
        }
    }
    let pinned = report.iter().filter(|t| t.status != "removed").count();
    outln!(
        "pinned {} of `{server}` in {}",
        count(pinned, "tool"),
        lock.display()
    );
    0
}

fn init(paths: &ConfigPaths) -> u8 {
    if paths.project.exists() {
        outln!("{} already exists; left as it is", paths.project.display());
        return 0;
    }
    match write_file(&paths.project, core_agent_mcp_config::INIT_TEXT) {
        Ok(()) => {
            outln!("created {}", paths.project.display());
            0
        }
        Err(e) => {
            eprintln!("core-agent: cannot write {}: {e}", paths.project.display());
            FAILED
        }
    }
}

fn scope_file(paths: &ConfigPaths, scope: ScopeArg) -> Option<PathBuf> {
    match scope {
        ScopeArg::Project => Some(paths.project.clone()),
        ScopeArg::User => paths.user.clone(),
    }
}

/// Writes `text` to `path` through a temporary file, creating the directory.
fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

fn print_doctor(report: &DoctorReport, json: bool) {
    let report = &doctor_worded(report);
    if json {
        print_json(report);
        return;
    }
    for f in &report.findings {
        let mut line = format!("{:<9}{}", format!("{}:", f.severity), f.check);
        if let Some(server) = &f.server {
            line.push_str(&format!(" [{server}]"));
        }
        if let Some(field) = &f.field {
            line.push_str(&format!(" {field}"));
        }
        outln!("{line}\n        {}; {}", clean(&f.message), f.fix);
    }
    for s in &report.servers {
        let left_out: Vec<String> = s
            .left_out
            .iter()
            .map(|(by, n)| format!("{n} left out by {by}"))
            .collect();
        let tools = if left_out.is_empty() {
            count(s.tools, "tool")
        } else {
            format!("{} ({})", count(s.tools, "tool"), left_out.join(", "))
        };
        match &s.error {
            None => outln!(
                "server  {} ({}): connected, {tools} in {} ms",
                s.name,
                s.transport,
                s.ms
            ),
            Some(e) if s.status != core_agent_host::ServerStatus::Error => {
                outln!("server  {}: {}: {}", s.name, s.status, clean(first_line(e)))
            }
            Some(e) => outln!(
                "server  {} ({}): error after {} ms: {}",
                s.name,
                s.transport,
                s.ms,
                clean(first_line(e))
            ),
        }
        if s.transport == core_agent_host::TransportKind::Http {
            outln!("        auth: {}", clean(&s.auth.to_string()));
        }
        for line in restricted_lines(&s.restricted_tools) {
            outln!("        {line}");
        }
    }
    if !report.servers.is_empty() {
        outln!(
            "tools   {}, about {} tokens of tool definitions per request",
            count(report.tools, "tool"),
            report.token_estimate
        );
    }
    outln!(
        "doctor: {}, {}",
        count(report.errors, "error"),
        count(report.warnings, "warning")
    );
}

fn print_config(config: &core_agent_mcp_config::Config, json: bool) {
    let report = core_agent_host::config_report(config);
    if json {
        print_json(&report);
        return;
    }
    outln!("files (highest precedence first):");
    for f in &report.files {
        let state = match (&f.dialect, f.found) {
            (Some(d), true) => format!("{} dialect", d.as_str()),
            _ => "not found".to_owned(),
        };
        outln!("  {:<8} {} ({state})", f.scope.as_str(), f.path);
    }
    if let Some(dotenv) = &report.dotenv {
        outln!(".env: {dotenv}");
    }
    outln!("settings:");
    for (name, setting) in &report.settings {
        match setting {
            Some(s) => outln!("  {name} = {} (from {})", s.value, s.source),
            None => outln!("  {name}: not set"),
        }
    }
    outln!("servers:");
    for server in &report.servers {
        print_server_config(server);
    }
    if !report.left_out.is_empty() {
        outln!("not started:");
        for l in &report.left_out {
            outln!("  {} (from {}): {}", l.name, l.source, l.reason);
        }
    }
    for w in &report.warnings {
        outln!("warning: {w}");
    }
}

/// One server of `config show`: its header line, then each setting that
/// is not at its empty default.
fn print_server_config(s: &core_agent_host::ServerConfigReport) {
    use core_agent_host::ConnectionReport;
    outln!(
        "  {} ({}, {} scope, from {})",
        s.name,
        s.transport,
        s.scope,
        s.source
    );
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut lines: Vec<(&str, String)> = Vec::new();
    match &s.connection {
        ConnectionReport::Stdio { command, args, env } => {
            lines.push(("command", command.clone()));
            if !args.is_empty() {
                lines.push(("args", args.join(" ")));
            }
            if !env.is_empty() {
                lines.push(("env", pairs(env)));
            }
        }
        ConnectionReport::Http { url, headers, auth } => {
            lines.push(("url", url.clone()));
            if !headers.is_empty() {
                lines.push(("headers", pairs(headers)));
            }
            if let Some(auth) = auth {
                if let Some(google) = &auth.google_oauth {
                    let scopes = google.scopes.join(" ");
                    lines.push(("auth", format!("google_oauth (scopes: {scopes})")));
                }
                if let Some(oauth) = &auth.oauth {
                    let mut parts = Vec::new();
                    if !oauth.scopes.is_empty() {
                        parts.push(format!("scopes: {}", oauth.scopes.join(" ")));
                    }
                    if let Some(id) = &oauth.client_id {
                        parts.push(format!("client_id: {id}"));
                    }
                    if let Some(secret) = &oauth.client_secret {
                        parts.push(format!("client_secret: {secret}"));
                    }
                    if let Some(url) = &oauth.client_metadata_url {
                        parts.push(format!("client_metadata_url: {url}"));
                    }
                    if let Some(port) = oauth.callback_port {
                        parts.push(format!("callback_port: {port}"));
                    }
                    let detail = if parts.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", parts.join("; "))
                    };
                    lines.push(("auth", format!("oauth{detail}")));
                }
            }
        }
    }
    if !s.tools.is_empty() {
        lines.push(("tools", s.tools.join(", ")));
    }
    if !s.blocked_tools.is_empty() {
        lines.push(("blocked_tools", s.blocked_tools.join(", ")));
    }
    if let Some(levels) = &s.allowed_trust_levels {
        let levels: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        lines.push(("allowed_trust_levels", levels.join(", ")));
    }
    for (tool, levels) in &s.tool_policies {
        let levels: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        lines.push(("tool_policy", format!("{tool}: {}", levels.join(", "))));
    }
    if let Some(cloud) = &s.cloud {
        lines.push(("cloud", cloud.as_str().to_owned()));
    }
    if s.read_only {
        lines.push(("read_only", "true".to_owned()));
    }
    if s.agentic_never {
        lines.push(("agentic_never", "true".to_owned()));
    }
    for (tool, note) in &s.tool_notes {
        lines.push(("tool_note", format!("{tool}: {note}")));
    }
    let l = &s.limits;
    lines.push((
        "limits",
        format!(
            "max_tools {}, max_pages {}, max_input_schema_bytes {}, max_result_bytes {}, call_timeout_ms {}, max_concurrent_calls {}, max_message_bytes {}",
            l.max_tools,
            l.max_pages,
            l.max_input_schema_bytes,
            l.max_result_bytes,
            l.call_timeout_ms,
            l.max_concurrent_calls,
            l.max_message_bytes
        ),
    ));
    for (k, v) in lines {
        outln!("    {k}: {}", clean(&v));
    }
}

/// What a digest of a run without `--session-db` says of its raw payload:
/// it is kept in memory, so it dies with the process (a batch is read whole
/// before it runs, so none of its calls can name a `call_id` it returns);
/// how to keep it.
fn memory_only_note() -> String {
    "the raw payload is kept in memory only and is gone when this run ends; to keep raw payloads, run with --session-db PATH, then `core-agent raw <call_id> --session-db PATH` prints it whole".to_owned()
}

fn parse_call_args(raw: Option<&str>) -> anyhow::Result<JsonObject> {
    let text = match raw {
        None => return Ok(JsonObject::new()),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the arguments from stdin")?;
            s
        }
        Some(s) => s.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(&text).context(
        "the arguments are not valid JSON; pass an object such as '{\"path\": \"/tmp\"}'",
    )?;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        other => anyhow::bail!(
            "the arguments must be a JSON object, not {other}; pass an object such as '{{\"path\": \"/tmp\"}}'"
        ),
    }
}

/// Reads a batch: one JSON object `{"name": …, "arguments": {…}}` per line.
fn parse_batch(file: &str) -> anyhow::Result<Vec<CallRequest>> {
    let text = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the batch from stdin")?;
        s
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the batch file {file}"))?
    };
    let mut calls = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let call =
            BatchLine::parse(line).map_err(|e| anyhow::anyhow!("batch line {}: {e}", i + 1))?;
        calls.push(call);
    }
    Ok(calls)
}

fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s))
}

/// One stderr line per server as it becomes ready or fails (for `serve`,
/// whose stdout may be the MCP channel: never live lines).
fn report_ready(server: &core_agent_mcp_transport::Server, summary: Option<&ServerSummary>) {
    eprintln!("{}", term::ready_line(server, summary).0);
}

fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => outln!("{s}"),
        Err(e) => eprintln!("core-agent: cannot render JSON: {e}"),
    }
}

fn print_result(result: &CallToolResult) {
    let mut printed = false;
    for block in &result.content {
        if let Some(text) = block.as_text() {
            outln!("{}", clean(&text.text));
        } else {
            outln!("{}", clean(&describe_block(block)));
        }
        printed = true;
    }
    if let (false, Some(structured)) = (printed, &result.structured_content) {
        print_json(structured);
    }
}

fn describe_block(block: &ContentBlock) -> String {
    match serde_json::to_value(block) {
        Ok(serde_json::Value::Object(map)) => {
            let kind = map
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("content");
            let detail = ["uri", "mimeType", "name"]
                .iter()
                .filter_map(|k| map.get(*k).and_then(|v| v.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            format!("[{kind}: {detail}]")
        }
        _ => "[content]".to_owned(),
    }
}

/// A Host error as this command says it: a refused ask also names `--yes`.
/// The doctor's report with each remedy in the CLI's words (its commands).
fn doctor_worded(report: &DoctorReport) -> DoctorReport {
    use core_agent_host::Remedy;
    let mut report = report.clone();
    for f in &mut report.findings {
        match f.remedy {
            Some(Remedy::FixThenRecheck { what }) => {
                f.fix = format!("fix {what}, then run `core-agent mcp doctor` again");
            }
            Some(Remedy::ReviewChangedTool) => {
                f.fix = "compare the change with what the tool should do; if it is expected, run the `core-agent mcp trust` command named above".to_owned();
            }
            Some(Remedy::RepairLock) => {
                f.fix = "fix or delete mcp.lock, then run `core-agent mcp trust`".to_owned();
            }
            _ => {}
        }
    }
    report
}

fn render_error(e: &core_agent_host::Error) -> String {
    match e {
        core_agent_host::Error::Denied {
            unanswered_ask: true,
            ..
        } => format!("{e}, or run with --yes to approve every ask of this run"),
        core_agent_host::Error::UnknownTool { name, suggestions } if suggestions.is_empty() => {
            format!("no tool named `{name}`; run `core-agent tools` to list the tools")
        }
        _ => e.to_string(),
    }
}

pub(crate) fn clean(s: &str) -> String {
    core_agent_host::terminal_safe(s)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// `creator only`, `creator, agent only`, `no trust level`.
fn levels_only(levels: &[&str]) -> String {
    if levels.is_empty() {
        "no trust level".to_owned()
    } else {
        format!("{} only", levels.join(", "))
    }
}

/// A server's restricted tools, grouped by levels and reason:
/// `creator only (mutating, not marked non-destructive): git_add, git_commit`.
fn restricted_lines(tools: &[core_agent_host::RestrictedTool]) -> Vec<String> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for t in tools {
        let head = format!("{} ({})", levels_only(&t.trust_levels), t.why);
        match groups.iter_mut().find(|(h, _)| *h == head) {
            Some((_, names)) => names.push(&t.tool),
            None => groups.push((head, vec![&t.tool])),
        }
    }
    groups
        .into_iter()
        .map(|(head, names)| clean(&format!("{head}: {}", names.join(", "))))
        .collect()
}

/// `1 tool`, `2 tools`: a count with its noun in the right number.
pub(crate) fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// SIGINT and SIGTERM, caught from the moment they are installed: while
/// they are, neither kills the process, so it can stop its servers first.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the next signal, with its name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "interrupted",
            _ = self.terminate.recv() => "terminated",
        }
    }
}

/// Declines every elicitation with a one-line notice on stderr.
struct NoticeDecline;

impl Elicitor for NoticeDecline {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        eprintln!(
            "core-agent: mcp: {server}: declined an elicitation request ({}); no terminal to ask on",
            clean(&describe_request(&request))
        );
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}
