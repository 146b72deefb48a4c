//! Each server's state, as `Host::server_reports` gives it.

use std::collections::BTreeMap;

use core_agent_mcp_config::{LeftOutReason, Scope, Transport, TrustLevel};
use core_agent_mcp_policy::{Catalog, Restricted};
use core_agent_mcp_transport::Status;
use serde::Serialize;

use crate::host::Host;

/// One server's state, as `core-agent mcp list --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// The server's key in `mcp.json`.
    pub name: String,
    /// How it is reached (`"stdio"`, `"http"`, `"-"` for a server that was
    /// not started).
    pub transport: TransportKind,
    /// Where it was configured (`"project"` or `"user"`).
    #[serde(serialize_with = "super::word")]
    pub scope: Scope,
    /// Its state (`"connected"`, `"error"`, `"disabled"`, `"left-out"`, …).
    pub status: ServerStatus,
    /// How many tools it publishes to a caller of the report's trust level.
    pub tools: usize,
    /// How many tools the server listed.
    pub listed: usize,
    /// How many of the listed tools policy left out, by reason
    /// (`"the allowlist"`, `"the blocklist"`, `"max_input_schema_bytes"`, `"max_tools"`).
    pub left_out: BTreeMap<String, usize>,
    /// Why it is not connected, or `null`.
    pub error: Option<String>,
    /// How many of its published tools the caller's trust level may not see.
    pub restricted: usize,
    /// Each published tool that is not open to every trust level, with the
    /// levels that may call it and why (whatever the caller's level).
    pub restricted_tools: Vec<RestrictedTool>,
    /// What the operator should hear about it (allowlist typos, dropped tools, …).
    pub warnings: Vec<String>,
    /// How its requests are authenticated; never a secret.
    pub auth: AuthStatus,
    /// The config file it came from.
    pub source: String,
}

/// A published tool that some trust level may not call, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestrictedTool {
    /// The name the model calls.
    pub name: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The trust levels that may call it (their words in JSON).
    #[serde(serialize_with = "super::words")]
    pub trust_levels: Vec<TrustLevel>,
    /// Why: `mutating, not marked non-destructive`, `open-world`, `the
    /// server's allowedTrustLevels`, `its toolPolicies entry`, or several
    /// of them joined by `; `.
    pub why: String,
}

/// The tools of `server` in `catalog` that are not open to every level.
pub(crate) fn restricted_tools(catalog: &Catalog, server: &str) -> Vec<RestrictedTool> {
    catalog
        .entries()
        .iter()
        .filter(|e| e.server == server && !e.restricted.is_empty())
        .map(|e| RestrictedTool {
            name: e.name.clone(),
            tool: e.tool.clone(),
            trust_levels: e.trust_levels.clone(),
            why: Restricted::join(&e.restricted),
        })
        .collect()
}

/// How a server's requests are authenticated, as `mcp list` and doctor show
/// it: `auth: none`, `auth: static`, `auth: google-adc (authorized user …)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthStatus {
    /// `"none"`, `"static"` (an `Authorization` written in `headers`),
    /// `"google-adc"`, or `"-"` for a server that was left out.
    pub kind: String,
    /// Where the token comes from, in the source's words
    /// (`service account key /path/key.json`); `null` when there is no source.
    pub detail: Option<String>,
}

impl AuthStatus {
    /// With the front end's login command after the detail (`login
    /// needed: <command>`), when the server cannot start until someone
    /// logs in.
    pub(crate) fn login(mut self, command: Option<String>) -> AuthStatus {
        if let (Some(detail), Some(command)) = (self.detail.as_mut(), command) {
            detail.push_str(": ");
            detail.push_str(&command);
        }
        self
    }

    /// A server that was not started.
    pub(crate) fn left_out() -> AuthStatus {
        AuthStatus {
            kind: "-".to_owned(),
            detail: None,
        }
    }
}

impl From<&core_agent_mcp_transport::Auth> for AuthStatus {
    /// By the strategy: no auth, a static header, or a token source (its
    /// kind, and where its token comes from when the source says).
    fn from(auth: &core_agent_mcp_transport::Auth) -> Self {
        use core_agent_mcp_transport::Auth;
        match auth {
            Auth::None | Auth::Static => AuthStatus {
                kind: auth.kind().to_owned(),
                detail: None,
            },
            Auth::Source { kind, detail } => AuthStatus {
                kind: kind.clone(),
                detail: detail.clone(),
            },
            _ => AuthStatus {
                kind: auth.kind().to_owned(),
                detail: None,
            },
        }
    }
}

impl std::fmt::Display for AuthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.detail {
            Some(detail) => write!(f, "{} ({detail})", self.kind),
            None => f.write_str(&self.kind),
        }
    }
}

