//! The `core-agent` command: parses arguments, wires the Host, prints.

#![allow(clippy::print_stderr)]

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
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
use cli::{Cli, Command, ConfigCommand, DialectArg, McpCommand, ModeArg};
use commands::mcp::{login, trust};
use commands::{call, config, mcp, serve};
use core_agent_gateway::GatewayOptions;
use core_agent_host::{
    CallRequest, DoctorOptions, Host, HostConfig, HostOptions, OutcomeLine, Overrides, Session,
    SessionOptions, load_permissions, project_root,
};
use core_agent_mcp_config::{ConfigPaths, Dialect};
use core_agent_mcp_policy::ServerSummary;
use core_agent_mcp_transport::ProgressSink;
use core_agent_permissions::{ApproveAll, RefuseAll};
use render::{
    clean, count, first_line, levels_only, print_json, print_result, render_error, report_ready,
    restricted_lines,
};
use setup::{NoticeDecline, restart_policy, seconds, supervisor};
use signals::StopSignals;
use term::{CallLine, Screen, Startup};

/// Exit codes: 0 ok, 1 the work failed, 2 bad usage or bad config.
const FAILED: u8 = 1;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Supervise { words } = cli.command {
        // It runs a small runtime of its own, and nothing else.
        return commands::supervise::supervise(words);
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
        } => match call::parse_call_args(args.as_deref()) {
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
        } => match call::parse_batch(file) {
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
            session.digest_note = Some(call::memory_only_note());
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
            return mcp::add::add(&paths, name, *scope, env, url.as_deref(), headers, command);
        }
        Command::Mcp(McpCommand::Remove { name, scope }) => {
            return mcp::remove::remove(&paths, name, *scope);
        }
        Command::Raw { call_id, pointer } => {
            return commands::raw::raw(
                cli.global.session_db.as_deref(),
                call_id,
                pointer.as_deref(),
            );
        }
        Command::Usage { json } => {
            return commands::usage::usage(
                cli.global.session_db.as_deref(),
                cli.global.session.as_deref(),
                *json,
            );
        }
        Command::Mcp(McpCommand::Init) => return mcp::init::init(&paths),
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
            };
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
            mcp::doctor::print_doctor(&report, *json);
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
        config::print_config(&config, *json);
        return 0;
    }
    let permissions = match load_permissions(&cli.global.agents_dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("core-agent: bad config:\n{e}");
            return USAGE;
        }
    };
    let gateway_tokens = permissions.gateway_tokens.clone();
    let gateway_limits = permissions.gateway_limits;
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
            limits: core_agent_permissions::GatewayLimits {
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
        return trust::trust(
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
