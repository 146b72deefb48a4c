use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::position::Positions;
use crate::schema;
use crate::spec::{AuthSpec, HttpSpec, StdioSpec, Transport};
use crate::{
    Cloud, Config, ConfigFile, Dialect, DotEnv, Error, Limits, Problem, Result, Scope, ServerEntry,
    ServerSpec, Setting, Template, TrustLevel,
};

/// Which files to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPaths {
    /// `<agentsDir>/mcp.json`, highest precedence.
    pub project: PathBuf,
    /// `<project root>/.mcp.json`, next; `None` reads none.
    pub dot_mcp: Option<PathBuf>,
    /// `~/.agents/mcp.json`, or the file given instead; `None` reads no user file.
    pub user: Option<PathBuf>,
    /// `<project root>/.env`; `None` reads none.
    pub dotenv: Option<PathBuf>,
}

impl ConfigPaths {
    /// The standard paths. The project root is the directory that holds the
    /// agents directory (`.agents` → `.`): `<root>/.mcp.json` and `<root>/.env`
    /// are read from there. The user file is `$HOME/.agents/mcp.json` unless
    /// `user_config` replaces it (none when `HOME` is unset).
    pub fn new(agents_dir: impl AsRef<Path>, user_config: Option<PathBuf>) -> ConfigPaths {
        let agents_dir = agents_dir.as_ref();
        let root = match agents_dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let user = user_config.or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|home| Path::new(&home).join(".agents").join("mcp.json"))
        });
        ConfigPaths {
            project: agents_dir.join("mcp.json"),
            dot_mcp: Some(root.join(".mcp.json")),
            user,
            dotenv: Some(root.join(".env")),
        }
    }

    /// Only `project`, nothing else: handy in tests and embedding hosts.
    pub fn only(project: impl Into<PathBuf>) -> ConfigPaths {
        ConfigPaths {
            project: project.into(),
            dot_mcp: None,
            user: None,
            dotenv: None,
        }
    }

    /// The config files, highest precedence first, with their scopes.
    pub fn files(&self) -> Vec<(PathBuf, Scope)> {
        let mut files = vec![(self.project.clone(), Scope::Project)];
        if let Some(p) = &self.dot_mcp {
            files.push((p.clone(), Scope::Project));
        }
        if let Some(p) = &self.user {
            files.push((p.clone(), Scope::User));
        }
        let mut seen: Vec<PathBuf> = Vec::new();
        files.retain(|(p, _)| {
            let key = p.canonicalize().unwrap_or_else(|_| p.clone());
            if seen.contains(&key) {
                false
            } else {
                seen.push(key);
                true
            }
        });
        files
    }
}

/// Reads, validates and merges the files named by `paths`, and reads `.env`.
///
/// A missing file means "no servers here". Every problem of every file is
/// reported at once. Placeholders are checked here and expanded when each
/// server starts ([`Template::expand`]).
pub fn load(paths: &ConfigPaths) -> Result<Config> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    let mut config = Config::default();
    for (path, scope) in paths.files() {
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                config.files.push(ConfigFile {
                    path,
                    scope,
                    found: false,
                    dialect: None,
                });
                continue;
            }
            Err(source) => return Err(Error::Read { path, source }),
        };
        let file = parse_file(&text, &path, scope, &mut problems)?;
        config.files.push(ConfigFile {
            path: path.clone(),
            scope,
            found: true,
            dialect: Some(file.dialect),
        });
        parsed.push(file);
    }
    if let Some(dotenv) = &paths.dotenv {
        config.dotenv = DotEnv::load(dotenv)?;
    }
    if !problems.is_empty() {
        return Err(Error::Invalid { problems });
    }
    merge(&mut config, parsed);
    Ok(config)
}

