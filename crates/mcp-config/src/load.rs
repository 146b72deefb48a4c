use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::spec::{AuthSpec, HttpSpec, StdioSpec, Transport};
use crate::{
    Config, ConfigFile, Error, Problem, Result, Scope, ServerEntry, ServerSpec, Setting, Template,
};

/// Which files to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPaths {
    /// `<agentsDir>/mcp.json`, highest precedence.
    pub project: PathBuf,
    /// `~/.agents/mcp.json`, or the file given instead; `None` reads no user file.
    pub user: Option<PathBuf>,
}

impl ConfigPaths {
    /// The standard paths: `<agents_dir>/mcp.json` and, unless `user_config`
    /// replaces it, `$HOME/.agents/mcp.json` (none when `HOME` is unset).
    pub fn new(agents_dir: impl AsRef<Path>, user_config: Option<PathBuf>) -> ConfigPaths {
        let user = user_config.or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|home| Path::new(&home).join(".agents").join("mcp.json"))
        });
        ConfigPaths {
            project: agents_dir.as_ref().join("mcp.json"),
            user,
        }
    }
}

/// Reads, validates and merges the files named by `paths`.
///
/// A missing file means "no servers here". Nothing is interpolated yet:
/// `${env:NAME}` placeholders are checked for syntax and expanded when each
/// server starts ([`Template::expand`]).
pub fn load(paths: &ConfigPaths) -> Result<Config> {
    let mut files = vec![(paths.project.clone(), Scope::Project)];
    if let Some(user) = paths
        .user
        .as_ref()
        .filter(|u| !same_file(u, &paths.project))
    {
        files.push((user.clone(), Scope::User));
    }
    let mut parsed = Vec::new();
    let mut problems = Vec::new();
    let mut config = Config::default();
    for (path, scope) in files {
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                config.files.push(ConfigFile {
                    path,
                    scope,
                    found: false,
                });
                continue;
            }
            Err(source) => return Err(Error::Read { path, source }),
        };
        config.files.push(ConfigFile {
            path: path.clone(),
            scope,
            found: true,
        });
        let file = parse_str(&text, &path, scope, &mut problems)?;
        parsed.push(file);
    }
    if !problems.is_empty() {
        return Err(Error::Invalid { problems });
    }
    merge(&mut config, parsed);
    Ok(config)
}

/// One file, parsed and validated, before merging.
#[derive(Debug, Default)]
struct FileConfig {
    servers: Vec<ServerEntry>,
    agentic_wrap: Option<Setting<bool>>,
    agentic_wrap_threshold: Option<Setting<u64>>,
    agentic_wrap_llm: Option<Setting<bool>>,
    agentic_wrap_model: Option<Setting<String>>,
}

/// Merges files given highest precedence first.
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
    }
    config.servers = servers.into_values().collect();
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

const TOP_KEYS: &[&str] = &[
    "$schema",
    "version",
    "servers",
    "agentic_wrap",
    "agentic_wrap_threshold",
    "agentic_wrap_llm",
    "agentic_wrap_model",
];

const SERVER_KEYS: &[&str] = &[
    "transport",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "auth",
    "tools",
    "read_only",
    "agentic_never",
    "tool_notes",
];

const STDIO_ONLY: &[&str] = &["command", "args", "env"];
const HTTP_ONLY: &[&str] = &["url", "headers", "auth"];

