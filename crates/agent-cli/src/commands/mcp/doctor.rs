//! `core-agent mcp doctor`: the config's and the servers' findings, as
//! text or JSON.

use std::sync::Arc;

use core_agent_host::{DoctorOptions, DoctorReport, HostOptions};

use crate::cli::Global;
use crate::render::{clean, count, first_line, print_json, restricted_lines};
use crate::setup::{NoticeDecline, Setup, guard_own_gateway, supervisor};
use crate::signals::StopSignals;
use crate::{FAILED, USAGE};

pub(crate) async fn run(global: &Global, cloud: bool, offline: bool, json: bool) -> u8 {
    let Some(Setup {
        paths,
        start_timeout,
        call_timeout,
        ..
    }) = Setup::new(global)
    else {
        return USAGE;
    };
    let mut loaded = core_agent_mcp_config::load(&paths);
    let mut host = HostOptions::default()
        .with_call_timeout(call_timeout)
        .with_commands(Arc::new(crate::words::commands::CliCommands));
    host.start.timeout = start_timeout;
    host.start.elicitor = Arc::new(NoticeDecline);
    host.start.supervisor = supervisor();
    host.start.credentials = core_agent_mcp_transport::oauth::CredentialsDir::user();
    // An entry that is this gateway is among the findings, as a left-out server.
    if let Ok(config) = loaded.as_mut()
        && let Err(code) = guard_own_gateway(config, &paths, &mut host.start, None)
    {
        return code;
    }
    let doctor_options = DoctorOptions::new(host)
        .with_cloud(cloud)
        .with_offline(offline);
    let mut stop = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            errln!("core-agent: cannot catch SIGINT/SIGTERM: {e}");
            return FAILED;
        }
    };
    let report = tokio::select! {
        report = core_agent_host::doctor(loaded.as_ref(), doctor_options) => report,
        signal = stop.next() => {
            errln!("core-agent: {signal}: stopped the servers");
            return 130;
        }
    };
    print_doctor(&report, json);
    if report.errors > 0 { FAILED } else { 0 }
}

fn print_doctor(report: &DoctorReport, json: bool) {
    let report = &doctor_worded(report);
    if json {
        print_json(report);
        return;
    }
    for f in &report.findings {
        let mut line = format!("{:<9}{}", format!("{}:", f.severity), f.check);
        if let Some(server) = &f.server {
            line.push_str(&format!(" [{server}]"));
        }
        if let Some(field) = &f.field {
            line.push_str(&format!(" {field}"));
        }
        outln!("{line}\n        {}; {}", clean(&f.message), f.fix);
    }
    for s in &report.servers {
        let left_out: Vec<String> = s
            .left_out
            .iter()
            .map(|(by, n)| format!("{n} left out by {by}"))
            .collect();
        let tools = if left_out.is_empty() {
            count(s.tools, "tool")
        } else {
            format!("{} ({})", count(s.tools, "tool"), left_out.join(", "))
        };
        match &s.error {
            None => outln!(
                "server  {} ({}): connected, {tools} in {} ms",
                s.name,
                s.transport,
                s.ms
            ),
            Some(e) if s.status != core_agent_host::ServerStatus::Error => {
                outln!("server  {}: {}: {}", s.name, s.status, clean(first_line(e)))
            }
            Some(e) => outln!(
                "server  {} ({}): error after {} ms: {}",
                s.name,
                s.transport,
                s.ms,
                clean(first_line(e))
            ),
        }
        if s.transport == core_agent_host::TransportKind::Http {
            outln!("        auth: {}", clean(&s.auth.to_string()));
        }
        for line in restricted_lines(&s.restricted_tools) {
            outln!("        {line}");
        }
    }
    if !report.servers.is_empty() {
        outln!(
            "tools   {}, about {} tokens of tool definitions per request",
            count(report.tools, "tool"),
            report.token_estimate
        );
    }
    if !report.secrets.is_empty() {
        outln!(
            "secrets {} kept from servers that do not name them, and redacted as ***: {}",
            count(report.secrets.len(), "secret"),
            report.secrets.join(", ")
        );
    }
    outln!(
        "doctor: {}, {}",
        count(report.errors, "error"),
        count(report.warnings, "warning")
    );
}

/// The doctor's report with each remedy in the CLI's words (its commands).
fn doctor_worded(report: &DoctorReport) -> DoctorReport {
    use core_agent_host::Remedy;
    let mut report = report.clone();
    for f in &mut report.findings {
        match f.remedy {
            Some(Remedy::FixThenRecheck { what }) => {
                f.fix = format!("fix {what}, then run `core-agent mcp doctor` again");
            }
            Some(Remedy::ReviewChangedTool) => {
                f.fix = "compare the change with what the tool should do; if it is expected, run the `core-agent mcp trust` command named above".to_owned();
            }
            Some(Remedy::RepairLock) => {
                f.fix = "fix or delete mcp.lock, then run `core-agent mcp trust`".to_owned();
            }
            _ => {}
        }
    }
    report
}
