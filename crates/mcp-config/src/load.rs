use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::check::{FileProblems, parse_json, read_optional};
use crate::convert::{Cx, FileConfig, convert};
use crate::schema;
use crate::spec::Transport;
use crate::{
    Config, ConfigFile, ConfigWarning, ConfigWarningKind, Dialect, DotEnv, Error, Problem, Result,
    Scope,
};

/// Which files to read: [`ConfigPaths::new`] for the standard ones,
/// [`ConfigPaths::only`] for one, and the `with_*` methods to change either.
///
/// ```
/// use core_agent_mcp_config::ConfigPaths;
///
/// let paths = ConfigPaths::only("project/.agents/mcp.json").with_dotenv(Some("project/.env".into()));
/// assert_eq!(paths.files().len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigPaths {
    /// `<agentsDir>/mcp.json`, highest precedence.
    pub project: PathBuf,
    /// `<project root>/.mcp.json`, next; `None` reads none.
    pub dot_mcp: Option<PathBuf>,
    /// `~/.agents/mcp.json`, or the file given instead; `None` reads no user file.
    pub user: Option<PathBuf>,
    /// `<project root>/.env`; `None` reads none.
    pub dotenv: Option<PathBuf>,
}

/// The agents directory of the project that `start` is in, found the way
/// git finds a repository: `start`, then each parent, is a project when it
/// holds `<agents_dir_name>/mcp.json` or `.mcp.json`. The walk stops at the
/// first directory that holds `.git` (a repository's root) and below `home`
/// (whose `.agents` is the user's own file, not a project). The path
/// returned is relative to `start` (`.agents`, `../../.agents`), so what is
/// printed stays short; `None` when no project is found.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join(".mcp.json"), "{}").unwrap();
/// let sub = dir.path().join("src/deep");
/// std::fs::create_dir_all(&sub).unwrap();
/// let found = core_agent_mcp_config::find_agents_dir(&sub, ".agents", None);
/// assert_eq!(found.as_deref(), Some(std::path::Path::new("../../.agents")));
/// ```
pub fn find_agents_dir(
    start: &Path,
    agents_dir_name: &str,
    home: Option<&Path>,
) -> Option<PathBuf> {
    let mut relative = PathBuf::new();
    for dir in start.ancestors() {
        if home.is_some_and(|h| h == dir) {
            return None;
        }
        if dir.join(agents_dir_name).join("mcp.json").is_file() || dir.join(".mcp.json").is_file() {
            return Some(relative.join(agents_dir_name));
        }
        if dir.join(".git").exists() {
            return None;
        }
        relative.push("..");
    }
    None
}

impl ConfigPaths {
    /// The standard paths. The project root is the directory that holds the
    /// agents directory (`.agents` → `.`): `<root>/.mcp.json` and `<root>/.env`
    /// are read from there. The user file is `$HOME/.agents/mcp.json` unless
    /// `user_config` replaces it (none when `HOME` is unset).
    pub fn new(agents_dir: impl AsRef<Path>, user_config: Option<PathBuf>) -> ConfigPaths {
        let agents_dir = agents_dir.as_ref();
        let root = match agents_dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let user = user_config.or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|home| Path::new(&home).join(".agents").join("mcp.json"))
        });
        ConfigPaths {
            project: agents_dir.join("mcp.json"),
            dot_mcp: Some(root.join(".mcp.json")),
            user,
            dotenv: Some(root.join(".env")),
        }
    }

    /// Only `project`, nothing else: handy in tests and embedding hosts.
    pub fn only(project: impl Into<PathBuf>) -> ConfigPaths {
        ConfigPaths {
            project: project.into(),
            dot_mcp: None,
            user: None,
            dotenv: None,
        }
    }

    /// `<project root>/.mcp.json`, or another file of that dialect (`None`
    /// reads none).
    #[must_use]
    pub fn with_dot_mcp(mut self, dot_mcp: Option<PathBuf>) -> ConfigPaths {
        self.dot_mcp = dot_mcp;
        self
    }

    /// The user's file (`None` reads none).
    #[must_use]
    pub fn with_user(mut self, user: Option<PathBuf>) -> ConfigPaths {
        self.user = user;
        self
    }

    /// The `.env` file (`None` reads none).
    #[must_use]
    pub fn with_dotenv(mut self, dotenv: Option<PathBuf>) -> ConfigPaths {
        self.dotenv = dotenv;
        self
    }

    /// `<agentsDir>/mcp.lock`: the tool definitions pinned per server, next
    /// to the project's `mcp.json`.
    pub fn lock(&self) -> PathBuf {
        self.project.with_file_name("mcp.lock")
    }

    /// The file a server of `scope` is written to: the project's `mcp.json`,
    /// or the user's file (`None` when there is none: `HOME` unset and no
    /// file given instead).
    pub fn file(&self, scope: Scope) -> Option<&Path> {
        match scope {
            Scope::Project => Some(&self.project),
            Scope::User => self.user.as_deref(),
        }
    }

    /// The config files, highest precedence first, with their scopes.
    pub fn files(&self) -> Vec<(PathBuf, Scope)> {
        let mut files = vec![(self.project.clone(), Scope::Project)];
        if let Some(p) = &self.dot_mcp {
            files.push((p.clone(), Scope::Project));
        }
        if let Some(p) = &self.user {
            files.push((p.clone(), Scope::User));
        }
        let mut seen: Vec<PathBuf> = Vec::new();
        files.retain(|(p, _)| {
            let key = p.canonicalize().unwrap_or_else(|_| p.clone());
            if seen.contains(&key) {
                false
            } else {
                seen.push(key);
                true
            }
        });
        files
    }
}

