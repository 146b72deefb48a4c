//! Builds the model of one file from a document the schema accepted: one
//! module per dialect, and what both build alike here.

mod core;
pub(crate) mod mcp_servers;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::check::FileProblems;
use crate::position::escape_pointer;
use crate::spec::{
    AuthSpec, BuiltinTools, ConfigWarning, EnvInherit, ExchangeEndpoint, HttpSpec, LeftOut,
    OAuthSpec, StdioSpec, TokenExchangeSpec, Transport,
};
use crate::{
    Cloud, Dialect, Limits, PinMode, Scope, ServerEntry, ServerSpec, Template, TrustLevel,
};

/// One file, parsed and validated, before merging; only the loader makes one.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct FileConfig {
    /// The file's dialect.
    pub dialect: Dialect,
    pub(crate) servers: Vec<ServerEntry>,
    pub(crate) left_out: Vec<LeftOut>,
    pub(crate) warnings: Vec<ConfigWarning>,
    pub(crate) wrap: crate::WrapSettings,
    pub(crate) survey: Option<crate::Setting<bool>>,
    pub(crate) builtin: Option<BuiltinTools>,
    /// Per server of an `mcpServers` file, the keys its `auggy` policy sets.
    pub(crate) policies: BTreeMap<String, Vec<String>>,
}

impl FileConfig {
    /// The servers of this file that are configured but not to be started.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// The warnings about this file, in file order.
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }
}

/// Validation context: the file and the problems so far.
pub(crate) struct Cx<'a> {
    pub(crate) path: &'a Path,
    pub(crate) problems: FileProblems<'a>,
}

impl Cx<'_> {
    pub(crate) fn push(&mut self, server: Option<String>, pointer: &str, message: &str, fix: &str) {
        self.problems.push(server.as_deref(), pointer, message, fix);
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

/// Builds the model from a document the schema accepted, in its dialect.
pub(crate) fn convert(
    cx: &mut Cx<'_>,
    root: &Value,
    dialect: Dialect,
    scope: Scope,
    file: &mut FileConfig,
) {
    match dialect {
        Dialect::Core => core::convert(cx, root, scope, file),
        Dialect::McpServers => mcp_servers::convert(cx, root, scope, file),
    }
}

/// The transport a server object declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportKind {
    /// A child process spoken to over stdin and stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// The legacy SSE transport, which core-agent does not speak.
    Sse,
}

impl TransportKind {
    /// The kind, as a server object of either dialect declares it
    /// (`transport` or `type`; with neither, a lone `url` means http, unless
    /// Cline's `"transportType": "sse"` says otherwise).
    pub(crate) fn of(server: &Value) -> TransportKind {
        let declared = server
            .get("transport")
            .or_else(|| server.get("type"))
            .and_then(Value::as_str);
        let lone_url = server.get("url").is_some() && server.get("command").is_none();
        match declared {
            Some("http" | "streamable-http" | "streamableHttp") => TransportKind::Http,
            Some("sse") => TransportKind::Sse,
            Some(_) => TransportKind::Stdio,
            None if lone_url
                && server.get("transportType").and_then(Value::as_str) == Some("sse") =>
            {
                TransportKind::Sse
            }
            None if lone_url => TransportKind::Http,
            None => TransportKind::Stdio,
        }
    }

    /// `"stdio"`, `"http"` or `"sse"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
        }
    }
}

/// One server as its dialect read it: the parts both dialects build alike
/// come from `value` (then `policy`), the rest the dialect has worked out.
struct Server<'v> {
    name: &'v str,
    /// The pointer of the server's object.
    base: String,
    /// The server's object.
    value: &'v Value,
    /// Its `auggy` policy (`mcpServers`), or `null`.
    policy: &'v Value,
    kind: TransportKind,
    tools: Vec<String>,
    blocked_tools: Vec<String>,
    limits: Limits,
}

/// The built-in tools' allowlist and trust levels, under the reserved name.
fn builtin(cx: &Cx<'_>, b: &Value) -> BuiltinTools {
    BuiltinTools {
        tools: strings(b.get("tools").or_else(|| b.get("allowedTools"))),
        blocked_tools: strings(b.get("blockedTools")),
        allowed_trust_levels: levels(b.get("allowedTrustLevels")),
        tool_policies: tool_policies(b),
        source: cx.path.to_owned(),
    }
}

