//! A hermetic environment for the processes the tests start.

use std::ffi::OsString;
use std::process::Command;

/// The prefixes of the variables that configure core-agent (`CORE_AGENT_`),
/// Google's Application Default Credentials (`GOOGLE_`, and gcloud's
/// `CLOUDSDK_` and `GCE_METADATA_`, which ADC reads too) and OpenTelemetry
/// (`OTEL_`): the developer's or CI's own never reach a process under test.
pub const HOST_VARIABLES: &[&str] = &[
    "CORE_AGENT_",
    "GOOGLE_",
    "OTEL_",
    "CLOUDSDK_",
    "GCE_METADATA_",
];

/// Removes from `cmd`'s environment every variable of this process whose
/// name starts with one of [`HOST_VARIABLES`], but those `cmd` sets itself:
/// a variable set on `cmd` before this call is kept, and one set after it
/// is passed as usual.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    clear_inherited(cmd, std::env::vars_os().map(|(key, _)| key))
}

/// [`hermetic`] with the names of the inherited variables given.
fn clear_inherited(
    cmd: &mut Command,
    inherited: impl IntoIterator<Item = OsString>,
) -> &mut Command {
    let set: Vec<OsString> = cmd
        .get_envs()
        .filter(|(_, value)| value.is_some())
        .map(|(key, _)| key.to_owned())
        .collect();
    for key in inherited {
        let name = key.to_string_lossy();
        if HOST_VARIABLES.iter().any(|p| name.starts_with(p)) && !set.contains(&key) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermetic_clears_inherited_host_variables_but_keeps_those_set() {
        let inherited = [
            "CORE_AGENT_LOG",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "CLOUDSDK_CONFIG",
            "GCE_METADATA_HOST",
            "CORE_AGENT_RESTART_DELAY_MS",
            "PATH",
            "GOOGLEBOT",
        ];
        let mut cmd = Command::new("true");
        cmd.env("CORE_AGENT_RESTART_DELAY_MS", "500");
        clear_inherited(&mut cmd, inherited.map(OsString::from));
        cmd.env("GCE_METADATA_HOST", "127.0.0.1:9");
        let mut envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                let text = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
                (text(k), v.map(text))
            })
            .collect();
        envs.sort();
        let some = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        let removed = |k: &str| (k.to_owned(), None);
        assert_eq!(
            envs,
            [
                removed("CLOUDSDK_CONFIG"),
                removed("CORE_AGENT_LOG"),
                some("CORE_AGENT_RESTART_DELAY_MS", "500"),
                some("GCE_METADATA_HOST", "127.0.0.1:9"),
                removed("GOOGLE_APPLICATION_CREDENTIALS"),
                removed("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ]
        );
    }
}