/// Parses one file's text. Schema problems are pushed to `problems`; a JSON
/// syntax error is returned at once.
fn parse_str(
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
    let mut cx = Cx {
        path,
        server: None,
        problems,
    };
    let mut file = FileConfig::default();
    let Some(root) = root.as_object() else {
        cx.problem(
            "",
            "the file must hold a JSON object",
            "write `{\"version\": 1, \"servers\": {}}`",
        );
        return Ok(file);
    };
    cx.unknown_keys(root, "", TOP_KEYS);
    match root.get("version") {
        None => {}
        Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
        Some(other) => cx.problem(
            "/version",
            &format!("unsupported version {other}"),
            "set \"version\": 1, the only version this core-agent reads",
        ),
    }
    let setting = |value| Setting {
        value,
        source: path.to_owned(),
    };
    file.agentic_wrap = cx.bool(root, "", "agentic_wrap").map(setting);
    file.agentic_wrap_llm = cx.bool(root, "", "agentic_wrap_llm").map(setting);
    file.agentic_wrap_threshold = match root.get("agentic_wrap_threshold") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) => Some(Setting {
                value: n,
                source: path.to_owned(),
            }),
            None => {
                cx.problem(
                    "/agentic_wrap_threshold",
                    &format!("expected a whole number of bytes, found {}", describe(v)),
                    "write a number such as 8000",
                );
                None
            }
        },
    };
    file.agentic_wrap_model = cx
        .string(root, "", "agentic_wrap_model")
        .map(|value| Setting {
            value,
            source: path.to_owned(),
        });
    match root.get("servers") {
        None => {}
        Some(Value::Object(servers)) => {
            for (name, value) in servers {
                if let Some(spec) = parse_server(&mut cx, name, value) {
                    file.servers.push(ServerEntry {
                        name: name.clone(),
                        scope,
                        source: path.to_owned(),
                        spec,
                    });
                }
            }
        }
        Some(other) => cx.problem(
            "/servers",
            &format!(
                "expected an object of name → server, found {}",
                describe(other)
            ),
            "write \"servers\": {\"name\": {\"transport\": \"stdio\", \"command\": \"…\"}}",
        ),
    }
    Ok(file)
}

fn parse_server(cx: &mut Cx<'_>, name: &str, value: &Value) -> Option<ServerSpec> {
    cx.server = Some(name.to_owned());
    let base = format!("/servers/{}", escape_pointer(name));
    let spec = parse_server_inner(cx, name, value, &base);
    cx.server = None;
    spec
}

