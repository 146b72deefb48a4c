#![doc = include_str!("../README.md")]

mod audit;
mod error;
mod fleet;
mod memory;
mod pins;
mod postgres;
mod store;

pub use error::{Error, Result, redact};
pub use pins::{Listening, Notice};
pub use postgres::{Options, Postgres, SCHEMA_VERSION};

/// Now, in milliseconds since the Unix epoch, as the database keeps it.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
