//! Integration tests of the `Host` library API (one binary; the topics are
//! in `suite/`).

mod suite;