/// `auth.token_exchange` at `pointer`: exactly one of `token_endpoint` and
/// `issuer` (the schema checks the rest).
fn token_exchange(
    cx: &mut Cx<'_>,
    server: &str,
    pointer: &str,
    value: &Value,
) -> Option<TokenExchangeSpec> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let endpoint = match (text("token_endpoint"), text("issuer")) {
        (Some(url), None) => ExchangeEndpoint::TokenEndpoint(url),
        (None, Some(url)) => ExchangeEndpoint::Issuer(url),
        (Some(_), Some(_)) => {
            cx.push(
                Some(server.to_owned()),
                &format!("{pointer}/issuer"),
                "`token_exchange` names both `token_endpoint` and `issuer`",
                "keep one: `token_endpoint` is used as it is, `issuer` is looked up for its token endpoint",
            );
            return None;
        }
        (None, None) => {
            cx.push(
                Some(server.to_owned()),
                pointer,
                "`token_exchange` needs `token_endpoint` or `issuer`",
                "add \"token_endpoint\": \"https://…/token\" (the backend's authorization server), or its \"issuer\" to look it up",
            );
            return None;
        }
    };
    let client_secret = value
        .get("client_secret")
        .and_then(Value::as_str)
        .and_then(|raw| cx.template(server, &format!("{pointer}/client_secret"), raw));
    Some(TokenExchangeSpec {
        endpoint,
        client_id: text("client_id").unwrap_or_default(),
        client_secret,
        audience: text("audience"),
        resource: text("resource"),
        scopes: strings(value.get("scopes")),
    })
}

/// The entry of one server, built alike in both dialects.
fn entry(cx: &mut Cx<'_>, scope: Scope, dialect: Dialect, server: Server<'_>) -> ServerEntry {
    let Server {
        name,
        base,
        value,
        policy,
        kind,
        tools,
        blocked_tools,
        limits,
    } = server;
    let transport = match kind {
        TransportKind::Stdio => Transport::Stdio(StdioSpec {
            command: value
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            args: strings(value.get("args")),
            env: cx.templates(name, &format!("{base}/env"), value.get("env")),
        }),
        TransportKind::Http | TransportKind::Sse => Transport::Http(HttpSpec {
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
                (None, None) => value
                    .pointer("/auth/token_exchange")
                    .and_then(|x| {
                        token_exchange(cx, name, &format!("{base}/auth/token_exchange"), x)
                    })
                    .map(AuthSpec::TokenExchange),
                (Some(s), _) => Some(AuthSpec::GoogleOAuth {
                    scopes: strings(Some(s)),
                }),
                (None, Some(o)) => Some(AuthSpec::OAuth(OAuthSpec {
                    scopes: strings(o.get("scopes")),
                    client_id: o
                        .get("client_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    client_secret: o
                        .get("client_secret")
                        .and_then(Value::as_str)
                        .and_then(|raw| {
                            cx.template(name, &format!("{base}/auth/oauth/client_secret"), raw)
                        }),
                    client_metadata_url: o
                        .get("client_metadata_url")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    callback_port: o
                        .get("callback_port")
                        .and_then(Value::as_u64)
                        .and_then(|p| u16::try_from(p).ok()),
                })),
            },
        }),
    };
    // The core dialect's server keys, or the `auggy` policy's.
    let key = |k: &str| value.get(k).or_else(|| policy.get(k));
    let cloud = key("cloud").and_then(Value::as_str).map(|c| {
        if c == "disabled" {
            Cloud::Disabled
        } else {
            Cloud::LocalOnly
        }
    });
    let spec = ServerSpec {
        transport,
        tools,
        blocked_tools,
        allowed_trust_levels: levels(policy.get("allowedTrustLevels")),
        tool_policies: tool_policies(policy),
        cloud,
        limits,
        read_only: key("read_only").and_then(Value::as_bool).unwrap_or(false),
        agentic_never: key("agentic_never")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        tool_notes: key("tool_notes")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        pin: key("pin")
            .and_then(Value::as_str)
            .and_then(PinMode::parse)
            .unwrap_or_default(),
        resources: key("resources").and_then(Value::as_bool).unwrap_or(true),
        prompts: key("prompts").and_then(Value::as_bool).unwrap_or(true),
        required: key("required").and_then(Value::as_bool).unwrap_or(false),
        env_inherit: key("env_inherit").and_then(EnvInherit::parse),
    };
    ServerEntry {
        name: name.to_owned(),
        scope,
        source: cx.path.to_owned(),
        dialect,
        spec,
    }
}
