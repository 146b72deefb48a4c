//! Integration tests of `PermissionsConfig` loading (one binary; the topics
//! are in `suite/`).

mod suite;
