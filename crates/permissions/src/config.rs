use std::path::{Path, PathBuf};

use core_agent_mcp_config::{FileProblems, parse_json, read_optional};
use serde_json::{Map, Value};

use crate::{Error, Pattern, Result};

/// How the gate treats calls that no pattern decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Denied calls are refused, allowed ones run, the rest are asked about.
    #[default]
    Ask,
    /// Like `Ask`, but what is not allowed is refused without asking.
    Allowlist,
    /// MCP calls skip the gate entirely.
    Yolo,
}

impl Mode {
    /// The mode's name in `config.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Allowlist => "allowlist",
            Mode::Yolo => "yolo",
        }
    }

    /// The mode called `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        [Mode::Ask, Mode::Allowlist, Mode::Yolo]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

/// The merged permissions of `<agentsDir>/config.json` and `~/.agents/config.json`.
///
/// [`PermissionsConfig::load`] reads them from the files; in code, start
/// from [`PermissionsConfig::default`] (`ask`, no patterns) and use the
/// `with_*` methods:
///
/// ```
/// use std::path::Path;
///
/// use core_agent_permissions::{Mode, Pattern, PermissionsConfig};
///
/// let allow = Pattern::parse("mcp:github_get_*", Path::new("config.json")).unwrap();
/// let config = PermissionsConfig::default()
///     .with_mode(Mode::Allowlist)
///     .with_allow(vec![allow]);
/// assert_eq!(config.allow.len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PermissionsConfig {
    /// `permissions.mode` (default `ask`).
    pub mode: Mode,
    /// `permissions.allow`, from both files.
    pub allow: Vec<Pattern>,
    /// `permissions.deny`, from both files.
    pub deny: Vec<Pattern>,
    /// `permissions.require_plan_artifact` (default false).
    pub require_plan_artifact: bool,
    /// `tools.wait_and_verify.poll_allow`: mutating tools that may be polled.
    pub poll_allow: Vec<Pattern>,
    /// The file that set `mode`, if one did.
    pub mode_source: Option<PathBuf>,
    /// The project's `config.json` (read or not): where advice tells the
    /// operator to add a pattern.
    pub project_file: Option<PathBuf>,
    /// The `gateway` section of each file that has one, the project file's
    /// first, as written: `core-agent-gateway` reads it (its tokens and
    /// session limits) and reports its problems at their line and column.
    pub gateway: Vec<Section>,
}

/// A top-level section of one `config.json` that another crate reads (the
/// `gateway` section, read by `core-agent-gateway`): its value as written,
/// and its file's path and text, so that the problems found in it name the
/// file, line and column, like the problems of the rest of the file.
#[derive(Clone, PartialEq)]
pub struct Section {
    /// The file.
    pub path: PathBuf,
    /// The file's text, where the positions of problems are found.
    pub text: String,
    /// The JSON pointer of the section in its file (`/gateway`).
    pub pointer: String,
    /// The section's value, not checked: it need not even be an object.
    pub value: Value,
}

impl Section {
    /// An empty list of problems in the section's file, for the reader of
    /// the section to report through (`/gateway/...` pointers placed at
    /// their line and column).
    pub fn problems(&self) -> FileProblems<'_> {
        FileProblems::new(&self.path, &self.text)
    }
}

impl std::fmt::Debug for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Section")
            .field("path", &self.path)
            .field("pointer", &self.pointer)
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

impl PermissionsConfig {
    /// The mode (`permissions.mode`).
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> PermissionsConfig {
        self.mode = mode;
        self
    }

    /// The patterns that allow a call (`permissions.allow`).
    #[must_use]
    pub fn with_allow(mut self, allow: Vec<Pattern>) -> PermissionsConfig {
        self.allow = allow;
        self
    }

    /// The patterns that deny a call (`permissions.deny`).
    #[must_use]
    pub fn with_deny(mut self, deny: Vec<Pattern>) -> PermissionsConfig {
        self.deny = deny;
        self
    }

    /// Whether a mutating call needs a recorded plan first
    /// (`permissions.require_plan_artifact`).
    #[must_use]
    pub fn with_require_plan_artifact(mut self, require: bool) -> PermissionsConfig {
        self.require_plan_artifact = require;
        self
    }

    /// The mutating tools that may be polled (`tools.wait_and_verify.poll_allow`).
    #[must_use]
    pub fn with_poll_allow(mut self, poll_allow: Vec<Pattern>) -> PermissionsConfig {
        self.poll_allow = poll_allow;
        self
    }

    /// The project's `config.json`, which advice names as the place to add
    /// a pattern.
    #[must_use]
    pub fn with_project_file(mut self, project_file: Option<PathBuf>) -> PermissionsConfig {
        self.project_file = project_file;
        self
    }

    /// Reads the project file, then the user file (either may be missing).
    /// The project wins for `mode` and `require_plan_artifact`; the `allow`,
    /// `deny` and `poll_allow` lists of both apply; each file's `gateway`
    /// section is kept as written ([`PermissionsConfig::gateway`]).
    pub fn load(project: &Path, user: Option<&Path>) -> Result<PermissionsConfig> {
        PermissionsConfig::load_checking(project, user, &|_| Vec::new())
    }

