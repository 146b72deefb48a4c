//! `core-agent tools`: the namespaced tools the model would see.

use core_agent_host::Session;

use crate::cli::Global;
use crate::render::{clean, level_words, levels_only, print_json};
use crate::setup::listing;

pub(crate) async fn run(global: &Global, json: bool) -> u8 {
    listing(global, json, tools).await
}

fn tools(session: &Session, json: bool) -> u8 {
    let host = session.host();
    let level = session.trust_level();
    let tools = host.tool_reports(level);
    if json {
        print_json(&tools);
    } else {
        for t in tools {
            let class = if t.read_only { "read-only" } else { "mutating" };
            let trust = match &t.why_restricted {
                Some(why) => format!("{} ({why})", levels_only(&t.trust_levels)),
                None => level_words(&t.trust_levels),
            };
            outln!("{}  [{class}; {trust}]", t.name);
            for line in clean(&t.description).lines() {
                outln!("    {line}");
            }
        }
    }
    0
}
