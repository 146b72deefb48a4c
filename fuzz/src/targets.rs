//! The fuzz targets: one per parser, each with the invariants it asserts.
//!
//! | target | code under test | asserts |
//! |---|---|---|
//! | `digest` | `core_agent_digest::prune` | no panic; valid JSON is accepted and pruned into valid JSON |
//! | `config` | `mcp_config::parse_file`, both dialects | no panic; a syntax error and every problem carry a line (within the text) and column |
//! | `dotenv` | `mcp_config::DotEnv::load` | no panic; every error carries a line within the text and a column |
//! | `template` | `mcp_config::Template` | no panic; a parsed template keeps its text, expands with every variable set, and misses none |
//! | `pattern` | `permissions::Pattern::parse`, `PermissionsConfig::load` | no panic; every `config.json` error carries a line and column |
//! | `pointer` | `mcp_config::locate`, `digest::extract` | no panic; a position is 1-based and within the text |
//! | `lock` | `mcp_policy::Lock::parse` | no panic; every error has a position; a lock that parses renders to text that parses to the same lock |
//! | `http` | the gateway's HTTP front: `gateway::check_message` on a request's body, `HttpOptions::host_allowed`/`origin_allowed` on its head | no panic; each refusal has a spec code and its status; what passes is one JSON-RPC 2.0 object; an origin passes only with an allowed scheme and host |

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use core_agent_mcp_config::{Dialect, Env, Error, Problem, Scope, Template};

use crate::{Rng, Target, files};

/// Every target, in the order `all` runs them.
pub fn all() -> Vec<Box<dyn Target>> {
    vec![
        Box::new(Digest),
        Box::new(Config::default()),
        Box::new(DotEnv::new()),
        Box::new(Templates),
        Box::new(Patterns::new()),
        Box::new(Pointers),
        Box::new(LockFile),
        Box::new(HttpFront::new()),
    ]
}

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Box<dyn Target>> {
    all().into_iter().find(|t| t.name() == name)
}

/// The JSON grammar's fragments, shared by the JSON targets.
const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\\u00",
    b"\\ud800",
    b"null",
    b"true",
    b"-1e9",
    b"1e999",
    b"18446744073709551616",
    b"\"\":",
    b"\xc3\xa9",
    b"\xff",
    b"\xf0\x9f\x98\x80",
    b" ",
    b"\n",
    b"/",
    b"~",
];

/// Where the text ends, in 1-based lines: an error may point one past the
/// last line (at the end of input), never further.
fn last_line(text: &str) -> usize {
    text.split('\n').count()
}

fn check_problem(p: &Problem, text: &str) -> Result<(), String> {
    match (p.line, p.column) {
        (Some(line), Some(column)) if line >= 1 && column >= 1 && line <= last_line(text) => Ok(()),
        (line, column) => Err(format!(
            "a problem without a valid position (line {line:?}, column {column:?}): {p}"
        )),
    }
}

fn check_error(e: &Error, text: &str) -> Result<(), String> {
    match e {
        Error::Syntax { line, .. } if *line >= 1 && *line <= last_line(text) => Ok(()),
        Error::Syntax { line, column, .. } => Err(format!(
            "a syntax error at line {line} column {column}, outside the text: {e}"
        )),
        Error::Invalid { problems } if problems.is_empty() => {
            Err("an invalid-config error with no problem".to_owned())
        }
        Error::Invalid { problems } => problems.iter().try_for_each(|p| check_problem(p, text)),
        other => Err(format!("an error without a position: {other}")),
    }
}

/// `digest`: the structural pruner.
#[derive(Debug)]
pub struct Digest;

