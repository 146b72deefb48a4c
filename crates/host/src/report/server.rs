//! Each server's state, as `Host::server_reports` gives it.

use std::collections::BTreeMap;

use core_agent_mcp_config::{LeftOutReason, TrustLevel};
use core_agent_mcp_policy::{Catalog, Restricted};
use serde::Serialize;

use crate::host::Host;

/// One server's state, as `core-agent mcp list --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// The server's key in `mcp.json`.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: String,
    /// `"project"` or `"user"`.
    pub scope: String,
    /// `"connected"`, `"error"`, `"disabled"` (`"disabled": true` in its
    /// file) or `"left-out"` (configured in a way core-agent cannot start,
    /// such as the SSE transport; `error` says why).
    pub status: String,
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
    /// The trust levels that may call it.
    pub trust_levels: Vec<&'static str>,
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
            trust_levels: e.trust_levels.iter().map(|l| l.as_str()).collect(),
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
    /// A server that was not started.
    pub(crate) fn left_out() -> AuthStatus {
        AuthStatus {
            kind: "-".to_owned(),
            detail: None,
        }
    }
}

impl From<&core_agent_mcp_transport::Auth> for AuthStatus {
    fn from(auth: &core_agent_mcp_transport::Auth) -> Self {
        let described = auth.to_string();
        let kind = auth.kind().to_owned();
        // `google-adc (service account key /k.json)` → detail `service account key /k.json`.
        let detail = described
            .strip_prefix(&kind)
            .map(str::trim)
            .and_then(|rest| rest.strip_prefix('('))
            .and_then(|rest| rest.strip_suffix(')'))
            .map(str::to_owned);
        AuthStatus { kind, detail }
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
                    .map(ToString::to_string)
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
                    transport: s.transport().to_owned(),
                    scope: s.scope().as_str().to_owned(),
                    status: s.status().as_str().to_owned(),
                    tools: catalog
                        .visible(level)
                        .filter(|e| e.server == s.name())
                        .count(),
                    listed: summary.listed,
                    left_out: summary.left_out_by_reason(),
                    error: s.problem(),
                    restricted: catalog.restricted(s.name(), level),
                    restricted_tools: restricted_tools(&catalog, s.name()),
                    warnings,
                    auth: AuthStatus::from(s.auth()),
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
            transport: "-".to_owned(),
            scope: l.scope.as_str().to_owned(),
            status: left_out_status(&l.reason).to_owned(),
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

/// The status reports give a configured server that was not started:
/// `disabled` when its file says so, `left-out` otherwise.
pub(crate) fn left_out_status(reason: &LeftOutReason) -> &'static str {
    match reason {
        LeftOutReason::Disabled => "disabled",
        _ => "left-out",
    }
}
