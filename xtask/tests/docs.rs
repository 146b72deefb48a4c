//! The docs cannot drift: every JSON example and every `core-agent` command
//! line in `docs/*.md` and `README.md` is checked against the code.
//!
//! - Each ` ```json ` / ` ```jsonc ` block parses as one or more JSON values
//!   (JSON Lines included). An example may elide with `…` outside strings
//!   (`{ … }`, `, …`, `… 198 more items …,`): the elisions are removed before
//!   parsing, so what is shown still has to be JSON (a value shown as `"…"`
//!   elides too). A block that is a single
//!   `"key": value` pair is read as an object. `jsonc` drops `//` lines.
//! - A block with no elision that is a whole `mcp.json` (`servers`) or
//!   `.mcp.json` (`mcpServers`) is validated by `core-agent-mcp-config`, and a
//!   whole `config.json` (`permissions` or `gateway`, a fragment such as
//!   `{"gateway": {"tokens": …}}` included) is loaded as the binary loads it:
//!   `core-agent-permissions` reads the file, with `core-agent-gateway`'s
//!   reader checking its `gateway` section, so an unknown key or a wrong type
//!   anywhere fails. Each must accept it with no problem; `${NAME}`
//!   placeholders are accepted where the loader accepts them (they are
//!   expanded only when the gateway starts).
//! - Each `core-agent <subcommand…> [--flag…]` in a shell block or an inline
//!   code span names subcommands and flags that the built binary's `--help`
//!   lists (the hidden `__supervise` is the supervisor's entry, not a user
//!   command, and is not asked). The binary is `target/debug/core-agent` (under `CARGO_TARGET_DIR` when set),
//!   which `cargo test --workspace` builds (`cargo build -p core-agent` when
//!   running this test alone).

// Test code throughout: a failed read is the test failing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// `README.md` and every page of `docs/`, with their text.
fn pages() -> Vec<(String, String)> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 8, "docs/ has only {docs:?}");
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let shown = f.strip_prefix(&root).unwrap().display().to_string();
            (shown, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// A fenced block: its language, its first line's number, its body.
struct Block {
    lang: String,
    line: usize,
    body: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Block {
                    lang: lang.trim().to_owned(),
                    line: i + 1,
                    body: String::new(),
                })
            }
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some(block), None) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// JSON.

