use std::path::{Path, PathBuf};

use core_agent_mcp_config::{FileProblems, escape_pointer, parse_json, read_optional};
use serde_json::{Map, Value};

use crate::{Error, Pattern, Result};

/// How the gate treats calls that no pattern decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Denied calls are refused, allowed ones run, the rest are asked about.
    #[default]
    Ask,
    /// Like `Ask`, but what is not allowed is refused without asking.
    Allowlist,
    /// MCP calls skip the gate entirely.
    Yolo,
}

impl Mode {
    /// The mode's name in `config.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Allowlist => "allowlist",
            Mode::Yolo => "yolo",
        }
    }

    /// The mode called `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        [Mode::Ask, Mode::Allowlist, Mode::Yolo]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

/// The merged permissions of `<agentsDir>/config.json` and `~/.agents/config.json`.
#[derive(Debug, Clone, Default)]
pub struct PermissionsConfig {
    /// `permissions.mode` (default `ask`).
    pub mode: Mode,
    /// `permissions.allow`, from both files.
    pub allow: Vec<Pattern>,
    /// `permissions.deny`, from both files.
    pub deny: Vec<Pattern>,
    /// `permissions.require_plan_artifact` (default false).
    pub require_plan_artifact: bool,
    /// `tools.wait_and_verify.poll_allow`: mutating tools that may be polled.
    pub poll_allow: Vec<Pattern>,
    /// The file that set `mode`, if one did.
    pub mode_source: Option<PathBuf>,
    /// The project's `config.json` (read or not): where advice tells the
    /// operator to add a pattern.
    pub project_file: Option<PathBuf>,
    /// `gateway.tokens`: who may connect to `core-agent serve --http`, by
    /// name; a name in the project file wins over the same name in the user file.
    pub gateway_tokens: Vec<GatewayToken>,
    /// `gateway.max_sessions`, `gateway.max_sessions_per_token` and
    /// `gateway.session_idle_timeout_secs`; each as the project file sets
    /// it, else the user file, else unset (the gateway's default).
    pub gateway_limits: GatewayLimits,
}

/// How many MCP sessions `core-agent serve --http` holds, and for how long
/// an idle one lives (`gateway.*` in `config.json`); `None`: the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatewayLimits {
    /// `gateway.max_sessions`: open sessions over every token.
    pub max_sessions: Option<usize>,
    /// `gateway.max_sessions_per_token`: open sessions of one token.
    pub max_sessions_per_token: Option<usize>,
    /// `gateway.session_idle_timeout_secs`: seconds an idle session lives.
    pub session_idle_timeout_secs: Option<u64>,
}

/// One bearer token of the gateway (`gateway.tokens.<name>` in `config.json`):
/// the token itself is read from an environment variable, so that no secret
/// is written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayToken {
    /// The key under `gateway.tokens`: how sessions and logs name the caller.
    pub name: String,
    /// `env`: the environment variable that holds the token.
    pub env: String,
    /// `trust_level`: the trust level of sessions opened with this token.
    pub trust_level: core_agent_mcp_config::TrustLevel,
    /// The file that declares it.
    pub source: PathBuf,
}

