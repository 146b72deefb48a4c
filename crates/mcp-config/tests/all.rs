//! Integration tests of config loading (one binary; the topics are in
//! `suite/`).

mod suite;
