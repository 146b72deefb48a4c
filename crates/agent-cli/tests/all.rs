//! Integration tests of the `core-agent` binary (one binary; the topics are in
//! `suite/`).

mod suite;
