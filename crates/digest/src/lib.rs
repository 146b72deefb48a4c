#![doc = include_str!("../README.md")]

mod error;
mod llm;
mod prune;
mod route;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod telemetry;
mod text;

pub use error::{Error, Result};
pub use llm::{
    BoxFuture, DEFAULT_MODEL, Price, Pricing, Summarizer, Summary, SummaryError, SummaryRequest,
    choose_model,
};
pub use prune::{Limits, Malformed, PruneStats, is_identifier_key, prune, prune_with_stats};
pub use route::{Digested, Method, PROSE_WRAPPER_STRINGS, Settings, extract, passthrough, route};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{MemoryStore, RawRecord, Store, new_call_id, new_session_id};
pub use telemetry::{DigestEvent, DigestMethods, DigestSavings, LlmUsage, Usage};
