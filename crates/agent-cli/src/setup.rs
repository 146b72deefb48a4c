//! From the global flags to a host: what the commands share. [`Setup`]
//! checks the flags every command takes; [`Launch`] reads the config files
//! into a host's options for the commands that start servers; and
//! [`with_session`] starts them, runs a listing's or a call's work in one
//! session, and stops them, a signal included.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use core_agent_digest::Pricing;
use core_agent_gateway::{AuditSettings, GatewayConfig, GatewayLimits, GatewayToken, OAuthConfig};
use core_agent_host::{
    Host, HostConfig, HostOptions, Overrides, Session, SessionOptions, permission_files,
    project_root,
};
use core_agent_mcp_config::{Config, ConfigPaths, LINEAGE_VAR, Lineage, OwnProgram};
use core_agent_mcp_policy::ServerSummary;
use core_agent_mcp_transport::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use core_agent_mcp_transport::{BoxFuture, Elicitor};
use core_agent_permissions::PermissionsConfig;

use crate::cli::Global;
use crate::commands::mcp::login;
use crate::render::{clean, describe_request};
use crate::signals::StopSignals;
use crate::term::{self, Screen, Startup};
use crate::warnings::WarningLog;
use crate::{FAILED, USAGE};

/// The global flags, checked, and what they say about the config and the
/// host. Every command but `demo-server` goes through it, so a bad
/// `--start-timeout` or `--call-timeout` is refused whatever the command.
pub(crate) struct Setup {
    pub(crate) paths: ConfigPaths,
    pub(crate) start_timeout: Duration,
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) overrides: Overrides,
    /// `serve --server NAME`: only that server is started.
    pub(crate) only_server: Option<String>,
}

impl Setup {
    /// `None` when a flag is refused; the reason is printed.
    pub(crate) fn new(global: &Global) -> Option<Setup> {
        let call_timeout = match global.call_timeout {
            None => Some(None),
            Some(s) => seconds(s).map(Some),
        };
        let (Some(start_timeout), Some(call_timeout)) =
            (seconds(global.start_timeout), call_timeout)
        else {
            errln!(
                "core-agent: --start-timeout and --call-timeout take a positive number of seconds"
            );
            return None;
        };
        let paths = ConfigPaths::new(&global.agents_dir, global.user_config.clone());
        let overrides = Overrides::default()
            .with_start_timeout(Some(start_timeout))
            .with_call_timeout(call_timeout)
            .with_no_digest(global.no_mcp_digest)
            .with_session_db(global.session_db.clone())
            .with_llm(global.mcp_agentic_wrap_llm)
            .with_llm_model(global.mcp_agentic_wrap_model.clone())
            .with_small_model(global.agentic_small_model.clone())
            .with_cost_ceiling(global.cost_ceiling)
            .with_no_survey(global.no_survey)
            .with_survey_root(Some(project_root(&global.agents_dir)));
        Some(Setup {
            paths,
            start_timeout,
            call_timeout,
            overrides,
            only_server: None,
        })
    }
}

/// The merged config, or `None` when it does not load; the problems are printed.
pub(crate) fn load_config(paths: &ConfigPaths) -> Option<Config> {
    match core_agent_mcp_config::load(paths) {
        Ok(c) => Some(c),
        Err(e) => {
            errln!("core-agent: bad config:\n{e}");
            None
        }
    }
}

/// This program and the project it reads, as [`OwnProgram`] recognizes
/// entries that would start it again.
pub(crate) fn own_program(paths: &ConfigPaths) -> OwnProgram {
    let agents_dir = paths.project.parent().unwrap_or(Path::new(".agents"));
    OwnProgram::new(std::env::current_exe().ok(), agents_dir)
}

