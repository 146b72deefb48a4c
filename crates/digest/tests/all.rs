//! Integration tests of the digest (one binary; the topics are in `suite/`).

mod suite;
