//! The JSON Schemas of both dialects, and the translation of schema
//! violations into messages that name the field and the fix.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::Dialect;
use crate::convert::TransportKind;
use crate::position::escape_pointer;
use crate::suggest::closest;

/// The JSON Schema (draft 2020-12) of core-agent's `mcp.json` dialect.
pub const CORE_SCHEMA: &str = include_str!("../schema/core.schema.json");
/// The JSON Schema (draft 2020-12) of the `.mcp.json` (`mcpServers`) dialect.
pub const MCP_SERVERS_SCHEMA: &str = include_str!("../schema/mcp-servers.schema.json");

/// The schema text of `dialect`, for editors.
pub fn schema(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Core => CORE_SCHEMA,
        Dialect::McpServers => MCP_SERVERS_SCHEMA,
    }
}

/// One violation, before it is placed in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) pointer: String,
    pub(crate) message: String,
    pub(crate) fix: String,
    /// For an unknown key: the pointer of the known key it is a typo of.
    typo_of: Option<String>,
    /// For a missing key: the pointers of the keys whose absence this is.
    absent: Vec<String>,
}

impl Violation {
    fn new(pointer: &str, message: String, fix: String) -> Violation {
        Violation {
            pointer: pointer.to_owned(),
            message,
            fix,
            typo_of: None,
            absent: Vec::new(),
        }
    }
}

