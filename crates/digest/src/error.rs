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
}