impl Digest {
    /// Random JSON, at most about 16 KiB.
    fn generate(rng: &mut Rng, depth: usize, out: &mut Vec<u8>) {
        if out.len() > 16 * 1024 {
            out.push(b'0');
            return;
        }
        match rng.below(if depth > 12 { 4 } else { 7 }) {
            0 => out.extend_from_slice(b"null"),
            1 => out.extend_from_slice(format!("{}", rng.next_u64() as i64 % 100_000).as_bytes()),
            2 => {
                let n = rng.below(40) * if rng.below(10) == 0 { 30 } else { 1 };
                out.push(b'"');
                for _ in 0..n {
                    out.push(b"ab\\ \xc3\xa9"[rng.below(6)].max(b'a'));
                }
                out.push(b'"');
            }
            3 => out.extend_from_slice(b"true"),
            4 | 5 => {
                out.push(b'[');
                let max = if rng.below(4) == 0 { 60 } else { 5 };
                for i in 0..rng.below(max) {
                    if i > 0 {
                        out.push(b',');
                    }
                    Digest::generate(rng, depth + 1, out);
                }
                out.push(b']');
            }
            _ => {
                out.push(b'{');
                for i in 0..rng.below(6) {
                    if i > 0 {
                        out.push(b',');
                    }
                    let key =
                        ["id", "name", "status", "x", "self_url", "owner_id", "data"][rng.below(7)];
                    out.extend_from_slice(format!("\"{key}{i}\":").as_bytes());
                    Digest::generate(rng, depth + 1, out);
                }
                out.push(b'}');
            }
        }
    }
}

impl Target for Digest {
    fn name(&self) -> &'static str {
        "digest"
    }

    fn json(&self) -> bool {
        true
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds: Vec<Vec<u8>> = files("crates/digest/tests/golden", &[".input"])
            .into_iter()
            .map(|mut b| {
                b.truncate(20_000);
                b
            })
            .collect();
        let mut rng = Rng::new(0x5eed_cafe);
        for _ in 0..32 {
            let mut v = Vec::new();
            Digest::generate(&mut rng, 0, &mut v);
            seeds.push(v);
        }
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        JSON_TOKENS
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        use core_agent_digest::{Limits, prune};
        let small = Limits::default()
            .with_max_string_chars(3)
            .with_array_head(2)
            .with_array_tail(1)
            .with_max_depth(3)
            .with_max_identifier_chars(5)
            .with_max_object_keys(2);
        // Past the tightest pass of `fit`: no head, no tail, no member.
        let none = Limits::default()
            .with_max_string_chars(0)
            .with_array_head(0)
            .with_array_tail(0)
            .with_max_depth(0)
            .with_max_identifier_chars(0)
            .with_max_object_keys(0);
        let valid = serde_json::from_slice::<serde_json::Value>(input).is_ok();
        for limits in [Limits::default(), small, none] {
            match prune(input, &limits) {
                Ok(text) if valid => {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .map_err(|e| format!("invalid output ({e}): {text}"))?;
                }
                Err(_) if valid => return Err("valid JSON was rejected".to_owned()),
                // Input serde_json rejects may still be grammatical JSON (a
                // number like 1e7774 is out of f64's range); only the
                // absence of a panic counts.
                _ => {}
            }
        }
        Ok(())
    }
}

/// `config`: `mcp.json` in both dialects.
#[derive(Debug, Default)]
pub struct Config {
    loaded: BTreeMap<&'static str, u64>,
}

