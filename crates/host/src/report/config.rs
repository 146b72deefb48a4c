use std::collections::BTreeMap;

use core_agent_mcp_config::{
    AuthSpec, Cloud, Config, Dialect, Env, Limits, Scope, Template, Transport, TrustLevel,
};
use serde::Serialize;
use serde_json::Value;

/// The effective merged config, as `core-agent config show --json` prints it.
/// Values that came from interpolation are shown as `***`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigReport {
    /// The files looked at, highest precedence first.
    pub files: Vec<FileReport>,
    /// The `.env` file that supplied variables, if any.
    pub dotenv: Option<String>,
    /// The non-server settings, each with the file that set it (`null` when unset).
    pub settings: BTreeMap<String, Option<SettingReport>>,
    /// The merged servers, by name.
    pub servers: Vec<ServerConfigReport>,
    /// Servers the files name but that are not started, with why.
    pub left_out: Vec<LeftOutReport>,
    /// What the files say that core-agent does not use.
    pub warnings: Vec<String>,
}

/// A configured server that is not started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOutReport {
    /// Its name.
    pub name: String,
    /// The file that declares it.
    pub source: String,
    /// `disabled`, `unsupported-transport`, …
    pub kind: String,
    /// Why, in words.
    pub reason: String,
}

/// One config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// Its path.
    pub path: String,
    /// Where it sits (`project` or `user`).
    #[serde(serialize_with = "super::word")]
    pub scope: Scope,
    /// Whether it exists.
    pub found: bool,
    /// Its dialect (`core` or `mcpServers`), when found.
    #[serde(serialize_with = "super::word_opt")]
    pub dialect: Option<Dialect>,
}

/// A setting and where its value came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingReport {
    /// The value.
    pub value: Value,
    /// The file that set it.
    pub source: String,
}

/// One merged server as configured (the `servers` of `config show`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfigReport {
    /// Its name.
    pub name: String,
    /// Where it was declared (`project` or `user`).
    #[serde(serialize_with = "super::word")]
    pub scope: Scope,
    /// The file that declares it.
    pub source: String,
    /// The dialect of that file (`core` or `mcpServers`).
    #[serde(serialize_with = "super::word")]
    pub dialect: Dialect,
    /// How it is reached (`stdio` or `http`).
    pub transport: crate::TransportKind,
    /// How it is reached.
    #[serde(flatten)]
    pub connection: ConnectionReport,
    /// The allowlist (empty: all).
    pub tools: Vec<String>,
    /// Tools never published.
    pub blocked_tools: Vec<String>,
    /// The trust levels that may see its tools (`None`: each tool's default).
    #[serde(serialize_with = "super::words_opt")]
    pub allowed_trust_levels: Option<Vec<TrustLevel>>,
    /// Explicit trust levels per tool.
    #[serde(serialize_with = "super::words_by_key")]
    pub tool_policies: BTreeMap<String, Vec<TrustLevel>>,
    /// Whether a cloud deployment runs it.
    #[serde(serialize_with = "super::word_opt")]
    pub cloud: Option<Cloud>,
    /// Whether unannotated tools are read-only.
    pub read_only: bool,
    /// Whether the digest is off for it.
    pub agentic_never: bool,
    /// Tool name → note appended to its description.
    pub tool_notes: BTreeMap<String, String>,
    /// Its limits, defaults filled in.
    pub limits: LimitsReport,
}

/// How a server is reached; values a placeholder produced are `***`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ConnectionReport {
    /// A child process.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its extra environment.
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Static headers.
        headers: BTreeMap<String, String>,
        /// `auth`, when set.
        #[serde(skip_serializing_if = "Option::is_none")]
        auth: Option<AuthReport>,
    },
}

/// A server's `auth` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthReport {
    /// Google Application Default Credentials with these scopes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub google_oauth: Option<GoogleOAuthReport>,
    /// MCP OAuth 2.1 (`core-agent mcp login`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthReport>,
}

/// `auth.oauth`; the client secret is never shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OAuthReport {
    /// Scopes requested (empty: the server's).
    pub scopes: Vec<String>,
    /// The pre-registered client, if any.
    pub client_id: Option<String>,
    /// `***` when a client secret is configured.
    pub client_secret: Option<String>,
    /// The client ID metadata document URL, if any.
    pub client_metadata_url: Option<String>,
    /// The loopback port of the login redirect, if fixed.
    pub callback_port: Option<u16>,
}

/// `auth.google_oauth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GoogleOAuthReport {
    /// The OAuth scopes requested.
    pub scopes: Vec<String>,
}