fn parse_server_inner(
    cx: &mut Cx<'_>,
    name: &str,
    value: &Value,
    base: &str,
) -> Option<ServerSpec> {
    let start = cx.problems.len();
    if name.is_empty() {
        cx.problem(
            base,
            "the server name is empty",
            "give the server a name such as \"filesystem\"",
        );
    }
    let Some(obj) = value.as_object() else {
        cx.problem(
            base,
            &format!("expected a server object, found {}", describe(value)),
            "write {\"transport\": \"stdio\", \"command\": \"…\"} or {\"transport\": \"http\", \"url\": \"…\"}",
        );
        return None;
    };
    cx.unknown_keys(obj, base, SERVER_KEYS);
    let present = |keys: &[&'static str]| -> Vec<&'static str> {
        keys.iter()
            .copied()
            .filter(|k| obj.contains_key(*k))
            .collect()
    };
    let (stdio_keys, http_keys) = (present(STDIO_ONLY), present(HTTP_ONLY));
    let transport = match obj.get("transport") {
        None => {
            let guess = if !stdio_keys.is_empty() && http_keys.is_empty() {
                "add \"transport\": \"stdio\""
            } else if stdio_keys.is_empty() && !http_keys.is_empty() {
                "add \"transport\": \"http\""
            } else {
                "add \"transport\": \"stdio\" (with `command`) or \"http\" (with `url`)"
            };
            cx.problem(
                &format!("{base}/transport"),
                "missing required field `transport`",
                guess,
            );
            None
        }
        Some(Value::String(t)) if t == "stdio" || t == "http" => Some(t.as_str()),
        Some(other) => {
            let hint = match other.as_str() {
                Some("streamable-http" | "streamableHttp" | "streamable_http") => {
                    "use \"http\", which is streamable HTTP"
                }
                Some("sse") => {
                    "core-agent speaks streamable HTTP only; use \"http\" with the server's streamable endpoint"
                }
                _ => "use \"stdio\" or \"http\"",
            };
            cx.problem(
                &format!("{base}/transport"),
                &format!("unknown transport {other}"),
                hint,
            );
            None
        }
    };
    let mixing = |cx: &mut Cx<'_>, wrong: &[&str], kind: &str, keep: &str| {
        if !wrong.is_empty() {
            let list = wrong
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            cx.problem(
                &format!("{base}/{}", wrong[0]),
                &format!("a {kind} server cannot have {list}: a server uses exactly one transport"),
                &format!(
                    "remove {list}, or make this an {keep} server and remove the {kind} fields"
                ),
            );
        }
    };
    let tools = cx.string_list(obj, base, "tools").unwrap_or_default();
    let tool_notes = cx.string_map(obj, base, "tool_notes").unwrap_or_default();
    let read_only = cx.bool(obj, base, "read_only").unwrap_or(false);
    let agentic_never = cx.bool(obj, base, "agentic_never").unwrap_or(false);
    let transport = match transport {
        Some("stdio") => {
            mixing(cx, &http_keys, "stdio", "http");
            let command = cx.string(obj, base, "command");
            if command.is_none() && !obj.contains_key("command") {
                cx.problem(
                    &format!("{base}/command"),
                    "a stdio server needs `command`, the executable to spawn",
                    "add \"command\": \"<executable>\"",
                );
            }
            if command.as_deref() == Some("") {
                cx.problem(
                    &format!("{base}/command"),
                    "`command` is empty",
                    "name the executable to spawn",
                );
            }
            let args = cx.string_list(obj, base, "args").unwrap_or_default();
            let env = cx.templates(obj, base, "env");
            command.map(|command| Transport::Stdio(StdioSpec { command, args, env }))
        }
        Some(_) => {
            mixing(cx, &stdio_keys, "http", "stdio");
            let url = cx.string(obj, base, "url");
            match &url {
                None if !obj.contains_key("url") => cx.problem(
                    &format!("{base}/url"),
                    "an http server needs `url`, its streamable HTTP endpoint",
                    "add \"url\": \"https://…/mcp\"",
                ),
                Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => cx.problem(
                    &format!("{base}/url"),
                    &format!("`{u}` is not an http:// or https:// URL"),
                    "write the full endpoint URL, such as \"https://example.com/mcp\"",
                ),
                _ => {}
            }
            let headers = cx.templates(obj, base, "headers");
            let auth = obj
                .get("auth")
                .and_then(|v| parse_auth(cx, &format!("{base}/auth"), v));
            url.map(|url| Transport::Http(HttpSpec { url, headers, auth }))
        }
        None => None,
    };
    if cx.problems.len() > start {
        return None;
    }
    Some(ServerSpec {
        transport: transport?,
        tools,
        read_only,
        agentic_never,
        tool_notes,
    })
}

fn parse_auth(cx: &mut Cx<'_>, base: &str, value: &Value) -> Option<AuthSpec> {
    let Some(obj) = value.as_object() else {
        cx.problem(
            base,
            &format!("expected an object, found {}", describe(value)),
            "write \"auth\": {\"google_oauth\": {\"scopes\": [\"…\"]}}",
        );
        return None;
    };
    cx.unknown_keys(obj, base, &["google_oauth"]);
    let google = obj.get("google_oauth")?;
    let gbase = format!("{base}/google_oauth");
    let Some(gobj) = google.as_object() else {
        cx.problem(
            &gbase,
            &format!("expected an object, found {}", describe(google)),
            "write {\"scopes\": [\"…\"]}",
        );
        return None;
    };
    cx.unknown_keys(gobj, &gbase, &["scopes"]);
    let no_default = "list the OAuth scopes the server documents; there is no default";
    if !gobj.contains_key("scopes") {
        cx.problem(
            &format!("{gbase}/scopes"),
            "missing required field `scopes`",
            no_default,
        );
        return None;
    }
    match cx.string_list(gobj, &gbase, "scopes") {
        Some(scopes) if !scopes.is_empty() => Some(AuthSpec::GoogleOAuth { scopes }),
        Some(_) => {
            cx.problem(&format!("{gbase}/scopes"), "`scopes` is empty", no_default);
            None
        }
        None => None,
    }
}

