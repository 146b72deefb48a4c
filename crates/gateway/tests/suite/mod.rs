//! The gateway driven from outside: over an in-memory pipe with an rmcp
//! client, and over streamable HTTP on a loopback port with raw requests,
//! with the demo server (a real stdio child) behind the host.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;
mod http;
mod pipe;