impl Target for Config {
    fn name(&self) -> &'static str {
        "config"
    }

    fn json(&self) -> bool {
        true
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = files("crates/mcp-config/tests/fixtures/good", &[".json"]);
        seeds.extend(files("crates/mcp-config/tests/fixtures/bad", &[".json"]));
        seeds.extend(files(".agents", &["mcp.json"]));
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\"",
            b"null",
            b"1",
            b"0",
            b"-1",
            b"true",
            b"\"servers\":",
            b"\"mcpServers\":",
            b"\"auggy\":",
            b"\"version\": 1,",
            b"\"transport\": \"stdio\",",
            b"\"transport\": \"http\",",
            b"\"type\": \"sse\",",
            b"\"command\": \"x\",",
            b"\"url\": \"https://x/mcp\",",
            b"\"env\": {\"A\": \"${env:B}\"},",
            b"\"headers\": {\"H\": \"${X:-d}\"},",
            b"\"limits\": {\"max_tools\": 0},",
            b"\"timeout\": 3600,",
            b"\"pin\": \"strict\",",
            b"\"cwd\": \".\",",
            b"\"disabled\": true,",
            b"\"toolPolicies\": {\"t\": {}},",
            b"${",
            b"$${",
            b"~1",
            b"\xff",
            b"\xc3\xa9",
        ]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(input);
        let mut problems = Vec::new();
        let result = core_agent_mcp_config::parse_file(
            &text,
            Path::new(".agents/mcp.json"),
            Scope::Project,
            &mut problems,
        );
        let outcome = match result {
            Err(e) => {
                check_error(&e, &text)?;
                "syntax error"
            }
            Ok(file) => {
                for p in &problems {
                    check_problem(p, &text)?;
                }
                match (file.dialect, problems.is_empty()) {
                    (Dialect::Core, true) => "core, valid",
                    (Dialect::Core, false) => "core, invalid",
                    (Dialect::McpServers, true) => "mcpServers, valid",
                    (Dialect::McpServers, false) => "mcpServers, invalid",
                }
            }
        };
        *self.loaded.entry(outcome).or_default() += 1;
        Ok(())
    }

    fn stats(&self) -> String {
        self.loaded
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A file in the temporary directory that files-only loaders read; removed
/// on drop.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        // Memory-backed where there is one: these targets write a file per input.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        Scratch(dir.join(format!("core-agent-fuzz-{}-{name}", std::process::id())))
    }

    fn write(&self, input: &[u8]) -> Result<&Path, String> {
        std::fs::write(&self.0, input)
            .map_err(|e| format!("cannot write {}: {e}", self.0.display()))?;
        Ok(&self.0)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `dotenv`: the project's `.env`.
#[derive(Debug)]
pub struct DotEnv {
    file: Scratch,
}

impl DotEnv {
    fn new() -> DotEnv {
        DotEnv {
            file: Scratch::new("dotenv"),
        }
    }
}

impl Target for DotEnv {
    fn name(&self) -> &'static str {
        "dotenv"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        [
            "A=1\nB=two\n",
            "# comment\nexport TOKEN=abc # trailing\n",
            "QUOTED=\"a b\\n c\"\nSINGLE='lit $A'\n",
            "MULTI=\"line one\nline two\"\nNEXT=x\n",
            "\u{feff}BOM=1\r\nCRLF=2\r\n",
            "A=${B}\nB=$A-suffix\nC=${UNSET:-}\n",
            "BAD LINE\n",
            "X='unclosed\n",
            "K=\"\\q\"\n",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect()
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"=",
            b"\n",
            b"\r\n",
            b"#",
            b" ",
            b"'",
            b"\"",
            b"\\",
            b"\\n",
            b"$",
            b"${",
            b"}",
            b"export ",
            b"A",
            b"_",
            b"\xff",
            b"\xc3\xa9",
        ]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let path = self.file.write(input)?;
        let text = String::from_utf8_lossy(input);
        match core_agent_mcp_config::DotEnv::load(path) {
            Ok(_) => Ok(()),
            // Not UTF-8: there is no text to point into.
            Err(Error::Read { .. }) if std::str::from_utf8(input).is_err() => Ok(()),
            Err(e) => check_error(&e, &text),
        }
    }
}

/// Every variable is set, to a value naming it.
#[derive(Debug)]
struct EveryVar;

impl Env for EveryVar {
    fn var(&self, name: &str) -> Option<String> {
        Some(format!("<{name}>"))
    }
}

/// `template`: `${env:NAME}`, `${NAME:-default}` and `$${` in config strings.
#[derive(Debug)]
pub struct Templates;

