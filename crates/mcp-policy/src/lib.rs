#![doc = include_str!("../README.md")]

mod builder;
mod catalog;
mod names;
mod pin;
mod preflight;
mod summary;
mod text;
mod warning;

pub use builder::{CatalogBuilder, Verdicts};
pub use catalog::{Annotations, Catalog, CatalogEntry, DiscoveredTool, Restricted, ServerTools};
pub use core_agent_mcp_config::PinMode;
pub use core_agent_mcp_config::TrustLevel;
pub use names::{MAX_NAME, Naming, namespaced, sanitize, unique_names};
pub use pin::{
    Change, ChangeKind, LOCK_VERSION, Lock, LockError, PinHashes, PinnedTool, PointerChange,
    ToolDefinition, Verdict, text_diff,
};
pub use preflight::{MAX_SCHEMA_BYTES, PreflightIssue, estimate_tokens, preflight};
pub use summary::{LeftOutBy, ServerSummary};
pub use text::{MAX_TOOL_NAME, elide, strip_controls, valid_tool_name};
pub use warning::Warning;