fn validator(dialect: Dialect) -> Result<&'static jsonschema::Validator, String> {
    static CORE: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    static MCP: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    let cell = match dialect {
        Dialect::Core => &CORE,
        Dialect::McpServers => &MCP,
    };
    cell.get_or_init(|| {
        let schema: Value = serde_json::from_str(schema(dialect)).map_err(|e| e.to_string())?;
        jsonschema::draft202012::new(&schema).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Validates `root` against the schema of `dialect`.
pub(crate) fn validate(dialect: Dialect, root: &Value) -> Vec<Violation> {
    let validator = match validator(dialect) {
        Ok(v) => v,
        Err(e) => {
            return vec![Violation::new(
                "",
                format!("core-agent's built-in schema does not compile: {e}"),
                "report this as a bug in core-agent".to_owned(),
            )];
        }
    };
    let mut out: Vec<Violation> = Vec::new();
    for error in validator.iter_errors(root) {
        for v in translate(dialect, root, error.instance_path().as_str(), error.kind()) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    // A misspelled required key shows up twice: as an unknown key and as a
    // missing one. The did-you-mean says it all.
    let typos: Vec<String> = out.iter().filter_map(|v| v.typo_of.clone()).collect();
    out.retain(|v| !v.absent.iter().any(|a| typos.contains(a)));
    out
}

/// Turns one schema error into violations a person can act on.
fn translate(
    dialect: Dialect,
    root: &Value,
    pointer: &str,
    kind: &ValidationErrorKind,
) -> Vec<Violation> {
    let instance = root.pointer(pointer).unwrap_or(&Value::Null);
    // An array element is named after its array: `allowedTrustLevels`, not `1`.
    let leaf = match leaf(pointer) {
        l if l.parse::<usize>().is_ok() => leaf(parent(pointer)),
        l => l,
    };
    let one = |message: String, fix: String| vec![Violation::new(pointer, message, fix)];
    match kind {
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|key| {
                let known = known_keys(dialect, pointer);
                let typo = closest(key, known);
                let fix = match typo {
                    _ if dialect == Dialect::Core && pointer == "/servers/builtin" => {
                        "`builtin` is reserved: it takes only `tools`, the built-in survey tools to offer; give your server another name".to_owned()
                    }
                    Some(k) => format!("did you mean `{k}`?"),
                    None if known.is_empty() => "remove it".to_owned(),
                    None => format!("valid fields here are {}", quoted(known)),
                };
                Violation {
                    typo_of: typo.map(|k| format!("{pointer}/{}", escape_pointer(k))),
                    ..Violation::new(
                        &format!("{pointer}/{}", escape_pointer(key)),
                        format!("unknown field `{key}`"),
                        fix,
                    )
                }
            })
            .collect(),
        ValidationErrorKind::Required { property } => {
            let field = property.as_str().unwrap_or_default();
            let (message, fix) = match field {
                "transport" => (
                    "missing required field `transport`".to_owned(),
                    match (instance.get("command"), instance.get("url")) {
                        (Some(_), None) => "add \"transport\": \"stdio\"".to_owned(),
                        (None, Some(_)) => "add \"transport\": \"http\"".to_owned(),
                        _ => {
                            "add \"transport\": \"stdio\" (with `command`) or \"http\" (with `url`)"
                                .to_owned()
                        }
                    },
                ),
                "command" => (
                    "a stdio server needs `command`, the executable to spawn".to_owned(),
                    "add \"command\": \"<executable>\"".to_owned(),
                ),
                "url" if TransportKind::of(instance) == TransportKind::Sse => (
                    "an sse server needs `url`, its endpoint".to_owned(),
                    "add \"url\": \"https://…\"".to_owned(),
                ),
                "url" => (
                    "an http server needs `url`, its streamable HTTP endpoint".to_owned(),
                    "add \"url\": \"https://…/mcp\"".to_owned(),
                ),
                "client_id" if leaf == "token_exchange" => (
                    "`token_exchange` needs `client_id`, the client the exchange authenticates as"
                        .to_owned(),
                    "add the `client_id` registered for the gateway at the server's authorization server"
                        .to_owned(),
                ),
                "client_id" => (
                    "`client_secret` is set without `client_id`".to_owned(),
                    "add the `client_id` the secret belongs to, or remove `client_secret`"
                        .to_owned(),
                ),
                "scopes" => (
                    "missing required field `scopes`".to_owned(),
                    "list the OAuth scopes the server documents; there is no default".to_owned(),
                ),
                other => (
                    format!("missing required field `{other}`"),
                    format!("add `{other}`"),
                ),
            };
            let at = format!("{pointer}/{}", escape_pointer(field));
            vec![Violation {
                absent: vec![at.clone()],
                ..Violation::new(&at, message, fix)
            }]
        }
        ValidationErrorKind::FalseSchema => {
            let parent = parent(pointer);
            let server = root.pointer(parent).unwrap_or(&Value::Null);
            let kind = TransportKind::of(server);
            let other = if kind == TransportKind::Stdio {
                "http"
            } else {
                "stdio"
            };
            let kind = kind.as_str();
            let (a, an) = (article(kind), article(other));
            one(
                format!(
                    "{a} {kind} server cannot have `{leaf}`: a server uses exactly one transport"
                ),
                format!(
                    "remove `{leaf}`, or make this {an} {other} server and remove the {kind} fields"
                ),
            )
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => one(
            "both `command` and `url` are set: a server uses exactly one transport".to_owned(),
            "remove one of them, or set \"type\" to say which transport you mean".to_owned(),
        ),
        ValidationErrorKind::OneOfNotValid { .. } => vec![Violation {
            absent: vec![format!("{pointer}/command"), format!("{pointer}/url")],
            ..Violation::new(
                pointer,
                "a server needs `command` (stdio) or `url` (streamable HTTP)".to_owned(),
                "add \"command\": \"<executable>\" or \"url\": \"https://…/mcp\"".to_owned(),
            )
        }],
        ValidationErrorKind::Enum { options } => {
            let value = instance.as_str().unwrap_or_default();
            let fix = match (leaf, value) {
                ("type" | "transport", "sse") => {
                    "core-agent speaks streamable HTTP only, not the legacy SSE transport; point `url` at the server's streamable HTTP endpoint and use \"http\"".to_owned()
                }
                ("transport", "streamable-http" | "streamableHttp" | "streamable_http") => {
                    "use \"http\", which is streamable HTTP".to_owned()
                }
                _ => {
                    let names: Vec<&str> = options
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    match closest(value, &names) {
                        Some(name) => format!(
                            "did you mean \"{name}\"? use one of {}",
                            options_list(options)
                        ),
                        None => format!("use one of {}", options_list(options)),
                    }
                }
            };
            one(format!("unsupported value {instance} in `{leaf}`"), fix)
        }
        ValidationErrorKind::Constant { expected_value } => one(
            format!("unsupported value {instance} in `{leaf}`"),
            format!("set \"{leaf}\": {expected_value}, the only one this core-agent reads"),
        ),
        ValidationErrorKind::Type { .. } => {
            let expected = expected_type(dialect, pointer);
            one(
                format!("expected {expected}, found {}", describe(instance)),
                format!("write {expected}"),
            )
        }
        ValidationErrorKind::Pattern { .. } if leaf == "url" => one(
            format!("{instance} is not an http:// or https:// URL"),
            "write the full endpoint URL, such as \"https://example.com/mcp\"".to_owned(),
        ),
        ValidationErrorKind::Pattern { .. }
            if matches!(leaf, "token_endpoint" | "issuer" | "resource") =>
        {
            one(
                format!("{instance} is not an http:// or https:// URL"),
                format!("write the full URL in `{leaf}`, such as \"https://auth.example.com/token\""),
            )
        }
        ValidationErrorKind::MinLength { .. } => one(
            format!("`{leaf}` is empty"),
            format!("give `{leaf}` a value"),
        ),
        ValidationErrorKind::Pattern { .. } if leaf == "client_metadata_url" => one(
            format!("{instance} is not an https:// URL with a path"),
            "write the HTTPS URL of your client ID metadata document, such as \"https://example.com/client.json\"".to_owned(),
        ),
        ValidationErrorKind::MaxProperties { .. } if leaf == "auth" => one(
            "`auth` names more than one strategy".to_owned(),
            "keep one of `google_oauth`, `oauth` and `token_exchange`".to_owned(),
        ),
        ValidationErrorKind::Maximum { limit } => one(
            format!("{instance} is above {limit}"),
            format!("use a number of at most {limit}"),
        ),
        ValidationErrorKind::MinItems { .. } if leaf == "scopes" => one(
            "`scopes` is empty".to_owned(),
            "list the OAuth scopes the server documents; there is no default".to_owned(),
        ),
        ValidationErrorKind::Minimum { limit } => one(
            format!("{instance} is below {limit}"),
            format!("use a number of at least {limit}"),
        ),
        other => one(
            format!("{other:?}").to_lowercase(),
            "see `core-agent config schema`".to_owned(),
        ),
    }
}

/// "a stdio", "an http", "an sse".
fn article(kind: &str) -> &'static str {
    if kind == "stdio" { "a" } else { "an" }
}

fn leaf(pointer: &str) -> &str {
    pointer.rsplit('/').next().unwrap_or_default()
}

fn parent(pointer: &str) -> &str {
    pointer.rfind('/').map_or("", |i| &pointer[..i])
}

fn segments(pointer: &str) -> Vec<&str> {
    pointer.split('/').skip(1).collect()
}

const CORE_TOP: [&str; 11] = join(
    ["$schema", "limits", "version", "servers", "survey"],
    crate::WrapSettings::KEYS,
);

/// `a` then `b`, at compile time (`C` must be their total length).
const fn join<const A: usize, const B: usize, const C: usize>(
    a: [&'static str; A],
    b: [&'static str; B],
) -> [&'static str; C] {
    assert!(A + B == C, "join: wrong output length");
    let mut out = [""; C];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < C {
        out[i] = b[i - A];
        i += 1;
    }
    out
}
const CORE_SERVER: &[&str] = &[
    "transport",
    "command",
    "args",
    "env",
    "env_inherit",
    "url",
    "headers",
    "auth",
    "tools",
    "read_only",
    "agentic_never",
    "tool_notes",
    "cloud",
    "resources",
    "prompts",
    "required",
    "pin",
    "limits",
];
const MCP_TOP: &[&str] = &["$schema", "mcpServers", "auggy", "limits"];
/// The server keys of the `mcpServers` dialect that core-agent uses: its
/// own, and the ones of other tools that it maps (`disabled`, `timeout`, …).
/// A misspelled key is matched against these for the did-you-mean.
const MCP_SERVER: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "env_inherit",
    "url",
    "headers",
    "auth",
    "cloud",
    "pin",
    "resources",
    "prompts",
    "required",
    "disabled",
    "timeout",
    "transportType",
    "includeTools",
    "excludeTools",
    "disabledTools",
    "cwd",
];
const POLICY: &[&str] = &[
    "allowedTools",
    "blockedTools",
    "allowedTrustLevels",
    "toolPolicies",
    "read_only",
    "agentic_never",
    "tool_notes",
    "cloud",
    "pin",
    "resources",
    "prompts",
    "required",
    "limits",
];

const LIMITS: &[&str] = &[
    "max_tools",
    "max_pages",
    "max_input_schema_bytes",
    "max_result_bytes",
    "call_timeout_ms",
    "max_concurrent_calls",
    "max_message_bytes",
];

/// The keys valid in the object at `pointer`.
fn known_keys(dialect: Dialect, pointer: &str) -> &'static [&'static str] {
    let segs = segments(pointer);
    match (dialect, segs.as_slice()) {
        (Dialect::Core, []) => &CORE_TOP,
        (Dialect::Core, ["servers", "builtin"]) => &["tools"],
        (Dialect::Core, ["servers", _]) => CORE_SERVER,
        (_, ["servers" | "mcpServers", _, "auth"]) => &["google_oauth", "oauth", "token_exchange"],
        (_, ["servers" | "mcpServers", _, "auth", "token_exchange"]) => &[
            "token_endpoint",
            "issuer",
            "client_id",
            "client_secret",
            "audience",
            "resource",
            "scopes",
        ],
        (_, ["servers" | "mcpServers", _, "auth", "google_oauth"]) => &["scopes"],
        (_, ["servers" | "mcpServers", _, "auth", "oauth"]) => &[
            "scopes",
            "client_id",
            "client_secret",
            "client_metadata_url",
            "callback_port",
        ],
        (Dialect::McpServers, []) => MCP_TOP,
        (Dialect::McpServers, ["mcpServers", _]) => MCP_SERVER,
        (Dialect::McpServers, ["auggy"]) => &["servers"],
        (Dialect::McpServers, ["auggy", "servers", _]) => POLICY,
        (Dialect::McpServers, ["auggy", "servers", _, "toolPolicies", _]) => {
            &["allowedTrustLevels"]
        }
        (_, [.., "limits"]) => LIMITS,
        (Dialect::Core, ["agentic_wrap_pricing", _]) => &["input", "cached_input", "output"],
        _ => &[],
    }
}

/// What the value at `pointer` should be, in words.
fn expected_type(dialect: Dialect, pointer: &str) -> &'static str {
    let segs = segments(pointer);
    match (dialect, segs.as_slice()) {
        (_, []) => "a JSON object",
        (Dialect::Core, ["servers"]) | (Dialect::McpServers, ["mcpServers"]) => {
            "an object of name → server, such as {\"fs\": {…}}"
        }
        (Dialect::Core, ["servers", _]) | (Dialect::McpServers, ["mcpServers", _]) => {
            "a server object, such as {\"command\": \"…\"}"
        }
        (
            _,
            [
                ..,
                "args" | "tools" | "scopes" | "allowedTools" | "blockedTools"
                | "allowedTrustLevels" | "includeTools" | "excludeTools" | "disabledTools",
            ],
        ) => "an array of strings, such as [\"a\", \"b\"]",
        (_, [.., "env" | "headers" | "tool_notes"]) => {
            "an object of strings, such as {\"NAME\": \"value\"}"
        }
        (
            _,
            [
                ..,
                "read_only" | "agentic_never" | "agentic_wrap" | "agentic_wrap_llm" | "disabled"
                | "survey" | "resources" | "prompts" | "required",
            ],
        ) => "true or false",
        (Dialect::McpServers, ["mcpServers", _, "timeout"]) => {
            "a whole number of seconds (up to 3600) or milliseconds, such as 60"
        }
        (_, [.., "agentic_wrap_threshold"]) => "a whole number of bytes, such as 8000",
        (_, [.., "agentic_wrap_llm_max_input_bytes"]) => {
            "a whole number of bytes above 0, such as 262144"
        }
        (_, [.., "limits"]) => "an object of limits, such as {\"max_tools\": 32}",
        (
            _,
            [
                ..,
                "max_tools"
                | "max_pages"
                | "max_input_schema_bytes"
                | "max_result_bytes"
                | "call_timeout_ms"
                | "max_concurrent_calls"
                | "max_message_bytes",
            ],
        ) => "a whole number, such as 10",
        (_, [.., "callback_port"]) => "a port number, such as 8976",
        (
            _,
            [
                ..,
                "auth" | "google_oauth" | "oauth" | "auggy" | "toolPolicies",
            ],
        ) => "an object",
        _ => "a string in double quotes",
    }
}

fn options_list(options: &Value) -> String {
    match options.as_array() {
        Some(items) => items
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        None => options.to_string(),
    }
}

fn quoted(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a JSON value is described in an error ("a number", "a string").
pub(crate) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::mcp_servers::PEER_IGNORED;

    /// The keys the `mcpServers` schema accepts on a server are exactly the
    /// ones used (`MCP_SERVER`) and the ones ignored (`PEER_IGNORED`): a key
    /// added to the schema but to neither list would be silently dropped.
    #[test]
    fn every_server_key_of_the_schema_is_used_or_ignored() {
        let schema: Value = serde_json::from_str(MCP_SERVERS_SCHEMA).unwrap();
        let mut in_schema: Vec<&str> = schema
            .pointer("/$defs/server/properties")
            .and_then(Value::as_object)
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut listed: Vec<&str> = MCP_SERVER.iter().chain(PEER_IGNORED).copied().collect();
        in_schema.sort_unstable();
        listed.sort_unstable();
        assert_eq!(in_schema, listed);
        assert!(!PEER_IGNORED.iter().any(|k| MCP_SERVER.contains(k)));
    }

    #[test]
    fn a_misspelled_command_is_one_problem_with_a_did_you_mean() {
        let root: Value =
            serde_json::from_str(r#"{"mcpServers":{"fs":{"comand":"x","autoApprove":[]}}}"#)
                .unwrap();
        let found: Vec<(String, String)> = validate(Dialect::McpServers, &root)
            .into_iter()
            .map(|v| (v.pointer, v.fix))
            .collect();
        assert_eq!(
            found,
            [(
                "/mcpServers/fs/comand".to_owned(),
                "did you mean `command`?".to_owned()
            )]
        );
    }
}
