//! End-to-end tests: the real `core-agent` binary against real MCP servers
//! (our demo and fixture servers on rmcp, server-everything and
//! server-filesystem from npm, and a Python SDK server).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::panic
)]

mod abuse_bounds;
mod abuse_http;
mod abuse_identity;
mod abuse_secrets;
mod abuse_survey;
mod auth;
mod cli;
mod config;
mod demo;
mod dialects;
mod digest;
mod doctor;
mod edges;
mod everyday;
mod faults;
mod fleet;
mod gate;
mod gateway_audit;
mod gateway_clients;
mod gateway_context;
mod gateway_context_filesystem;
mod gateway_load;
mod gateway_oauth;
mod gateway_stateless;
mod gateway_telemetry;
mod gateway_token_exchange;
mod lifecycle;
mod listing;
mod oauth;
mod own_gateway;
mod peers;
mod pin;
mod policy;
mod real;
mod recovery;
mod survey;
mod terminal;
mod text_digest;
mod third_party;
mod transparent;
mod trust;
mod warnings;

use core_agent_e2e::{bin, everything_js, node, py_server, python};
use serde_json::{Value, json};

/// A stdio server entry running our fixture server in `mode`.
fn fixture(mode: &str) -> Value {
    json!({"transport": "stdio", "command": bin("fixture-server"), "args": [mode]})
}

/// A stdio server entry running server-everything.
fn everything_stdio() -> Value {
    json!({"transport": "stdio", "command": node(), "args": [everything_js(), "stdio"]})
}

/// A stdio server entry running the Python SDK fixture.
fn python_stdio() -> Value {
    json!({"transport": "stdio", "command": python(), "args": [py_server(), "stdio"]})
}

/// A stdio server entry running the demo server.
fn demo_server() -> Value {
    json!({"transport": "stdio", "command": bin("core-agent"), "args": ["demo-server"]})
}

/// The server objects of `mcp list --json`, by name.
fn by_name(list: &Value, name: &str) -> Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no server `{name}` in {list:#}"))
}
