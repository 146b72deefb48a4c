//! Model-facing checks of a catalog: will the major model APIs accept it,
//! and what does it cost?

use crate::CatalogEntry;

/// Input schemas larger than this are flagged (16 KiB).
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// One problem a model API would have with a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightIssue {
    /// The namespaced tool name.
    pub tool: String,
    /// Which rule it breaks (`name-charset`, `name-length`, `name-start`, `schema-size`).
    pub rule: &'static str,
    /// What is wrong.
    pub message: String,
}

/// Checks every entry against the function-name rules of the major model
/// APIs (`^[a-zA-Z0-9_-]{1,64}$`, and a first character that is a letter or
/// `_`) and the input-schema size limit.
pub fn preflight(entries: &[CatalogEntry]) -> Vec<PreflightIssue> {
    let mut issues = Vec::new();
    for e in entries {
        let issue = |rule, message: String| PreflightIssue {
            tool: e.name.clone(),
            rule,
            message,
        };
        if !e
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            issues.push(issue(
                "name-charset",
                format!("`{}` has characters outside [a-zA-Z0-9_-]", e.name),
            ));
        }
        let len = e.name.chars().count();
        if len == 0 || len > 64 {
            issues.push(issue(
                "name-length",
                format!("`{}` is {len} characters; the limit is 64", e.name),
            ));
        }
        if !e
            .name
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        {
            issues.push(issue(
                "name-start",
                format!(
                    "`{}` does not start with a letter or `_`, which some model APIs require",
                    e.name
                ),
            ));
        }
        let size = e.input_schema.to_string().len();
        if size > MAX_SCHEMA_BYTES {
            issues.push(issue(
                "schema-size",
                format!("the input schema of `{}` is {size} bytes, over the {MAX_SCHEMA_BYTES}-byte limit", e.name),
            ));
        }
    }
    issues
}

/// A rough count of the tokens the tool list costs on every request: the
/// JSON of each tool's name, description and input schema, at about four
/// bytes per token.
pub fn estimate_tokens(entries: &[CatalogEntry]) -> usize {
    let bytes: usize = entries
        .iter()
        .map(|e| e.name.len() + e.description.len() + e.input_schema.to_string().len() + 40)
        .sum();
    bytes.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(name: &str, schema: serde_json::Value) -> CatalogEntry {
        CatalogEntry {
            name: name.to_owned(),
            server: "s".into(),
            tool: "t".into(),
            description: "d".into(),
            input_schema: schema,
            read_only: true,
            trust_levels: Vec::new(),
            restricted: Vec::new(),
        }
    }

    #[test]
    fn each_rule_is_checked() {
        let big = json!({"description": "x".repeat(MAX_SCHEMA_BYTES)});
        let entries = [
            entry("fine_name", json!({})),
            entry("9lives", json!({})),
            entry(&"a".repeat(65), json!({})),
            entry("has.dot", json!({})),
            entry("huge", big),
        ];
        let issues = preflight(&entries);
        let got: Vec<(&str, &str)> = issues.iter().map(|i| (i.tool.as_str(), i.rule)).collect();
        let long = "a".repeat(65);
        assert_eq!(
            got,
            [
                ("9lives", "name-start"),
                (long.as_str(), "name-length"),
                ("has.dot", "name-charset"),
                ("huge", "schema-size")
            ]
        );
    }

    #[test]
    fn tokens_grow_with_the_catalog() {
        let one = [entry("a", json!({"type": "object"}))];
        let two = [
            entry("a", json!({"type": "object"})),
            entry("b", json!({"type": "object"})),
        ];
        assert!(estimate_tokens(&one) > 0);
        assert!(estimate_tokens(&two) > estimate_tokens(&one));
        assert_eq!(estimate_tokens(&[]), 0);
    }
}