/// Before any server starts: refuses to run below a core-agent that reads
/// the same project (the config starts core-agent again through a wrapper)
/// or at the end of a chain [`core_agent_mcp_config::MAX_LINEAGE`] long
/// (only the chain's length counts for `only`, a run that starts that one
/// server: `serve --server NAME`); leaves out every entry that would start
/// this gateway again; and has every stdio server learn the lineage. `Err` is the exit
/// code, the reason printed.
pub(crate) fn guard_own_gateway(
    config: &mut Config,
    paths: &ConfigPaths,
    start: &mut core_agent_mcp_transport::StartOptions,
    only: Option<&str>,
) -> Result<(), u8> {
    let own = own_program(paths);
    let lineage = Lineage::parse(std::env::var(LINEAGE_VAR).ok().as_deref());
    if let Some(why) = lineage.refusal(&own, only.is_some()) {
        errln!("core-agent: {why}");
        return Err(FAILED);
    }
    // Each one left out is warned about with the other left-out servers.
    config.leave_out_own(&own, std::env::var_os("PATH").as_deref());
    let mut set = (*start.set_env).clone();
    set.insert(LINEAGE_VAR.to_owned(), lineage.child_value(&own));
    start.set_env = Arc::new(set);
    Ok(())
}

/// The gateway's credentials, as the host's own (see
/// `HostConfig::from_config`): the variables `gateway.tokens`, the
/// introspection client secret and `gateway.store`'s placeholders read are
/// inherited by no stdio server that does not name them, and their values
/// are redacted.
fn guard_gateway_secrets(
    options: &mut core_agent_host::HostOptions,
    tokens: &[core_agent_gateway::GatewayToken],
    oauth: Option<&core_agent_gateway::OAuthConfig>,
    store: Option<&str>,
) {
    let mut names: Vec<String> = tokens.iter().map(|t| t.env.clone()).collect();
    if let Some(i) = oauth.and_then(|o| o.introspection.as_ref()) {
        names.extend(i.client_secret.variables().map(str::to_owned));
    }
    // `gateway.store`'s placeholders (the database password).
    if let Some(store) = store.and_then(|s| core_agent_mcp_config::Template::parse(s).ok()) {
        names.extend(store.variables().map(str::to_owned));
    }
    let mut withheld = (*options.start.withheld).clone();
    withheld.extend(names.iter().cloned());
    options.start.withheld = Arc::new(withheld);
    let values = names
        .into_iter()
        .filter_map(|n| std::env::var(&n).ok().map(|v| (n, v)));
    options.start.redactor = options.start.redactor.with(values);
}

/// Whether a person can be asked: prompts read stdin and draw on stderr.
pub(crate) fn can_prompt() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The session of a listing or a call: the caller's trust level and id.
pub(crate) fn session_options(global: &Global) -> SessionOptions {
    SessionOptions::new(global.trust_level.level()).with_id(global.session.clone())
}

/// What the commands that start servers (`mcp list`, `tools`, `call`,
/// `serve`, `mcp trust`) read from the config files before the first
/// server starts: the config, the host's options, the gateway's part of
/// `config.json`, and the signals, caught from here on.
pub(crate) struct Launch {
    pub(crate) config: Config,
    pub(crate) options: HostOptions,
    pub(crate) pricing: Pricing,
    pub(crate) gateway_tokens: Vec<GatewayToken>,
    pub(crate) gateway_limits: GatewayLimits,
    /// `gateway.audit`, when set.
    pub(crate) gateway_audit: Option<AuditSettings>,
    pub(crate) gateway_oauth: Option<OAuthConfig>,
    /// `gateway.store`, as written.
    pub(crate) gateway_store: Option<String>,
    /// `gateway.allowed_origins`, when set.
    pub(crate) gateway_origins: Option<Vec<String>>,
    /// `gateway.rate_limits` and the tokens' `rate_limits`.
    pub(crate) gateway_rate_limits: core_agent_gateway::RateLimits,
    pub(crate) warned: Arc<WarningLog>,
    pub(crate) stop: StopSignals,
}

