#![doc = include_str!("../README.md")]

pub mod demo;
mod error;
mod host;

pub use error::{Error, Result};
pub use host::{Host, HostOptions, ServerReport, ToolReport};
