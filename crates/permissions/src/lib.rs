#![doc = include_str!("../README.md")]

mod config;
mod error;
mod gate;
mod pattern;

pub use config::{Mode, PermissionsConfig, Section};
pub use core_agent_mcp_config::Problem;
pub use error::{Error, Result};
pub use gate::{
    Answer, ApproveAll, AskFuture, BUILTIN, DETAIL_CHARS, Decision, Gate, MCP, Prompter, RefuseAll,
    Request, Rule, detail,
};
pub use pattern::Pattern;
