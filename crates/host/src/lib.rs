#![doc = include_str!("../README.md")]

pub mod builtin;
mod cap;
mod config_view;
#[cfg(feature = "demo")]
pub mod demo;
mod doctor;
mod error;
mod host;
mod llm;
mod pin;
mod setup;
mod text;
mod wire;
mod wrap;

pub use cap::cap_result;
pub use config_view::{
    AuthReport, ConfigReport, ConnectionReport, FileReport, GoogleOAuthReport, LeftOutReport,
    LimitsReport, OAuthReport, ServerConfigReport, SettingReport, config_report,
};
pub use doctor::{DoctorOptions, DoctorReport, FindingReport, ServerCheck, doctor, on_path};
pub use error::{Error, Result};
pub use host::{
    AuthStatus, CallOutcome, CallRequest, DigestOptions, Host, HostOptions, RestrictedTool,
    ServerReady, ServerReport, Session, SessionOptions, SurveyOptions, ToolReport,
};
pub use llm::OpenAiSummarizer;
pub use pin::Trusted;
pub use setup::{HostConfig, Overrides, load_permissions, permission_files, project_root};
pub use text::terminal_safe;
pub use wire::{BatchLine, OutcomeLine, UsageReport};
pub use wrap::{DigestWrap, LlmPath, payload_of};