impl Target for Templates {
    fn name(&self) -> &'static str {
        "template"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        // Every string with a `$` in the config fixtures, and a few more.
        let mut seeds: Vec<Vec<u8>> = [
            "Bearer ${env:TOKEN}",
            "${A}${B:-x}$${C}",
            "${env:NAME:-default value}",
            "plain",
            "$$${A}",
            "${",
            "${1BAD}",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        for dir in [
            "crates/mcp-config/tests/fixtures/good",
            "crates/mcp-config/tests/fixtures/bad",
        ] {
            for file in files(dir, &[".json"]) {
                let text = String::from_utf8_lossy(&file);
                for piece in text.split('"').filter(|p| p.contains('$')) {
                    seeds.push(piece.as_bytes().to_vec());
                }
            }
        }
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"$",
            b"${",
            b"$${",
            b"}",
            b"env:",
            b":-",
            b":",
            b"-",
            b"A",
            b"_",
            b"1",
            b" ",
            b"\xc3\xa9",
        ]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let raw = String::from_utf8_lossy(input);
        match Template::parse(&raw) {
            Ok(t) => {
                if t.raw() != raw {
                    return Err(format!("the template's text changed: {:?}", t.raw()));
                }
                let expanded = t.expand(&EveryVar);
                if t.variables()
                    .any(|v| !expanded.value.contains(&format!("<{v}>")))
                {
                    return Err(format!(
                        "a variable was not expanded: {raw:?} → {:?}",
                        expanded.value
                    ));
                }
                if !t.missing(&EveryVar).is_empty() {
                    return Err("a set variable is reported missing".to_owned());
                }
                if expanded.interpolated != t.has_placeholders() {
                    return Err("`interpolated` disagrees with the placeholders".to_owned());
                }
                let _ = t.expand(&BTreeMap::<String, String>::new());
                Ok(())
            }
            Err(message) if message.is_empty() => Err("an error without a message".to_owned()),
            Err(_) => Ok(()),
        }
    }
}

/// `pattern`: permission patterns, alone and in `config.json`.
#[derive(Debug)]
pub struct Patterns {
    file: Scratch,
}

impl Patterns {
    fn new() -> Patterns {
        Patterns {
            file: Scratch::new("config.json"),
        }
    }
}

impl Target for Patterns {
    fn name(&self) -> &'static str {
        "pattern"
    }

    fn json(&self) -> bool {
        true
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let mut seeds = files(".agents", &["config.json"]);
        seeds.extend(
            [
                r#"{"permissions": {"mode": "allowlist", "allow": ["mcp:a_*", "builtin:retrieve_raw"], "deny": ["mcp:*_delete*"]}}"#,
                r#"{"permissions": {"mode": "ask", "require_plan_artifact": true}, "tools": {"wait_and_verify": {"poll_allow": ["mcp:jobs_*"]}}}"#,
                r#"{"gateway": {"tokens": {"ci": {"env": "CI_TOKEN", "trust_level": "agent"}}}}"#,
                "mcp:fs_{read,list}*\nbuiltin:*\nmcp:[a-z]?_x\n",
            ]
            .iter()
            .map(|s| s.as_bytes().to_vec()),
        );
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"mcp:",
            b"builtin:",
            b"*",
            b"**",
            b"?",
            b"[",
            b"]",
            b"[!",
            b"{",
            b"}",
            b",",
            b"\\",
            b":",
            b"\"",
            b"\n",
            b"\"allow\": [",
            b"\"deny\": [",
            b"\"mode\": ",
            b"\"yolo\"",
            b"\xc3\xa9",
        ]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(input);
        let source = Path::new(".agents/config.json");
        for line in text.lines() {
            if let Ok(p) = core_agent_permissions::Pattern::parse(line, source) {
                let _ = p.matches("mcp", "fs_read_file");
                let _ = p.matches(p.namespace(), line);
                if p.as_str().is_empty() {
                    return Err(format!("a pattern with no text from {line:?}"));
                }
            }
        }
        let path = self.file.write(input)?;
        match core_agent_permissions::PermissionsConfig::load(path, None) {
            Ok(_) => Ok(()),
            Err(core_agent_permissions::Error::Read { .. })
                if std::str::from_utf8(input).is_err() =>
            {
                Ok(())
            }
            Err(core_agent_permissions::Error::Syntax { line, .. })
                if line >= 1 && line <= last_line(&text) =>
            {
                Ok(())
            }
            Err(core_agent_permissions::Error::Invalid { problems }) if !problems.is_empty() => {
                problems.iter().try_for_each(|p| check_problem(p, &text))
            }
            Err(e) => Err(format!("an error without a valid position: {e}")),
        }
    }
}