/// A server's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LimitsReport {
    /// Tools published at most.
    pub max_tools: usize,
    /// `tools/list` pages read at most.
    pub max_pages: usize,
    /// Largest input schema kept.
    pub max_input_schema_bytes: usize,
    /// Largest result returned.
    pub max_result_bytes: usize,
    /// Per-call timeout.
    pub call_timeout_ms: u64,
    /// Calls in flight at most.
    pub max_concurrent_calls: usize,
    /// Largest message read from the server.
    pub max_message_bytes: usize,
}

impl From<&Limits> for LimitsReport {
    fn from(l: &Limits) -> Self {
        LimitsReport {
            max_tools: l.max_tools,
            max_pages: l.max_pages,
            max_input_schema_bytes: l.max_input_schema_bytes,
            max_result_bytes: l.max_result_bytes,
            call_timeout_ms: l.call_timeout_ms,
            max_concurrent_calls: l.max_concurrent_calls,
            max_message_bytes: l.max_message_bytes,
        }
    }
}

/// Builds the report. Placeholders are expanded from the process
/// environment and the project's `.env` only to decide what to mask.
pub fn config_report(config: &Config) -> ConfigReport {
    let survey = (
        "survey",
        config
            .survey
            .as_ref()
            .map(|s| (serde_json::json!(s.value), s.source.as_path())),
    );
    // The reserved server name `builtin`: what narrows the survey tools.
    let builtin = (
        "builtin",
        config.builtin.as_ref().map(|b| {
            let levels = |l: &[TrustLevel]| l.iter().map(|t| t.as_str()).collect::<Vec<_>>();
            let mut value = serde_json::Map::new();
            if !b.tools.is_empty() {
                value.insert("tools".into(), serde_json::json!(b.tools));
            }
            if !b.blocked_tools.is_empty() {
                value.insert("blocked_tools".into(), serde_json::json!(b.blocked_tools));
            }
            if let Some(allowed) = &b.allowed_trust_levels {
                value.insert("trust_levels".into(), serde_json::json!(levels(allowed)));
            }
            if !b.tool_policies.is_empty() {
                let policies: BTreeMap<&str, Vec<&str>> = b
                    .tool_policies
                    .iter()
                    .map(|(tool, l)| (tool.as_str(), levels(l)))
                    .collect();
                value.insert("tool_policies".into(), serde_json::json!(policies));
            }
            (Value::Object(value), b.source.as_path())
        }),
    );
    let settings = config
        .wrap
        .entries()
        .into_iter()
        .chain([survey, builtin])
        .map(|(key, value)| {
            let report = value.map(|(value, source)| SettingReport {
                value,
                source: source.display().to_string(),
            });
            (key.to_owned(), report)
        })
        .collect();
    let env = config.dotenv.over_process();
    let servers = config
        .servers
        .iter()
        .map(|s| {
            let spec = &s.spec;
            let connection = match &spec.transport {
                Transport::Stdio(t) => ConnectionReport::Stdio {
                    command: t.command.clone(),
                    args: t.args.clone(),
                    env: masked(&t.env, &env),
                },
                Transport::Http(t) => ConnectionReport::Http {
                    url: t.url.clone(),
                    headers: masked(&t.headers, &env),
                    auth: t.auth.as_ref().and_then(|a| match a {
                        AuthSpec::GoogleOAuth { scopes } => Some(AuthReport {
                            google_oauth: Some(GoogleOAuthReport {
                                scopes: scopes.clone(),
                            }),
                            oauth: None,
                        }),
                        AuthSpec::OAuth(o) => Some(AuthReport {
                            google_oauth: None,
                            oauth: Some(OAuthReport {
                                scopes: o.scopes.clone(),
                                client_id: o.client_id.clone(),
                                client_secret: o.client_secret.as_ref().map(|_| "***".to_owned()),
                                client_metadata_url: o.client_metadata_url.clone(),
                                callback_port: o.callback_port,
                            }),
                        }),
                        _ => None,
                    }),
                },
            };
            ServerConfigReport {
                name: s.name.clone(),
                scope: s.scope,
                source: s.source.display().to_string(),
                dialect: s.dialect,
                transport: crate::TransportKind::from(&spec.transport),
                connection,
                tools: spec.tools.clone(),
                blocked_tools: spec.blocked_tools.clone(),
                allowed_trust_levels: spec.allowed_trust_levels.clone(),
                tool_policies: spec.tool_policies.clone(),
                cloud: spec.cloud,
                read_only: spec.read_only,
                agentic_never: spec.agentic_never,
                tool_notes: spec.tool_notes.clone(),
                limits: LimitsReport::from(&spec.limits),
            }
        })
        .collect();
    ConfigReport {
        files: config
            .files
            .iter()
            .map(|f| FileReport {
                path: f.path.display().to_string(),
                scope: f.scope,
                found: f.found,
                dialect: f.dialect,
            })
            .collect(),
        dotenv: config.dotenv.path.as_ref().map(|p| p.display().to_string()),
        settings,
        servers,
        left_out: config
            .left_out
            .iter()
            .map(|l| LeftOutReport {
                name: l.name.clone(),
                source: l.source.display().to_string(),
                kind: l.reason.kind().to_owned(),
                reason: l.reason.to_string(),
            })
            .collect(),
        warnings: config.warnings.iter().map(ToString::to_string).collect(),
    }
}

