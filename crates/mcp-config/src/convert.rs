//! Builds the model of one file from a document the schema accepted.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::load::FileConfig;
use crate::position::{Positions, escape_pointer};
use crate::schema;
use crate::spec::{AuthSpec, BUILTIN, BuiltinTools, HttpSpec, OAuthSpec, StdioSpec, Transport};
use crate::suggest::closest;
use crate::{
    Cloud, ConfigWarning, ConfigWarningKind, Dialect, LeftOut, LeftOutReason, Limits, PinMode,
    Problem, Scope, ServerEntry, ServerSpec, Template, TrustLevel,
};

/// Validation context: the file, its positions, and the problems so far.
pub(crate) struct Cx<'a> {
    pub(crate) path: &'a Path,
    pub(crate) positions: &'a Positions<'a>,
    pub(crate) problems: Vec<Problem>,
}

impl Cx<'_> {
    pub(crate) fn push(&mut self, server: Option<String>, pointer: &str, message: &str, fix: &str) {
        let (line, column) = self.positions.line_col(pointer);
        self.problems.push(Problem {
            path: self.path.to_owned(),
            line: Some(line),
            column: Some(column),
            server,
            pointer: pointer.to_owned(),
            message: message.to_owned(),
            fix: fix.to_owned(),
        });
    }

    /// One placeholder string, or `None` (with a problem) when it does not parse.
    fn template(&mut self, server: &str, pointer: &str, raw: &str) -> Option<Template> {
        match Template::parse(raw) {
            Ok(t) => Some(t),
            Err(message) => {
                self.push(
                    Some(server.to_owned()),
                    pointer,
                    &message,
                    "write placeholders as ${NAME}, ${NAME:-default} or ${env:NAME}, and a literal `${` as `$${`",
                );
                None
            }
        }
    }

    fn templates(
        &mut self,
        server: &str,
        base: &str,
        obj: Option<&Value>,
    ) -> BTreeMap<String, Template> {
        let mut out = BTreeMap::new();
        for (k, raw) in obj.and_then(Value::as_object).into_iter().flatten() {
            let raw = raw.as_str().unwrap_or_default();
            match Template::parse(raw) {
                Ok(t) => {
                    out.insert(k.clone(), t);
                }
                Err(message) => self.push(
                    Some(server.to_owned()),
                    &format!("{base}/{}", escape_pointer(k)),
                    &message,
                    "write placeholders as ${NAME}, ${NAME:-default} or ${env:NAME}, and a literal `${` as `$${`",
                ),
            }
        }
        out
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn levels(v: Option<&Value>) -> Option<Vec<TrustLevel>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .filter_map(TrustLevel::parse)
            .collect()
    })
}