/// `pointer`: a JSON pointer (the input's first line) into a text (the rest).
#[derive(Debug)]
pub struct Pointers;

impl Target for Pointers {
    fn name(&self) -> &'static str {
        "pointer"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let pointers = [
            "",
            "/servers",
            "/servers/fs/env/TOKEN",
            "/mcpServers/a~1b/args/0",
            "/auggy/servers/x/toolPolicies/t~0",
            "/permissions/allow/1",
            "/a/-",
            "//",
        ];
        let mut seeds = Vec::new();
        let texts = files("crates/mcp-config/tests/fixtures/good", &[".json"]);
        for (i, text) in texts.iter().enumerate() {
            let mut seed = pointers[i % pointers.len()].as_bytes().to_vec();
            seed.push(b'\n');
            seed.extend_from_slice(text);
            seeds.push(seed);
        }
        seeds.push(b"/a/1\n{\"a\": [0, {\"b\": \"\\u00e9\"}]}".to_vec());
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"/",
            b"~",
            b"~0",
            b"~1",
            b"~2",
            b"0",
            b"01",
            b"-",
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b":",
            b",",
            b"\\\"",
            b"\xc3\xa9",
        ]
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let whole = String::from_utf8_lossy(input);
        let (pointer, text) = whole.split_once('\n').unwrap_or((&whole, ""));
        let (line, column) = core_agent_mcp_config::locate(text, pointer);
        if line < 1 || column < 1 || line > last_line(text) {
            return Err(format!(
                "locate gave line {line} column {column} for {pointer:?}"
            ));
        }
        let _ = core_agent_digest::extract(text, pointer);
        Ok(())
    }
}

/// `lock`: `mcp.lock`.
#[derive(Debug)]
pub struct LockFile;

impl Target for LockFile {
    fn name(&self) -> &'static str {
        "lock"
    }

    fn json(&self) -> bool {
        true
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        use core_agent_mcp_policy::{Lock, ToolDefinition};
        use serde_json::json;
        let mut lock = Lock::new();
        lock.pin(
            "fs",
            &ToolDefinition::new(
                "read_file",
                "Read a file.\nPaths are relative.",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
                json!({"readOnlyHint": true, "title": "Read"}),
            ),
        );
        lock.pin(
            "my/server",
            &ToolDefinition::new("t~1", "", json!({}), serde_json::Value::Null),
        );
        let mut seeds = vec![lock.render().into_bytes()];
        seeds.extend(files(".agents", &["mcp.lock"]));
        seeds
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        JSON_TOKENS
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        use core_agent_mcp_policy::Lock;
        let text = String::from_utf8_lossy(input);
        match Lock::parse(&text) {
            Ok(lock) => {
                let again = Lock::parse(&lock.render())
                    .map_err(|e| format!("a rendered lock does not parse: {e}"))?;
                if again != lock {
                    return Err("a lock changed when rendered and read back".to_owned());
                }
                Ok(())
            }
            Err(e) if e.line >= 1 && e.line <= last_line(&text) => Ok(()),
            Err(e) => Err(format!("a lock error outside the text: {e}")),
        }
    }
}