impl PermissionsConfig {
    /// Reads the project file, then the user file (either may be missing).
    /// The project wins for `mode` and `require_plan_artifact`; the `allow`,
    /// `deny` and `poll_allow` lists of both apply.
    pub fn load(project: &Path, user: Option<&Path>) -> Result<PermissionsConfig> {
        let mut config = PermissionsConfig {
            project_file: Some(project.to_owned()),
            ..PermissionsConfig::default()
        };
        let mut problems = Vec::new();
        let mut mode_set = false;
        let mut plan_set = false;
        for path in std::iter::once(project).chain(user) {
            let Some(text) = read_optional(path)? else {
                continue;
            };
            let root = parse_json(path, &text)?;
            let mut cx = Cx {
                path,
                problems: FileProblems::new(path, &text),
            };
            let Some(root) = cx.object(&root, "") else {
                problems.extend(cx.problems.into_problems());
                continue;
            };
            cx.keys(root, "", &["permissions", "tools", "gateway", "$schema"]);
            if let Some(gateway) = root.get("gateway").and_then(|v| cx.object(v, "/gateway")) {
                for token in cx.gateway_tokens(gateway) {
                    if !config.gateway_tokens.iter().any(|t| t.name == token.name) {
                        config.gateway_tokens.push(token);
                    }
                }
                // The first file that sets a limit wins (the project's).
                let max = cx.positive(gateway, "/gateway", "max_sessions");
                let per_token = cx.positive(gateway, "/gateway", "max_sessions_per_token");
                let idle = cx.positive(gateway, "/gateway", "session_idle_timeout_secs");
                let limits = &mut config.gateway_limits;
                limits.max_sessions = limits
                    .max_sessions
                    .or(max.and_then(|n| usize::try_from(n).ok()));
                limits.max_sessions_per_token = limits
                    .max_sessions_per_token
                    .or(per_token.and_then(|n| usize::try_from(n).ok()));
                limits.session_idle_timeout_secs = limits.session_idle_timeout_secs.or(idle);
            }
            if let Some(perms) = root
                .get("permissions")
                .and_then(|v| cx.object(v, "/permissions"))
            {
                cx.keys(
                    perms,
                    "/permissions",
                    &["mode", "allow", "deny", "require_plan_artifact"],
                );
                if let Some(v) = perms.get("mode") {
                    match v.as_str().and_then(Mode::parse) {
                        Some(mode) if !mode_set => {
                            config.mode = mode;
                            config.mode_source = Some(path.to_owned());
                            mode_set = true;
                        }
                        Some(_) => {}
                        None => cx.problem(
                            "/permissions/mode",
                            &format!("unknown mode {v}"),
                            "use \"ask\", \"allowlist\" or \"yolo\"",
                        ),
                    }
                }
                if let Some(v) = perms.get("require_plan_artifact") {
                    match v.as_bool() {
                        Some(b) if !plan_set => {
                            config.require_plan_artifact = b;
                            plan_set = true;
                        }
                        Some(_) => {}
                        None => cx.problem(
                            "/permissions/require_plan_artifact",
                            "expected true or false",
                            "write true or false without quotes",
                        ),
                    }
                }
                config
                    .allow
                    .extend(cx.patterns(perms, "/permissions", "allow"));
                config
                    .deny
                    .extend(cx.patterns(perms, "/permissions", "deny"));
            }
            if let Some(tools) = root.get("tools").and_then(|v| cx.object(v, "/tools")) {
                cx.keys(tools, "/tools", &["wait_and_verify"]);
                if let Some(wv) = tools
                    .get("wait_and_verify")
                    .and_then(|v| cx.object(v, "/tools/wait_and_verify"))
                {
                    cx.keys(wv, "/tools/wait_and_verify", &["poll_allow"]);
                    config.poll_allow.extend(cx.patterns(
                        wv,
                        "/tools/wait_and_verify",
                        "poll_allow",
                    ));
                }
            }
            problems.extend(cx.problems.into_problems());
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            // Found field by field; shown file by file, in file order.
            problems.sort_by_key(|p| (p.path != project, p.line, p.column));
            Err(Error::Invalid { problems })
        }
    }
}

/// Checking one file: its path, and the problems so far.
struct Cx<'a> {
    path: &'a Path,
    problems: FileProblems<'a>,
}

impl Cx<'_> {
    fn problem(&mut self, pointer: &str, message: &str, fix: &str) {
        self.problems.push(None, pointer, message, fix);
    }

    fn object<'v>(&mut self, v: &'v Value, pointer: &str) -> Option<&'v Map<String, Value>> {
        let obj = v.as_object();
        if obj.is_none() {
            self.problem(pointer, "expected a JSON object", "write {…}");
        }
        obj
    }

    fn keys(&mut self, obj: &Map<String, Value>, base: &str, known: &[&str]) {
        self.problems.unknown_keys(obj, base, known);
    }

    /// `obj[key]` when it is a whole number from 1 to 2^32 - 1; a problem when
    /// it is anything else; `None` when it is absent.
    fn positive(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<u64> {
        let v = obj.get(key)?;
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

    /// `gateway: {"tokens": {"<name>": {"env": "VAR", "trust_level": "public"}}}`.
    fn gateway_tokens(&mut self, gateway: &Map<String, Value>) -> Vec<GatewayToken> {
        use core_agent_mcp_config::TrustLevel;
        self.keys(
            gateway,
            "/gateway",
            &[
                "tokens",
                "max_sessions",
                "max_sessions_per_token",
                "session_idle_timeout_secs",
            ],
        );
        let Some(tokens) = gateway
            .get("tokens")
            .and_then(|v| self.object(v, "/gateway/tokens"))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, entry) in tokens {
            let base = format!("/gateway/tokens/{}", escape_pointer(name));
            let Some(entry) = self.object(entry, &base) else {
                continue;
            };
            self.keys(entry, &base, &["env", "trust_level"]);
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
                source: self.path.to_owned(),
            });
        }
        out
    }

    fn patterns(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Vec<Pattern> {
        let Some(v) = obj.get(key) else {
            return Vec::new();
        };
        let Some(items) = v.as_array() else {
            self.problem(
                &format!("{base}/{key}"),
                "expected an array of patterns",
                "write [\"mcp:server_tool\", \"mcp:server_*\"]",
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("{base}/{key}/{i}");
            match item.as_str().map(|s| Pattern::parse(s, self.path)) {
                Some(Ok(p)) => out.push(p),
                Some(Err(message)) => self.problem(
                    &pointer,
                    &message,
                    "write `namespace:glob`, such as \"mcp:filesystem_read_*\"",
                ),
                None => self.problem(
                    &pointer,
                    "expected a string",
                    "write the pattern in double quotes",
                ),
            }
        }
        out
    }
}
