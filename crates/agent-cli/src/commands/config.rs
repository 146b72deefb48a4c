//! `core-agent config show` and `config schema`.

use core_agent_mcp_config::Dialect;

use crate::USAGE;
use crate::cli::{DialectArg, Global};
use crate::render::{clean, print_json};
use crate::setup::{Setup, load_config, own_program};

/// `config show`: the effective merged config, with where each value came from.
pub(crate) fn show(global: &Global, json: bool) -> u8 {
    let Some(Setup { paths, .. }) = Setup::new(global) else {
        return USAGE;
    };
    let Some(mut config) = load_config(&paths) else {
        return USAGE;
    };
    config.leave_out_own(&own_program(&paths), std::env::var_os("PATH").as_deref());
    print_config(&config, json);
    0
}

/// `config schema`: the JSON Schema of a dialect.
pub(crate) fn schema(global: &Global, dialect: DialectArg) -> u8 {
    // Bad --start-timeout or --call-timeout values are refused here too.
    if Setup::new(global).is_none() {
        return USAGE;
    }
    let dialect = match dialect {
        DialectArg::Core => Dialect::Core,
        DialectArg::McpServers => Dialect::McpServers,
    };
    out!("{}", core_agent_mcp_config::schema(dialect));
    0
}

fn print_config(config: &core_agent_mcp_config::Config, json: bool) {
    let report = core_agent_host::config_report(config);
    if json {
        print_json(&report);
        return;
    }
    outln!("files (highest precedence first):");
    for f in &report.files {
        let state = match (&f.dialect, f.found) {
            (Some(d), true) => format!("{} dialect", d.as_str()),
            _ => "not found".to_owned(),
        };
        outln!("  {:<8} {} ({state})", f.scope.as_str(), f.path);
    }
    if let Some(dotenv) = &report.dotenv {
        outln!(".env: {dotenv}");
    }
    outln!("settings:");
    for (name, setting) in &report.settings {
        match setting {
            Some(s) => outln!("  {name} = {} (from {})", s.value, s.source),
            None => outln!("  {name}: not set"),
        }
    }
    outln!("servers:");
    for server in &report.servers {
        print_server_config(server);
    }
    if !report.left_out.is_empty() {
        outln!("not started:");
        for l in &report.left_out {
            outln!("  {} (from {}): {}", l.name, l.source, l.reason);
        }
    }
    for w in &report.warnings {
        outln!("warning: {w}");
    }
}

/// One server of `config show`: its header line, then each setting that
/// is not at its empty default.
fn print_server_config(s: &core_agent_host::ServerConfigReport) {
    use core_agent_host::ConnectionReport;
    outln!(
        "  {} ({}, {} scope, from {})",
        s.name,
        s.transport,
        s.scope,
        s.source
    );
    let pairs = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut lines: Vec<(&str, String)> = Vec::new();
    match &s.connection {
        ConnectionReport::Stdio { command, args, env } => {
            lines.push(("command", command.clone()));
            if !args.is_empty() {
                lines.push(("args", args.join(" ")));
            }
            if !env.is_empty() {
                lines.push(("env", pairs(env)));
            }
        }
        ConnectionReport::Http { url, headers, auth } => {
            lines.push(("url", url.clone()));
            if !headers.is_empty() {
                lines.push(("headers", pairs(headers)));
            }
            if let Some(auth) = auth {
                if let Some(google) = &auth.google_oauth {
                    let scopes = google.scopes.join(" ");
                    lines.push(("auth", format!("google_oauth (scopes: {scopes})")));
                }
                if let Some(oauth) = &auth.oauth {
                    let mut parts = Vec::new();
                    if !oauth.scopes.is_empty() {
                        parts.push(format!("scopes: {}", oauth.scopes.join(" ")));
                    }
                    if let Some(id) = &oauth.client_id {
                        parts.push(format!("client_id: {id}"));
                    }
                    if let Some(secret) = &oauth.client_secret {
                        parts.push(format!("client_secret: {secret}"));
                    }
                    if let Some(url) = &oauth.client_metadata_url {
                        parts.push(format!("client_metadata_url: {url}"));
                    }
                    if let Some(port) = oauth.callback_port {
                        parts.push(format!("callback_port: {port}"));
                    }
                    let detail = if parts.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", parts.join("; "))
                    };
                    lines.push(("auth", format!("oauth{detail}")));
                }
            }
        }
    }
    if !s.tools.is_empty() {
        lines.push(("tools", s.tools.join(", ")));
    }
    if !s.blocked_tools.is_empty() {
        lines.push(("blocked_tools", s.blocked_tools.join(", ")));
    }
    if let Some(levels) = &s.allowed_trust_levels {
        let levels: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        lines.push(("allowed_trust_levels", levels.join(", ")));
    }
    for (tool, levels) in &s.tool_policies {
        let levels: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        lines.push(("tool_policy", format!("{tool}: {}", levels.join(", "))));
    }
    if let Some(cloud) = &s.cloud {
        lines.push(("cloud", cloud.as_str().to_owned()));
    }
    if s.read_only {
        lines.push(("read_only", "true".to_owned()));
    }
    if s.agentic_never {
        lines.push(("agentic_never", "true".to_owned()));
    }
    for (tool, note) in &s.tool_notes {
        lines.push(("tool_note", format!("{tool}: {note}")));
    }
    let l = &s.limits;
    lines.push((
        "limits",
        format!(
            "max_tools {}, max_pages {}, max_input_schema_bytes {}, max_result_bytes {}, call_timeout_ms {}, max_concurrent_calls {}, max_message_bytes {}",
            l.max_tools,
            l.max_pages,
            l.max_input_schema_bytes,
            l.max_result_bytes,
            l.call_timeout_ms,
            l.max_concurrent_calls,
            l.max_message_bytes
        ),
    ));
    for (k, v) in lines {
        outln!("    {k}: {}", clean(&v));
    }
}
