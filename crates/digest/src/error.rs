/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What can go wrong outside the pure core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store could not read or write.
    #[error("raw store: {message}")]
    Store {
        /// What went wrong.
        message: String,
    },
    /// A payload is already stored under this `call_id`; stored payloads are
    /// never replaced.
    #[error("raw store: a payload is already stored under `{call_id}`; call ids are never reused")]
    Duplicate {
        /// The id.
        call_id: String,
    },
    /// A payload is larger than the in-memory store's whole byte budget, so
    /// it is not kept.
    #[error(
        "raw store: the payload of `{call_id}` is {bytes} bytes, more than the in-memory store's whole budget of {budget} bytes, so it is not kept; raise the budget or keep payloads in a session database"
    )]
    OverBudget {
        /// The id.
        call_id: String,
        /// The bytes it counts (payload and ids).
        bytes: u64,
        /// The store's budget.
        budget: u64,
    },
}