/// Reads, validates and merges the files named by `paths`, and reads `.env`.
///
/// A missing file means "no servers here". Every problem of every file is
/// reported at once. Placeholders are checked here and expanded when each
/// server starts ([`Template::expand`](crate::Template::expand)).
pub fn load(paths: &ConfigPaths) -> Result<Config> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    let mut config = Config::default();
    for (path, scope) in paths.files() {
        let Some(text) = read_optional(&path)? else {
            config.files.push(ConfigFile {
                path,
                scope,
                found: false,
                dialect: None,
            });
            continue;
        };
        let file = parse_file(&text, &path, scope, &mut problems)?;
        config.files.push(ConfigFile {
            path: path.clone(),
            scope,
            found: true,
            dialect: Some(file.dialect),
        });
        parsed.push(file);
    }
    if let Some(dotenv) = &paths.dotenv {
        config.dotenv = DotEnv::load(dotenv)?;
    }
    config.lock = Some(paths.lock());
    if !problems.is_empty() {
        return Err(Error::Invalid { problems });
    }
    merge(&mut config, parsed);
    Ok(config)
}

/// Parses and validates one file's text, in whichever dialect it is written.
///
/// Problems go to `problems`; a JSON syntax error is returned at once.
pub fn parse_file(
    text: &str,
    path: &Path,
    scope: Scope,
    problems: &mut Vec<Problem>,
) -> Result<FileConfig> {
    let root = parse_json(path, text)?;
    let dialect = Dialect::detect(&root);
    let mut cx = Cx {
        path,
        problems: FileProblems::new(path, text),
    };
    if let Some(obj) = root.as_object()
        && obj.contains_key("servers")
        && obj.contains_key("mcpServers")
    {
        cx.push(
            None,
            "/mcpServers",
            "the file has both `servers` (core-agent) and `mcpServers` (.mcp.json): a file uses one dialect",
            "move every server under one of the two keys",
        );
    }
    for v in schema::validate(dialect, &root) {
        let server = server_of(dialect, &v.pointer);
        cx.push(server, &v.pointer, &v.message, &v.fix);
    }
    let mut file = FileConfig {
        dialect,
        ..FileConfig::default()
    };
    if cx.problems.is_empty() {
        convert(&mut cx, &root, dialect, scope, &mut file);
    }
    let mut found = cx.problems.into_problems();
    found.sort_by_key(|p| (p.line, p.column));
    problems.extend(found);
    Ok(file)
}

/// The server a pointer belongs to.
fn server_of(dialect: Dialect, pointer: &str) -> Option<String> {
    let segs: Vec<&str> = pointer.split('/').skip(1).collect();
    let name = match (dialect, segs.as_slice()) {
        (Dialect::Core, ["servers", name, ..])
        | (Dialect::McpServers, ["mcpServers", name, ..]) => name,
        (Dialect::McpServers, ["auggy", "servers", name, ..]) => name,
        _ => return None,
    };
    Some(name.replace("~1", "/").replace("~0", "~"))
}

