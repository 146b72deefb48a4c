#![doc = include_str!("../README.md")]

mod error;
mod fit;
mod llm;
#[cfg(test)]
mod props;
mod prune;
mod route;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod telemetry;
mod text;

pub use error::{Error, Result};
pub use fit::{fit, tighter};
pub use llm::{
    Billed, BoxFuture, DEFAULT_MAX_INPUT_BYTES, DEFAULT_MODEL, INSTRUCTION,
    MESSAGE_OVERHEAD_TOKENS, Price, Pricing, Summarizer, Summary, SummaryError, SummaryFailure,
    SummaryRequest, TokenUsage, bound_input, choose_model,
};
pub use prune::{Limits, Malformed, PruneStats, prune, prune_with_stats};
pub use route::{Digested, Method, Settings, extract, passthrough, route};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{
    DEFAULT_RAW_BUDGET, ENDED_SESSIONS_KEPT, Entry, Evicted, MemoryStore, RawRecord, SessionRecord,
    Store, new_call_id, new_session_id,
};
pub use telemetry::{DigestEvent, DigestMethods, DigestSavings, LlmUsage, Usage};