/// Parses and validates one file's text, in whichever dialect it is written.
///
/// Problems go to `problems`; a JSON syntax error is returned at once.
pub fn parse_file(
    text: &str,
    path: &Path,
    scope: Scope,
    problems: &mut Vec<Problem>,
) -> Result<FileConfig> {
    let root: Value = serde_json::from_str(text).map_err(|e| Error::Syntax {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    let dialect = Dialect::detect(&root);
    let positions = Positions::new(text);
    let mut cx = Cx {
        path,
        positions: &positions,
        problems: Vec::new(),
    };
    if let Some(obj) = root.as_object()
        && obj.contains_key("servers")
        && obj.contains_key("mcpServers")
    {
        cx.push(
            None,
            "/mcpServers",
            "the file has both `servers` (core-agent) and `mcpServers` (.mcp.json): a file uses one dialect",
            "move every server under one of the two keys",
        );
    }
    for v in schema::validate(dialect, &root) {
        let server = server_of(dialect, &v.pointer);
        cx.push(server, &v.pointer, &v.message, &v.fix);
    }
    let mut file = FileConfig {
        dialect,
        ..FileConfig::default()
    };
    if cx.problems.is_empty() {
        convert(&mut cx, &root, dialect, scope, &mut file);
    }
    let mut found = cx.problems;
    found.sort_by_key(|p| (p.line, p.column));
    problems.extend(found);
    Ok(file)
}

/// The server a pointer belongs to.
fn server_of(dialect: Dialect, pointer: &str) -> Option<String> {
    let segs: Vec<&str> = pointer.split('/').skip(1).collect();
    let name = match (dialect, segs.as_slice()) {
        (Dialect::Core, ["servers", name, ..])
        | (Dialect::McpServers, ["mcpServers", name, ..]) => name,
        (Dialect::McpServers, ["auggy", "servers", name, ..]) => name,
        _ => return None,
    };
    Some(name.replace("~1", "/").replace("~0", "~"))
}

/// One file, parsed and validated, before merging.
#[derive(Debug, Default)]
pub struct FileConfig {
    /// The file's dialect.
    pub dialect: Dialect,
    servers: Vec<ServerEntry>,
    agentic_wrap: Option<Setting<bool>>,
    agentic_wrap_threshold: Option<Setting<u64>>,
    agentic_wrap_llm: Option<Setting<bool>>,
    agentic_wrap_model: Option<Setting<String>>,
    agentic_wrap_pricing: Option<Setting<crate::ModelPrices>>,
}

/// Merges files given highest precedence first: servers by name (the first
/// file that has a name wins), settings by first value set.
fn merge(config: &mut Config, files: Vec<FileConfig>) {
    let mut servers: BTreeMap<String, ServerEntry> = BTreeMap::new();
    for file in files {
        for server in file.servers {
            servers.entry(server.name.clone()).or_insert(server);
        }
        config.agentic_wrap = config.agentic_wrap.take().or(file.agentic_wrap);
        config.agentic_wrap_threshold = config
            .agentic_wrap_threshold
            .take()
            .or(file.agentic_wrap_threshold);
        config.agentic_wrap_llm = config.agentic_wrap_llm.take().or(file.agentic_wrap_llm);
        config.agentic_wrap_model = config.agentic_wrap_model.take().or(file.agentic_wrap_model);
        config.agentic_wrap_pricing = config
            .agentic_wrap_pricing
            .take()
            .or(file.agentic_wrap_pricing);
    }
    config.servers = servers.into_values().collect();
}

/// Validation context: the file, its positions, and the problems so far.
struct Cx<'a> {
    path: &'a Path,
    positions: &'a Positions<'a>,
    problems: Vec<Problem>,
}

impl Cx<'_> {
    fn push(&mut self, server: Option<String>, pointer: &str, message: &str, fix: &str) {
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

/// Builds the model from a document the schema accepted.
fn convert(cx: &mut Cx<'_>, root: &Value, dialect: Dialect, scope: Scope, file: &mut FileConfig) {
    let setting = |value| Setting {
        value,
        source: cx.path.to_owned(),
    };
    let servers_key = dialect.servers_key();
    if dialect == Dialect::Core {
        file.agentic_wrap = root
            .get("agentic_wrap")
            .and_then(Value::as_bool)
            .map(setting);
        file.agentic_wrap_llm = root
            .get("agentic_wrap_llm")
            .and_then(Value::as_bool)
            .map(setting);
        file.agentic_wrap_threshold = root
            .get("agentic_wrap_threshold")
            .and_then(Value::as_u64)
            .map(|value| Setting {
                value,
                source: cx.path.to_owned(),
            });
        file.agentic_wrap_model =
            root.get("agentic_wrap_model")
                .and_then(Value::as_str)
                .map(|value| Setting {
                    value: value.to_owned(),
                    source: cx.path.to_owned(),
                });
        file.agentic_wrap_pricing = root
            .get("agentic_wrap_pricing")
            .and_then(Value::as_object)
            .map(|models| {
                let price = |p: &Value, k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                Setting {
                    value: models
                        .iter()
                        .map(|(model, p)| {
                            let price = crate::ModelPrice {
                                input: price(p, "input"),
                                cached_input: price(p, "cached_input"),
                                output: price(p, "output"),
                            };
                            (model.clone(), price)
                        })
                        .collect(),
                    source: cx.path.to_owned(),
                }
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
    for name in policies.keys().filter(|n| !servers.contains_key(*n)) {
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
    for (name, value) in servers {
        let base = format!("/{servers_key}/{}", escape_pointer(name));
        let policy = policies.get(name).unwrap_or(&Value::Null);
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let levels = |v: Option<&Value>| -> Option<Vec<TrustLevel>> {
            v.and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter_map(TrustLevel::parse)
                    .collect()
            })
        };
        let transport = match transport_kind(value) {
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
                auth: value
                    .pointer("/auth/google_oauth/scopes")
                    .map(|s| AuthSpec::GoogleOAuth {
                        scopes: strings(Some(s)),
                    }),
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
        tools.extend(strings(policy.get("allowedTools")));
        let tool_policies = policy
            .get("toolPolicies")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(tool, p)| {
                        (
                            tool.clone(),
                            levels(p.get("allowedTrustLevels")).unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let spec = ServerSpec {
            transport,
            tools,
            blocked_tools: strings(policy.get("blockedTools")),
            allowed_trust_levels: levels(policy.get("allowedTrustLevels")),
            tool_policies,
            cloud,
            limits: file_limits.overlaid(value.get("limits").or_else(|| policy.get("limits"))),
            read_only: value
                .get("read_only")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            agentic_never: value
                .get("agentic_never")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            tool_notes: value
                .get("tool_notes")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
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

/// `"stdio"` or `"http"`, as a server object of either dialect declares it
/// (`transport` or `type`; with neither, a lone `url` means http).
pub(crate) fn transport_kind(server: &Value) -> &'static str {
    let declared = server
        .get("transport")
        .or_else(|| server.get("type"))
        .and_then(Value::as_str);
    match declared {
        Some("http" | "streamable-http") => "http",
        Some(_) => "stdio",
        None if server.get("url").is_some() && server.get("command").is_none() => "http",
        None => "stdio",
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
pub(crate) fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// serde_json appends " at line L column C"; we print the position first.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The known name closest to `key`, when it is close enough to be a typo.
pub(crate) fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| {
            (
                strsim::damerau_levenshtein(&key.to_lowercase(), &k.to_lowercase()),
                *k,
            )
        })
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<FileConfig, String> {
        let mut problems = Vec::new();
        let file = parse_file(text, Path::new("mcp.json"), Scope::Project, &mut problems)
            .map_err(|e| e.to_string())?;
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(Error::Invalid { problems }.to_string())
        }
    }

    #[test]
    fn closest_finds_typos_only() {
        let keys = ["command", "read_only", "transport"];
        assert_eq!(closest("comand", &keys), Some("command"));
        assert_eq!(closest("readonly", &keys), Some("read_only"));
        assert_eq!(closest("Transport", &keys), Some("transport"));
        assert_eq!(closest("zzzzzz", &keys), None);
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = parse("{\n  \"servers\": {,}\n}").unwrap_err();
        assert_eq!(
            err,
            "mcp.json:2:15: invalid JSON: key must be a string; fix the syntax at that position"
        );
    }

    #[test]
    fn full_server_specs_parse() {
        let file = parse(
            r#"{"version":1,"agentic_wrap_threshold":9000,"servers":{
                "fs":{"transport":"stdio","command":"srv","args":["a"],"env":{"K":"${env:V}"},
                      "tools":["read"],"read_only":true,"agentic_never":true,"tool_notes":{"read":"n"}},
                "gh":{"transport":"http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${env:T}"},
                      "auth":{"google_oauth":{"scopes":["s"]}}}}}"#,
        )
        .unwrap();
        assert_eq!(file.agentic_wrap_threshold.map(|s| s.value), Some(9000));
        let fs = &file.servers[0].spec;
        assert!(fs.read_only && fs.agentic_never);
        assert_eq!(fs.tools, ["read"]);
        let Transport::Stdio(stdio) = &fs.transport else {
            panic!("stdio")
        };
        assert_eq!(stdio.env["K"].raw(), "${env:V}");
        let Transport::Http(http) = &file.servers[1].spec.transport else {
            panic!("http")
        };
        assert_eq!(
            http.auth,
            Some(AuthSpec::GoogleOAuth {
                scopes: vec!["s".into()]
            })
        );
    }

    #[test]
    fn the_mcp_servers_dialect_maps_onto_the_same_model() {
        let file = parse(
            r#"{"mcpServers":{
                "ops":{"type":"streamable-http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${OPS_TOKEN}"}},
                "local":{"command":"srv","args":["--stdio"],"cloud":"localOnly"}},
              "auggy":{"servers":{"ops":{"allowedTools":["read_status"],"blockedTools":["delete_all"],
                "allowedTrustLevels":["creator","agent"],
                "toolPolicies":{"read_status":{"allowedTrustLevels":["public"]}},"cloud":"disabled"}}}}"#,
        )
        .unwrap();
        assert_eq!(file.dialect, Dialect::McpServers);
        let local = &file.servers[1];
        assert_eq!(local.name, "local");
        assert!(matches!(local.spec.transport, Transport::Stdio(_)));
        assert_eq!(local.spec.cloud, Some(Cloud::LocalOnly));
        let ops = &file.servers[0].spec;
        assert!(matches!(&ops.transport, Transport::Http(h) if h.url == "https://x/mcp"));
        assert_eq!(ops.tools, ["read_status"]);
        assert_eq!(ops.blocked_tools, ["delete_all"]);
        assert_eq!(
            ops.allowed_trust_levels,
            Some(vec![TrustLevel::Creator, TrustLevel::Agent])
        );
        assert_eq!(ops.tool_policies["read_status"], [TrustLevel::Public]);
        assert_eq!(ops.cloud, Some(Cloud::Disabled));
    }
}
