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
pub use doctor::{
    DoctorOptions, DoctorReport, FindingReport, Remedy, ServerCheck, doctor, on_path,
};
pub(crate) use server::restricted_tools;
pub use server::{AuthStatus, RestrictedTool, ServerReport, ServerStatus, TransportKind};
pub use tool::ToolReport;
pub use wire::{BatchLine, OutcomeLine, UsageReport};

/// A config value that serializes as the word the config files use.
pub(crate) trait Word {
    /// The word (`project`, `core`, `creator`, `cloud-run`, …).
    fn word(&self) -> &'static str;
}

macro_rules! words {
    ($($ty:ty),*) => {$(
        impl Word for $ty {
            fn word(&self) -> &'static str {
                self.as_str()
            }
        }
    )*};
}
words!(
    core_agent_mcp_config::Scope,
    core_agent_mcp_config::Dialect,
    core_agent_mcp_config::TrustLevel,
    core_agent_mcp_config::Cloud
);

/// Serializes a config value as its word.
pub(crate) fn word<S: serde::Serializer, T: Word>(
    value: &T,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(value.word())
}

/// Serializes an optional config value as its word, or `null`.
pub(crate) fn word_opt<S: serde::Serializer, T: Word>(
    value: &Option<T>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_str(value.word()),
        None => serializer.serialize_none(),
    }
}

/// Serializes a list of config values as their words.
pub(crate) fn words<S: serde::Serializer, T: Word>(
    values: &[T],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.collect_seq(values.iter().map(Word::word))
}

/// Serializes an optional list of config values as their words, or `null`.
pub(crate) fn words_opt<S: serde::Serializer, T: Word>(
    values: &Option<Vec<T>>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::Serialize;
    values
        .as_ref()
        .map(|v| v.iter().map(Word::word).collect::<Vec<_>>())
        .serialize(serializer)
}

/// Serializes a map of lists of config values as the words.
pub(crate) fn words_by_key<S: serde::Serializer, T: Word>(
    values: &std::collections::BTreeMap<String, Vec<T>>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::Serialize;
    values
        .iter()
        .map(|(k, v)| (k, v.iter().map(Word::word).collect::<Vec<_>>()))
        .collect::<std::collections::BTreeMap<_, _>>()
        .serialize(serializer)
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_config::TrustLevel;

    use super::RestrictedTool;

    /// Typed levels serialize as the words the JSON always had.
    #[test]
    fn trust_levels_serialize_as_their_words() {
        let tool = RestrictedTool {
            name: "git_commit".to_owned(),
            tool: "commit".to_owned(),
            trust_levels: vec![TrustLevel::Creator, TrustLevel::Agent],
            why: "mutating".to_owned(),
        };
        assert_eq!(
            serde_json::to_string(&tool).ok().as_deref(),
            Some(
                r#"{"name":"git_commit","tool":"commit","trust_levels":["creator","agent"],"why":"mutating"}"#
            )
        );
    }
}