/// Merges files given highest precedence first: servers by name (the first
/// file that has a name wins, whether it starts the server or leaves it out),
/// settings by first value set. A warning about a server is kept only when
/// that server's winning entry comes from the warning's file.
///
/// A server a project file defines that a higher project file also defines
/// (`.mcp.json` under `.agents/mcp.json`) gets a warning naming both files
/// and what was dropped; a user-scope server the project redefines does not
/// (that is what the project file is for).
fn merge(config: &mut Config, files: Vec<FileConfig>) {
    // Each name, with the file and scope of the entry that won it.
    let mut named: BTreeMap<String, (PathBuf, Scope)> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut shadowed = Vec::new();
    for file in files {
        let mut entries: Vec<(String, Scope, PathBuf, String)> = Vec::new();
        for server in file.servers {
            if named.contains_key(&server.name) {
                entries.push((
                    server.name.clone(),
                    server.scope,
                    server.source.clone(),
                    describe_entry(&server.spec.transport),
                ));
            } else {
                named.insert(server.name.clone(), (server.source.clone(), server.scope));
                config.servers.push(server);
            }
        }
        for left in file.left_out {
            if named.contains_key(&left.name) {
                entries.push((
                    left.name.clone(),
                    left.scope,
                    left.source.clone(),
                    format!("its entry (left out there: {})", left.reason.kind()),
                ));
            } else {
                named.insert(left.name.clone(), (left.source.clone(), left.scope));
                config.left_out.push(left);
            }
        }
        for (name, scope, source, what) in entries {
            let Some((winner, winner_scope)) = named.get(&name) else {
                continue;
            };
            if scope != Scope::Project || *winner_scope != Scope::Project {
                continue;
            }
            let (dropped, verb) = match file.policies.get(&name) {
                Some(keys) if !keys.is_empty() => (
                    format!("{what} and its auggy policy ({})", keys.join(", ")),
                    "are",
                ),
                _ => (what, "is"),
            };
            shadowed.push(ConfigWarning {
                file: winner.clone(),
                server: Some(name.clone()),
                kind: ConfigWarningKind::Shadowed,
                message: format!(
                    "also defined in {}, whose entry is dropped: {dropped} {verb} not used, \
                     because {} comes first; define `{name}` in one file only",
                    source.display(),
                    winner.display()
                ),
            });
        }
        warnings.extend(file.warnings);
        config.wrap = std::mem::take(&mut config.wrap).or(file.wrap);
        config.survey = config.survey.take().or(file.survey);
        config.builtin = config.builtin.take().or(file.builtin);
    }
    config.servers.sort_by(|a, b| a.name.cmp(&b.name));
    config.left_out.sort_by(|a, b| a.name.cmp(&b.name));
    warnings.retain(|w| match &w.server {
        None => true,
        Some(name) => config.server(name).is_some_and(|s| s.source == w.file),
    });
    warnings.extend(shadowed);
    config.warnings = warnings;
}

