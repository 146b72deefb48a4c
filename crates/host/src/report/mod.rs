//! What the host reports: the config view, doctor, the wire shapes of a
//! batch, and the server and tool reports.

mod config;
mod doctor;
mod server;
mod tool;
mod wire;

pub use config::{
    AuthReport, ConfigReport, ConnectionReport, FileReport, GoogleOAuthReport, LeftOutReport,
    LimitsReport, OAuthReport, ServerConfigReport, SettingReport, config_report,
};
pub use doctor::{DoctorOptions, DoctorReport, FindingReport, ServerCheck, doctor, on_path};
pub use server::{AuthStatus, RestrictedTool, ServerReport};
pub(crate) use server::{left_out_status, restricted_tools};
pub use tool::ToolReport;
pub use wire::{BatchLine, OutcomeLine, UsageReport};
