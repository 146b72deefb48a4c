//! Connecting to a server: spawning a stdio server or reaching an HTTP one,
//! the MCP handshake, and its failures in words a person can act on.

mod handshake;
mod http;
mod probe;
mod stdio;
mod words;

pub(crate) use handshake::Started;
pub(crate) use http::start_http;
pub(crate) use stdio::start_stdio;
pub(crate) use words::transport_words;
