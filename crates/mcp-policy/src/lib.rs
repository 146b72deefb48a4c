#![doc = include_str!("../README.md")]

mod catalog;
mod names;

pub use catalog::{Catalog, CatalogEntry, DiscoveredTool, Warning};
pub use names::{namespaced, sanitize};