/// What a dropped server entry was: `its stdio command `npx``, `its http url `…``.
fn describe_entry(transport: &Transport) -> String {
    match transport {
        Transport::Stdio(s) => format!("its stdio command `{}`", s.command),
        Transport::Http(h) => format!("its http url `{}`", h.url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuthSpec, Cloud, LeftOut, LeftOutReason, PinMode, TrustLevel};

    fn parse(text: &str) -> std::result::Result<FileConfig, String> {
        let mut problems = Vec::new();
        let file = parse_file(text, Path::new("mcp.json"), Scope::Project, &mut problems)
            .map_err(|e| e.to_string())?;
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(Error::Invalid { problems }.to_string())
        }
    }

    fn parse_at(path: &str, scope: Scope, text: &str) -> FileConfig {
        let mut problems = Vec::new();
        let file = parse_file(text, Path::new(path), scope, &mut problems).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        file
    }

    fn merged(files: Vec<FileConfig>) -> Config {
        let mut config = Config::default();
        merge(&mut config, files);
        config
    }

    #[test]
    fn each_scope_writes_to_its_file() {
        let paths = ConfigPaths::only("p/.agents/mcp.json");
        assert_eq!(
            (paths.file(Scope::Project), paths.file(Scope::User)),
            (Some(Path::new("p/.agents/mcp.json")), None)
        );
        let paths = paths.with_user(Some("home/mcp.json".into()));
        assert_eq!(paths.file(Scope::User), Some(Path::new("home/mcp.json")));
    }

    #[test]
    fn a_tool_policy_without_trust_levels_overrides_nothing() {
        let file = parse(
            r#"{"mcpServers":{"s":{"command":"srv"}},
                "auggy":{"servers":{"s":{"toolPolicies":{
                    "t":{},"u":{"allowedTrustLevels":[]},"v":{"allowedTrustLevels":["user"]}}}}}}"#,
        )
        .unwrap();
        let policies = &file.servers[0].spec.tool_policies;
        assert!(!policies.contains_key("t"), "{policies:?}");
        // An explicit empty list is the operator's word: nobody sees `u`.
        assert_eq!(policies["u"], []);
        assert_eq!(policies["v"], [TrustLevel::User]);
    }

    #[test]
    fn timeout_sits_between_the_file_limits_and_the_servers_own() {
        let file = parse(
            r#"{"limits":{"call_timeout_ms":10000},
                "mcpServers":{
                  "none":{"command":"srv"},
                  "secs":{"command":"srv","timeout":60},
                  "ms":{"command":"srv","timeout":45000},
                  "pinned":{"command":"srv","timeout":60},
                  "other-limit":{"command":"srv","timeout":60},
                  "doubt":{"command":"srv","timeout":2000}},
                "auggy":{"servers":{
                  "pinned":{"limits":{"call_timeout_ms":5000}},
                  "other-limit":{"limits":{"max_tools":3}}}}}"#,
        )
        .unwrap();
        let timeout = |name: &str| {
            let server = file.servers.iter().find(|s| s.name == name).unwrap();
            server.spec.limits.call_timeout_ms
        };
        assert_eq!(timeout("none"), 10_000);
        assert_eq!(timeout("secs"), 60_000);
        assert_eq!(timeout("ms"), 45_000);
        assert_eq!(timeout("pinned"), 5_000);
        assert_eq!(timeout("other-limit"), 60_000);
        assert_eq!(timeout("doubt"), 2_000_000);
        let kinds: Vec<(Option<&str>, ConfigWarningKind)> = file
            .warnings()
            .iter()
            .map(|w| (w.server.as_deref(), w.kind))
            .collect();
        assert_eq!(kinds, [(Some("doubt"), ConfigWarningKind::TimeoutUnits)]);
    }

    #[test]
    fn peer_keys_leave_servers_out_or_warn_once_per_server() {
        let file = parse(
            r#"{"mcpServers":{
                "off":{"type":"sse","url":"https://x/sse","disabled":true},
                "on":{"command":"srv","disabled":false,"autoApprove":[],"alwaysAllow":["a"],"trust":true,"description":""},
                "sse":{"type":"sse","url":"https://x/sse"},
                "cline-sse":{"url":"https://x/sse","transportType":"sse"},
                "cline-http":{"url":"https://x/mcp","transportType":"http"},
                "streamable":{"type":"streamableHttp","url":"https://x/mcp"},
                "dir":{"command":"node","args":["index.js"],"cwd":"tools"},
                "url-dir":{"url":"https://x/mcp","cwd":"tools"}}}"#,
        )
        .unwrap();
        let left: Vec<(&str, &str)> = file
            .left_out()
            .iter()
            .map(|l| (l.name.as_str(), l.reason.kind()))
            .collect();
        assert_eq!(
            left,
            [
                ("off", "disabled"),
                ("sse", "unsupported-transport"),
                ("cline-sse", "unsupported-transport"),
                ("dir", "working-directory"),
            ]
        );
        let started: Vec<(&str, &str)> = file
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.spec.transport.kind()))
            .collect();
        assert_eq!(
            started,
            [
                ("on", "stdio"),
                ("cline-http", "http"),
                ("streamable", "http"),
                ("url-dir", "http"),
            ]
        );
        let warnings: Vec<String> = file.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "mcp.json: server `on`: ignored keys other tools use: alwaysAllow, trust",
                "mcp.json: server `url-dir`: ignored key other tools use: cwd",
            ]
        );
    }

    #[test]
    fn peer_keys_map_onto_tool_lists() {
        let file = parse(
            r#"{"mcpServers":{"s":{"command":"srv","includeTools":["a","b"],
                  "excludeTools":["c"],"disabledTools":["d"]}},
                "auggy":{"servers":{"s":{"allowedTools":["e"],"blockedTools":["f"]}}}}"#,
        )
        .unwrap();
        let spec = &file.servers[0].spec;
        assert_eq!(spec.tools, ["a", "b", "e"]);
        assert_eq!(spec.blocked_tools, ["c", "d", "f"]);
    }

    #[test]
    fn the_core_dialect_stays_strict() {
        let err = parse(r#"{"version":1,"servers":{"s":{"transport":"stdio","command":"srv","disabled":true}}}"#)
            .unwrap_err();
        assert!(err.contains("unknown field `disabled`"), "{err}");
    }

    #[test]
    fn a_left_out_server_shadows_a_lower_server_of_the_same_name() {
        let config = merged(vec![
            parse_at(
                ".mcp.json",
                Scope::Project,
                r#"{"mcpServers":{"x":{"command":"a","disabled":true}}}"#,
            ),
            parse_at(
                "home/mcp.json",
                Scope::User,
                r#"{"mcpServers":{"x":{"command":"b","autoApprove":["t"]},"y":{"command":"c"}}}"#,
            ),
        ]);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["y"]);
        let x = config.left_out_entry("x").unwrap();
        assert_eq!(
            (x.scope, x.source.as_path(), &x.reason),
            (
                Scope::Project,
                Path::new(".mcp.json"),
                &LeftOutReason::Disabled
            )
        );
        assert!(config.server("x").is_none());
        // The shadowed definition's warning would be about a server that
        // does not run.
        assert_eq!(config.warnings, []);
    }

    #[test]
    fn a_server_shadows_a_lower_left_out_entry_of_the_same_name() {
        let config = merged(vec![
            parse_at(
                ".agents/mcp.json",
                Scope::Project,
                r#"{"version":1,"servers":{"x":{"transport":"stdio","command":"a"}}}"#,
            ),
            parse_at(
                ".mcp.json",
                Scope::Project,
                r#"{"mcpServers":{"x":{"type":"sse","url":"https://x/sse"},"z":{"command":"z","disabled":true}}}"#,
            ),
        ]);
        let x = config.server("x").unwrap();
        assert_eq!(x.source, Path::new(".agents/mcp.json"));
        let left: Vec<&str> = config.left_out.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(left, ["z"]);
        // Not silently: the dropped entry is named, with its file.
        let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                ".agents/mcp.json: server `x`: also defined in .mcp.json, whose entry is dropped: its entry (left out there: unsupported-transport) is not used, because .agents/mcp.json comes first; define `x` in one file only"
            ]
        );
    }

    #[test]
    fn a_server_in_both_project_files_warns_naming_both_and_the_dropped_policy() {
        let config = merged(vec![
            parse_at(
                ".agents/mcp.json",
                Scope::Project,
                r#"{"version":1,"servers":{"x":{"transport":"stdio","command":"a"}}}"#,
            ),
            parse_at(
                ".mcp.json",
                Scope::Project,
                r#"{"mcpServers":{"x":{"command":"npx","args":["x-mcp"]},"y":{"command":"y"}},
                    "auggy":{"servers":{"x":{"allowedTools":["read"],"pin":"strict"}}}}"#,
            ),
            // A user server the project redefines is the layering working.
            parse_at(
                "home/mcp.json",
                Scope::User,
                r#"{"version":1,"servers":{"y":{"transport":"stdio","command":"user-y"}}}"#,
            ),
        ]);
        let x = config.server("x").unwrap();
        assert_eq!(x.source, Path::new(".agents/mcp.json"));
        assert_eq!(
            x.spec.pin,
            PinMode::Warn,
            "the dropped policy is not applied"
        );
        assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
        let w = &config.warnings[0];
        assert_eq!(
            (
                w.kind,
                w.kind.as_str(),
                w.server.as_deref(),
                w.file.as_path()
            ),
            (
                ConfigWarningKind::Shadowed,
                "shadowed",
                Some("x"),
                Path::new(".agents/mcp.json")
            )
        );
        assert_eq!(
            w.to_string(),
            ".agents/mcp.json: server `x`: also defined in .mcp.json, whose entry is dropped: its stdio command `npx` and its auggy policy (allowedTools, pin) are not used, because .agents/mcp.json comes first; define `x` in one file only"
        );
    }

    #[test]
    fn resources_and_prompts_can_be_switched_off_in_either_dialect() {
        let file = parse(
            r#"{"mcpServers":{"s":{"command":"srv","resources":false},"t":{"command":"srv"}},
                "auggy":{"servers":{"t":{"prompts":false}}}}"#,
        )
        .unwrap();
        let (s, t) = (&file.servers[0].spec, &file.servers[1].spec);
        assert!(!s.resources && s.prompts, "{s:?}");
        assert!(t.resources && !t.prompts, "{t:?}");
        let err = parse(r#"{"mcpServers":{"s":{"command":"srv","prompts":"no"}}}"#).unwrap_err();
        assert!(
            err.contains("prompts") && err.contains("true or false"),
            "{err}"
        );
    }

    #[test]
    fn env_inherit_is_read_in_both_dialects_and_checked() {
        use crate::EnvInherit;
        let file = parse(
            r#"{"mcpServers":{"a":{"command":"srv","env_inherit":"all"},"b":{"command":"srv"},
                "c":{"command":"srv","env_inherit":["HOME","GITHUB_TOKEN"]}}}"#,
        )
        .unwrap();
        let inherit: Vec<_> = file
            .servers
            .iter()
            .map(|s| s.spec.env_inherit.clone())
            .collect();
        assert_eq!(
            inherit,
            [
                Some(EnvInherit::All),
                None,
                Some(EnvInherit::Names(vec![
                    "HOME".into(),
                    "GITHUB_TOKEN".into()
                ]))
            ]
        );
        let core = parse(r#"{"version":1,"servers":{"a":{"transport":"stdio","command":"srv","env_inherit":"minimal"}}}"#).unwrap();
        assert_eq!(core.servers[0].spec.env_inherit, Some(EnvInherit::Minimal));
        for bad in [
            r#"{"version":1,"servers":{"a":{"transport":"stdio","command":"srv","env_inherit":"some"}}}"#,
            r#"{"version":1,"servers":{"a":{"transport":"http","url":"http://x","env_inherit":"all"}}}"#,
            r#"{"mcpServers":{"a":{"command":"srv","env_inherit":["NOT-A-NAME"]}}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn required_is_read_in_both_dialects_and_defaults_to_false() {
        let file = parse(
            r#"{"mcpServers":{"a":{"command":"srv","required":true},"b":{"command":"srv"},
                "c":{"command":"srv"}},"auggy":{"servers":{"c":{"required":true}}}}"#,
        )
        .unwrap();
        let required: Vec<bool> = file.servers.iter().map(|s| s.spec.required).collect();
        assert_eq!(required, [true, false, true]);
        let core = parse(r#"{"version":1,"servers":{"a":{"transport":"stdio","command":"srv","required":true}}}"#).unwrap();
        assert!(core.servers[0].spec.required);
        let err = parse(r#"{"version":1,"servers":{"a":{"transport":"stdio","command":"srv","required":"yes"}}}"#).unwrap_err();
        assert!(err.to_string().contains("true or false"), "{err}");
    }

    #[test]
    fn an_auggy_policy_carries_read_only_tool_notes_and_agentic_never() {
        let file = parse(
            r#"{"mcpServers":{"s":{"command":"srv"},"t":{"command":"srv"}},
                "auggy":{"servers":{"s":{"read_only":true,"agentic_never":true,
                    "tool_notes":{"status":"Cheap; poll it."}}}}}"#,
        )
        .unwrap();
        let s = &file.servers[0].spec;
        assert!(s.read_only && s.agentic_never);
        assert_eq!(
            s.tool_notes,
            BTreeMap::from([("status".to_owned(), "Cheap; poll it.".to_owned())])
        );
        let t = &file.servers[1].spec;
        assert!(!t.read_only && !t.agentic_never && t.tool_notes.is_empty());
        // Mistyped, they are problems like any policy key.
        let err = parse(
            r#"{"mcpServers":{"s":{"command":"srv"}},"auggy":{"servers":{"s":{"read_only":"yes","tool_note":{}}}}}"#,
        )
        .unwrap_err();
        assert!(err.contains("read_only"), "{err}");
        assert!(
            err.contains("tool_note") && err.contains("tool_notes"),
            "{err}"
        );
    }

    #[test]
    fn left_out_reasons_say_what_to_do() {
        let left = LeftOut {
            name: "x".into(),
            scope: Scope::Project,
            source: PathBuf::from(".mcp.json"),
            reason: LeftOutReason::Disabled,
        };
        assert_eq!(
            left.to_string(),
            ".mcp.json: server `x`: disabled (\"disabled\": true); set it to false or remove it to start the server"
        );
        let sse = LeftOutReason::UnsupportedTransport {
            transport: "sse".into(),
        };
        assert!(
            sse.to_string().ends_with("and write \"type\": \"http\""),
            "{sse}"
        );
    }

    #[test]
    fn the_survey_switch_is_read_and_the_higher_file_wins() {
        let high = parse_at(
            "high.json",
            Scope::Project,
            r#"{"survey": false, "servers": {}}"#,
        );
        let low = parse_at(
            "low.json",
            Scope::User,
            r#"{"survey": true, "servers": {}}"#,
        );
        assert_eq!(high.survey.as_ref().map(|s| s.value), Some(false));
        let config = merged(vec![high, low]);
        let survey = config.survey.unwrap();
        assert_eq!((survey.value, survey.source), (false, "high.json".into()));
        let unset = parse_at("m.json", Scope::Project, r#"{"servers": {}}"#);
        assert_eq!(merged(vec![unset]).survey, None);
        let bad = parse(r#"{"survey": "no", "servers": {}}"#).unwrap_err();
        assert!(bad.contains("true or false"), "{bad}");
    }

    #[test]
    fn the_reserved_name_builtin_narrows_the_survey_tools_in_both_dialects() {
        let core = parse_at(
            "high.json",
            Scope::Project,
            r#"{"servers": {"builtin": {"tools": ["grep", "glob"]},
                            "s": {"transport": "stdio", "command": "srv"}}}"#,
        );
        assert_eq!(core.servers.len(), 1, "builtin is not a server");
        let builtin = core.builtin.clone().unwrap();
        assert_eq!(builtin.tools, ["grep", "glob"]);
        assert_eq!(builtin.levels("grep"), Some(TrustLevel::ALL.to_vec()));
        assert_eq!(builtin.levels("read_many_files"), None);

        let peer = parse_at(
            "low.json",
            Scope::User,
            r#"{"mcpServers": {"s": {"command": "srv"}},
                "auggy": {"servers": {"builtin": {
                    "blockedTools": ["read_many_files"],
                    "allowedTrustLevels": ["creator", "agent"],
                    "toolPolicies": {"grep": {"allowedTrustLevels": ["creator"]}}}}}}"#,
        );
        let builtin = peer.builtin.clone().unwrap();
        assert_eq!(builtin.levels("read_many_files"), None);
        assert_eq!(builtin.levels("grep"), Some(vec![TrustLevel::Creator]));
        assert_eq!(
            builtin.levels("list_dir"),
            Some(vec![TrustLevel::Creator, TrustLevel::Agent])
        );
        // The higher file's entry wins whole.
        let config = merged(vec![core, peer]);
        assert_eq!(
            config.builtin.map(|b| b.source),
            Some(PathBuf::from("high.json"))
        );

        let err = parse(r#"{"servers": {"builtin": {"transport": "stdio", "command": "x"}}}"#)
            .unwrap_err();
        assert!(err.contains("/servers/builtin/transport"), "{err}");
        assert!(err.contains("`builtin` is reserved"), "{err}");
        let err = parse(r#"{"servers": {"builtin": {"tools": ["gerp"]}}}"#).unwrap_err();
        assert!(err.contains("\"grep\""), "{err}");
        let err = parse(r#"{"mcpServers": {"builtin": {"command": "x"}}}"#).unwrap_err();
        assert!(err.contains("reserved name"), "{err}");
        assert!(err.contains("another name"), "{err}");
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = parse("{\n  \"servers\": {,}\n}").unwrap_err();
        assert_eq!(
            err,
            "mcp.json:2:15: invalid JSON: key must be a string; fix the syntax at that position"
        );
    }

    #[test]
    fn full_server_specs_parse() {
        let file = parse(
            r#"{"version":1,"agentic_wrap_threshold":9000,"servers":{
                "fs":{"transport":"stdio","command":"srv","args":["a"],"env":{"K":"${env:V}"},
                      "tools":["read"],"read_only":true,"agentic_never":true,"tool_notes":{"read":"n"}},
                "gh":{"transport":"http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${env:T}"},
                      "auth":{"google_oauth":{"scopes":["s"]}}}}}"#,
        )
        .unwrap();
        assert_eq!(file.wrap.threshold.map(|s| s.value), Some(9000));
        let fs = &file.servers[0].spec;
        assert!(fs.read_only && fs.agentic_never);
        assert_eq!(fs.tools, ["read"]);
        let Transport::Stdio(stdio) = &fs.transport else {
            panic!("stdio")
        };
        assert_eq!(stdio.env["K"].raw(), "${env:V}");
        let Transport::Http(http) = &file.servers[1].spec.transport else {
            panic!("http")
        };
        assert_eq!(
            http.auth,
            Some(AuthSpec::GoogleOAuth {
                scopes: vec!["s".into()]
            })
        );
    }

    #[test]
    fn the_mcp_servers_dialect_maps_onto_the_same_model() {
        let file = parse(
            r#"{"mcpServers":{
                "ops":{"type":"streamable-http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${OPS_TOKEN}"}},
                "local":{"command":"srv","args":["--stdio"],"cloud":"localOnly"}},
              "auggy":{"servers":{"ops":{"allowedTools":["read_status"],"blockedTools":["delete_all"],
                "allowedTrustLevels":["creator","agent"],
                "toolPolicies":{"read_status":{"allowedTrustLevels":["public"]}},"cloud":"disabled"}}}}"#,
        )
        .unwrap();
        assert_eq!(file.dialect, Dialect::McpServers);
        let local = &file.servers[1];
        assert_eq!(local.name, "local");
        assert!(matches!(local.spec.transport, Transport::Stdio(_)));
        assert_eq!(local.spec.cloud, Some(Cloud::LocalOnly));
        let ops = &file.servers[0].spec;
        assert!(matches!(&ops.transport, Transport::Http(h) if h.url == "https://x/mcp"));
        assert_eq!(ops.tools, ["read_status"]);
        assert_eq!(ops.blocked_tools, ["delete_all"]);
        assert_eq!(
            ops.allowed_trust_levels,
            Some(vec![TrustLevel::Creator, TrustLevel::Agent])
        );
        assert_eq!(ops.tool_policies["read_status"], [TrustLevel::Public]);
        assert!(file.left_out().is_empty() && file.warnings().is_empty());
        assert_eq!(ops.cloud, Some(Cloud::Disabled));
    }

    #[test]
    fn token_exchange_parses_in_both_dialects() {
        let entry = r#"{"url":"https://tickets.example/mcp","auth":{"token_exchange":{
            "issuer":"https://sso.example","client_id":"gw","client_secret":"${env:GW_SECRET}",
            "audience":"tickets","scopes":["tickets:read","tickets:write"]}}}"#;
        for text in [
            format!(
                r#"{{"servers":{{"t":{}}}}}"#,
                entry.replacen('{', r#"{"transport":"http","#, 1)
            ),
            format!(r#"{{"mcpServers":{{"t":{entry}}}}}"#),
        ] {
            let file = parse(&text).unwrap();
            let Transport::Http(http) = &file.servers[0].spec.transport else {
                panic!("http")
            };
            let Some(AuthSpec::TokenExchange(x)) = &http.auth else {
                panic!("token_exchange: {:?}", http.auth)
            };
            assert_eq!(
                x.endpoint,
                crate::ExchangeEndpoint::Issuer("https://sso.example".into())
            );
            assert_eq!(x.client_id, "gw");
            assert_eq!(
                x.client_secret.as_ref().map(|t| t.raw()),
                Some("${env:GW_SECRET}")
            );
            assert_eq!(x.audience.as_deref(), Some("tickets"));
            assert_eq!(x.resource, None);
            assert_eq!(x.scopes, ["tickets:read", "tickets:write"]);
        }
        let file = parse(
            r#"{"mcpServers":{"t":{"url":"https://t/mcp","auth":{"token_exchange":{
                "token_endpoint":"https://as/token","client_id":"gw"}}}}}"#,
        )
        .unwrap();
        let Transport::Http(http) = &file.servers[0].spec.transport else {
            panic!("http")
        };
        let Some(AuthSpec::TokenExchange(x)) = &http.auth else {
            panic!("token_exchange")
        };
        assert_eq!(
            x.endpoint,
            crate::ExchangeEndpoint::TokenEndpoint("https://as/token".into())
        );
        assert_eq!(
            (x.client_secret.is_none(), x.scopes.is_empty()),
            (true, true)
        );
    }
}
