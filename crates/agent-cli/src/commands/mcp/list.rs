//! `core-agent mcp list`: one line per configured server (or `--json`).

use core_agent_host::Session;

use crate::cli::Global;
use crate::render::{clean, count, first_line, print_json, restricted_lines};
use crate::setup::listing;

pub(crate) async fn run(global: &Global, json: bool) -> u8 {
    listing(global, json, list).await
}

/// Exits 1 when servers were to start and none did (see
/// `start_failure` in `setup.rs`).
fn list(session: &Session, json: bool) -> u8 {
    let host = session.host();
    let level = session.trust_level();
    let reports = host.server_reports(level);
    if json {
        print_json(&reports);
    } else if reports.is_empty() {
        outln!("no MCP servers configured");
    } else {
        for r in reports {
            let mut notes: Vec<String> = r
                .left_out
                .iter()
                .map(|(by, n)| format!("{n} left out by {by}"))
                .collect();
            if r.restricted > 0 {
                notes.push(format!("{} restricted at this trust level", r.restricted));
            }
            let mut detail = match &r.error {
                Some(e) if r.status == core_agent_host::ServerStatus::Error => {
                    format!("error: {}", clean(first_line(e)))
                }
                Some(e) => clean(first_line(e)),
                None if notes.is_empty() => count(r.tools, "tool"),
                None => format!("{} ({})", count(r.tools, "tool"), notes.join(", ")),
            };
            // Only HTTP servers carry credentials.
            if r.transport == core_agent_host::TransportKind::Http {
                detail.push_str(&format!("; auth: {}", clean(&r.auth.to_string())));
            }
            outln!(
                "{:<20} {:<6} {:<8} {:<10} {detail}",
                r.name,
                r.transport,
                r.scope.as_str(),
                r.status
            );
            // The rest of an error (a server's stderr tail) under its line.
            for line in r.error.iter().flat_map(|e| e.lines().skip(1)) {
                outln!("    {}", clean(line.trim_start()));
            }
            for line in restricted_lines(&r.restricted_tools) {
                outln!("    {line}");
            }
        }
    }
    0
}
