#![doc = include_str!("../README.md")]

mod auth;
mod child;
mod elicit;
mod error;
#[cfg(feature = "google")]
mod google;
mod handler;
#[cfg(feature = "oauth")]
pub mod oauth;
mod restart;
mod server;
pub mod supervise;

pub use auth::{Auth, AuthError, StaticToken, Token, TokenSource};
pub use elicit::{AcceptDefaults, BoxFuture, Decline, Elicitor};
pub use error::{Error, Result, StartError};
pub use handler::{Progress, ProgressSink};
pub use restart::RestartPolicy;
pub use server::{OnReady, Server, Servers, StartOptions, Status};
pub use supervise::Supervisor;

/// The rmcp model types this crate's API uses (`CallToolResult`, `Tool`,
/// `ElicitRequestParams`, …).
pub use rmcp::model;
