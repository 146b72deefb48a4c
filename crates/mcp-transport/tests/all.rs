//! Integration tests of `core-agent-mcp-transport` (one binary; the topics are
//! in `suite/`).

mod suite;
