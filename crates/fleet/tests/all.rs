//! Integration tests of the fleet's state on PostgreSQL (one binary; the topics
//! are in `suite/`).

mod suite;
