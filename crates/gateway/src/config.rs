//! The `gateway` section of `config.json`: who may connect over HTTP
//! (`tokens`) and how many sessions are held, for how long. `permissions`
//! reads the files and keeps the section as written; it is checked here,
//! its problems reported like the rest of the file's (file, line, column,
//! pointer, fix).

use core_agent_mcp_config::{Error, FileProblems, Problem, TrustLevel, escape_pointer};
use core_agent_permissions::Section;
use serde_json::{Map, Value};

use crate::oauth::{
    DEFAULT_ALGORITHMS, DefaultTrust, IntrospectionConfig, OAuthConfig, TrustMatch, TrustRule,
};
use crate::{AuditSettings, AuditTarget, Budget, GatewayToken, Limit, RateLimits};

/// The `gateway` sections of the project's and the user's `config.json`,
/// merged: tokens by name and each limit by key, the project file winning.
/// Built by [`GatewayConfig::parse`], or from [`GatewayConfig::default`]
/// (no tokens, every limit unset) with the `with_*` methods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// `gateway.oauth`: callers signed in with an identity provider; the
    /// first file that sets it (the project's) wins as a whole.
    pub oauth: Option<OAuthConfig>,
    /// `gateway.tokens`: who may connect over HTTP, by name; a name in the
    /// project file wins over the same name in the user file.
    pub tokens: Vec<GatewayToken>,
    /// `gateway.max_sessions`, `gateway.max_sessions_per_token` and
    /// `gateway.session_idle_timeout_secs`; each as the project file sets
    /// it, else the user file, else unset (the gateway's default).
    pub limits: GatewayLimits,
    /// `gateway.audit`: where the audit trail is written (none when unset);
    /// the project file's wins.
    pub audit: Option<AuditSettings>,
    /// `gateway.store`: the PostgreSQL database replicas share, as written
    /// (`${NAME}` placeholders unexpanded, so a password can stay in the
    /// environment); the project file's wins.
    pub store: Option<String>,
    /// `gateway.allowed_origins`: `Origin` headers accepted beside the
    /// loopback ones; the project file's list wins.
    pub allowed_origins: Option<Vec<String>>,
    /// `gateway.survey_hidden`: what the survey tools hide from callers
    /// below `creator`, beyond their defaults (`.env*`, `.agents`, `.git`,
    /// ignored files, the audit trail, the session database); both files'
    /// patterns add up.
    pub survey_hidden: Vec<String>,
    /// `gateway.rate_limits` per trust level and
    /// `gateway.tokens.<name>.rate_limits` per token: each limit as the
    /// project file sets it, else the user file, else the default.
    pub rate_limits: RateLimits,
}

/// How many MCP sessions the HTTP gateway holds, and for how long an idle
/// one lives (`gateway.*` in `config.json`); `None`: the default of
/// [`HttpOptions`](crate::HttpOptions). Built by [`GatewayConfig::parse`],
/// or from [`GatewayLimits::default`] (all unset) with the `with_*` methods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GatewayLimits {
    /// `gateway.max_sessions`: open sessions over every token.
    pub max_sessions: Option<usize>,
    /// `gateway.max_sessions_per_token`: open sessions of one token.
    pub max_sessions_per_token: Option<usize>,
    /// `gateway.session_idle_timeout_secs`: seconds an idle session lives.
    pub session_idle_timeout_secs: Option<u64>,
    /// `gateway.header_timeout_secs`: seconds a request head may take.
    pub header_timeout_secs: Option<u64>,
    /// `gateway.body_timeout_secs`: seconds a request body may take.
    pub body_timeout_secs: Option<u64>,
    /// `gateway.max_connections`: open connections.
    pub max_connections: Option<usize>,
    /// `gateway.max_connections_per_address`: open connections from one address.
    pub max_connections_per_address: Option<usize>,
}

impl GatewayLimits {
    /// `gateway.max_sessions`: open sessions over every token.
    #[must_use]
    pub fn with_max_sessions(mut self, sessions: Option<usize>) -> GatewayLimits {
        self.max_sessions = sessions;
        self
    }

    /// `gateway.max_sessions_per_token`: open sessions of one token.
    #[must_use]
    pub fn with_max_sessions_per_token(mut self, sessions: Option<usize>) -> GatewayLimits {
        self.max_sessions_per_token = sessions;
        self
    }

    /// `gateway.session_idle_timeout_secs`: seconds an idle session lives.
    #[must_use]
    pub fn with_session_idle_timeout_secs(mut self, secs: Option<u64>) -> GatewayLimits {
        self.session_idle_timeout_secs = secs;
        self
    }
}

impl GatewayConfig {
    /// `gateway.tokens`: who may connect over HTTP, by name.
    pub fn with_tokens(mut self, tokens: Vec<GatewayToken>) -> GatewayConfig {
        self.tokens = tokens;
        self
    }

    /// `gateway.oauth`: callers signed in with an identity provider.
    pub fn with_oauth(mut self, oauth: Option<OAuthConfig>) -> GatewayConfig {
        self.oauth = oauth;
        self
    }

    /// `gateway.max_sessions`, `gateway.max_sessions_per_token` and
    /// `gateway.session_idle_timeout_secs`.
    pub fn with_limits(mut self, limits: GatewayLimits) -> GatewayConfig {
        self.limits = limits;
        self
    }

    /// `gateway.audit`: where the audit trail is written.
    pub fn with_audit(mut self, audit: Option<AuditSettings>) -> GatewayConfig {
        self.audit = audit;
        self
    }

    /// `gateway.store`: the PostgreSQL database replicas share.
    pub fn with_store(mut self, store: Option<String>) -> GatewayConfig {
        self.store = store;
        self
    }

    /// `gateway.rate_limits` and each token's `rate_limits`.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> GatewayConfig {
        self.rate_limits = limits;
        self
    }

    /// Reads `sections` (`PermissionsConfig::gateway`: the project file's
    /// first, then the user file's).
    ///
    /// # Errors
    /// [`Error::Invalid`] with every problem of every section, file by file
    /// and in file order, each naming its file, line, column and field (the
    /// error `PermissionsConfig::load` gives for the rest of the file).
    pub fn parse(sections: &[Section]) -> Result<GatewayConfig, Error> {
        let (config, mut problems) = GatewayConfig::read(sections);
        if problems.is_empty() {
            return Ok(config);
        }
        // Found field by field; shown file by file, in file order.
        let file = |p: &Problem| sections.iter().position(|s| s.path == p.path);
        problems.sort_by_key(|p| (file(p), p.line, p.column));
        Err(Error::Invalid { problems })
    }
}

impl GatewayConfig {
    /// The problems of `sections`, for
    /// `PermissionsConfig::load_checking`, which lists them with the rest
    /// of the files' problems.
    pub fn problems(sections: &[Section]) -> Vec<Problem> {
        GatewayConfig::read(sections).1
    }

    /// The sections merged, and their problems in the order found.
    fn read(sections: &[Section]) -> (GatewayConfig, Vec<Problem>) {
        let mut config = GatewayConfig::default();
        let mut problems = Vec::new();
        for section in sections {
            let mut cx = Cx {
                section,
                problems: section.problems(),
            };
            cx.section(&mut config);
            problems.extend(cx.problems.into_problems());
        }
        (config, problems)
    }
}