/// The gateway's HTTP front: a `POST /mcp` body, screened as it is before
/// rmcp reads it; the body's text and each string in it are also tried as a
/// request head's `Host` and `Origin`.
#[derive(Debug)]
pub struct HttpFront {
    options: core_agent_gateway::HttpOptions,
    /// Bodies refused, by JSON-RPC code, and bodies passed.
    refused: BTreeMap<i32, u64>,
    passed: u64,
}

impl HttpFront {
    fn new() -> HttpFront {
        let options = core_agent_gateway::HttpOptions::new(core_agent_gateway::Auth::Open(
            core_agent_mcp_config::TrustLevel::User,
        ))
        .with_allowed_origins(vec![
            "http://localhost".to_owned(),
            "https://app.example.com:8443".to_owned(),
        ]);
        HttpFront {
            options,
            refused: BTreeMap::new(),
            passed: 0,
        }
    }

    /// `value`'s strings, keys included.
    fn strings<'a>(value: &'a serde_json::Value, into: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::String(s) => into.push(s),
            serde_json::Value::Array(a) => a.iter().for_each(|v| HttpFront::strings(v, into)),
            serde_json::Value::Object(o) => o.iter().for_each(|(k, v)| {
                into.push(k);
                HttpFront::strings(v, into);
            }),
            _ => {}
        }
    }

    /// A `Host` and an `Origin` header value checked.
    fn head(&self, value: &str) -> Result<(), String> {
        let _ = self.options.host_allowed(value);
        if self.options.origin_allowed(value) {
            let lower = value.trim().to_ascii_lowercase();
            if !lower.starts_with("http://localhost")
                && !lower.starts_with("https://app.example.com:8443")
            {
                return Err(format!("origin {value:?} passed, which no entry allows"));
            }
        }
        Ok(())
    }
}

impl Target for HttpFront {
    fn name(&self) -> &'static str {
        "http"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"http://localhost:5173","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"https://app.example.com:8443","arguments":{"x":[1,2]}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"http://[::1]:80"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{"h":"127.0.0.1:8940"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"o":"null"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            "42",
        ]
        .iter()
        .map(|body| body.as_bytes().to_vec())
        .collect()
    }

    fn tokens(&self) -> &'static [&'static [u8]] {
        &[
            b"null",
            b"http://",
            b"https://",
            b"[::1]",
            b":8443",
            b"localhost",
            b"\"jsonrpc\":\"2.0\"",
            b"\"id\":",
            b"\"method\":",
            b"\"params\":",
            b"\"tools/call\"",
            b"\"arguments\":",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\"",
            b"1.5",
            b"\xff",
        ]
    }

    fn json(&self) -> bool {
        true
    }

    fn check(&mut self, input: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(input);
        self.head(&text)?;
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) {
            let mut strings = Vec::new();
            HttpFront::strings(&value, &mut strings);
            for s in strings {
                self.head(s)?;
            }
        }
        match core_agent_gateway::check_message(input) {
            Ok(()) => {
                self.passed += 1;
                let value: serde_json::Value = serde_json::from_slice(input)
                    .map_err(|e| format!("a body that is not JSON passed: {e}"))?;
                if value.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") {
                    return Err(format!("a body without jsonrpc 2.0 passed: {value}"));
                }
            }
            Err(e) => {
                *self.refused.entry(e.code).or_default() += 1;
                let fits = match e.code {
                    -32700 | -32600 => e.status == 400,
                    -32602 => (e.status == 200) == e.id.is_some() && matches!(e.status, 200 | 400),
                    _ => false,
                };
                if !fits {
                    return Err(format!("code {} with status {}: {e}", e.code, e.status));
                }
            }
        }
        Ok(())
    }

    fn stats(&self) -> String {
        format!("passed {}, refused by code {:?}", self.passed, self.refused)
    }
}
