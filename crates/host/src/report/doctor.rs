use std::path::Path;

use core_agent_mcp_config::{Config, Finding, Severity, diagnose};
use core_agent_mcp_policy::{estimate_tokens, preflight};
use core_agent_mcp_transport::Status;
use serde::Serialize;

use crate::{Host, HostOptions};

/// What `core-agent mcp doctor` checks.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// Also check what a cloud deployment cannot run.
    pub cloud: bool,
    /// Skip connecting to the servers.
    pub offline: bool,
    /// How servers are started for the connect phase.
    pub host: HostOptions,
}

impl DoctorOptions {
    /// Connect to the servers, started with `host`; no cloud checks.
    pub fn new(host: HostOptions) -> DoctorOptions {
        DoctorOptions {
            cloud: false,
            offline: false,
            host,
        }
    }

    /// Also check what a cloud deployment cannot run.
    pub fn with_cloud(mut self, cloud: bool) -> DoctorOptions {
        self.cloud = cloud;
        self
    }

    /// Skip connecting to the servers.
    pub fn with_offline(mut self, offline: bool) -> DoctorOptions {
        self.offline = offline;
        self
    }
}

/// Everything `doctor` found, as `core-agent mcp doctor --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    /// Problems and warnings, static checks first.
    pub findings: Vec<FindingReport>,
    /// One entry per server from the connect phase (empty with `--offline`).
    pub servers: Vec<ServerCheck>,
    /// How many tools the model would see.
    pub tools: usize,
    /// About how many tokens the tool list costs on every request.
    pub token_estimate: usize,
    /// How many findings are errors.
    pub errors: usize,
    /// How many findings are warnings.
    pub warnings: usize,
    /// The names of the secrets kept out of servers' environments and
    /// redacted from every report (placeholder variables, `.env` entries,
    /// core-agent's credentials); never their values.
    pub secrets: Vec<String>,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingReport {
    /// `error` or `warning`.
    pub severity: String,
    /// The check's stable id (`missing-env`, `literal-secret`, `cloud-stdio`, …).
    pub check: String,
    /// The server concerned, if any.
    pub server: Option<String>,
    /// The file and JSON pointer of the field concerned, if any.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do, in the library's words.
    pub fix: String,
    /// The remedy as data, where it is a step a front end names in its own
    /// words (its command for re-running the checks, for accepting a
    /// changed tool); `None` when `fix` says all.
    #[serde(skip)]
    pub remedy: Option<Remedy>,
}

/// A remedy a front end words for its users (the `core-agent` binary names
/// its commands); [`FindingReport::fix`] says the same without them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// Fix `what` (`the server or its entry`, `the file`), then run the
    /// checks again.
    FixThenRecheck {
        /// What to fix.
        what: &'static str,
    },
    /// A pinned tool changed: compare the change with what the tool should
    /// do and, if it is expected, accept the new definition into `mcp.lock`
    /// (as the finding's message names it).
    ReviewChangedTool,
    /// `mcp.lock` could not be verified: fix or delete it, then accept the
    /// servers' definitions into it again.
    RepairLock,
}

impl Remedy {
    /// The remedy in words that name no command.
    pub fn describe(self) -> String {
        match self {
            Remedy::FixThenRecheck { what } => format!("fix {what}, then run the checks again"),
            Remedy::ReviewChangedTool => "compare the change with what the tool should do; if it is expected, accept the new definition into mcp.lock as named above".to_owned(),
            Remedy::RepairLock => "fix or delete mcp.lock, then accept the servers' tool definitions into it again".to_owned(),
        }
    }
}

impl From<&Finding> for FindingReport {
    fn from(f: &Finding) -> Self {
        FindingReport {
            severity: f.severity.as_str().to_owned(),
            check: f.check.to_owned(),
            server: f.server.clone(),
            field: f.field.clone(),
            message: f.message.clone(),
            fix: f.fix.clone(),
            remedy: None,
        }
    }
}

/// How one server fared in the connect phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerCheck {
    /// The server.
    pub name: String,
    /// How it is reached (`stdio`, `http`, `-` when it was not started).
    pub transport: crate::TransportKind,
    /// `connected`, `error`, `disabled` or `left-out`.
    pub status: crate::ServerStatus,
    /// How many tools it publishes (after allowlists and limits).
    pub tools: usize,
    /// How many tools it lists.
    pub listed: usize,
    /// How many of the listed tools policy left out, by reason.
    pub left_out: std::collections::BTreeMap<String, usize>,
    /// How long the start took, in milliseconds.
    pub ms: u128,
    /// Why it failed, in words a person can act on.
    pub error: Option<String>,
    /// How its requests are authenticated (for Google ADC: which
    /// credentials were found); never a secret.
    pub auth: crate::AuthStatus,
    /// Each published tool that is not open to every trust level, and why.
    pub restricted_tools: Vec<crate::RestrictedTool>,
}

