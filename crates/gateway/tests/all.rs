//! Integration tests of the gateway (one binary; the topics are in `suite/`).

mod suite;
