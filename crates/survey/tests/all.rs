//! Integration tests of the survey tools (one binary; the topics are in
//! `suite/`).

mod suite;
