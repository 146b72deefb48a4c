//! The `core-agent` command: parses arguments, wires the Host, prints.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use core_agent::{Host, HostOptions};
use core_agent_mcp_config::{ConfigPaths, ProcessEnv};
use core_agent_mcp_transport::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitResult, ElicitationAction, JsonObject,
};
use core_agent_mcp_transport::{BoxFuture, Elicitor, Server, Status, describe_request};

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
    /// Limit on each tool call, in seconds; the request is cancelled on the server past it.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30.0)]
    call_timeout: f64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect the configured MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// List the namespaced tools the model would see.
    Tools {
        /// Print a JSON array of {name, server, tool, description, input_schema}.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool by its namespaced name.
    Call {
        /// The namespaced tool name, as `core-agent tools` lists it.
        name: String,
        /// The arguments as a JSON object (default `{}`); `-` reads them from stdin.
        args: Option<String>,
        /// Print the whole MCP CallToolResult as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the built-in demo MCP server on stdin/stdout.
    DemoServer,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// One line per configured server: transport, scope, status, tool count, error.
    List {
        /// Print a JSON array of {name, transport, scope, status, tools, error}.
        #[arg(long)]
        json: bool,
    },
}

/// Exit codes: 0 ok, 1 the work failed, 2 bad usage or bad config.
const FAILED: u8 = 1;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        return match core_agent::demo::serve_stdio().await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("core-agent: demo-server: {e}");
                FAILED
            }
        };
    }
    // Arguments are checked before any server starts.
    let call_args = match &cli.command {
        Command::Call { args, .. } => match parse_call_args(args.as_deref()) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("core-agent: {e:#}");
                return USAGE;
            }
        },
        _ => None,
    };
    let (Some(start_timeout), Some(call_timeout)) = (
        seconds(cli.global.start_timeout),
        seconds(cli.global.call_timeout),
    ) else {
        eprintln!(
            "core-agent: --start-timeout and --call-timeout take a positive number of seconds"
        );
        return USAGE;
    };
    let paths = ConfigPaths::new(&cli.global.agents_dir, cli.global.user_config.clone());
    let config = match core_agent_mcp_config::load(&paths) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("core-agent: bad config:\n{e}");
            return USAGE;
        }
    };
    let mut options = HostOptions {
        call_timeout,
        ..HostOptions::default()
    };
    options.start.timeout = start_timeout;
    options.start.elicitor = Arc::new(NoticeDecline);
    let mut host = Host::start(&config, &ProcessEnv, options, &report_ready).await;
    for warning in host.catalog().warnings() {
        eprintln!("core-agent: mcp: {warning}");
    }
    let code = tokio::select! {
        code = execute(&host, &cli.command, call_args) => code,
        signal = interrupted() => {
            eprintln!("core-agent: {signal}: stopping the servers");
            130
        }
    };
    host.shutdown().await;
    code
}

async fn execute(host: &Host, command: &Command, call_args: Option<JsonObject>) -> u8 {
    match command {
        Command::Mcp(McpCommand::List { json }) => {
            let reports = host.server_reports();
            if *json {
                print_json(&reports);
            } else if reports.is_empty() {
                println!("no MCP servers configured");
            } else {
                for r in reports {
                    let detail = match &r.error {
                        Some(e) => format!("error: {}", first_line(e)),
                        None => format!("{} tools", r.tools),
                    };
                    println!(
                        "{:<20} {:<6} {:<8} {:<10} {detail}",
                        r.name, r.transport, r.scope, r.status
                    );
                }
            }
            0
        }
        Command::Tools { json } => {
            let tools = host.tool_reports();
            if *json {
                print_json(&tools);
            } else {
                for t in tools {
                    println!("{}\n    {}", t.name, first_line(&t.description));
                }
            }
            0
        }
        Command::Call { name, json, .. } => {
            let args = call_args.unwrap_or_default();
            match host.call(name, args).await {
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
                Err(e @ core_agent::Error::UnknownTool { .. }) => {
                    eprintln!("core-agent: {e}");
                    USAGE
                }
                Err(e) => {
                    eprintln!("core-agent: {e}");
                    FAILED
                }
            }
        }
        Command::DemoServer => 0,
    }
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

fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s))
}

/// One stderr line per server as it becomes ready or fails.
fn report_ready(server: &Server) {
    let ms = server.elapsed().as_millis();
    match server.status() {
        Status::Connected => {
            eprintln!(
                "core-agent: mcp: {} ({}): {} tools in {ms} ms",
                server.name(),
                server.transport(),
                server.tools().len()
            )
        }
        Status::Error | Status::Closed => eprintln!(
            "core-agent: mcp: {} ({}): error after {ms} ms: {}",
            server.name(),
            server.transport(),
            server.error().map(ToString::to_string).unwrap_or_default()
        ),
    }
}

fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("core-agent: cannot render JSON: {e}"),
    }
}

fn print_result(result: &CallToolResult) {
    let mut printed = false;
    for block in &result.content {
        if let Some(text) = block.as_text() {
            println!("{}", text.text);
        } else {
            println!("{}", describe_block(block));
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// Resolves when the process is asked to stop (Ctrl-C or SIGTERM).
async fn interrupted() -> &'static str {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted",
        () = term => "terminated",
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
        let how = if std::io::stdin().is_terminal() {
            "this command cannot prompt yet"
        } else {
            "no terminal to ask on"
        };
        eprintln!(
            "core-agent: mcp: {server}: declined an elicitation request ({}); {how}",
            describe_request(&request)
        );
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}
