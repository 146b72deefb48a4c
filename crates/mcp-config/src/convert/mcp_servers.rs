//! The `.mcp.json` dialect, as Claude Code, Cursor and Auggy write it:
//! `{"mcpServers": {…}, "auggy": {"servers": {…}}}`, with core-agent's policy
//! for each server under `auggy`, and the keys other tools add mapped
//! (`disabled`, `timeout`, `includeTools`, …), left out or warned about.

use serde_json::{Map, Value};

use super::{Cx, FileConfig, Server, TransportKind, builtin, entry, strings};
use crate::position::escape_pointer;
use crate::spec::BUILTIN;
use crate::suggest::closest;
use crate::{ConfigWarning, ConfigWarningKind, Dialect, LeftOut, LeftOutReason, Limits, Scope};

/// Server keys that other tools write in `.mcp.json` files and core-agent
/// accepts but does not use: each server that has some gets one warning.
pub(crate) const PEER_IGNORED: &[&str] = &[
    "autoApprove",
    "alwaysAllow",
    "description",
    "name",
    "networkTimeout",
    "trust",
    "envFile",
    "oauth",
    "headersHelper",
    "watchPaths",
];

/// Reads an `mcpServers` file the schema accepted into `file`.
pub(super) fn convert(cx: &mut Cx<'_>, root: &Value, scope: Scope, file: &mut FileConfig) {
    let empty = Map::new();
    let file_limits = Limits::default().overlaid(root.get("limits"));
    let servers = root
        .get("mcpServers")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let policies = root
        .pointer("/auggy/servers")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if servers.contains_key(BUILTIN) {
        cx.push(
            Some(BUILTIN.to_owned()),
            &format!("/mcpServers/{BUILTIN}"),
            &format!("`{BUILTIN}` is a reserved name: core-agent's own tools are gated as `{BUILTIN}:<tool>` and narrowed under it"),
            "give the server another name (its tools are published as <name>_<tool>)",
        );
    }
    // The built-in tools' allowlist and trust levels: `auggy.servers.builtin`.
    if let Some(b) = policies.get(BUILTIN) {
        file.builtin = Some(builtin(cx, b));
    }
    for name in policies
        .keys()
        .filter(|n| !servers.contains_key(*n) && *n != BUILTIN)
    {
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
    for (name, value) in servers.iter().filter(|(n, _)| *n != BUILTIN) {
        let policy = policies.get(name).unwrap_or(&Value::Null);
        if let Some(keys) = policy.as_object() {
            let mut keys: Vec<String> = keys.keys().cloned().collect();
            keys.sort();
            file.policies.insert(name.clone(), keys);
        }
        if let Some(reason) = left_out_reason(value) {
            file.left_out.push(LeftOut {
                name: name.clone(),
                scope,
                source: cx.path.to_owned(),
                reason,
            });
            continue;
        }
        let kind = TransportKind::of(value);
        let mut tools = strings(value.get("includeTools"));
        tools.extend(strings(policy.get("allowedTools")));
        let mut blocked_tools = strings(value.get("excludeTools"));
        blocked_tools.extend(strings(value.get("disabledTools")));
        blocked_tools.extend(strings(policy.get("blockedTools")));
        // Most specific first: the server's own `limits`, then its `timeout`
        // (another tool's key), then the file's `limits`, then the defaults.
        let mut limits = file_limits;
        let explicit_timeout = value
            .pointer("/limits/call_timeout_ms")
            .or_else(|| policy.pointer("/limits/call_timeout_ms"))
            .is_some();
        if let Some(timeout) = value.get("timeout").and_then(Value::as_u64)
            && !explicit_timeout
        {
            let (ms, ambiguous) = timeout_ms(timeout);
            limits.call_timeout_ms = ms;
            if ambiguous {
                file.warnings.push(ConfigWarning {
                    file: cx.path.to_owned(),
                    server: Some(name.clone()),
                    kind: ConfigWarningKind::TimeoutUnits,
                    message: format!(
                        "\"timeout\": {timeout} is taken as seconds (as Cline and Roo Code \
                         write it), not milliseconds (as Gemini CLI does); if you meant \
                         milliseconds, add \"auggy\": {{\"servers\": {{\"{name}\": {{\"limits\": \
                         {{\"call_timeout_ms\": {timeout}}}}}}}}}, which wins over \"timeout\""
                    ),
                });
            }
        }
        let limits = limits.overlaid(value.get("limits").or_else(|| policy.get("limits")));
        let ignored: Vec<&str> = value
            .as_object()
            .into_iter()
            .flat_map(|o| o.iter())
            .filter(|(k, v)| {
                let ignored = PEER_IGNORED.contains(&k.as_str())
                    || (*k == "cwd" && kind != TransportKind::Stdio);
                ignored && says_something(v)
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if !ignored.is_empty() {
            let keys = if ignored.len() == 1 { "key" } else { "keys" };
            file.warnings.push(ConfigWarning {
                file: cx.path.to_owned(),
                server: Some(name.clone()),
                kind: ConfigWarningKind::IgnoredKeys,
                message: format!("ignored {keys} other tools use: {}", ignored.join(", ")),
            });
        }
        let server = Server {
            name,
            base: format!("/mcpServers/{}", escape_pointer(name)),
            value,
            policy,
            kind,
            tools,
            blocked_tools,
            limits,
        };
        let entry = entry(cx, scope, Dialect::McpServers, server);
        file.servers.push(entry);
    }
}

/// Why a server of the `mcpServers` dialect is configured but not to be
/// started, if it is not: disabled first (the user's word), then a transport
/// core-agent does not speak, then a working directory it cannot honour.
fn left_out_reason(server: &Value) -> Option<LeftOutReason> {
    let kind = TransportKind::of(server);
    if server.get("disabled").and_then(Value::as_bool) == Some(true) {
        Some(LeftOutReason::Disabled)
    } else if kind == TransportKind::Sse {
        Some(LeftOutReason::UnsupportedTransport {
            transport: kind.as_str().to_owned(),
        })
    } else if kind == TransportKind::Stdio
        && let Some(cwd) = server.get("cwd").and_then(Value::as_str)
    {
        Some(LeftOutReason::WorkingDirectory {
            cwd: cwd.to_owned(),
        })
    } else {
        None
    }
}

/// Whether ignoring this value loses anything: `[]`, `{}`, `""`, `false` and
/// `null` (as Cline writes `"autoApprove": []` on every server) say nothing.
fn says_something(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(true) | Value::Number(_) => true,
    }
}

/// The longest `timeout` taken as seconds: Cline and Roo Code write seconds
/// (1 to 3600, default 60); Gemini CLI writes milliseconds (default 600000).
pub(crate) const TIMEOUT_MAX_SECONDS: u64 = 3600;

/// A `timeout` in milliseconds, and whether its unit is in doubt.
///
/// Up to [`TIMEOUT_MAX_SECONDS`] it is seconds; above, milliseconds. Below
/// 1000 that is clear (a call timeout under a second is not meant); from
/// 1000 to 3600 it could be either, and the caller warns.
pub(crate) fn timeout_ms(timeout: u64) -> (u64, bool) {
    if timeout <= TIMEOUT_MAX_SECONDS {
        (timeout.saturating_mul(1000), timeout >= 1000)
    } else {
        (timeout, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_up_to_3600_is_seconds_and_above_is_milliseconds() {
        let table = [
            (1, 1_000, false),
            (60, 60_000, false),
            (999, 999_000, false),
            (1_000, 1_000_000, true),
            (3_600, 3_600_000, true),
            (3_601, 3_601, false),
            (30_000, 30_000, false),
            (600_000, 600_000, false),
            (u64::MAX, u64::MAX, false),
        ];
        for (timeout, ms, ambiguous) in table {
            assert_eq!(timeout_ms(timeout), (ms, ambiguous), "timeout {timeout}");
        }
    }
}