impl Host {
    /// Every server's state, with tool counts and restrictions as a caller
    /// of `level` sees them; servers the config left out come last.
    pub fn server_reports(&self, level: TrustLevel) -> Vec<ServerReport> {
        let catalog = self.catalog();
        let mut reports: Vec<ServerReport> = self
            .servers
            .iter()
            .map(|s| {
                let mut warnings: Vec<String> = catalog
                    .warnings()
                    .iter()
                    .filter(|w| w.server() == Some(s.name()))
                    .map(|w| self.word(w))
                    .collect();
                warnings.extend(s.warnings());
                warnings.extend(
                    self.config_warnings
                        .iter()
                        .filter(|w| w.server.as_deref() == Some(s.name()))
                        .map(|w| w.message.clone()),
                );
                let summary = catalog.summary(s.name()).cloned().unwrap_or_default();
                ServerReport {
                    name: s.name().to_owned(),
                    transport: TransportKind::of(s.transport()),
                    scope: s.scope(),
                    status: ServerStatus::from(s.status()),
                    tools: catalog
                        .visible(level)
                        .filter(|e| e.server == s.name())
                        .count(),
                    listed: summary.listed,
                    left_out: summary.left_out_by_reason(),
                    error: self.problem_of(s),
                    restricted: catalog.restricted(s.name(), level),
                    restricted_tools: restricted_tools(&catalog, s.name()),
                    warnings,
                    auth: AuthStatus::from(s.auth()).login(self.login_command(s)),
                    source: self
                        .entries
                        .iter()
                        .find(|e| e.name == s.name())
                        .map(|e| e.source.display().to_string())
                        .unwrap_or_default(),
                }
            })
            .collect();
        reports.extend(self.left_out.iter().map(|l| ServerReport {
            name: l.name.clone(),
            transport: TransportKind::NotStarted,
            scope: l.scope,
            status: ServerStatus::left_out(&l.reason),
            tools: 0,
            listed: 0,
            left_out: BTreeMap::new(),
            error: Some(l.reason.to_string()),
            restricted: 0,
            restricted_tools: Vec::new(),
            warnings: Vec::new(),
            auth: AuthStatus::left_out(),
            source: l.source.display().to_string(),
        }));
        reports
    }
}

/// A server's state in a report: how its start went, or why it was not
/// started. Serialized as the lower-case words `mcp list --json` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ServerStatus {
    /// `"connected"`: initialized and its tools listed.
    Connected,
    /// `"error"`: it failed to start; the report's `error` says why.
    Error,
    /// `"closed"`: it was connected and has been shut down.
    Closed,
    /// `"restarting"`: its connection ended and it is being started again.
    Restarting,
    /// `"down"`: its connection ended and it is not started again.
    Down,
    /// `"disabled"`: `"disabled": true` in its file.
    Disabled,
    /// `"left-out"`: configured in a way core-agent cannot start (such as
    /// the SSE transport); the report's `error` says why.
    LeftOut,
}

impl ServerStatus {
    /// The word reports use: `"connected"`, `"error"`, `"closed"`,
    /// `"restarting"`, `"down"`, `"disabled"` or `"left-out"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Connected => "connected",
            ServerStatus::Error => "error",
            ServerStatus::Closed => "closed",
            ServerStatus::Restarting => "restarting",
            ServerStatus::Down => "down",
            ServerStatus::Disabled => "disabled",
            ServerStatus::LeftOut => "left-out",
        }
    }

    /// The status of a configured server that was not started: `Disabled`
    /// when its file says so, `LeftOut` otherwise.
    pub(crate) fn left_out(reason: &LeftOutReason) -> ServerStatus {
        match reason {
            LeftOutReason::Disabled => ServerStatus::Disabled,
            _ => ServerStatus::LeftOut,
        }
    }
}

impl From<Status> for ServerStatus {
    fn from(status: Status) -> ServerStatus {
        match status {
            Status::Connected => ServerStatus::Connected,
            Status::Error => ServerStatus::Error,
            Status::Closed => ServerStatus::Closed,
            Status::Restarting => ServerStatus::Restarting,
            Status::Down => ServerStatus::Down,
        }
    }
}

impl std::fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// How a server in a report is reached. Serialized as `"stdio"`, `"http"`,
/// or `"-"` for a server that was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum TransportKind {
    /// `"stdio"`: a child process speaking MCP on stdin/stdout.
    #[serde(rename = "stdio")]
    Stdio,
    /// `"http"`: a streamable HTTP endpoint.
    #[serde(rename = "http")]
    Http,
    /// `"-"`: the server was not started (disabled or left out).
    #[serde(rename = "-")]
    NotStarted,
}

impl TransportKind {
    /// The word reports use: `"stdio"`, `"http"` or `"-"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::NotStarted => "-",
        }
    }

    /// The kind a started server's transport names (`"stdio"` or `"http"`).
    pub(crate) fn of(transport: &str) -> TransportKind {
        match transport {
            "http" => TransportKind::Http,
            _ => TransportKind::Stdio,
        }
    }
}

impl From<&Transport> for TransportKind {
    fn from(transport: &Transport) -> TransportKind {
        match transport {
            Transport::Stdio(_) => TransportKind::Stdio,
            Transport::Http(_) => TransportKind::Http,
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
