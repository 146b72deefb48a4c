//! What the commands print: stdout lines that survive a closed pipe, JSON,
//! a tool's result, a Host error in the CLI's words, and the small helpers
//! that keep untrusted text safe and counts readable. Every line goes out
//! without the secrets the config knows (`set_redactor`).

/// Writes a line to stdout, with every known secret redacted
/// ([`set_redactor`]). A closed stdout (`core-agent … | head`) is not
/// an error worth a panic: the rest of the output is dropped, and the
/// command still stops its servers and exits as it would have.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", $crate::render::redacted(&text));
    }};
}

/// [`outln!`] without the newline.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = write!(std::io::stdout(), "{}", $crate::render::redacted(&text));
    }};
}

/// `eprintln!`, with every known secret redacted ([`set_redactor`]).
macro_rules! errln {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        eprintln!("{}", $crate::render::redacted(&text));
    }};
}

/// The secrets every printed line is cleaned of, once the config is loaded.
static REDACTOR: std::sync::OnceLock<core_agent_mcp_config::Redactor> = std::sync::OnceLock::new();

/// Sets the secrets [`outln!`], [`out!`], [`errln!`] and the log lines
/// redact (the first call wins: one config per run).
pub(crate) fn set_redactor(redactor: core_agent_mcp_config::Redactor) {
    let _ = REDACTOR.set(redactor);
}

/// `text` with every known secret replaced.
pub(crate) fn redacted(text: &str) -> std::borrow::Cow<'_, str> {
    match REDACTOR.get() {
        Some(r) => r.redact(text),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Log lines on their way to stderr, redacted ([`set_redactor`]): each
/// event is formatted whole, then written once.
pub(crate) struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(redacted(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_policy::ServerSummary;
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, ElicitRequestParams};

use crate::term;

/// One stderr line per server as it becomes ready or fails (for `serve`,
/// whose stdout may be the MCP channel: never live lines).
pub(crate) fn report_ready(
    server: &core_agent_mcp_transport::Server,
    summary: Option<&ServerSummary>,
) {
    errln!("{}", term::ready_line(server, summary).0);
}

pub(crate) fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => outln!("{s}"),
        Err(e) => eprintln!("core-agent: cannot render JSON: {e}"),
    }
}

pub(crate) fn print_result(result: &CallToolResult) {
    let mut printed = false;
    for block in &result.content {
        if let Some(text) = block.as_text() {
            outln!("{}", clean(&text.text));
        } else {
            outln!("{}", clean(&describe_block(block)));
        }
        printed = true;
    }
    if let (false, Some(structured)) = (printed, &result.structured_content) {
        print_json(structured);
    }
}

fn describe_block(block: &ContentBlock) -> String {
    match serde_json::to_value(block) {
        Ok(serde_json::Value::Object(map)) => {
            let kind = map
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("content");
            let detail = ["uri", "mimeType", "name"]
                .iter()
                .filter_map(|k| map.get(*k).and_then(|v| v.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            format!("[{kind}: {detail}]")
        }
        _ => "[content]".to_owned(),
    }
}

/// A Host error as this command says it: a refused ask also names `--yes`.
pub(crate) fn render_error(e: &core_agent_host::Error) -> String {
    match e {
        core_agent_host::Error::Denied {
            unanswered_ask: true,
            ..
        } => format!("{e}, or run with --yes to approve every ask of this run"),
        core_agent_host::Error::UnknownTool { name, suggestions } if suggestions.is_empty() => {
            format!("no tool named `{name}`; run `core-agent tools` to list the tools")
        }
        _ => e.to_string(),
    }
}

pub(crate) fn clean(s: &str) -> String {
    core_agent_host::terminal_safe(&redacted(s))
}

pub(crate) fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// `creator only`, `creator, agent only`, `no trust level`.
pub(crate) fn levels_only(levels: &[TrustLevel]) -> String {
    if levels.is_empty() {
        "no trust level".to_owned()
    } else {
        format!("{} only", level_words(levels))
    }
}

/// `creator, agent`.
pub(crate) fn level_words(levels: &[TrustLevel]) -> String {
    let words: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
    words.join(", ")
}

/// A server's restricted tools, grouped by levels and reason:
/// `creator only (mutating, not marked non-destructive): git_add, git_commit`.
pub(crate) fn restricted_lines(tools: &[core_agent_host::RestrictedTool]) -> Vec<String> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for t in tools {
        let head = format!("{} ({})", levels_only(&t.trust_levels), t.why);
        match groups.iter_mut().find(|(h, _)| *h == head) {
            Some((_, names)) => names.push(&t.tool),
            None => groups.push((head, vec![&t.tool])),
        }
    }
    groups
        .into_iter()
        .map(|(head, names)| clean(&format!("{head}: {}", names.join(", "))))
        .collect()
}

/// `1 tool`, `2 tools`: a count with its noun in the right number.
pub(crate) fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// A one-line description of an elicitation request, for notices
/// ("form: Please provide…").
pub(crate) fn describe_request(request: &ElicitRequestParams) -> String {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. } => {
            format!("form: {}", one_line(message))
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            format!("url {url}: {}", one_line(message))
        }
        _ => "a request of an unknown kind".to_owned(),
    }
}

/// `s` on one line (whitespace runs become one space), cut at 120 characters.
fn one_line(s: &str) -> String {
    let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(120).collect::<String>())
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(value: serde_json::Value) -> ElicitRequestParams {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn describe_request_is_one_short_line() {
        let form = |message: &str| {
            request(json!({"mode": "form", "message": message,
                "requestedSchema": {"type": "object", "properties": {}}}))
        };
        let long = "word ".repeat(40);
        let table = [
            (
                form("Please provide\n  your   name"),
                "form: Please provide your name".to_owned(),
            ),
            (
                request(json!({"mode": "url", "message": "Open this\tpage",
                    "url": "https://example.com/x", "elicitationId": "e-1"})),
                "url https://example.com/x: Open this page".to_owned(),
            ),
            (form(&long), format!("form: {}…", &long.trim_end()[..120])),
        ];
        for (request, want) in table {
            assert_eq!(describe_request(&request), want);
        }
    }
}