/// Where the audit trail goes when it is on without a file named
/// (`"audit": true`, or an object without `path`):
/// `$HOME/.agents/audit.jsonl`, beside the user's credentials and outside
/// any project, so the survey tools over a project never reach it; `None`
/// when `HOME` is unset or empty.
pub(crate) fn default_audit_file() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| {
            std::path::Path::new(&home)
                .join(".agents")
                .join("audit.jsonl")
        })
}

/// Checking one file's section: the section, and the problems so far.
struct Cx<'a> {
    section: &'a Section,
    problems: FileProblems<'a>,
}

impl Cx<'_> {
    /// `{"tokens": {…}, "max_sessions": N, "max_sessions_per_token": N,
    /// "session_idle_timeout_secs": N}`, merged into `config` where an
    /// earlier file left a name or a key unset.
    fn section(&mut self, config: &mut GatewayConfig) {
        let section = self.section;
        let base = section.pointer.as_str();
        let Some(gateway) = self.object(&section.value, base) else {
            return;
        };
        self.problems.unknown_keys(
            gateway,
            base,
            &[
                "tokens",
                "oauth",
                "max_sessions",
                "max_sessions_per_token",
                "session_idle_timeout_secs",
                "audit",
                "store",
                "allowed_origins",
                "header_timeout_secs",
                "body_timeout_secs",
                "max_connections",
                "max_connections_per_address",
                "survey_hidden",
                "rate_limits",
            ],
        );
        if gateway.contains_key("allowed_origins") {
            let origins = self.origins(gateway, base);
            config.allowed_origins = config.allowed_origins.take().or(Some(origins));
        }
        if let Some(hidden) = gateway.get("survey_hidden") {
            for pattern in self.patterns(hidden) {
                if !config.survey_hidden.contains(&pattern) {
                    config.survey_hidden.push(pattern);
                }
            }
        }
        if let Some(v) = gateway.get("rate_limits") {
            for (level, budget) in self.rate_levels(v, &format!("{base}/rate_limits")) {
                let limits = &mut config.rate_limits;
                let earlier = limits
                    .levels
                    .iter()
                    .find(|(l, _)| *l == level)
                    .map_or(Budget::default(), |(_, b)| *b);
                limits.levels.retain(|(l, _)| *l != level);
                limits.levels.push((level, earlier.or(budget)));
            }
        }
        if let Some(tokens) = gateway.get("tokens").and_then(Value::as_object) {
            for (name, entry) in tokens {
                let Some(v) = entry.get("rate_limits") else {
                    continue;
                };
                let pointer = format!(
                    "{}/tokens/{}/rate_limits",
                    self.section.pointer,
                    escape_pointer(name)
                );
                let Some(budget) = self.budget(v, &pointer) else {
                    continue;
                };
                let limits = &mut config.rate_limits;
                let earlier = limits
                    .tokens
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(Budget::default(), |(_, b)| *b);
                limits.tokens.retain(|(n, _)| n != name);
                limits.tokens.push((name.clone(), earlier.or(budget)));
            }
        }
        if let Some(store) = gateway.get("store").and_then(|v| self.store(v)) {
            config.store = config.store.take().or(Some(store));
        }
        if let Some(audit) = gateway.get("audit").and_then(|v| self.audit(v)) {
            config.audit = config.audit.take().or(Some(audit));
        }
        if let Some(oauth) = gateway.get("oauth") {
            let parsed = self.oauth(oauth);
            if config.oauth.is_none() {
                config.oauth = parsed;
            }
        }
        for token in self.tokens(gateway) {
            if !config.tokens.iter().any(|t| t.name == token.name) {
                config.tokens.push(token);
            }
        }
        // The first file that sets a limit wins (the project's).
        let max = self.positive(gateway, "max_sessions", base);
        let per_token = self.positive(gateway, "max_sessions_per_token", base);
        let idle = self.positive(gateway, "session_idle_timeout_secs", base);
        let limits = &mut config.limits;
        limits.max_sessions = limits
            .max_sessions
            .or(max.and_then(|n| usize::try_from(n).ok()));
        limits.max_sessions_per_token = limits
            .max_sessions_per_token
            .or(per_token.and_then(|n| usize::try_from(n).ok()));
        limits.session_idle_timeout_secs = limits.session_idle_timeout_secs.or(idle);
        let header = self.positive(gateway, "header_timeout_secs", base);
        let body = self.positive(gateway, "body_timeout_secs", base);
        let connections = self.positive(gateway, "max_connections", base);
        let per_address = self.positive(gateway, "max_connections_per_address", base);
        limits.header_timeout_secs = limits.header_timeout_secs.or(header);
        limits.body_timeout_secs = limits.body_timeout_secs.or(body);
        limits.max_connections = limits
            .max_connections
            .or(connections.and_then(|n| usize::try_from(n).ok()));
        limits.max_connections_per_address = limits
            .max_connections_per_address
            .or(per_address.and_then(|n| usize::try_from(n).ok()));
    }

    fn problem(&mut self, pointer: &str, message: &str, fix: &str) {
        self.problems.push(None, pointer, message, fix);
    }

    fn object<'v>(&mut self, v: &'v Value, pointer: &str) -> Option<&'v Map<String, Value>> {
        self.problems.object(v, pointer)
    }

    /// `gateway[key]` when it is a whole number from 1 to 2^32 - 1; a
    /// problem when it is anything else; `None` when it is absent.
    fn positive(&mut self, gateway: &Map<String, Value>, key: &str, base: &str) -> Option<u64> {
        let v = gateway.get(key)?;
        match v.as_u64() {
            Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => Some(n),
            _ => {
                self.problem(
                    &format!("{base}/{key}"),
                    &format!("expected a whole number of at least 1, not {v}"),
                    &format!("write \"{key}\": 100 (no quotes), or remove it for the default"),
                );
                None
            }
        }
    }

    /// `"survey_hidden": ["*.pem", "config/secrets.toml"]`: globs, each
    /// checked as the survey tools read it.
    fn patterns(&mut self, value: &Value) -> Vec<String> {
        let pointer = format!("{}/survey_hidden", self.section.pointer);
        let fix = "write \"survey_hidden\": [\"*.pem\", \"config/secrets.toml\"] (a name matches at any depth; a path with / is taken from the project directory)";
        let Some(items) = value.as_array() else {
            self.problem(
                &pointer,
                &format!("expected a list of patterns, not {value}"),
                fix,
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str().map(str::trim) {
                Some(p) if !p.is_empty() && !p.starts_with('/') => out.push(p.to_owned()),
                Some(p) => self.problem(
                    &format!("{pointer}/{i}"),
                    &format!("`{p}` is not a pattern relative to the project directory"),
                    fix,
                ),
                None => self.problem(
                    &format!("{pointer}/{i}"),
                    &format!("expected a pattern (a string), not {item}"),
                    fix,
                ),
            }
        }
        out
    }

    /// `"rate_limits": {"public": {…}, "user": {…}}`: a budget per trust level.
    fn rate_levels(&mut self, v: &Value, base: &str) -> Vec<(TrustLevel, Budget)> {
        let Some(levels) = self.object(v, base) else {
            return Vec::new();
        };
        let names: Vec<&str> = TrustLevel::ALL.map(TrustLevel::as_str).to_vec();
        self.problems.unknown_keys(levels, base, &names);
        let mut out = Vec::new();
        for (name, budget) in levels {
            let Some(level) = TrustLevel::parse(name) else {
                continue;
            };
            if let Some(budget) = self.budget(budget, &format!("{base}/{name}")) {
                out.push((level, budget));
            }
        }
        out
    }

    /// `{"calls_per_minute": N, "result_bytes_per_minute": N,
    /// "concurrent_calls": N}`, each a whole number of at least 1 or
    /// `"unlimited"`.
    fn budget(&mut self, v: &Value, base: &str) -> Option<Budget> {
        let keys = [
            "calls_per_minute",
            "result_bytes_per_minute",
            "concurrent_calls",
        ];
        let budget = self.object(v, base)?;
        self.problems.unknown_keys(budget, base, &keys);
        let mut limits = [None; 3];
        for (key, limit) in keys.iter().zip(limits.iter_mut()) {
            let Some(v) = budget.get(*key) else {
                continue;
            };
            *limit = match (v.as_u64(), v.as_str()) {
                (Some(n), _) if n >= 1 => Some(Limit::Max(n)),
                (_, Some("unlimited")) => Some(Limit::Unlimited),
                _ => {
                    self.problem(
                        &format!("{base}/{key}"),
                        &format!("expected a whole number of at least 1 or \"unlimited\", not {v}"),
                        &format!("write \"{key}\": 60 (no quotes), \"{key}\": \"unlimited\", or remove it for the default"),
                    );
                    None
                }
            };
        }
        let [calls, bytes, concurrent] = limits;
        Some(
            Budget::default()
                .with_calls_per_minute(calls)
                .with_result_bytes_per_minute(bytes)
                .with_concurrent_calls(concurrent),
        )
    }

    /// `"store": "postgres://USER@HOST/DATABASE"`, `${NAME}` placeholders
    /// allowed (expanded from the environment when the gateway starts).
    fn store(&mut self, value: &Value) -> Option<String> {
        let pointer = format!("{}/store", self.section.pointer);
        let fix = "write \"store\": \"postgres://core@db:5432/core_agent\" (a password as a placeholder: \"postgres://core:${PGPASSWORD}@db/core_agent\"), or remove it to keep state in this process";
        let Some(raw) = value.as_str() else {
            self.problem(
                &pointer,
                &format!("expected a PostgreSQL URL, not {value}"),
                fix,
            );
            return None;
        };
        let template = match core_agent_mcp_config::Template::parse(raw) {
            Ok(template) => template,
            Err(e) => {
                self.problem(&pointer, &e, fix);
                return None;
            }
        };
        let scheme = raw.split_once("://").map(|(scheme, _)| scheme);
        let postgres = matches!(scheme, Some("postgres" | "postgresql"));
        let placeholder = template.has_placeholders() && raw.starts_with("${");
        if !(postgres || placeholder) {
            self.problem(
                &pointer,
                "the shared store must be a PostgreSQL URL (postgres://…)",
                fix,
            );
            return None;
        }
        Some(raw.to_owned())
    }

    /// `"audit": "FILE"` (`"-"`: standard output), `"audit": {"path":
    /// "FILE", "max_bytes": N, "keep": N, "arguments": false}`, or
    /// `"audit": {"store": true, "arguments": false}` (the shared store of
    /// `gateway.store`); a relative path is taken from the directory of the
    /// file that sets it.
    fn audit(&mut self, value: &Value) -> Option<AuditSettings> {
        let base = format!("{}/audit", self.section.pointer);
        let fix = "write \"audit\": \"audit.jsonl\" (a file; \"-\" for standard output), \"audit\": {\"path\": \"audit.jsonl\", \"max_bytes\": 104857600, \"keep\": 5, \"arguments\": false}, or \"audit\": {\"store\": true} (into the shared store, gateway.store)";
        let (target, entry) = match value {
            Value::String(path) => (self.audit_path(path, &base, fix)?, None),
            Value::Bool(true) => (self.default_audit_path(&base, fix)?, None),
            Value::Bool(false) => return None,
            Value::Object(entry) => {
                self.problems.unknown_keys(
                    entry,
                    &base,
                    &["path", "store", "max_bytes", "keep", "arguments"],
                );
                let store = match entry.get("store") {
                    None => false,
                    Some(store) => match store.as_bool() {
                        Some(on) => on,
                        None => {
                            self.problem(
                                &format!("{base}/store"),
                                &format!("expected true or false, not {store}"),
                                "write \"store\": true to write the trail into the shared store (gateway.store), or remove it",
                            );
                            return None;
                        }
                    },
                };
                match (store, entry.get("path")) {
                    (true, Some(_)) => {
                        self.problem(
                            &format!("{base}/store"),
                            "the audit trail goes to a file (path) or into the shared store (store), not both",
                            "remove \"path\" to write into the shared store, or \"store\" to write the file",
                        );
                        return None;
                    }
                    (true, None) => {
                        let rotation: Vec<&str> = ["max_bytes", "keep"]
                            .into_iter()
                            .filter(|key| entry.contains_key(*key))
                            .collect();
                        for key in rotation {
                            self.problem(
                                &format!("{base}/{key}"),
                                "only a file is rotated; the shared store keeps every line",
                                &format!("remove \"{key}\" (delete old rows from audit_lines yourself, by their time)"),
                            );
                        }
                        (AuditTarget::Store, Some(entry))
                    }
                    (false, Some(Value::String(path))) => {
                        (self.audit_path(path, &base, fix)?, Some(entry))
                    }
                    (false, None) => (self.default_audit_path(&base, fix)?, Some(entry)),
                    (false, Some(_)) => {
                        self.problem(
                            &format!("{base}/path"),
                            "the audit trail needs a path, or \"store\": true",
                            "add \"path\": \"audit.jsonl\" (a file; \"-\" for standard output), or \"store\": true (into the shared store, gateway.store)",
                        );
                        return None;
                    }
                }
            }
            other => {
                self.problem(
                    &base,
                    &format!("expected a path or an object, not {other}"),
                    fix,
                );
                return None;
            }
        };
        let mut settings = AuditSettings::new(target);
        let Some(entry) = entry else {
            return Some(settings);
        };
        if settings.target != AuditTarget::Store {
            if let Some(max) = self.positive(entry, "max_bytes", &base) {
                settings.max_bytes = max;
            }
            if let Some(keep) = entry.get("keep") {
                match keep.as_u64() {
                    Some(n) if n <= 1000 => settings.keep = n as usize,
                    _ => self.problem(
                        &format!("{base}/keep"),
                        &format!(
                            "expected how many rotated files to keep, from 0 to 1000, not {keep}"
                        ),
                        "write \"keep\": 5 (no quotes), or remove it for the default",
                    ),
                }
            }
        }
        if let Some(arguments) = entry.get("arguments") {
            match arguments.as_bool() {
                Some(on) => settings.arguments = on,
                None => self.problem(
                    &format!("{base}/arguments"),
                    &format!("expected true or false, not {arguments}"),
                    "write \"arguments\": true to log argument values (secrets redacted), or false for only their hash",
                ),
            }
        }
        Some(settings)
    }

    /// The audit trail's file when none is named: [`default_audit_file`],
    /// outside any project directory.
    fn default_audit_path(&mut self, base: &str, fix: &str) -> Option<AuditTarget> {
        match default_audit_file() {
            Some(path) => Some(AuditTarget::File(path)),
            None => {
                self.problem(
                    base,
                    "the audit trail has no default file without a home directory (HOME is unset)",
                    fix,
                );
                None
            }
        }
    }

    /// The file (or `-`, standard output) of `gateway.audit`, relative to
    /// the directory of the file that names it.
    fn audit_path(&mut self, path: &str, base: &str, fix: &str) -> Option<AuditTarget> {
        if path.trim().is_empty() {
            self.problem(base, "the audit trail's path is empty", fix);
            return None;
        }
        if path == "-" {
            return Some(AuditTarget::Stdout);
        }
        let dir = self
            .section
            .path
            .parent()
            .unwrap_or(std::path::Path::new("."));
        Some(AuditTarget::File(dir.join(path)))
    }

    /// `"oauth": {"issuer", "audience", "algorithms", "leeway_secs",
    /// "jwks_refresh_secs", "scopes_supported", "required_scopes",
    /// "introspection", "trust", "default"}`; `None` when it has a problem.
    fn oauth(&mut self, value: &Value) -> Option<OAuthConfig> {
        let base = format!("{}/oauth", self.section.pointer);
        let oauth = self.object(value, &base)?;
        self.problems.unknown_keys(
            oauth,
            &base,
            &[
                "issuer",
                "audience",
                "algorithms",
                "leeway_secs",
                "require_at_jwt",
                "max_token_lifetime_secs",
                "jwks_refresh_secs",
                "scopes_supported",
                "required_scopes",
                "introspection",
                "trust",
                "default",
            ],
        );
        let before = self.problems_count();
        let issuer = self.url(oauth, &base, "issuer", "https://login.example.com");
        let audience = self.url(oauth, &base, "audience", "https://gateway.example.com/mcp");
        let mut config = OAuthConfig::new(issuer.unwrap_or_default(), audience.unwrap_or_default());
        config.source = self.section.path.clone();
        if let Some(algs) = self.algorithms(oauth, &base) {
            config.algorithms = algs;
        }
        if let Some(leeway) = self.whole(oauth, &base, "leeway_secs", 0, 600) {
            config.leeway_secs = leeway;
        }
        match oauth.get("require_at_jwt") {
            None => {}
            Some(Value::Bool(b)) => config.require_at_jwt = *b,
            Some(v) => self.problem(
                &format!("{base}/require_at_jwt"),
                &format!("expected true or false, not {v}"),
                "write \"require_at_jwt\": true when the provider issues RFC 9068 access tokens",
            ),
        }
        if let Some(secs) = self.whole(oauth, &base, "max_token_lifetime_secs", 60, 31_536_000) {
            config.max_token_lifetime_secs = secs;
        }
        if let Some(secs) = self.whole(oauth, &base, "jwks_refresh_secs", 1, 3600) {
            config.jwks_refresh_secs = secs;
        }
        config.scopes_supported = self.strings(oauth, &base, "scopes_supported");
        config.required_scopes = self.strings(oauth, &base, "required_scopes");
        config.introspection = oauth
            .get("introspection")
            .and_then(|v| self.introspection(v, &format!("{base}/introspection")));
        config.trust = self.trust_rules(oauth, &base);
        config.default = self.default_trust(oauth, &base);
        (self.problems_count() == before).then_some(config)
    }

    fn problems_count(&self) -> usize {
        self.problems.len()
    }

    /// `oauth[key]`: an absolute `https` URL (`http` only on a loopback host).
    fn url(
        &mut self,
        oauth: &Map<String, Value>,
        base: &str,
        key: &str,
        example: &str,
    ) -> Option<String> {
        let pointer = format!("{base}/{key}");
        let fix = format!("write \"{key}\": \"{example}\"");
        let Some(v) = oauth.get(key) else {
            self.problem(
                &pointer,
                &format!("gateway.oauth needs an {key}"),
                &format!("add {}", &fix[6..]),
            );
            return None;
        };
        let Some(text) = v.as_str() else {
            self.problem(&pointer, &format!("expected a URL, not {v}"), &fix);
            return None;
        };
        match url::Url::parse(text) {
            Ok(u) if u.scheme() == "https" && u.host().is_some() => Some(text.to_owned()),
            Ok(u)
                if u.scheme() == "http"
                    && u.host_str()
                        .is_some_and(|h| h == "localhost" || h == "127.0.0.1" || h == "[::1]") =>
            {
                Some(text.to_owned())
            }
            Ok(_) => {
                self.problem(
                    &pointer,
                    &format!(
                        "`{text}` is not an https URL (plain http is only for a loopback host)"
                    ),
                    &fix,
                );
                None
            }
            Err(e) => {
                self.problem(&pointer, &format!("`{text}` is not a URL ({e})"), &fix);
                None
            }
        }
    }

    /// `oauth.algorithms`: asymmetric JWS algorithms only.
    fn algorithms(
        &mut self,
        oauth: &Map<String, Value>,
        base: &str,
    ) -> Option<Vec<jsonwebtoken::Algorithm>> {
        let v = oauth.get("algorithms")?;
        let pointer = format!("{base}/algorithms");
        let names = DEFAULT_ALGORITHMS.map(|a| format!("{a:?}")).join("\", \"");
        let Some(items) = v.as_array().filter(|a| !a.is_empty()) else {
            self.problem(&pointer, "expected a list of algorithm names", "write \"algorithms\": [\"RS256\", \"ES256\"], or remove it for every asymmetric algorithm");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("{pointer}/{i}");
            let name = item.as_str().unwrap_or_default();
            match DEFAULT_ALGORITHMS.iter().find(|a| format!("{a:?}") == name) {
                Some(a) => out.push(*a),
                None if name.eq_ignore_ascii_case("none") => self.problem(
                    &pointer,
                    "`none` is never accepted: an unsigned token proves nothing",
                    &format!("remove it; use one of \"{names}\""),
                ),
                None if name.to_ascii_uppercase().starts_with("HS") => self.problem(
                    &pointer,
                    &format!("`{name}` is a shared-secret algorithm, which the issuer's public keys cannot check"),
                    &format!("remove it; use one of \"{names}\""),
                ),
                None => self.problem(
                    &pointer,
                    &format!("unknown algorithm {item}"),
                    &format!("use one of \"{names}\""),
                ),
            }
        }
        Some(out)
    }

    /// `oauth[key]`: a whole number from `min` to `max`.
    fn whole(
        &mut self,
        oauth: &Map<String, Value>,
        base: &str,
        key: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        let v = oauth.get(key)?;
        match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.problem(
                    &format!("{base}/{key}"),
                    &format!("expected a whole number from {min} to {max}, not {v}"),
                    &format!("write \"{key}\": 60 (no quotes), or remove it for the default"),
                );
                None
            }
        }
    }

    /// `oauth[key]`: a list of scope names.
    fn strings(&mut self, oauth: &Map<String, Value>, base: &str, key: &str) -> Vec<String> {
        let Some(v) = oauth.get(key) else {
            return Vec::new();
        };
        match v.as_array().map(|a| {
            a.iter()
                .map(|s| {
                    s.as_str()
                        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
                })
                .collect::<Option<Vec<_>>>()
        }) {
            Some(Some(scopes)) => scopes.into_iter().map(str::to_owned).collect(),
            _ => {
                self.problem(
                    &format!("{base}/{key}"),
                    "expected a list of scope names (no spaces)",
                    &format!("write \"{key}\": [\"mcp:tools\"]"),
                );
                Vec::new()
            }
        }
    }

    /// `gateway.allowed_origins`: a list of `scheme://host[:port]`.
    fn origins(&mut self, gateway: &Map<String, Value>, base: &str) -> Vec<String> {
        let v = gateway.get("allowed_origins").unwrap_or(&Value::Null);
        let listed = v.as_array().map(|a| {
            a.iter()
                .map(|o| o.as_str().filter(|o| crate::front::valid_origin(o)))
                .collect::<Option<Vec<_>>>()
        });
        match listed {
            Some(Some(origins)) => origins.into_iter().map(str::to_owned).collect(),
            _ => {
                self.problem(
                    &format!("{base}/allowed_origins"),
                    "expected a list of origins, each scheme://host or scheme://host:port (no path)",
                    "write \"allowed_origins\": [\"https://app.example.com\"]",
                );
                Vec::new()
            }
        }
    }

    /// `oauth.introspection`: `{"endpoint"?, "client_id", "client_secret"}`.
    fn introspection(&mut self, v: &Value, base: &str) -> Option<IntrospectionConfig> {
        let obj = self.object(v, base)?;
        self.problems
            .unknown_keys(obj, base, &["endpoint", "client_id", "client_secret"]);
        let endpoint = match obj.get("endpoint") {
            None => None,
            Some(_) => Some(self.url(
                obj,
                base,
                "endpoint",
                "https://login.example.com/introspect",
            )?),
        };
        let mut template = |key: &str, var: &str| -> Option<core_agent_mcp_config::Template> {
            let pointer = format!("{base}/{key}");
            let fix = format!(
                "write \"{key}\": \"${{env:{var}}}\" and export {var} where the gateway starts"
            );
            let text = obj
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let Some(text) = text else {
                self.problem(&pointer, &format!("introspection needs a {key}"), &fix);
                return None;
            };
            match core_agent_mcp_config::Template::parse(text) {
                Ok(t) if key == "client_secret" && !t.has_placeholders() => {
                    self.problem(&pointer, "a secret written in config.json would be readable by anyone who reads the file", &fix);
                    None
                }
                Ok(t) => Some(t),
                Err(e) => {
                    self.problem(&pointer, &e, &fix);
                    None
                }
            }
        };
        let client_id = template("client_id", "GATEWAY_INTROSPECTION_CLIENT_ID");
        let client_secret = template("client_secret", "GATEWAY_INTROSPECTION_CLIENT_SECRET");
        let mut out = IntrospectionConfig::new(client_id?, client_secret?);
        out.endpoint = endpoint;
        Some(out)
    }

    /// `oauth.trust`: `[{"scope": S, "level": L} | {"claim": C, "value": V, "level": L}]`,
    /// each with optional `"rate_limits"`.
    fn trust_rules(&mut self, oauth: &Map<String, Value>, base: &str) -> Vec<TrustRule> {
        let Some(v) = oauth.get("trust") else {
            return Vec::new();
        };
        let base = format!("{base}/trust");
        let example = "write [{\"scope\": \"mcp:admin\", \"level\": \"creator\"}, {\"claim\": \"groups\", \"value\": \"eng\", \"level\": \"user\"}]";
        let Some(items) = v.as_array() else {
            self.problem(&base, "expected a list of rules", example);
            return Vec::new();
        };
        let levels = TrustLevel::ALL.map(TrustLevel::as_str).join("\", \"");
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("{base}/{i}");
            let Some(rule) = self.object(item, &pointer) else {
                continue;
            };
            self.problems.unknown_keys(
                rule,
                &pointer,
                &["scope", "claim", "value", "level", "rate_limits"],
            );
            let matches = match (rule.get("scope"), rule.get("claim"), rule.get("value")) {
                (Some(Value::String(s)), None, None) if !s.is_empty() => {
                    TrustMatch::Scope(s.clone())
                }
                (None, Some(Value::String(c)), Some(v)) if !c.is_empty() && !v.is_null() => {
                    TrustMatch::Claim {
                        name: c.clone(),
                        value: v.clone(),
                    }
                }
                _ => {
                    self.problem(
                        &pointer,
                        "a rule matches either a \"scope\", or a \"claim\" with its \"value\"",
                        "write {\"scope\": \"mcp:admin\", \"level\": \"creator\"} or {\"claim\": \"groups\", \"value\": \"eng\", \"level\": \"user\"}",
                    );
                    continue;
                }
            };
            let level = rule.get("level").and_then(Value::as_str);
            let Some(level) = level.and_then(TrustLevel::parse) else {
                self.problem(
                    &format!("{pointer}/level"),
                    &match level {
                        Some(l) => format!("unknown trust level \"{l}\""),
                        None => "every rule needs the trust level it grants".to_owned(),
                    },
                    &format!("write \"level\": one of \"{levels}\""),
                );
                continue;
            };
            let rate_limits = rule
                .get("rate_limits")
                .and_then(|v| self.budget(v, &format!("{pointer}/rate_limits")));
            out.push(TrustRule {
                matches,
                level,
                rate_limits,
            });
        }
        out
    }

    /// `oauth.default`: a trust level, or `"refuse"` (also when unset).
    fn default_trust(&mut self, oauth: &Map<String, Value>, base: &str) -> DefaultTrust {
        let Some(v) = oauth.get("default") else {
            return DefaultTrust::Refuse;
        };
        match v.as_str() {
            Some("refuse") => DefaultTrust::Refuse,
            Some(l) if TrustLevel::parse(l).is_some() => {
                TrustLevel::parse(l).map_or(DefaultTrust::Refuse, DefaultTrust::Level)
            }
            _ => {
                let levels = TrustLevel::ALL.map(TrustLevel::as_str).join("\", \"");
                self.problem(
                    &format!("{base}/default"),
                    &format!("expected \"refuse\" or a trust level, not {v}"),
                    &format!("write \"default\": \"refuse\", or one of \"{levels}\""),
                );
                DefaultTrust::Refuse
            }
        }
    }

    /// `"tokens": {"<name>": {"env": "VAR", "trust_level": "public"}}`.
    fn tokens(&mut self, gateway: &Map<String, Value>) -> Vec<GatewayToken> {
        let base = format!("{}/tokens", self.section.pointer);
        let Some(tokens) = gateway.get("tokens").and_then(|v| self.object(v, &base)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, entry) in tokens {
            let base = format!("{base}/{}", escape_pointer(name));
            let Some(entry) = self.object(entry, &base) else {
                continue;
            };
            self.problems
                .unknown_keys(entry, &base, &["env", "trust_level", "rate_limits"]);
            let env = match entry.get("env").and_then(Value::as_str) {
                Some(env) if !env.is_empty() && !env.contains('=') => env.to_owned(),
                _ => {
                    self.problem(
                        &format!("{base}/env"),
                        "expected the name of the environment variable that holds the token",
                        "write \"env\": \"MY_GATEWAY_TOKEN\" and export MY_GATEWAY_TOKEN in the environment the gateway starts in",
                    );
                    continue;
                }
            };
            let levels = TrustLevel::ALL.map(TrustLevel::as_str).join("\", \"");
            let trust_level = match entry.get("trust_level").and_then(Value::as_str) {
                Some(level) => match TrustLevel::parse(level) {
                    Some(level) => level,
                    None => {
                        self.problem(
                            &format!("{base}/trust_level"),
                            &format!("unknown trust level \"{level}\""),
                            &format!("use one of \"{levels}\""),
                        );
                        continue;
                    }
                },
                None => {
                    self.problem(
                        &format!("{base}/trust_level"),
                        "every gateway token needs a trust level",
                        &format!("add \"trust_level\": one of \"{levels}\""),
                    );
                    continue;
                }
            };
            out.push(GatewayToken {
                name: name.clone(),
                env,
                trust_level,
                source: self.section.path.clone(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    //! Through `PermissionsConfig::load`, as a front end reads them: the
    //! positions are those of the real files.

    use std::path::PathBuf;

    use core_agent_permissions::PermissionsConfig;

    use super::*;

    fn files(project: Option<&str>, user: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("project.json");
        let u = dir.path().join("user.json");
        for (path, text) in [(&p, project), (&u, user)] {
            if let Some(text) = text {
                std::fs::write(path, text).unwrap();
            }
        }
        (dir, p, u)
    }

    fn load(p: &std::path::Path, u: Option<&std::path::Path>) -> Result<GatewayConfig, Error> {
        let permissions = PermissionsConfig::load(p, u).unwrap();
        GatewayConfig::parse(&permissions.gateway)
    }

    #[test]
    fn gateway_tokens_map_names_to_env_vars_and_trust_levels_project_first() {
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"tokens": {"bot": {"env": "CA_BOT", "trust_level": "public"}}}}"#),
            Some(
                r#"{"gateway": {"tokens": {"bot": {"env": "CA_OTHER", "trust_level": "creator"},
                                        "me": {"env": "CA_ME", "trust_level": "creator"}}}}"#,
            ),
        );
        let c = load(&p, Some(&u)).unwrap();
        let tokens: Vec<(&str, &str, &str)> = c
            .tokens
            .iter()
            .map(|t| (t.name.as_str(), t.env.as_str(), t.trust_level.as_str()))
            .collect();
        assert_eq!(
            tokens,
            [("bot", "CA_BOT", "public"), ("me", "CA_ME", "creator")]
        );
        assert_eq!(
            (c.tokens[0].source.as_path(), c.tokens[1].source.as_path()),
            (p.as_path(), u.as_path())
        );
    }

    #[test]
    fn loaded_with_the_gateways_check_one_list_names_every_problem_of_the_files() {
        let (_d, p, u) = files(
            Some(
                r#"{"permissions": {"mode": "sometimes"},
 "gateway": {"tokens": {"bot": {"env": "CA_BOT"}}}}"#,
            ),
            Some(r#"{"gateway": {"max_sessions": "many"}}"#),
        );
        let Err(Error::Invalid { problems }) =
            PermissionsConfig::load_checking(&p, Some(&u), &GatewayConfig::problems)
        else {
            panic!("expected the problems of both files");
        };
        let found: Vec<(bool, &str)> = problems
            .iter()
            .map(|q| (q.path == p, q.pointer.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                (true, "/permissions/mode"),
                (true, "/gateway/tokens/bot/trust_level"),
                (false, "/gateway/max_sessions"),
            ],
            "{problems:?}"
        );
        // Without the check, the gateway's sections are not read.
        assert!(PermissionsConfig::load(&p, Some(&u)).is_err());
        let fine = files(Some(r#"{"gateway": {"max_sessions": "many"}}"#), None);
        assert!(PermissionsConfig::load(&fine.1, None).is_ok());
    }

    #[test]
    fn the_http_front_limits_and_origins_are_read_project_first_and_checked() {
        let (_d, p, u) = files(
            Some(
                r#"{"gateway": {"header_timeout_secs": 5, "max_connections": 64, "allowed_origins": ["https://app.example.com"]}}"#,
            ),
            Some(
                r#"{"gateway": {"header_timeout_secs": 9, "body_timeout_secs": 7, "max_connections_per_address": 8, "allowed_origins": ["https://other.example.com"]}}"#,
            ),
        );
        let c = load(&p, Some(&u)).unwrap();
        let l = c.limits;
        assert_eq!(
            (
                l.header_timeout_secs,
                l.body_timeout_secs,
                l.max_connections,
                l.max_connections_per_address
            ),
            (Some(5), Some(7), Some(64), Some(8))
        );
        assert_eq!(
            c.allowed_origins,
            Some(vec!["https://app.example.com".to_owned()])
        );
        for bad in [
            r#"{"gateway": {"allowed_origins": ["https://app.example.com/path"]}}"#,
            r#"{"gateway": {"allowed_origins": "https://app.example.com"}}"#,
            r#"{"gateway": {"max_connections": 0}}"#,
        ] {
            let (_d, p, _u) = files(Some(bad), None);
            assert!(load(&p, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn gateway_session_limits_are_read_project_first() {
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"max_sessions": 40, "session_idle_timeout_secs": 90}}"#),
            Some(r#"{"gateway": {"max_sessions": 7, "max_sessions_per_token": 5}}"#),
        );
        let c = load(&p, Some(&u)).unwrap();
        assert_eq!(
            c.limits,
            GatewayLimits {
                max_sessions: Some(40),
                max_sessions_per_token: Some(5),
                session_idle_timeout_secs: Some(90),
                ..GatewayLimits::default()
            }
        );
        let (_d, p, _u) = files(Some("{}"), None);
        let c = load(&p, None).unwrap();
        assert_eq!(c.limits, Default::default());
        assert_eq!(
            GatewayConfig::parse(&[]).ok(),
            Some(GatewayConfig::default())
        );
    }

    #[test]
    fn a_trust_rule_may_carry_rate_limits_and_a_bad_one_is_named() {
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"oauth": {"issuer": "https://idp.example", "audience": "https://gw.example/mcp",
                    "trust": [{"claim": "groups", "value": "bulk", "level": "user",
                               "rate_limits": {"calls_per_minute": 6000}}]}}}"#,
            ),
            None,
        );
        let c = load(&p, None).unwrap();
        let rule = &c.oauth.unwrap().trust[0];
        assert_eq!(
            rule.rate_limits.and_then(|b| b.calls_per_minute),
            Some(Limit::Max(6000))
        );
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"oauth": {"issuer": "https://idp.example", "audience": "https://gw.example/mcp",
                    "trust": [{"scope": "x", "level": "user", "rate_limits": {"calls_per_minute": 0}}]}}}"#,
            ),
            None,
        );
        let e = load(&p, None).unwrap_err().to_string();
        assert!(
            e.contains("/gateway/oauth/trust/0/rate_limits/calls_per_minute"),
            "{e}"
        );
    }

    #[test]
    fn rate_limits_are_read_per_level_and_per_token_project_first() {
        let (_d, p, u) = files(
            Some(
                r#"{"gateway": {"rate_limits": {"public": {"calls_per_minute": 10}},
                    "tokens": {"bot": {"env": "BOT_TOKEN", "trust_level": "public",
                                       "rate_limits": {"concurrent_calls": "unlimited"}}}}}"#,
            ),
            Some(
                r#"{"gateway": {"rate_limits": {"public": {"calls_per_minute": 99, "result_bytes_per_minute": 1000},
                                                "user": {"concurrent_calls": 2}},
                    "tokens": {"bot": {"env": "X", "trust_level": "user", "rate_limits": {"calls_per_minute": 5}}}}}"#,
            ),
        );
        let c = load(&p, Some(&u)).unwrap();
        let public = |name: &str| {
            c.rate_limits
                .budget(&crate::Caller::new(name, TrustLevel::Public))
        };
        assert_eq!(public("anyone").calls_per_minute, Some(Limit::Max(10)));
        assert_eq!(
            public("anyone").result_bytes_per_minute,
            Some(Limit::Max(1000))
        );
        assert_eq!(public("anyone").concurrent_calls, Some(Limit::Max(4)));
        assert_eq!(public("bot").concurrent_calls, Some(Limit::Unlimited));
        assert_eq!(public("bot").calls_per_minute, Some(Limit::Max(5)));
        let user = c
            .rate_limits
            .budget(&crate::Caller::new("u", TrustLevel::User));
        assert_eq!(user.concurrent_calls, Some(Limit::Max(2)));
        assert_eq!(user.calls_per_minute, Some(Limit::Max(600)));
    }

    #[test]
    fn a_bad_rate_limit_names_the_field_and_the_fix() {
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"rate_limits": {"public": {"calls_per_minute": 0, "calls": 3}, "everyone": {}},
                    "tokens": {"bot": {"env": "B", "trust_level": "public", "rate_limits": {"concurrent_calls": "lots"}}}}}"#,
            ),
            None,
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/rate_limits/public/calls_per_minute: expected a whole number of at least 1 or \"unlimited\", not 0",
            "/gateway/rate_limits/public/calls: unknown field `calls`",
            "/gateway/rate_limits/everyone: unknown field `everyone`",
            "/gateway/tokens/bot/rate_limits/concurrent_calls: expected a whole number of at least 1 or \"unlimited\", not \"lots\"",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
    }

    #[test]
    fn a_bad_gateway_session_limit_names_the_field_and_the_fix() {
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"max_sessions": 0, "max_sessions_per_token": "10", "session_idle_timeout_secs": 1.5, "max_session": 3}}"#,
            ),
            None,
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/max_sessions: expected a whole number of at least 1, not 0",
            "/gateway/max_sessions_per_token: expected a whole number of at least 1, not \"10\"",
            "write \"max_sessions_per_token\": 100 (no quotes)",
            "/gateway/session_idle_timeout_secs: expected a whole number of at least 1, not 1.5",
            "/gateway/max_session: unknown field `max_session`; did you mean `max_sessions`?",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
    }

    #[test]
    fn the_audit_trail_is_a_path_or_an_object_relative_to_its_file_project_first() {
        let (d, p, u) = files(
            Some(
                r#"{"gateway": {"audit": {"path": "logs/audit.jsonl", "max_bytes": 1000, "keep": 0, "arguments": true}}}"#,
            ),
            Some(r#"{"gateway": {"audit": "-"}}"#),
        );
        let audit = load(&p, Some(&u)).unwrap().audit.unwrap();
        assert_eq!(
            audit,
            AuditSettings::new(AuditTarget::File(d.path().join("logs/audit.jsonl")))
                .with_max_bytes(1000)
                .with_keep(0)
                .with_arguments(true)
        );
        let audit = load(&u, None).unwrap().audit.unwrap();
        assert_eq!(audit, AuditSettings::new(AuditTarget::Stdout));
        assert_eq!(
            load(&u, None).unwrap().audit.unwrap().max_bytes,
            AuditSettings::MAX_BYTES
        );
    }

    #[test]
    fn the_audit_trail_can_go_into_the_shared_store() {
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"audit": {"store": true, "arguments": true}}}"#),
            Some(
                r#"{"gateway": {"audit": {"store": false, "path": "a.jsonl"}, "store": "postgres://db/core"}}"#,
            ),
        );
        assert_eq!(
            load(&p, Some(&u)).unwrap().audit.unwrap(),
            AuditSettings::new(AuditTarget::Store).with_arguments(true)
        );
        assert!(matches!(
            load(&u, None).unwrap().audit.unwrap().target,
            AuditTarget::File(_)
        ));
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"audit": {"store": true, "path": "a.jsonl"}}}"#),
            Some(r#"{"gateway": {"audit": {"store": "yes", "arguments": true}}}"#),
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        assert!(
            err.contains("/gateway/audit/store: the audit trail goes to a file (path) or into the shared store (store), not both"),
            "{err}"
        );
        let err = load(&u, None).map(drop).unwrap_err().to_string();
        assert!(
            err.contains("/gateway/audit/store: expected true or false, not \"yes\""),
            "{err}"
        );
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"audit": {"store": true, "max_bytes": 1000, "keep": 2}}}"#),
            Some(r#"{"gateway": {"audit": {"arguments": true}}}"#),
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for key in ["max_bytes", "keep"] {
            assert!(
                err.contains(&format!(
                    "/gateway/audit/{key}: only a file is rotated; the shared store keeps every line"
                )),
                "{err}"
            );
        }
        // Without a path, the default file, outside the project.
        let audit = load(&u, None).unwrap().audit.unwrap();
        assert_eq!(
            Some(audit.target),
            default_audit_file().map(AuditTarget::File)
        );
        assert!(audit.arguments);
    }

    #[test]
    fn the_shared_store_is_a_postgres_url_with_placeholders_kept_project_first() {
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"store": "postgres://core:${PGPASSWORD}@db/core_agent"}}"#),
            Some(r#"{"gateway": {"store": "${CORE_AGENT_STORE}"}}"#),
        );
        assert_eq!(
            load(&p, Some(&u)).unwrap().store.as_deref(),
            Some("postgres://core:${PGPASSWORD}@db/core_agent")
        );
        assert_eq!(
            load(&u, None).unwrap().store.as_deref(),
            Some("${CORE_AGENT_STORE}")
        );
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"store": "mysql://db/core"}}"#),
            Some(r#"{"gateway": {"store": 5}}"#),
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        assert!(
            err.contains(
                "/gateway/store: the shared store must be a PostgreSQL URL (postgres://…)"
            ),
            "{err}"
        );
        assert!(err.contains("postgres://core@db:5432/core_agent"), "{err}");
        let err = load(&u, None).map(drop).unwrap_err().to_string();
        assert!(
            err.contains("/gateway/store: expected a PostgreSQL URL, not 5"),
            "{err}"
        );
    }

    #[test]
    fn survey_hidden_patterns_add_up_and_bad_ones_are_named() {
        let (_d, p, u) = files(
            Some(r#"{"gateway": {"survey_hidden": ["*.pem", "config/secrets.toml"]}}"#),
            Some(r#"{"gateway": {"survey_hidden": ["*.pem", "*.key"]}}"#),
        );
        assert_eq!(
            load(&p, Some(&u)).unwrap().survey_hidden,
            ["*.pem", "config/secrets.toml", "*.key"]
        );
        let (_d, p, _u) = files(Some(r#"{"gateway": {"survey_hidden": ["/etc", 3]}}"#), None);
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/survey_hidden/0: `/etc` is not a pattern relative to the project directory",
            "/gateway/survey_hidden/1: expected a pattern (a string), not 3",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
    }

    #[test]
    fn a_bad_audit_trail_names_the_field_and_the_fix() {
        let (_d, p, u) = files(
            Some(
                r#"{"gateway": {"audit": {"max_bytes": 0, "keep": -1, "arguments": "yes", "pth": "x"}}}"#,
            ),
            Some(r#"{"gateway": {"audit": 3}}"#),
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        let want = "/gateway/audit/pth: unknown field `pth`; did you mean `path`?";
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"audit": {"path": "a", "max_bytes": 0, "keep": -1, "arguments": "yes"}}}"#,
            ),
            None,
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/audit/max_bytes: expected a whole number of at least 1, not 0",
            "/gateway/audit/keep: expected how many rotated files to keep, from 0 to 1000, not -1",
            "/gateway/audit/arguments: expected true or false, not \"yes\"",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
        let err = load(&u, None).map(drop).unwrap_err().to_string();
        assert!(
            err.contains("/gateway/audit: expected a path or an object, not 3"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_gateway_token_names_the_field_and_the_fix() {
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"tokens": {"a": {"env": "X", "trust_level": "admin"}, "b": {"trust_level": "user"}, "c": {"env": "Y"}}, "token": 1}}"#,
            ),
            None,
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/tokens/a/trust_level: unknown trust level \"admin\"",
            "use one of \"creator\", \"agent\", \"user\", \"public\"",
            "/gateway/tokens/b/env: expected the name of the environment variable",
            "/gateway/tokens/c/trust_level: every gateway token needs a trust level",
            "/gateway/token: unknown field `token`; did you mean `tokens`?",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
    }

    #[test]
    fn gateway_oauth_reads_the_issuer_audience_and_claims_to_trust_project_first() {
        let (_d, p, u) = files(
            Some(
                r#"{"gateway": {"oauth": {
                    "issuer": "https://login.example.com",
                    "audience": "https://gateway.example.com/mcp",
                    "algorithms": ["RS256", "EdDSA"],
                    "leeway_secs": 30,
                    "scopes_supported": ["mcp:tools", "mcp:admin"],
                    "required_scopes": ["mcp:tools"],
                    "introspection": {"client_id": "gateway", "client_secret": "${env:GW_SECRET}"},
                    "trust": [{"scope": "mcp:admin", "level": "creator"},
                              {"claim": "groups", "value": "eng", "level": "user"}],
                    "default": "public"}}}"#,
            ),
            Some(
                r#"{"gateway": {"oauth": {"issuer": "https://other.example.com", "audience": "http://127.0.0.1:8940/mcp"}}}"#,
            ),
        );
        let c = load(&p, Some(&u)).unwrap();
        let o = c.oauth.unwrap();
        assert_eq!(o.issuer, "https://login.example.com");
        assert_eq!(o.audience, "https://gateway.example.com/mcp");
        assert_eq!(
            o.algorithms,
            [
                jsonwebtoken::Algorithm::RS256,
                jsonwebtoken::Algorithm::EdDSA
            ]
        );
        assert_eq!((o.leeway_secs, o.jwks_refresh_secs), (30, 10));
        assert_eq!(o.required_scopes, ["mcp:tools"]);
        assert_eq!(o.default, DefaultTrust::Level(TrustLevel::Public));
        assert_eq!(
            o.trust,
            [
                TrustRule {
                    matches: TrustMatch::Scope("mcp:admin".into()),
                    level: TrustLevel::Creator,
                    rate_limits: None,
                },
                TrustRule {
                    matches: TrustMatch::Claim {
                        name: "groups".into(),
                        value: serde_json::json!("eng")
                    },
                    level: TrustLevel::User,
                    rate_limits: None,
                },
            ]
        );
        let i = o.introspection.unwrap();
        assert_eq!(
            (i.client_id.raw(), i.client_secret.raw(), i.endpoint),
            ("gateway", "${env:GW_SECRET}", None)
        );
        assert_eq!(o.source, p);
        // The user file alone: loopback http is fine, the default refuses.
        let o = load(&u, None).unwrap().oauth.unwrap();
        assert_eq!((o.default, o.algorithms.len()), (DefaultTrust::Refuse, 9));
    }

    #[test]
    fn a_bad_gateway_oauth_names_the_field_and_the_fix() {
        let (_d, p, _u) = files(
            Some(
                r#"{"gateway": {"oauth": {
                    "issuer": "http://login.example.com",
                    "algorithms": ["RS256", "none", "HS256", "XY1"],
                    "leeway_secs": 9000,
                    "jwks_refresh_secs": 0,
                    "scopes_supported": ["a b"],
                    "introspection": {"client_id": "gw", "client_secret": "hunter2"},
                    "trust": [{"scope": "x", "claim": "y", "level": "user"}, {"scope": "mcp:admin", "level": "admin"}],
                    "default": "nobody",
                    "isuer": 1}}}"#,
            ),
            None,
        );
        let err = load(&p, None).map(drop).unwrap_err().to_string();
        for want in [
            "/gateway/oauth/issuer: `http://login.example.com` is not an https URL (plain http is only for a loopback host); write \"issuer\": \"https://login.example.com\"",
            "/gateway/oauth/audience: gateway.oauth needs an audience; add \"audience\": \"https://gateway.example.com/mcp\"",
            "/gateway/oauth/algorithms/1: `none` is never accepted",
            "/gateway/oauth/algorithms/2: `HS256` is a shared-secret algorithm, which the issuer's public keys cannot check",
            "/gateway/oauth/algorithms/3: unknown algorithm \"XY1\"",
            "/gateway/oauth/leeway_secs: expected a whole number from 0 to 600, not 9000",
            "/gateway/oauth/jwks_refresh_secs: expected a whole number from 1 to 3600, not 0",
            "/gateway/oauth/scopes_supported: expected a list of scope names (no spaces)",
            "/gateway/oauth/introspection/client_secret: a secret written in config.json would be readable by anyone who reads the file; write \"client_secret\": \"${env:GATEWAY_INTROSPECTION_CLIENT_SECRET}\"",
            "/gateway/oauth/trust/0: a rule matches either a \"scope\", or a \"claim\" with its \"value\"",
            "/gateway/oauth/trust/1/level: unknown trust level \"admin\"",
            "/gateway/oauth/default: expected \"refuse\" or a trust level, not \"nobody\"",
            "/gateway/oauth/isuer: unknown field `isuer`; did you mean `issuer`?",
        ] {
            assert!(err.contains(want), "missing {want:?} in:\n{err}");
        }
        assert!(err.contains(&p.display().to_string()), "{err}");
        assert!(!err.contains("hunter2"), "a secret in an error:\n{err}");
    }

    #[test]
    fn problems_name_file_line_and_column_file_by_file() {
        let (_d, p, u) = files(
            Some("{\n  \"gateway\": {\n    \"max_sessions\": 0,\n    \"tokens\": []\n  }\n}"),
            Some(r#"{"gateway": {"tokens": {"a/b": 3}}}"#),
        );
        let err = load(&p, Some(&u)).map(drop).unwrap_err().to_string();
        let (f, g) = (p.display(), u.display());
        assert_eq!(
            err,
            format!(
                "{f}:3:5: /gateway/max_sessions: expected a whole number of at least 1, not 0; write \"max_sessions\": 100 (no quotes), or remove it for the default\n\
                 {f}:4:5: /gateway/tokens: expected a JSON object; write {{…}}\n\
                 {g}:1:25: /gateway/tokens/a~1b: expected a JSON object; write {{…}}"
            )
        );
        let (_d, p, _u) = files(Some("{\"gateway\": 1}"), None);
        assert_eq!(
            load(&p, None).map(drop).unwrap_err().to_string(),
            format!(
                "{}:1:2: /gateway: expected a JSON object; write {{…}}",
                p.display()
            )
        );
    }
}