/// Runs the checks on a loaded config (or reports why it did not load).
pub async fn doctor(
    config: Result<&Config, &core_agent_mcp_config::Error>,
    mut options: DoctorOptions,
) -> DoctorReport {
    let mut findings: Vec<Finding> = Vec::new();
    // Which findings carry a remedy a front end words (by index).
    let mut remedies: Vec<(usize, Remedy)> = Vec::new();
    let mut servers = Vec::new();
    let (mut tools, mut token_estimate) = (0, 0);
    match config {
        Err(e) => {
            findings.extend(load_findings(e));
            if !matches!(e, core_agent_mcp_config::Error::Invalid { .. }) {
                remedies.push((0, LOAD));
            }
        }
        Ok(config) => {
            crate::setup::guard_secrets(&mut options.host.start, config);
            let env = config.dotenv.over_process();
            findings.extend(diagnose(config, &env, options.cloud));
            findings.extend(commands_on_path(config, &env));
            for w in &config.warnings {
                findings.push(Finding {
                    severity: Severity::Warning,
                    check: w.kind.as_str(),
                    server: w.server.clone(),
                    field: None,
                    message: format!("{}: {}", w.file.display(), w.message),
                    fix: match w.kind {
                        core_agent_mcp_config::ConfigWarningKind::TimeoutUnits => {
                            "write the timeout in seconds (up to 3600), or set `limits.call_timeout_ms` in the server's auggy policy to say milliseconds".to_owned()
                        }
                        core_agent_mcp_config::ConfigWarningKind::Shadowed => {
                            "keep the server in one file: remove it from the lower one, or move what that entry set (its auggy policy) into the higher one".to_owned()
                        }
                        _ => "nothing breaks; remove the keys to silence this".to_owned(),
                    },
                });
            }
            for l in &config.left_out {
                servers.push(ServerCheck {
                    name: l.name.clone(),
                    transport: crate::TransportKind::NotStarted,
                    status: crate::ServerStatus::left_out(&l.reason),
                    tools: 0,
                    listed: 0,
                    left_out: Default::default(),
                    ms: 0,
                    error: Some(l.reason.to_string()),
                    auth: crate::AuthStatus::left_out(),
                    restricted_tools: Vec::new(),
                });
                if !matches!(l.reason, core_agent_mcp_config::LeftOutReason::Disabled) {
                    findings.push(Finding {
                        severity: Severity::Warning,
                        check: l.reason.kind(),
                        server: Some(l.name.clone()),
                        field: None,
                        message: format!("left out: {}", l.reason),
                        fix: format!("fix the server's entry in {}", l.source.display()),
                    });
                }
            }
            if !options.offline {
                let host = Host::start(config, &env, options.host.clone(), &|_, _| {}).await;
                let catalog = host.catalog();
                for s in host.servers() {
                    let summary = catalog.summary(s.name()).cloned().unwrap_or_default();
                    servers.push(ServerCheck {
                        name: s.name().to_owned(),
                        transport: crate::TransportKind::of(s.transport()),
                        status: crate::ServerStatus::from(s.status()),
                        tools: summary.published,
                        listed: summary.listed,
                        left_out: summary.left_out_by_reason(),
                        ms: s.elapsed().as_millis(),
                        error: host.problem_of(s),
                        auth: crate::AuthStatus::from(s.auth()).login(host.login_command(s)),
                        restricted_tools: crate::report::restricted_tools(&catalog, s.name()),
                    });
                    if let Some(e) = s.error() {
                        findings.push(Finding {
                            severity: Severity::Error,
                            check: "connect",
                            server: Some(s.name().to_owned()),
                            field: None,
                            message: host.problem_of(s).unwrap_or_else(|| e.to_string()),
                            fix: CONNECT.describe(),
                        });
                        remedies.push((findings.len() - 1, CONNECT));
                    }
                    if s.status() == Status::Connected
                        && let Some(line) = s.stdout_noise()
                    {
                        findings.push(Finding {
                            severity: Severity::Warning,
                            check: "stdout-noise",
                            server: Some(s.name().to_owned()),
                            field: None,
                            message: format!("it wrote non-protocol text to stdout: `{line}`"),
                            fix: "make the server log to stderr; stdout is for JSON-RPC only"
                                .to_owned(),
                        });
                    }
                }
                if let Some(problem) = host.pin_problem() {
                    findings.push(Finding {
                        severity: Severity::Warning,
                        check: "pin-lock",
                        server: None,
                        field: None,
                        message: problem,
                        fix: "tool definitions are not checked until mcp.lock can be read and written".to_owned(),
                    });
                }
                for w in catalog.warnings() {
                    let fix = match w.kind() {
                        "name-collision" | "name-shortened" => {
                            "rename the server to a shorter or distinct key"
                        }
                        "schema-size" | "max-tools" => {
                            "raise the server's `limits`, or narrow it with `tools`"
                        }
                        "reserved-name" => {
                            "nothing breaks: the built-in keeps its name; rename the server to publish the tool under a plain name"
                        }
                        "tool-changed" | "tool-quarantined" => {
                            remedies.push((findings.len(), Remedy::ReviewChangedTool));
                            "compare the change with what the tool should do; if it is expected, accept the new definition into mcp.lock as named above"
                        }
                        "pin-unverified" => {
                            remedies.push((findings.len(), Remedy::RepairLock));
                            "fix or delete mcp.lock, then accept the servers' tool definitions into it again"
                        }
                        _ => "fix the names in mcp.json; the exposed names are listed",
                    };
                    findings.push(Finding {
                        severity: Severity::Warning,
                        check: w.kind(),
                        server: w.server().map(str::to_owned),
                        field: None,
                        message: host.word(w),
                        fix: fix.to_owned(),
                    });
                }
                for s in host.servers() {
                    for message in s.warnings() {
                        findings.push(Finding {
                            severity: Severity::Warning,
                            check: "max-pages",
                            server: Some(s.name().to_owned()),
                            field: None,
                            message,
                            fix: "raise the server's `limits.max_pages`".to_owned(),
                        });
                    }
                }
                for issue in preflight(catalog.entries()) {
                    let server = catalog.get(&issue.tool).map(|e| e.server.clone());
                    findings.push(Finding {
                        severity: Severity::Warning,
                        check: issue.rule,
                        server,
                        field: None,
                        message: issue.message,
                        fix: "rename the server, narrow it with `tools`, or ask its author"
                            .to_owned(),
                    });
                }
                tools = catalog.entries().len();
                token_estimate = estimate_tokens(catalog.entries());
                host.shutdown().await;
            }
        }
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let redactor = &options.host.start.redactor;
    for f in &mut findings {
        redactor.redact_string(&mut f.message);
    }
    for s in &mut servers {
        if let Some(e) = &mut s.error {
            redactor.redact_string(e);
        }
    }
    DoctorReport {
        secrets: redactor.names().to_vec(),
        warnings: findings.len() - errors,
        errors,
        findings: findings
            .iter()
            .enumerate()
            .map(|(i, f)| FindingReport {
                remedy: remedies.iter().find(|(at, _)| *at == i).map(|(_, r)| *r),
                ..FindingReport::from(f)
            })
            .collect(),
        servers,
        tools,
        token_estimate,
    }
}

/// The remedy of a server that failed to connect.
const CONNECT: Remedy = Remedy::FixThenRecheck {
    what: "the server or its entry",
};
/// The remedy of a config file that failed to load.
const LOAD: Remedy = Remedy::FixThenRecheck { what: "the file" };

/// A config that failed to load, as findings.
fn load_findings(e: &core_agent_mcp_config::Error) -> Vec<Finding> {
    match e {
        core_agent_mcp_config::Error::Invalid { problems } => {
            problems.iter().map(Finding::from_problem).collect()
        }
        other => vec![Finding {
            severity: Severity::Error,
            check: "invalid-config",
            server: None,
            field: None,
            message: other.to_string(),
            fix: LOAD.describe(),
        }],
    }
}

/// stdio commands that cannot be found (with their placeholders expanded
/// from `env`, where the file's dialect expands them).
fn commands_on_path(config: &Config, env: &dyn core_agent_mcp_config::Env) -> Vec<Finding> {
    config
        .servers
        .iter()
        .filter_map(|s| {
            let (command, _) = s.launch_command(env)?;
            (!on_path(&command)).then_some((s, command))
        })
        .map(|(s, command)| Finding {
            severity: Severity::Error,
            check: "command-not-found",
            server: Some(s.name.clone()),
            field: Some(format!("{} command", s.source.display())),
            message: format!(
                "`{}` is not an executable file{}",
                command,
                if command.contains('/') {
                    ""
                } else {
                    " on PATH"
                }
            ),
            fix: "install it, or write its full path in `command`".to_owned(),
        })
        .collect()
}

/// Whether `command` names an executable, directly or on `PATH`.
pub fn on_path(command: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        return executable(Path::new(command));
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| executable(&dir.join(command))))
        .unwrap_or(false)
}