    /// [`PermissionsConfig::load`], with the problems `check` finds in the
    /// `gateway` sections (the gateway's reader) in the same list as the
    /// rest, so one run names every problem of the files.
    pub fn load_checking(
        project: &Path,
        user: Option<&Path>,
        check: &dyn Fn(&[Section]) -> Vec<core_agent_mcp_config::Problem>,
    ) -> Result<PermissionsConfig> {
        let mut config = PermissionsConfig {
            project_file: Some(project.to_owned()),
            ..PermissionsConfig::default()
        };
        let mut problems = Vec::new();
        let mut mode_set = false;
        let mut plan_set = false;
        for path in std::iter::once(project).chain(user) {
            let Some(text) = read_optional(path)? else {
                continue;
            };
            let root = parse_json(path, &text)?;
            let mut cx = Cx {
                path,
                problems: FileProblems::new(path, &text),
            };
            let Some(root) = cx.object(&root, "") else {
                problems.extend(cx.problems.into_problems());
                continue;
            };
            cx.keys(root, "", &["permissions", "tools", "gateway", "$schema"]);
            if let Some(gateway) = root.get("gateway") {
                config.gateway.push(Section {
                    path: path.to_owned(),
                    text: text.clone(),
                    pointer: "/gateway".to_owned(),
                    value: gateway.clone(),
                });
            }
            if let Some(perms) = root
                .get("permissions")
                .and_then(|v| cx.object(v, "/permissions"))
            {
                cx.keys(
                    perms,
                    "/permissions",
                    &["mode", "allow", "deny", "require_plan_artifact"],
                );
                if let Some(v) = perms.get("mode") {
                    match v.as_str().and_then(Mode::parse) {
                        Some(mode) if !mode_set => {
                            config.mode = mode;
                            config.mode_source = Some(path.to_owned());
                            mode_set = true;
                        }
                        Some(_) => {}
                        None => cx.problem(
                            "/permissions/mode",
                            &format!("unknown mode {v}"),
                            "use \"ask\", \"allowlist\" or \"yolo\"",
                        ),
                    }
                }
                if let Some(v) = perms.get("require_plan_artifact") {
                    match v.as_bool() {
                        Some(b) if !plan_set => {
                            config.require_plan_artifact = b;
                            plan_set = true;
                        }
                        Some(_) => {}
                        None => cx.problem(
                            "/permissions/require_plan_artifact",
                            "expected true or false",
                            "write true or false without quotes",
                        ),
                    }
                }
                config
                    .allow
                    .extend(cx.patterns(perms, "/permissions", "allow"));
                config
                    .deny
                    .extend(cx.patterns(perms, "/permissions", "deny"));
            }
            if let Some(tools) = root.get("tools").and_then(|v| cx.object(v, "/tools")) {
                cx.keys(tools, "/tools", &["wait_and_verify"]);
                if let Some(wv) = tools
                    .get("wait_and_verify")
                    .and_then(|v| cx.object(v, "/tools/wait_and_verify"))
                {
                    cx.keys(wv, "/tools/wait_and_verify", &["poll_allow"]);
                    config.poll_allow.extend(cx.patterns(
                        wv,
                        "/tools/wait_and_verify",
                        "poll_allow",
                    ));
                }
            }
            problems.extend(cx.problems.into_problems());
        }
        problems.extend(check(&config.gateway));
        if problems.is_empty() {
            Ok(config)
        } else {
            // Found field by field; shown file by file, in file order.
            problems.sort_by_key(|p| (p.path != project, p.line, p.column));
            Err(Error::Invalid { problems })
        }
    }
}

/// Checking one file: its path, and the problems so far.
struct Cx<'a> {
    path: &'a Path,
    problems: FileProblems<'a>,
}

impl Cx<'_> {
    fn problem(&mut self, pointer: &str, message: &str, fix: &str) {
        self.problems.push(None, pointer, message, fix);
    }

    fn object<'v>(&mut self, v: &'v Value, pointer: &str) -> Option<&'v Map<String, Value>> {
        self.problems.object(v, pointer)
    }

    fn keys(&mut self, obj: &Map<String, Value>, base: &str, known: &[&str]) {
        self.problems.unknown_keys(obj, base, known);
    }

    fn patterns(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Vec<Pattern> {
        let Some(v) = obj.get(key) else {
            return Vec::new();
        };
        let Some(items) = v.as_array() else {
            self.problem(
                &format!("{base}/{key}"),
                "expected an array of patterns",
                "write [\"mcp:server_tool\", \"mcp:server_*\"]",
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let pointer = format!("{base}/{key}/{i}");
            match item.as_str().map(|s| Pattern::parse(s, self.path)) {
                Some(Ok(p)) => out.push(p),
                Some(Err(message)) => self.problem(
                    &pointer,
                    &message,
                    "write `namespace:glob`, such as \"mcp:filesystem_read_*\"",
                ),
                None => self.problem(
                    &pointer,
                    "expected a string",
                    "write the pattern in double quotes",
                ),
            }
        }
        out
    }
}