impl Launch {
    /// Loads the config and `config.json`, prints the notices, and installs
    /// the signal handlers; `Err` is the exit code, the reason printed.
    pub(crate) fn new(global: &Global, setup: &Setup, screen: &Arc<Screen>) -> Result<Launch, u8> {
        let Some(mut config) = load_config(&setup.paths) else {
            return Err(USAGE);
        };
        // The gateway's section is checked with the rest of config.json, so
        // one run names every problem of the files.
        let (project_permissions, user_permissions) = permission_files(&global.agents_dir);
        let permissions = match PermissionsConfig::load_checking(
            &project_permissions,
            user_permissions.as_deref(),
            &GatewayConfig::problems,
        ) {
            Ok(p) => p,
            Err(e) => {
                errln!("core-agent: bad config:\n{e}");
                return Err(USAGE);
            }
        };
        let GatewayConfig {
            tokens: gateway_tokens,
            limits: gateway_limits,
            audit: gateway_audit,
            oauth: gateway_oauth,
            store: gateway_store,
            allowed_origins: gateway_origins,
            survey_hidden,
            rate_limits: gateway_rate_limits,
            ..
        } = match GatewayConfig::parse(&permissions.gateway) {
            Ok(g) => g,
            Err(e) => {
                errln!("core-agent: bad config:\n{e}");
                return Err(USAGE);
            }
        };
        let HostConfig {
            mut options,
            notices,
            pricing,
            ..
        } = match HostConfig::from_config(&config, permissions, &setup.overrides) {
            Ok(h) => h,
            Err(e) => {
                errln!("core-agent: {e}");
                return Err(USAGE);
            }
        };
        for notice in notices {
            errln!("core-agent: {notice}");
        }
        if let Some(survey) = options.survey.take() {
            options.survey = Some(survey.with_hidden(survey_hidden));
        }
        guard_gateway_secrets(
            &mut options,
            &gateway_tokens,
            gateway_oauth.as_ref(),
            gateway_store.as_deref(),
        );
        crate::render::set_redactor(options.start.redactor.clone());
        options.commands = Some(Arc::new(crate::words::commands::CliCommands));
        options.start.elicitor = if can_prompt() {
            Arc::new(term::TtyElicitor::new(screen.clone()))
        } else {
            Arc::new(NoticeDecline)
        };
        options.start.supervisor = supervisor();
        guard_own_gateway(
            &mut config,
            &setup.paths,
            &mut options.start,
            setup.only_server.as_deref(),
        )?;
        // An OAuth scope step-up mid-session shows its page to a person at a
        // terminal; elsewhere the call fails with the login command.
        if std::io::stderr().is_terminal() && std::io::stdin().is_terminal() {
            options.start.browser = Some(Arc::new(login::SystemBrowser::interactive()));
        }
        let warned = Arc::new(WarningLog::new(global.quiet));
        // Signals are caught from before the first server is spawned until the
        // last one is stopped: an interrupt while starting drops the start, and
        // dropping a starting server kills its process group.
        let stop = match StopSignals::install() {
            Ok(s) => s,
            Err(e) => {
                errln!("core-agent: cannot catch SIGINT/SIGTERM: {e}");
                return Err(FAILED);
            }
        };
        Ok(Launch {
            config,
            options,
            pricing,
            gateway_tokens,
            gateway_limits,
            gateway_audit,
            gateway_oauth,
            gateway_store,
            gateway_origins,
            gateway_rate_limits,
            warned,
            stop,
        })
    }
}

/// What a run waits for before its work starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waits {
    /// A listing waits for every server, and reports each one's start.
    ForEveryServer,
    /// A call waits only for the servers its tools can belong to, and
    /// reports a server's start only when it failed (or with `--verbose`).
    ForItsServers,
}

/// Starts the servers, runs `work` in one session, prints the warnings
/// once, and stops every server; a signal at any point stops them and
/// exits 130.
/// A listing (`mcp list`, `tools`): every server started and waited for,
/// then `list` run on one session; live lines on stderr only for a person
/// watching both streams, and never around JSON output.
pub(crate) async fn listing(global: &Global, json: bool, list: fn(&Session, bool) -> u8) -> u8 {
    let Some(setup) = Setup::new(global) else {
        return USAGE;
    };
    let screen = Screen::new(Screen::wanted(json));
    let launch = match Launch::new(global, &setup, &screen) {
        Ok(launch) => launch,
        Err(code) => return code,
    };
    let session = session_options(global);
    let required: Vec<String> = launch
        .config
        .servers
        .iter()
        .filter(|s| s.spec.required)
        .map(|s| s.name.clone())
        .collect();
    with_session(
        global,
        launch,
        &screen,
        session,
        Waits::ForEveryServer,
        async |session| match (list(session, json), start_failure(session, &required)) {
            (0, Some(why)) => {
                errln!("core-agent: {why}");
                FAILED
            }
            (code, _) => code,
        },
    )
    .await
}