/// Validation context: the file, the current server, and the problems so far.
struct Cx<'a> {
    path: &'a Path,
    server: Option<String>,
    problems: &'a mut Vec<Problem>,
}

impl Cx<'_> {
    fn problem(&mut self, pointer: &str, message: &str, fix: &str) {
        self.problems.push(Problem {
            path: self.path.to_owned(),
            server: self.server.clone(),
            pointer: pointer.to_owned(),
            message: message.to_owned(),
            fix: fix.to_owned(),
        });
    }

    fn unknown_keys(&mut self, obj: &Map<String, Value>, base: &str, known: &[&str]) {
        for key in obj.keys() {
            if known.contains(&key.as_str()) {
                continue;
            }
            let fix = match closest(key, known) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!(
                    "valid fields are {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            self.problem(
                &format!("{base}/{}", escape_pointer(key)),
                &format!("unknown field `{key}`"),
                &fix,
            );
        }
    }

    fn bool(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<bool> {
        let v = obj.get(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.problem(
                    &format!("{base}/{key}"),
                    &format!("expected true or false, found {}", describe(v)),
                    "write true or false without quotes",
                );
                None
            }
        }
    }

    fn string(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<String> {
        let v = obj.get(key)?;
        match v.as_str() {
            Some(s) => Some(s.to_owned()),
            None => {
                self.problem(
                    &format!("{base}/{key}"),
                    &format!("expected a string, found {}", describe(v)),
                    "write the value in double quotes",
                );
                None
            }
        }
    }

    fn string_list(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let v = obj.get(key)?;
        let items = v
            .as_array()
            .and_then(|a| a.iter().map(|i| i.as_str().map(str::to_owned)).collect());
        if items.is_none() {
            self.problem(
                &format!("{base}/{key}"),
                &format!("expected an array of strings, found {}", describe(v)),
                "write [\"a\", \"b\"]",
            );
        }
        items
    }

    fn string_map(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let v = obj.get(key)?;
        let Some(map) = v.as_object() else {
            self.problem(
                &format!("{base}/{key}"),
                &format!("expected an object of strings, found {}", describe(v)),
                "write {\"name\": \"text\"}",
            );
            return None;
        };
        let mut out = BTreeMap::new();
        for (k, item) in map {
            match item.as_str() {
                Some(s) => {
                    out.insert(k.clone(), s.to_owned());
                }
                None => self.problem(
                    &format!("{base}/{key}/{}", escape_pointer(k)),
                    &format!("expected a string, found {}", describe(item)),
                    "write the value in double quotes",
                ),
            }
        }
        Some(out)
    }

    fn templates(
        &mut self,
        obj: &Map<String, Value>,
        base: &str,
        key: &str,
    ) -> BTreeMap<String, Template> {
        let mut out = BTreeMap::new();
        for (k, raw) in self.string_map(obj, base, key).unwrap_or_default() {
            match Template::parse(&raw) {
                Ok(t) => {
                    out.insert(k, t);
                }
                Err(message) => self.problem(
                    &format!("{base}/{key}/{}", escape_pointer(&k)),
                    &message,
                    "write placeholders as ${env:NAME}",
                ),
            }
        }
        out
    }
}

/// How a JSON value is described in an error ("a number", "a string").
fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// serde_json appends " at line L column C"; we print the position first.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The known key closest to `key`, when it is close enough to be a typo.
fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<FileConfig, String> {
        let mut problems = Vec::new();
        let file = parse_str(text, Path::new("mcp.json"), Scope::Project, &mut problems)
            .map_err(|e| e.to_string())?;
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(Error::Invalid { problems }.to_string())
        }
    }

    #[test]
    fn closest_finds_typos_only() {
        assert_eq!(closest("comand", SERVER_KEYS), Some("command"));
        assert_eq!(closest("readonly", SERVER_KEYS), Some("read_only"));
        assert_eq!(closest("zzzzzz", SERVER_KEYS), None);
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
}