/// `toolPolicies`: a tool policy without `allowedTrustLevels` overrides
/// nothing (an empty list here would hide the tool from every level).
fn tool_policies(policy: &Value) -> BTreeMap<String, Vec<TrustLevel>> {
    policy
        .get("toolPolicies")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(tool, p)| Some((tool.clone(), levels(p.get("allowedTrustLevels"))?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the model from a document the schema accepted.
pub(crate) fn convert(
    cx: &mut Cx<'_>,
    root: &Value,
    dialect: Dialect,
    scope: Scope,
    file: &mut FileConfig,
) {
    let servers_key = dialect.servers_key();
    if dialect == Dialect::Core {
        file.wrap = crate::WrapSettings::read(root, cx.path);
        file.survey = root
            .get("survey")
            .and_then(Value::as_bool)
            .map(|value| crate::Setting {
                value,
                source: cx.path.to_owned(),
            });
    }
    let empty = Map::new();
    let file_limits = Limits::default().overlaid(root.get("limits"));
    let servers = root
        .get(servers_key)
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let policies = root
        .pointer("/auggy/servers")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if dialect == Dialect::McpServers && servers.contains_key(BUILTIN) {
        cx.push(
            Some(BUILTIN.to_owned()),
            &format!("/{servers_key}/{BUILTIN}"),
            &format!("`{BUILTIN}` is a reserved name: core-agent's own tools are gated as `{BUILTIN}:<tool>` and narrowed under it"),
            "give the server another name (its tools are published as <name>_<tool>)",
        );
    }
    // The built-in tools' allowlist and trust levels, under the reserved
    // name: `servers.builtin.tools` (core), `auggy.servers.builtin` (peer).
    let builtin = match dialect {
        Dialect::Core => servers.get(BUILTIN),
        Dialect::McpServers => policies.get(BUILTIN),
    };
    if let Some(b) = builtin {
        file.builtin = Some(BuiltinTools {
            tools: strings(b.get("tools").or_else(|| b.get("allowedTools"))),
            blocked_tools: strings(b.get("blockedTools")),
            allowed_trust_levels: levels(b.get("allowedTrustLevels")),
            tool_policies: tool_policies(b),
            source: cx.path.to_owned(),
        });
    }
    for name in policies
        .keys()
        .filter(|n| !servers.contains_key(*n) && *n != BUILTIN)
    {
        let names: Vec<&str> = servers.keys().map(String::as_str).collect();
        let fix = match closest(name, &names) {
            Some(n) => format!("did you mean `{n}`?"),
            None => "add the server to `mcpServers` or remove its policy".to_owned(),
        };
        cx.push(
            Some(name.clone()),
            &format!("/auggy/servers/{}", escape_pointer(name)),
            &format!("a policy for `{name}`, which is not in `mcpServers`"),
            &fix,
        );
    }
    for (name, value) in servers.iter().filter(|(n, _)| *n != BUILTIN) {
        let base = format!("/{servers_key}/{}", escape_pointer(name));
        let policy = policies.get(name).unwrap_or(&Value::Null);
        if let Some(keys) = policy.as_object() {
            let mut keys: Vec<String> = keys.keys().cloned().collect();
            keys.sort();
            file.policies.insert(name.clone(), keys);
        }
        if dialect == Dialect::McpServers
            && let Some(reason) = left_out_reason(value)
        {
            file.left_out.push(LeftOut {
                name: name.clone(),
                scope,
                source: cx.path.to_owned(),
                reason,
            });
            continue;
        }
        let kind = transport_kind(value);
        let transport = match kind {
            "stdio" => Transport::Stdio(StdioSpec {
                command: value
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                args: strings(value.get("args")),
                env: cx.templates(name, &format!("{base}/env"), value.get("env")),
            }),
            _ => Transport::Http(HttpSpec {
                url: value
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                headers: cx.templates(name, &format!("{base}/headers"), value.get("headers")),
                auth: match (
                    value.pointer("/auth/google_oauth/scopes"),
                    value.pointer("/auth/oauth"),
                ) {
                    (Some(s), _) => Some(AuthSpec::GoogleOAuth {
                        scopes: strings(Some(s)),
                    }),
                    (None, Some(o)) => Some(AuthSpec::OAuth(OAuthSpec {
                        scopes: strings(o.get("scopes")),
                        client_id: o
                            .get("client_id")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        client_secret: o.get("client_secret").and_then(Value::as_str).and_then(
                            |raw| {
                                cx.template(name, &format!("{base}/auth/oauth/client_secret"), raw)
                            },
                        ),
                        client_metadata_url: o
                            .get("client_metadata_url")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        callback_port: o
                            .get("callback_port")
                            .and_then(Value::as_u64)
                            .and_then(|p| u16::try_from(p).ok()),
                    })),
                    (None, None) => None,
                },
            }),
        };
        let cloud = value
            .get("cloud")
            .or_else(|| policy.get("cloud"))
            .and_then(Value::as_str)
            .map(|c| {
                if c == "disabled" {
                    Cloud::Disabled
                } else {
                    Cloud::LocalOnly
                }
            });
        let mut tools = strings(value.get("tools"));
        tools.extend(strings(value.get("includeTools")));
        tools.extend(strings(policy.get("allowedTools")));
        let mut blocked_tools = strings(value.get("excludeTools"));
        blocked_tools.extend(strings(value.get("disabledTools")));
        blocked_tools.extend(strings(policy.get("blockedTools")));
        let tool_policies = tool_policies(policy);
        // Most specific first: the server's own `limits`, then its `timeout`
        // (another tool's key), then the file's `limits`, then the defaults.
        let mut limits = file_limits;
        let explicit_timeout = value
            .pointer("/limits/call_timeout_ms")
            .or_else(|| policy.pointer("/limits/call_timeout_ms"))
            .is_some();
        if let Some(timeout) = value.get("timeout").and_then(Value::as_u64)
            && !explicit_timeout
        {
            let (ms, ambiguous) = timeout_ms(timeout);
            limits.call_timeout_ms = ms;
            if ambiguous {
                file.warnings.push(ConfigWarning {
                    file: cx.path.to_owned(),
                    server: Some(name.clone()),
                    kind: ConfigWarningKind::TimeoutUnits,
                    message: format!(
                        "\"timeout\": {timeout} is taken as seconds (as Cline and Roo Code \
                         write it), not milliseconds (as Gemini CLI does); if you meant \
                         milliseconds, add \"auggy\": {{\"servers\": {{\"{name}\": {{\"limits\": \
                         {{\"call_timeout_ms\": {timeout}}}}}}}}}, which wins over \"timeout\""
                    ),
                });
            }
        }
        let limits = limits.overlaid(value.get("limits").or_else(|| policy.get("limits")));
        if dialect == Dialect::McpServers {
            let ignored: Vec<&str> = value
                .as_object()
                .into_iter()
                .flat_map(|o| o.iter())
                .filter(|(k, v)| {
                    let ignored = schema::PEER_IGNORED.contains(&k.as_str())
                        || (*k == "cwd" && kind != "stdio");
                    ignored && says_something(v)
                })
                .map(|(k, _)| k.as_str())
                .collect();
            if !ignored.is_empty() {
                let keys = if ignored.len() == 1 { "key" } else { "keys" };
                file.warnings.push(ConfigWarning {
                    file: cx.path.to_owned(),
                    server: Some(name.clone()),
                    kind: ConfigWarningKind::IgnoredKeys,
                    message: format!("ignored {keys} other tools use: {}", ignored.join(", ")),
                });
            }
        }
        let spec = ServerSpec {
            transport,
            tools,
            blocked_tools,
            allowed_trust_levels: levels(policy.get("allowedTrustLevels")),
            tool_policies,
            cloud,
            limits,
            // The core dialect's server keys, or the `auggy` policy's.
            read_only: value
                .get("read_only")
                .or_else(|| policy.get("read_only"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            agentic_never: value
                .get("agentic_never")
                .or_else(|| policy.get("agentic_never"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            tool_notes: value
                .get("tool_notes")
                .or_else(|| policy.get("tool_notes"))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default(),
            pin: value
                .get("pin")
                .or_else(|| policy.get("pin"))
                .and_then(Value::as_str)
                .and_then(PinMode::parse)
                .unwrap_or_default(),
        };
        file.servers.push(ServerEntry {
            name: name.clone(),
            scope,
            source: cx.path.to_owned(),
            dialect,
            spec,
        });
    }
}

/// `"stdio"`, `"http"` or `"sse"`, as a server object of either dialect
/// declares it (`transport` or `type`; with neither, a lone `url` means http,
/// unless Cline's `"transportType": "sse"` says otherwise).
pub(crate) fn transport_kind(server: &Value) -> &'static str {
    let declared = server
        .get("transport")
        .or_else(|| server.get("type"))
        .and_then(Value::as_str);
    let lone_url = server.get("url").is_some() && server.get("command").is_none();
    match declared {
        Some("http" | "streamable-http" | "streamableHttp") => "http",
        Some("sse") => "sse",
        Some(_) => "stdio",
        None if lone_url && server.get("transportType").and_then(Value::as_str) == Some("sse") => {
            "sse"
        }
        None if lone_url => "http",
        None => "stdio",
    }
}

/// Why a server of the `mcpServers` dialect is configured but not to be
/// started, if it is not: disabled first (the user's word), then a transport
/// core-agent does not speak, then a working directory it cannot honour.
fn left_out_reason(server: &Value) -> Option<LeftOutReason> {
    let kind = transport_kind(server);
    if server.get("disabled").and_then(Value::as_bool) == Some(true) {
        Some(LeftOutReason::Disabled)
    } else if kind == "sse" {
        Some(LeftOutReason::UnsupportedTransport {
            transport: kind.to_owned(),
        })
    } else if kind == "stdio"
        && let Some(cwd) = server.get("cwd").and_then(Value::as_str)
    {
        Some(LeftOutReason::WorkingDirectory {
            cwd: cwd.to_owned(),
        })
    } else {
        None
    }
}

/// Whether ignoring this value loses anything: `[]`, `{}`, `""`, `false` and
/// `null` (as Cline writes `"autoApprove": []` on every server) say nothing.
fn says_something(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(true) | Value::Number(_) => true,
    }
}

/// The longest `timeout` taken as seconds: Cline and Roo Code write seconds
/// (1 to 3600, default 60); Gemini CLI writes milliseconds (default 600000).
pub(crate) const TIMEOUT_MAX_SECONDS: u64 = 3600;

/// A `timeout` in milliseconds, and whether its unit is in doubt.
///
/// Up to [`TIMEOUT_MAX_SECONDS`] it is seconds; above, milliseconds. Below
/// 1000 that is clear (a call timeout under a second is not meant); from
/// 1000 to 3600 it could be either, and the caller warns.
pub(crate) fn timeout_ms(timeout: u64) -> (u64, bool) {
    if timeout <= TIMEOUT_MAX_SECONDS {
        (timeout.saturating_mul(1000), timeout >= 1000)
    } else {
        (timeout, false)
    }
}
