#![doc = include_str!("../README.md")]

mod cap;
mod commands;
mod context;
#[cfg(feature = "demo")]
pub mod demo;
mod error;
mod host;
#[cfg(feature = "llm")]
mod llm;
mod memory;
mod observe;
mod owners;
mod pin;
mod pipeline;
mod report;
mod session;
mod setup;
mod text;
mod tools;
mod wrap;

pub use cap::cap_result;
pub use commands::Commands;
pub use context::{Offered, Offers, SAMPLING, URI_PREFIX, origin_of, public_uri};
pub use error::{Error, Result};
pub use host::{DigestOptions, Host, HostOptions, ServerReady, SurveyOptions};
#[cfg(feature = "llm")]
pub use llm::OpenAiSummarizer;
pub use memory::{Fact, InMemory, MemoryError, Recalled, SessionMemory};
pub use observe::{CallRecord, DigestedResult, Kind, Observer, Outcome, Verdict};
pub use owners::Owners;
pub use pin::{PinStore, PinStoreError, Trusted};
pub use report::{
    AuthReport, AuthStatus, BatchLine, ConfigReport, ConnectionReport, DoctorOptions, DoctorReport,
    FileReport, FindingReport, GoogleOAuthReport, LeftOutReport, LimitsReport, OAuthReport,
    OutcomeLine, Remedy, RestrictedTool, ServerCheck, ServerConfigReport, ServerReport,
    ServerStatus, SettingReport, ToolReport, TransportKind, UsageReport, config_report, doctor,
    on_path,
};
pub use session::{CallOutcome, CallRequest, Session, SessionOptions};
pub use setup::{HostConfig, Overrides, load_permissions, permission_files, project_root};
pub use text::terminal_safe;
pub use wrap::{DigestWrap, LlmPath, payload_of};