/// Each value as it will be sent, except that a value a placeholder
/// produced is `***`.
fn masked(values: &BTreeMap<String, Template>, env: &dyn Env) -> BTreeMap<String, String> {
    values
        .iter()
        .map(|(k, t)| {
            let e = t.expand(env);
            let shown = if e.interpolated {
                "***".to_owned()
            } else {
                e.value
            };
            (k.clone(), shown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use core_agent_mcp_config::{
        Dialect, HttpSpec, Scope, ServerEntry, ServerSpec, Setting, StdioSpec,
    };
    use serde_json::json;

    fn entry(name: &str, transport: Transport) -> ServerEntry {
        ServerEntry {
            name: name.to_owned(),
            scope: Scope::Project,
            source: ".agents/mcp.json".into(),
            dialect: Dialect::Core,
            spec: ServerSpec::new(transport),
        }
    }

    #[test]
    fn servers_and_settings_serialize_flat_with_secrets_masked() {
        let template = |s: &str| Template::parse(s).unwrap_or_else(|e| panic!("{e}"));
        let stdio = StdioSpec {
            command: "srv".to_owned(),
            args: vec!["--x".to_owned()],
            env: [("TOKEN".to_owned(), template("${CA_VIEW_UNSET:-s3cret}"))].into(),
        };
        let http = HttpSpec {
            url: "http://127.0.0.1:9/mcp".to_owned(),
            headers: [("X-Static".to_owned(), template("visible"))].into(),
            auth: None,
        };
        let mut config = Config::default().with_servers(vec![
            entry("a", Transport::Stdio(stdio)),
            entry("b", Transport::Http(http)),
        ]);
        config.wrap.threshold = Some(Setting {
            value: 4000,
            source: "x.json".into(),
        });
        let report = serde_json::to_value(config_report(&config)).unwrap_or_default();
        let a = &report["servers"][0];
        assert_eq!(
            (&a["command"], &a["args"], &a["env"]),
            (&json!("srv"), &json!(["--x"]), &json!({"TOKEN": "***"}))
        );
        assert_eq!(a["limits"]["max_result_bytes"], json!(128 * 1024));
        let b = &report["servers"][1];
        assert_eq!(b["headers"], json!({"X-Static": "visible"}));
        assert!(b.get("auth").is_none() && b.get("command").is_none());
        assert_eq!(
            report["settings"]["agentic_wrap_threshold"],
            json!({"value": 4000, "source": "x.json"})
        );
        assert_eq!(report["settings"]["agentic_wrap_pricing"], Value::Null);
        assert_eq!(report["settings"]["survey"], Value::Null);
        assert_eq!(report["settings"]["builtin"], Value::Null);
        config.builtin = Some(core_agent_mcp_config::BuiltinTools {
            tools: vec!["grep".into(), "glob".into()],
            blocked_tools: Vec::new(),
            allowed_trust_levels: Some(vec![TrustLevel::Creator]),
            tool_policies: BTreeMap::new(),
            source: "x.json".into(),
        });
        let report = serde_json::to_value(config_report(&config)).unwrap_or_default();
        assert_eq!(
            report["settings"]["builtin"],
            json!({"value": {"tools": ["grep", "glob"], "trust_levels": ["creator"]}, "source": "x.json"})
        );
        config.survey = Some(Setting {
            value: false,
            source: "x.json".into(),
        });
        let report = serde_json::to_value(config_report(&config)).unwrap_or_default();
        assert_eq!(
            report["settings"]["survey"],
            json!({"value": false, "source": "x.json"})
        );
    }
}
