//! The environment a stdio server starts with: what `env_inherit` lets
//! through of this process's variables, less what is withheld, under the
//! entry's own `env`.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use core_agent_mcp_config::{EnvInherit, ServerEntry};

/// The whole environment of `entry`'s process, from `parent` (this
/// process's variables), `own` (its `env`, expanded), the default
/// `inherit` and the names that pass only when the entry names them
/// (`withheld`).
pub(crate) fn environment(
    entry: &ServerEntry,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    own: &BTreeMap<String, String>,
    inherit: &EnvInherit,
    withheld: &BTreeSet<String>,
) -> BTreeMap<OsString, OsString> {
    let inherit = entry.spec.env_inherit.as_ref().unwrap_or(inherit);
    let named = entry.named_variables();
    let mut out: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(name, _)| {
            // A name that is not UTF-8 is no credential of ours and no
            // placeholder's; it passes only "all".
            match name.to_str() {
                Some(name) => {
                    inherit.admits(name) && (!withheld.contains(name) || named.contains(name))
                }
                None => *inherit == EnvInherit::All,
            }
        })
        .collect();
    out.extend(
        own.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    out
}

/// `command` as the child is to run it: a bare name is looked up on this
/// process's `PATH` when the child's environment has no `PATH` of its own
/// (else the child, or its supervisor, would search none); unchanged when
/// it has one, has a `/`, or is not found (the start then says so).
pub(crate) fn program(
    command: &str,
    env: &BTreeMap<OsString, OsString>,
    parent_path: Option<&OsStr>,
) -> String {
    if command.contains('/') || env.contains_key(OsStr::new("PATH")) {
        return command.to_owned();
    }
    let Some(path) = parent_path else {
        return command.to_owned();
    };
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
        .and_then(|found: PathBuf| found.to_str().map(str::to_owned))
        .unwrap_or_else(|| command.to_owned())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_config::{Dialect, Scope, ServerSpec, StdioSpec, Template, Transport};

    use super::*;

    fn entry(env: &[(&str, &str)], inherit: Option<EnvInherit>) -> ServerEntry {
        let mut spec = ServerSpec::new(Transport::Stdio(StdioSpec {
            command: "srv".into(),
            args: vec![],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), Template::parse(v).unwrap()))
                .collect(),
        }));
        spec.env_inherit = inherit;
        ServerEntry {
            name: "s".into(),
            scope: Scope::Project,
            source: "mcp.json".into(),
            dialect: Dialect::Core,
            spec,
        }
    }

    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/home/me"),
            ("LC_ALL", "C"),
            ("EDITOR", "vi"),
            ("CORE_AGENT_GATEWAY_TOKEN", "gw-secret"),
            ("OTHER_TOKEN", "other-secret"),
            ("MINE", "mine"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn names(env: &BTreeMap<OsString, OsString>) -> Vec<&str> {
        env.keys().map(|k| k.to_str().unwrap()).collect()
    }

    fn withheld() -> BTreeSet<String> {
        ["CORE_AGENT_GATEWAY_TOKEN", "OTHER_TOKEN", "MINE"]
            .map(String::from)
            .into()
    }

    #[test]
    fn all_minimal_and_a_list_let_through_what_they_say_less_the_withheld() {
        let own = BTreeMap::from([("X".to_owned(), "x".to_owned())]);
        let all = environment(
            &entry(&[], None),
            parent(),
            &own,
            &EnvInherit::All,
            &withheld(),
        );
        assert_eq!(names(&all), ["EDITOR", "HOME", "LC_ALL", "PATH", "X"]);
        let minimal = environment(
            &entry(&[], None),
            parent(),
            &own,
            &EnvInherit::Minimal,
            &withheld(),
        );
        assert_eq!(names(&minimal), ["HOME", "LC_ALL", "PATH", "X"]);
        // The entry's own setting wins over the default.
        let list = Some(EnvInherit::Names(vec!["EDITOR".into(), "MINE".into()]));
        let listed = environment(
            &entry(&[], list),
            parent(),
            &own,
            &EnvInherit::All,
            &withheld(),
        );
        assert_eq!(names(&listed), ["EDITOR", "MINE", "X"]);
    }

    #[test]
    fn a_withheld_variable_passes_when_the_entry_names_it() {
        let e = entry(&[("TOKEN", "${OTHER_TOKEN}")], None);
        let own = BTreeMap::from([("TOKEN".to_owned(), "other-secret".to_owned())]);
        let env = environment(&e, parent(), &own, &EnvInherit::All, &withheld());
        assert_eq!(
            names(&env),
            ["EDITOR", "HOME", "LC_ALL", "OTHER_TOKEN", "PATH", "TOKEN"]
        );
    }

    #[test]
    fn a_bare_command_is_found_on_the_parents_path_when_the_child_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("srv");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().as_os_str();
        let none = BTreeMap::new();
        assert_eq!(program("srv", &none, Some(path)), exe.to_str().unwrap());
        assert_eq!(program("nope", &none, Some(path)), "nope");
        let with_path = BTreeMap::from([("PATH".into(), "/bin".into())]);
        assert_eq!(program("srv", &with_path, Some(path)), "srv");
        assert_eq!(program("./srv", &none, Some(path)), "./srv");
    }
}
