//! The JSON shapes a front end reads and writes: a batch's request lines,
//! its outcome lines, and a session's usage report. One typed struct each,
//! serialized once.

use core_agent_digest::{DigestMethods, DigestSavings, Usage};
use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use serde::{Deserialize, Serialize};

use crate::{CallOutcome, CallRequest};

/// One line of a batch: `{"name": "<tool>", "arguments": {…}}` (`arguments`
/// may be left out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchLine {
    /// The namespaced tool name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: JsonObject,
}

impl BatchLine {
    /// Parses one line; the error says what a line must look like.
    pub fn parse(line: &str) -> std::result::Result<CallRequest, String> {
        let parsed: BatchLine = serde_json::from_str(line).map_err(|e| {
            format!("expected {{\"name\": \"<tool>\", \"arguments\": {{…}}}} ({e})")
        })?;
        Ok(CallRequest {
            name: parsed.name,
            arguments: parsed.arguments,
        })
    }
}

/// One outcome line of a batch, in input order:
/// `{"name", "ok", "result" | "error", "ms"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeLine {
    /// The tool that was called.
    pub name: String,
    /// Whether it ran and did not report an error.
    pub ok: bool,
    /// Its result, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CallToolResult>,
    /// Why it did not run or finish, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Milliseconds from the start of the batch's dispatch to its end.
    pub ms: u128,
}

impl OutcomeLine {
    /// The line of an outcome; `render` words an error for this front end.
    pub fn new(outcome: CallOutcome, render: impl Fn(&crate::Error) -> String) -> OutcomeLine {
        let ms = outcome.elapsed.as_millis();
        match outcome.result {
            Ok(result) => OutcomeLine {
                name: outcome.name,
                ok: result.is_error != Some(true),
                result: Some(result),
                error: None,
                ms,
            },
            Err(e) => OutcomeLine {
                name: outcome.name,
                ok: false,
                result: None,
                error: Some(render(&e)),
                ms,
            },
        }
    }
}

/// A session's digest telemetry, as `core-agent usage --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageReport {
    /// The session.
    pub session: String,
    /// Per-method call counts and bytes saved.
    pub digest_methods: DigestMethods,
    /// The session-cumulative savings.
    pub digest_savings: DigestSavings,
}

impl UsageReport {
    /// The report of `session`'s `usage`.
    pub fn new(session: impl Into<String>, usage: Usage) -> UsageReport {
        UsageReport {
            session: session.into(),
            digest_methods: usage.digest_methods,
            digest_savings: usage.digest_savings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lines_parse_or_say_what_they_must_be() {
        let call = BatchLine::parse(r#"{"name": "demo_divide", "arguments": {"a": 1}}"#).unwrap();
        assert_eq!(call.name, "demo_divide");
        assert_eq!(call.arguments["a"], 1);
        assert!(
            BatchLine::parse(r#"{"name": "t"}"#)
                .unwrap()
                .arguments
                .is_empty()
        );
        for bad in [
            r#"{"arguments": {}}"#,
            r#"{"name": "t", "arguments": 3}"#,
            "[]",
            r#"{"name": "t", "args": {}}"#,
        ] {
            let e = BatchLine::parse(bad).unwrap_err();
            assert!(
                e.starts_with("expected {\"name\": \"<tool>\""),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn outcome_lines_have_the_documented_keys() {
        let ok = OutcomeLine::new(
            CallOutcome {
                name: "t".into(),
                result: Ok(CallToolResult::success(vec![])),
                elapsed: std::time::Duration::from_millis(7),
            },
            ToString::to_string,
        );
        let v = serde_json::to_value(&ok).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "ok", "result", "ms"]);
        let failed = OutcomeLine::new(
            CallOutcome {
                name: "t".into(),
                result: Err(crate::Error::UnknownTool {
                    name: "t".into(),
                    suggestions: vec![],
                }),
                elapsed: std::time::Duration::ZERO,
            },
            ToString::to_string,
        );
        let v = serde_json::to_value(&failed).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "ok", "error", "ms"]);
        assert_eq!(v["ok"], false);
    }
}
