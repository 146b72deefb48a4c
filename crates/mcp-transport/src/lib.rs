#![doc = include_str!("../README.md")]

mod auth;
mod behalf;
mod call;
mod child;
mod connect;
mod elicit;
mod environ;
mod error;
mod features;
#[cfg(feature = "google")]
mod google;
mod handler;
mod listen;
mod live;
mod meta;
#[cfg(feature = "oauth")]
pub mod oauth;
mod options;
mod relay;
mod restart;
mod sampling;
mod server;
mod servers;
mod start;
pub mod supervise;
mod tools;

pub use auth::{Auth, AuthError, StaticToken, Token, TokenSource};
pub use behalf::{CallerTokens, TokenExchange, with_caller_tokens};
pub use elicit::{AcceptDefaults, BoxFuture, Decline, Elicitor};
pub use error::{Error, Result, StartError};
pub use features::{Listing, Notice, NoticeSink};
pub use handler::{Progress, ProgressSink};
pub use meta::{RequestMeta, with_request_meta};
pub use options::StartOptions;
pub use relay::{Resume, relaying};
pub use restart::RestartPolicy;
pub use sampling::{FixedRoots, Roots, Sampler};
pub use server::{OnReady, Server, Status};
pub use servers::Servers;
pub use supervise::Supervisor;

/// The rmcp model types this crate's API uses (`CallToolResult`, `Tool`,
/// `ElicitRequestParams`, …).
pub use rmcp::model;