#[test]
fn every_json_example_parses_and_every_config_example_validates() {
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut validated = 0;
    let mut gateway = 0;
    for (file, text) in pages() {
        for block in blocks(&text)
            .into_iter()
            .filter(|b| b.lang == "json" || b.lang == "jsonc")
        {
            let at = format!("{file}:{}", block.line);
            let body = if block.lang == "jsonc" {
                drop_comment_lines(&block.body)
            } else {
                block.body.clone()
            };
            let (unelided, elided) = remove_elisions(&body);
            match parse_values(&unelided) {
                Err(e) => problems.push(format!("{at}: not JSON: {e}")),
                Ok(values) => {
                    checked += 1;
                    if !elided {
                        for value in &values {
                            match validate_config(value) {
                                Ok(true) => {
                                    validated += 1;
                                    gateway += usize::from(value.get("gateway").is_some());
                                }
                                Ok(false) => {}
                                Err(e) => problems.push(format!("{at}: {e}")),
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs: {} JSON example(s) wrong:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    assert!(
        checked >= 15 && validated >= 8 && gateway >= 6,
        "only {checked} JSON blocks read, {validated} validated ({gateway} with a gateway \
         section): is the reader broken?"
    );
}

#[test]
fn a_broken_or_invalid_example_is_caught() {
    assert!(parse_values(&remove_elisions(r#"{"a": 1 "b": 2}"#).0).is_err());
    assert!(
        remove_elisions(r#"{"sha256": "…"}"#).1,
        "a string that is only `…` elides"
    );
    let (text, elided) = remove_elisions(
        "{\"items\": [{\"id\": 1, …},\n  … 198 more items …,\n  {\"id\": 200}], \"s\": \"a … b\", \"o\": { … }}",
    );
    assert!(elided);
    assert_eq!(
        parse_values(&text).unwrap(),
        [serde_json::json!({"items": [{"id": 1}, {"id": 200}], "s": "a … b", "o": {}})]
    );
    assert_eq!(parse_values("{\"a\":1}\n{\"b\":2}\n").unwrap().len(), 2);
    assert_eq!(
        parse_values("\"note\": \"x\"\n").unwrap(),
        [serde_json::json!({"note": "x"})]
    );
    // A config the crates refuse: an unknown key, a wrong mode.
    let bad_mcp = serde_json::json!({"version": 1, "servers": {"x": {"comand": "x"}}});
    assert!(validate_config(&bad_mcp).is_err());
    let bad_perm = serde_json::json!({"permissions": {"mode": "sometimes"}});
    assert!(validate_config(&bad_perm).is_err());
    // A gateway section the gateway refuses: an unknown key, a wrong type, a
    // secret written out; the same section with placeholders passes.
    for bad in [
        serde_json::json!({"gateway": {"max_session": 5}}),
        serde_json::json!({"gateway": {"max_sessions": "5"}}),
        serde_json::json!({"gateway": {"tokens": {"bot": {"env": "BOT", "trust_level": "root"}}}}),
        serde_json::json!({"gateway": {"oauth": {"issuer": "https://id.example.com",
            "audience": "https://gw.example.com/mcp",
            "introspection": {"client_id": "gw", "client_secret": "hunter2"}}}}),
        serde_json::json!({"permissions": {"mode": "ask"}, "gateway": {"audit": {"keep": "5"}}}),
    ] {
        assert!(validate_config(&bad).is_err(), "{bad} passed");
    }
    let placeholders = serde_json::json!({"gateway": {
        "store": "postgres://core:${PGPASSWORD}@db/core_agent",
        "oauth": {"issuer": "https://id.example.com", "audience": "https://gw.example.com/mcp",
            "introspection": {"client_id": "gw", "client_secret": "${env:GW_SECRET}"}}}});
    assert_eq!(validate_config(&placeholders), Ok(true));
    assert_eq!(
        validate_config(&serde_json::json!({"digest": 1})),
        Ok(false)
    );
}

fn drop_comment_lines(body: &str) -> String {
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Removes `…` elisions outside strings (from a `…` to the next one on the
/// same line when words sit between them), then the commas they leave
/// dangling; says whether anything was elided.
fn remove_elisions(text: &str) -> (String, bool) {
    let mut out = String::new();
    let mut elided = false;
    for line in text.lines() {
        let mut in_string = false;
        let mut escaped = false;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if in_string {
                out.push(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
            } else if c == '"' {
                in_string = true;
                out.push(c);
            } else if c == '…' {
                elided = true;
                // `… 198 more items …`: skip to the closing `…` when only words lie between.
                if let Some(end) = chars[i + 1..].iter().position(|&d| d == '…') {
                    let between: String = chars[i + 1..i + 1 + end].iter().collect();
                    if between.chars().all(|d| d.is_alphanumeric() || d == ' ') {
                        i += end + 1;
                    }
                }
            } else {
                out.push(c);
            }
            i += 1;
        }
        out.push('\n');
    }
    // A value shown as `"…"` (a hash, a URL) elides too: the example is then only parsed.
    (drop_dangling_commas(&out), elided || text.contains("\"…\""))
}

/// Drops a comma that follows `[`, `{` or another comma, or precedes `]` or `}`.
fn drop_dangling_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            out.push(c);
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let before = out.iter().rev().find(|d| !d.is_whitespace());
            let after = chars[i + 1..].iter().find(|d| !d.is_whitespace());
            if matches!(before, None | Some('[' | '{' | ','))
                || matches!(after, None | Some(']' | '}' | ','))
            {
                continue;
            }
        }
        out.push(c);
    }
    out.into_iter().collect()
}

/// One or more JSON values one after the other (JSON Lines included), or a
/// single `"key": value` pair read as an object.
fn parse_values(text: &str) -> Result<Vec<Value>, String> {
    let stream = || {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<Vec<Value>, _>>()
    };
    match stream() {
        Ok(values) if !values.is_empty() => Ok(values),
        Ok(_) => Err("an empty block".to_owned()),
        Err(e) => serde_json::from_str::<Value>(&format!("{{{text}}}"))
            .map(|v| vec![v])
            .map_err(|_| e.to_string()),
    }
}

/// Validates `value` when it is a whole config file: `Ok(true)` when it is one
/// and the crate that reads it accepts it, `Ok(false)` when it is no config file.
fn validate_config(value: &Value) -> Result<bool, String> {
    let Some(object) = value.as_object() else {
        return Ok(false);
    };
    let text = value.to_string();
    if object.contains_key("servers") || object.contains_key("mcpServers") {
        let name = if object.contains_key("servers") {
            "mcp.json"
        } else {
            ".mcp.json"
        };
        let mut problems = Vec::new();
        let parsed = core_agent_mcp_config::parse_file(
            &text,
            Path::new(name),
            core_agent_mcp_config::Scope::Project,
            &mut problems,
        );
        return match (parsed, problems.is_empty()) {
            (Ok(_), true) => Ok(true),
            (Err(e), _) => Err(format!("core-agent-mcp-config refuses this {name}: {e}")),
            (Ok(_), false) => Err(format!(
                "core-agent-mcp-config refuses this {name}: {problems:?}"
            )),
        };
    }
    if object.contains_key("permissions") || object.contains_key("gateway") {
        return validate_config_json(&text).map(|()| true);
    }
    Ok(false)
}

/// Loads `text` as the project's `config.json` the way the binary does:
/// `core-agent-permissions` reads the file with the gateway's reader checking
/// its `gateway` section (`PermissionsConfig::load_checking` with
/// `GatewayConfig::problems`), then `GatewayConfig::parse` reads that
/// section. `${NAME}` placeholders stay as written, as the loader keeps them
/// (they are expanded when the gateway starts).
fn validate_config_json(text: &str) -> Result<(), String> {
    use core_agent_gateway::GatewayConfig;
    use core_agent_permissions::PermissionsConfig;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "docs-config-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("config.json");
    let loaded = std::fs::write(&file, text)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            PermissionsConfig::load_checking(&file, None, &GatewayConfig::problems)
                .map_err(|e| format!("the config.json loader refuses this config.json: {e}"))
        });
    let _ = std::fs::remove_dir_all(&dir);
    let loaded = loaded?;
    GatewayConfig::parse(&loaded.gateway)
        .map(|_| ())
        .map_err(|e| format!("core-agent-gateway refuses this config.json's gateway: {e}"))
}

// ---------------------------------------------------------------------------
// Command lines.

#[test]
fn every_command_line_names_real_subcommands_and_flags() {
    // Where cargo put it: `CARGO_TARGET_DIR` (as cargo itself reads it),
    // else the workspace's `target`.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let bin = target.join("debug/core-agent");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p core-agent` (cargo test --workspace builds it)",
        bin.display()
    );
    let mut help = Help {
        bin,
        cache: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, text) in pages() {
        for (line, command) in command_lines(&text) {
            checked += 1;
            if let Err(e) = help.check(&command) {
                problems.push(format!("{file}:{line}: `{command}`: {e}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs: {} command line(s) the binary does not know:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    assert!(
        checked >= 30,
        "only {checked} command lines found: is the reader broken?"
    );
    // The check itself catches what drifted.
    assert_eq!(help.check("core-agent mcp list --json"), Ok(()));
    assert_eq!(
        help.check("core-agent mcp list --jsn"),
        Err("`core-agent mcp list` has no --jsn".to_owned())
    );
    assert_eq!(
        help.check("core-agent lsit"),
        Err("`lsit` is no subcommand of core-agent".to_owned())
    );
}

#[test]
fn command_lines_are_found_in_shell_blocks_and_code_spans() {
    let text = "\
Run `core-agent mcp list [--json]` or `core-agent-mcp-config`.\n\
```sh\n\
cargo run -p core-agent -- call demo_divide '{\"a\": 1}'   # comment --not-a-flag\n\
claude mcp add core-agent -- core-agent serve --agents-dir /p\n\
```\n";
    assert_eq!(
        command_lines(text),
        [
            (1, "core-agent mcp list [--json]".to_owned()),
            (3, "core-agent call demo_divide '{\"a\": 1}'".to_owned()),
            (4, "core-agent serve --agents-dir /p".to_owned()),
        ]
    );
    let (path, flags) = split_command("core-agent mcp login NAME [--no-browser] [--timeout=SECS]");
    assert_eq!(path, ["mcp", "login", "NAME"]);
    assert_eq!(flags, ["--no-browser", "--timeout"]);
}

/// Each `core-agent …` command of the text: in shell blocks (after a
/// `cargo run -p core-agent --` too, comments dropped) and in inline code.
fn command_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                None => Some(lang.trim().to_owned()),
                Some(_) => None,
            };
            continue;
        }
        match fence.as_deref() {
            Some("sh" | "console" | "bash") => {
                let code = line.split(" #").next().unwrap_or("");
                let code = code.replace("cargo run -p core-agent -- ", "core-agent ");
                if let Some(at) = find_command(&code) {
                    out.push((i + 1, code[at..].trim().to_owned()));
                }
            }
            Some(_) => {}
            None => {
                for (n, span) in line.split('`').enumerate() {
                    if n % 2 == 1 && find_command(span) == Some(0) {
                        out.push((i + 1, span.trim().to_owned()));
                    }
                }
            }
        }
    }
    out
}

/// Where `core-agent <word>` starts in `code` (not `core-agent-…`, not `cargo install core-agent`).
fn find_command(code: &str) -> Option<usize> {
    code.match_indices("core-agent ")
        .map(|(at, _)| at)
        .find(|&at| {
            let before_ok = code[..at]
                .chars()
                .next_back()
                .is_none_or(|c| c == ' ' || c == '(');
            let next = code[at + "core-agent ".len()..].chars().next();
            let installing = code[..at].trim_end().ends_with("install");
            before_ok && !installing && next.is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        })
}

/// The words after `core-agent` up to the first flag, and every `--flag`.
fn split_command(command: &str) -> (Vec<String>, Vec<String>) {
    let rest = command.strip_prefix("core-agent").unwrap_or(command);
    let mut words = Vec::new();
    let mut flags = Vec::new();
    let mut in_flags = false;
    for token in rest.split_whitespace() {
        let token = token.trim_matches(|c| c == '[' || c == ']' || c == '|');
        if let Some(flag) = token.strip_prefix("--") {
            in_flags = true;
            let name: String = flag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() {
                flags.push(format!("--{name}"));
            }
        } else if !in_flags && !token.starts_with('-') {
            words.push(token.to_owned());
        }
    }
    (words, flags)
}

/// The binary's `--help`, per subcommand path, asked once each.
struct Help {
    bin: PathBuf,
    cache: BTreeMap<Vec<String>, Option<String>>,
}

impl Help {
    /// The help text of `path`, or `None` when it is no subcommand.
    fn of(&mut self, path: &[String]) -> Option<String> {
        if let Some(text) = self.cache.get(path) {
            return text.clone();
        }
        let out = Command::new(&self.bin)
            .args(path)
            .arg("--help")
            .env_remove("CORE_AGENT_GATEWAY_TOKEN")
            .output()
            .unwrap();
        let text = out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned());
        self.cache.insert(path.to_vec(), text.clone());
        text
    }

    fn check(&mut self, command: &str) -> Result<(), String> {
        let (words, flags) = split_command(command);
        let mut path: Vec<String> = Vec::new();
        for word in &words {
            if word.starts_with("__") {
                return Ok(());
            }
            let is_word = word
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            let mut longer = path.clone();
            longer.push(word.clone());
            let parent = self.of(&path).unwrap_or_default();
            if !is_word || !subcommands(&parent).contains(word) {
                break;
            }
            if self.of(&longer).is_none() {
                return Err(format!("`{}` has no --help", longer.join(" ")));
            }
            path = longer;
        }
        if path.is_empty() {
            return Err(format!(
                "`{}` is no subcommand of core-agent",
                words.first().map(String::as_str).unwrap_or("")
            ));
        }
        for flag in &flags {
            let known = (0..=path.len())
                .any(|n| self.of(&path[..n]).is_some_and(|h| mentions_flag(&h, flag)));
            if !known {
                return Err(format!("`core-agent {}` has no {flag}", path.join(" ")));
            }
        }
        Ok(())
    }
}

/// The subcommand names of a clap help text (its `Commands:` list).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn mentions_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        !help[at + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

// ---------------------------------------------------------------------------
// Links.

#[test]
fn every_relative_link_points_at_a_file() {
    let root = root();
    let mut problems = Vec::new();
    for (file, text) in pages() {
        let dir = root.join(&file);
        let dir = dir.parent().unwrap_or(&root);
        for target in relative_links(&text) {
            if !dir.join(&target).exists() {
                problems.push(format!("{file}: ({target}) does not exist"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs: broken links:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn relative_links_are_read_without_their_anchor() {
    assert_eq!(
        relative_links("see [a](docs/a.md#x), [b](https://x.org/b), [c](#c) and [d](../d)"),
        ["docs/a.md", "../d"]
    );
}

/// The targets of `[text](target)` links that are neither URLs nor anchors.
fn relative_links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            let path = target.split('#').next().unwrap_or("");
            let local = !path.is_empty() && !path.contains("://") && !path.contains(' ');
            local.then(|| path.to_owned())
        })
        .collect()
}