/// Why a listing fails though it listed: servers were to start and none
/// did, or a `required` one did not.
fn start_failure(session: &Session, required: &[String]) -> Option<String> {
    use core_agent_mcp_transport::Status;
    let host = session.host();
    let up = |name: &str| {
        host.servers()
            .any(|s| s.name() == name && s.status() == Status::Connected)
    };
    let down: Vec<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| !up(r))
        .collect();
    if !down.is_empty() {
        return Some(format!(
            "required server{} not up: {}",
            if down.len() == 1 { " is" } else { "s are" },
            down.join(", ")
        ));
    }
    let total = host.servers().count();
    (total > 0 && !host.servers().any(|s| s.status() == Status::Connected)).then(|| {
        if total == 1 {
            "the one configured server did not start".to_owned()
        } else {
            format!("none of the {total} configured servers started")
        }
    })
}

pub(crate) async fn with_session(
    global: &Global,
    launch: Launch,
    screen: &Arc<Screen>,
    session: SessionOptions,
    waits: Waits,
    work: impl AsyncFnOnce(&Session) -> u8,
) -> u8 {
    let Launch {
        config,
        options,
        warned,
        mut stop,
        ..
    } = launch;
    let env = config.dotenv.over_process();
    // A call waits only for the servers its tools can belong to; listings
    // wait for every server. A call reports a server's start only when it
    // failed (or with --verbose); listings report every one.
    let calling = waits == Waits::ForItsServers;
    let verbose = global.verbose;
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
                errln!("core-agent: {signal} while starting: stopped the servers");
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
        code = work(&session) => code,
        signal = stop.next() => {
            startup.finish();
            let when = if host.all_started() { "" } else { " while starting" };
            errln!("core-agent: {signal}{when}: stopping the servers");
            130
        }
    };
    startup.finish();
    warned.print_new(&host);
    // Further signals are caught (and ignored) until every server is stopped.
    host.shutdown().await;
    code
}

/// How stdio servers are launched: through `core-agent __supervise`, so a
/// `kill -9` of core-agent still stops them (directly when the binary's
/// path cannot be found).
pub(crate) fn supervisor() -> Option<core_agent_mcp_transport::Supervisor> {
    match core_agent_mcp_transport::Supervisor::current_exe() {
        Ok(s) => Some(s),
        Err(e) => {
            errln!(
                "core-agent: cannot find its own path ({e}); stdio servers are started without a supervisor"
            );
            None
        }
    }
}

/// Restarting crashed servers, for long-lived runs (`serve`, `call --batch`):
/// 1 s, 2 s, 4 s … at most 5 restarts in 10 minutes. The first delay can be
/// set in milliseconds with `CORE_AGENT_RESTART_DELAY_MS` (the tests do).
pub(crate) fn restart_policy() -> core_agent_mcp_transport::RestartPolicy {
    let mut policy = core_agent_mcp_transport::RestartPolicy::default();
    if let Some(ms) = std::env::var("CORE_AGENT_RESTART_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        policy.first_delay = Duration::from_millis(ms);
    }
    policy
}

/// A flag's seconds as a duration: `None` unless finite and positive.
pub(crate) fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s))
}

/// Declines every elicitation with a one-line notice on stderr.
pub(crate) struct NoticeDecline;

impl Elicitor for NoticeDecline {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        errln!(
            "core-agent: mcp: {server}: declined an elicitation request ({}); no terminal to ask on",
            clean(&describe_request(&request))
        );
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}
