//! `core-agent mcp trust`: pins a server's tool definitions in `mcp.lock`.

use core_agent_host::{Host, HostOptions};

use crate::cli::Global;
use crate::render::{clean, count, print_json, report_ready};
use crate::setup::{Launch, Setup};
use crate::signals::StopSignals;
use crate::term::Screen;
use crate::{FAILED, USAGE};

pub(crate) async fn run(
    global: &Global,
    server: &str,
    tool: Option<&str>,
    json: bool,
    store: Option<String>,
) -> u8 {
    let Some(setup) = Setup::new(global) else {
        return USAGE;
    };
    // No live lines: only the listings and `call` draw them.
    let screen = Screen::new(false);
    let Launch {
        config,
        mut options,
        gateway_store,
        mut stop,
        ..
    } = match Launch::new(global, &setup, &screen) {
        Ok(launch) => launch,
        Err(code) => return code,
    };
    let env = config.dotenv.over_process();
    // A fleet's pins are the shared ones: accepting a tool here accepts it
    // on every replica.
    match crate::commands::store::shared_store(store, gateway_store, &env).await {
        Ok(Some(db)) => options.pins = Some(std::sync::Arc::new(db)),
        Ok(None) => {}
        Err(code) => return code,
    }
    trust(&config, &env, options, server, tool, json, &mut stop).await
}

/// `mcp trust`: starts only `server`, pins what it lists now (one tool or
/// all) and says what changed.
async fn trust(
    config: &core_agent_mcp_config::Config,
    env: &dyn core_agent_mcp_config::Env,
    options: HostOptions,
    server: &str,
    tool: Option<&str>,
    json: bool,
    stop: &mut StopSignals,
) -> u8 {
    if config.server(server).is_none() {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        let hint = match core_agent_mcp_config::closest(server, &names) {
            Some(n) => format!("did you mean `{n}`?"),
            None => "run `core-agent mcp list` to see the configured servers".to_owned(),
        };
        errln!("core-agent: no server named `{server}`; {hint}");
        return USAGE;
    }
    let Some(lock) = config.lock.clone() else {
        errln!("core-agent: this config has no mcp.lock");
        return USAGE;
    };
    let mut only = config.clone();
    only.servers.retain(|s| s.name == server);
    let host = tokio::select! {
        host = Host::start(&only, env, options, &report_ready) => host,
        signal = stop.next() => {
            errln!("core-agent: {signal} while starting: stopped the servers");
            return 130;
        }
    };
    let result = host.trust(server, tool);
    host.shutdown().await;
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            errln!("core-agent: mcp trust: {}", clean(&e.to_string()));
            return FAILED;
        }
    };
    if json {
        print_json(&report);
        return 0;
    }
    for t in &report {
        match &t.change {
            Some(change) => outln!("{server}/{}: {} ({})", t.tool, t.status, clean(change)),
            None => outln!("{server}/{}: {}", t.tool, t.status),
        }
    }
    let pinned = report.iter().filter(|t| t.status != "removed").count();
    outln!(
        "pinned {} of `{server}` in {}",
        count(pinned, "tool"),
        lock.display()
    );
    0
}
