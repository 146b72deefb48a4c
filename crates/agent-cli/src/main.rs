//! The `core-agent` command: parses arguments, wires the Host, prints.

#![allow(clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

// First: its `outln!` and `out!` are used by the modules below it.
#[macro_use]
mod render;
mod cli;
mod commands;
mod elicit_form;
mod setup;
mod signals;
mod term;
mod warnings;
mod words;

use clap::Parser;
use cli::{Cli, Command, ConfigCommand, McpCommand};
use commands::mcp;
// The modules name these `crate::clean` and `crate::count`.
use render::{clean, count};

/// Exit codes: 0 ok, 1 the work failed, 2 bad usage or bad config.
const FAILED: u8 = 1;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Supervise { words } = cli.command {
        // It runs a small runtime of its own, and nothing else.
        return commands::supervise::run(words);
    }
    // OpenTelemetry export, when the OTEL_EXPORTER_OTLP_* variables ask for it.
    if matches!(cli.command, Command::Serve(_)) {
        match core_agent_gateway::Otel::from_env() {
            Ok(Some(otel)) => {
                let _ = OTEL.set(otel);
            }
            Ok(None) => {}
            Err(e) => {
                errln!("core-agent: {e}");
                return ExitCode::from(USAGE);
            }
        }
    }
    init_tracing(OTEL.get());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // rmcp's request futures are deep: a debug build's frames need more
        // than tokio's default 2 MiB once spans are entered around them.
        .thread_stack_size(8 * 1024 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("core-agent: cannot start the async runtime: {e}");
            return ExitCode::from(FAILED);
        }
    };
    let code = runtime.block_on(run(cli));
    // Children were stopped by Host::shutdown; nothing is left to wait for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    // The spans and metrics still queued go to the collector (a collector
    // that does not answer holds the exit 5 s at most).
    if let Some(otel) = OTEL.get() {
        otel.shutdown(Duration::from_secs(5));
    }
    ExitCode::from(code)
}

/// OpenTelemetry export of `serve`, when configured: set before the runtime
/// starts, flushed after it stopped.
pub(crate) static OTEL: std::sync::OnceLock<core_agent_gateway::Otel> = std::sync::OnceLock::new();

/// Log lines on stderr (`CORE_AGENT_LOG`), and the spans `otel` exports.
fn init_tracing(otel: Option<&core_agent_gateway::Otel>) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORE_AGENT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rmcp=off"));
    // Colours only for a person at a terminal: a file, a pipe or a
    // container's log collector gets plain text (and `NO_COLOR` is heard).
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let log = tracing_subscriber::fmt::layer()
        .with_writer(|| render::RedactedStderr)
        .with_ansi(ansi)
        .with_target(false)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(log);
    match otel.and_then(|o| o.layer()) {
        Some(spans) => registry.with(spans).init(),
        None => registry.init(),
    }
}

/// One match: each command is run by its module in `commands/`.
async fn run(cli: Cli) -> u8 {
    let Cli {
        mut global,
        command,
    } = cli;
    // Run from a project's subdirectory, the project is found the way git
    // finds a repository (the default `.agents` only; a given one is kept).
    if global.agents_dir.as_os_str() == ".agents"
        && let Ok(here) = std::env::current_dir()
    {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        if let Some(found) =
            core_agent_mcp_config::find_agents_dir(&here, ".agents", home.as_deref())
        {
            global.agents_dir = found;
        }
    }
    let global = &global;
    match command {
        Command::Mcp(McpCommand::List { json }) => mcp::list::run(global, json).await,
        Command::Mcp(McpCommand::Doctor {
            cloud,
            offline,
            json,
        }) => mcp::doctor::run(global, cloud, offline, json).await,
        Command::Mcp(McpCommand::Add {
            name,
            scope,
            env,
            url,
            headers,
            command,
        }) => mcp::add::run(
            global,
            &name,
            scope,
            &env,
            url.as_deref(),
            &headers,
            &command,
        ),
        Command::Mcp(McpCommand::Remove { name, scope }) => mcp::remove::run(global, &name, scope),
        Command::Mcp(McpCommand::Init) => mcp::init::run(global),
        Command::Mcp(McpCommand::Login {
            name,
            no_browser,
            timeout,
        }) => mcp::login::run(global, &name, no_browser, timeout).await,
        Command::Mcp(McpCommand::Logout { name }) => mcp::login::logout(global, &name),
        Command::Mcp(McpCommand::Trust {
            server,
            tool,
            json,
            store,
        }) => mcp::trust::run(global, &server, tool.as_deref(), json, store).await,
        Command::Config(ConfigCommand::Show { json }) => commands::config::show(global, json),
        Command::Config(ConfigCommand::Schema { dialect }) => {
            commands::config::schema(global, dialect)
        }
        Command::Tools { json } => commands::tools::run(global, json).await,
        Command::Call(call) => commands::call::run(global, call).await,
        Command::Raw {
            call_id,
            pointer,
            store,
        } => commands::raw::run(global, &call_id, pointer.as_deref(), store).await,
        Command::Usage { json, store } => commands::usage::run(global, json, store).await,
        Command::Serve(serve) => commands::serve::run(global, serve).await,
        Command::DemoServer => commands::demo_server::run().await,
        Command::Completions { shell } => commands::completions::run(shell),
        Command::Man { dir } => commands::man::run(dir.as_deref()),
        // `main` runs it before the runtime starts.
        Command::Supervise { .. } => FAILED,
    }
}
