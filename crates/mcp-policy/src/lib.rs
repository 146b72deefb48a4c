#![doc = include_str!("../README.md")]

mod catalog;
mod names;
mod preflight;

pub use catalog::{Catalog, CatalogEntry, DiscoveredTool, Warning};
pub use names::{namespaced, sanitize};
pub use preflight::{MAX_SCHEMA_BYTES, PreflightIssue, estimate_tokens, preflight};
