//! core-agent in its own configuration: an entry that would start this
//! gateway again on the same files.
//!
//! `claude mcp add -s project core-agent -- core-agent serve` writes the
//! gateway into the project's `.mcp.json`, which core-agent reads too: each
//! `core-agent serve` would start another, without end. Two guards stop it:
//!
//! - [`Config::leave_out_own`] recognizes an entry that runs this program's
//!   `serve` on the same project and moves it to [`Config::left_out`]
//!   ([`LeftOutReason::OwnGateway`]), so it is never spawned and `doctor`
//!   names it;
//! - every stdio server gets [`LINEAGE_VAR`], the projects of the core-agents
//!   above it ([`Lineage`]). A core-agent that finds its own project there
//!   (the entry was wrapped, say in `sh -c` or `npx`, and the first guard
//!   could not see through it) starts nothing and says why, so a loop stops
//!   one level down; a chain of different projects stops at
//!   [`MAX_LINEAGE`].

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::spec::{Config, LeftOut, LeftOutReason, StdioSpec, Transport};

/// The variable every stdio server core-agent starts gets: the projects of
/// the core-agents that started it, one per line, outermost first.
pub const LINEAGE_VAR: &str = "CORE_AGENT_LINEAGE";

/// The most core-agents in one chain: one more would be refused.
pub const MAX_LINEAGE: usize = 8;

/// This program and the project it reads, to recognize entries that would
/// start it again.
///
/// ```
/// use core_agent_mcp_config::{OwnProgram, StdioSpec};
///
/// let own = OwnProgram::new(None, std::path::Path::new(".agents"));
/// let spec = StdioSpec {
///     command: "core-agent".into(),
///     args: vec!["serve".into()],
///     env: Default::default(),
/// };
/// assert!(own.is_own_gateway("core-agent", &spec, None));
/// ```
#[derive(Debug, Clone)]
pub struct OwnProgram {
    /// This executable, resolved (`None`: recognized by name alone).
    exe: Option<PathBuf>,
    /// The file names this program goes by (`core-agent`, and the
    /// executable's own name).
    names: Vec<String>,
    /// The agents directory, absolute and normalized.
    agents_dir: PathBuf,
}

impl OwnProgram {
    /// `exe`: this executable (`std::env::current_exe()`), when known;
    /// `agents_dir`: the agents directory the configuration was read from
    /// (relative to the current directory).
    pub fn new(exe: Option<PathBuf>, agents_dir: &Path) -> OwnProgram {
        let exe = exe.map(|e| e.canonicalize().unwrap_or(e));
        let mut names = vec!["core-agent".to_owned()];
        if let Some(name) = exe
            .as_deref()
            .and_then(Path::file_name)
            .and_then(OsStr::to_str)
            && !names.iter().any(|n| n == name)
        {
            names.push(name.to_owned());
        }
        OwnProgram {
            exe,
            names,
            agents_dir: absolute(agents_dir),
        }
    }

    /// The project as [`LINEAGE_VAR`] names it: the agents directory,
    /// absolute.
    pub fn identity(&self) -> String {
        self.agents_dir.display().to_string()
    }

    /// Whether `spec`, the entry of server `name`, runs this program's
    /// `serve` on the same project: its command is named `core-agent` (or
    /// is this executable, found on `path` when it has no `/`), one of its
    /// arguments is `serve`, any `--agents-dir` it gives is this one, and
    /// it serves every server, or (`--server NAME`) this entry itself.
    pub fn is_own_gateway(&self, name: &str, spec: &StdioSpec, path: Option<&OsStr>) -> bool {
        self.is_this_program(&spec.command, path) && self.serves_this_project(name, &spec.args)
    }

    fn is_this_program(&self, command: &str, path: Option<&OsStr>) -> bool {
        let named = Path::new(command)
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| self.names.iter().any(|own| own == n));
        if named {
            return true;
        }
        let Some(exe) = &self.exe else {
            return false;
        };
        let found = if command.contains('/') {
            Some(PathBuf::from(command))
        } else {
            path.and_then(|p| {
                std::env::split_paths(p)
                    .map(|dir| dir.join(command))
                    .find(|c| c.is_file())
            })
        };
        found
            .and_then(|f| f.canonicalize().ok())
            .is_some_and(|f| &f == exe)
    }

    fn serves_this_project(&self, name: &str, args: &[String]) -> bool {
        // Global flags may come before the subcommand, and some take a
        // value, so `serve` anywhere among the words counts.
        let mut agents_dir = None;
        let mut only = None;
        let mut words = args.iter();
        while let Some(word) = words.next() {
            if let Some(dir) = word.strip_prefix("--agents-dir=") {
                agents_dir = Some(dir.to_owned());
            } else if word == "--agents-dir" {
                agents_dir = words.next().cloned();
            } else if let Some(server) = word.strip_prefix("--server=") {
                only = Some(server.to_owned());
            } else if word == "--server" {
                only = words.next().cloned();
            }
        }
        args.iter().any(|a| a == "serve")
            && only.as_deref().is_none_or(|only| only == name)
            && agents_dir
                .as_deref()
                .is_none_or(|dir| absolute(Path::new(dir)) == self.agents_dir)
    }
}

impl Config {
    /// Moves every stdio server that would start this gateway again on the
    /// same project (see [`OwnProgram::is_own_gateway`]) from
    /// [`Config::servers`] to [`Config::left_out`], with
    /// [`LeftOutReason::OwnGateway`]; `path` is the `PATH` its command is
    /// looked up on. Returns how many.
    pub fn leave_out_own(&mut self, own: &OwnProgram, path: Option<&OsStr>) -> usize {
        let (own_entries, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.servers)
            .into_iter()
            .partition(|s| match &s.spec.transport {
                Transport::Stdio(stdio) => own.is_own_gateway(&s.name, stdio, path),
                Transport::Http(_) => false,
            });
        self.servers = others;
        let count = own_entries.len();
        for entry in own_entries {
            let command = match &entry.spec.transport {
                Transport::Stdio(stdio) => std::iter::once(stdio.command.as_str())
                    .chain(stdio.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                Transport::Http(_) => String::new(),
            };
            self.left_out.push(LeftOut {
                name: entry.name,
                scope: entry.scope,
                source: entry.source,
                reason: LeftOutReason::OwnGateway { command },
            });
        }
        self.left_out.sort_by(|a, b| a.name.cmp(&b.name));
        count
    }
}

/// The core-agents above this process, from [`LINEAGE_VAR`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lineage {
    projects: Vec<String>,
}

impl Lineage {
    /// Reads `value` (the variable's value; `None`: this process was not
    /// started by a core-agent). Blank lines are skipped.
    pub fn parse(value: Option<&str>) -> Lineage {
        Lineage {
            projects: value
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// How many core-agents are above this process.
    pub fn depth(&self) -> usize {
        self.projects.len()
    }

    /// Whether a core-agent above this process reads `own`'s project.
    pub fn contains(&self, own: &OwnProgram) -> bool {
        let me = own.identity();
        self.projects.contains(&me)
    }

    /// Why `own` must not start its servers here, if it must not: a
    /// core-agent above it reads the same project (a loop), or the chain is
    /// [`MAX_LINEAGE`] long. `one_server`: `own` starts one named server
    /// (`serve --server NAME`), which may be one more server of the same
    /// project; then only the chain's length counts.
    pub fn refusal(&self, own: &OwnProgram, one_server: bool) -> Option<String> {
        if !one_server && self.contains(own) {
            return Some(format!(
                "this core-agent was started as an MCP server by a core-agent that reads the same \
                 project ({}): the configuration has an entry that starts core-agent again (through \
                 a wrapper such as `sh -c` or `npx`), which would repeat without end. Remove that \
                 entry from the project's .mcp.json or .agents/mcp.json",
                own.identity()
            ));
        }
        (self.depth() >= MAX_LINEAGE).then(|| {
            format!(
                "this core-agent was started by a chain of {} core-agents, each an MCP server of \
                 the one before (the most is {MAX_LINEAGE}): {}",
                self.depth(),
                self.projects.join(" → ")
            )
        })
    }

    /// The value of [`LINEAGE_VAR`] for the servers `own` starts: this
    /// lineage and `own`'s project.
    pub fn child_value(&self, own: &OwnProgram) -> String {
        let mut projects = self.projects.clone();
        projects.push(own.identity());
        projects.join("\n")
    }
}

/// `path` made absolute against the current directory, with `.` and `..`
/// taken out, without touching the filesystem beyond resolving what
/// exists (symbolic links included).
fn absolute(path: &Path) -> PathBuf {
    if let Ok(resolved) = path.canonicalize() {
        return resolved;
    }
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    // The longest prefix that exists, resolved, then the rest normalized.
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    match (out.parent(), out.file_name()) {
        (Some(parent), Some(name)) => parent
            .canonicalize()
            .map(|p| p.join(name))
            .unwrap_or(out.clone()),
        _ => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: &str, args: &[&str]) -> StdioSpec {
        StdioSpec {
            command: command.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Default::default(),
        }
    }

    #[test]
    fn the_entry_claude_code_writes_is_recognized() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join(".agents");
        let own = OwnProgram::new(None, &agents);
        let args = |extra: &str| -> Vec<String> {
            vec!["--agents-dir".into(), extra.into(), "serve".into()]
        };
        assert!(own.is_own_gateway("gw", &spec("core-agent", &["serve"]), None));
        assert!(own.is_own_gateway(
            "gw",
            &spec(
                "/usr/local/bin/core-agent",
                &["serve", "--http", "127.0.0.1:1"]
            ),
            None
        ));
        assert!(own.is_own_gateway(
            "gw",
            &spec("core-agent", &["--trust-level", "user", "serve"]),
            None
        ));
        let same = agents.display().to_string();
        let s = StdioSpec {
            args: args(&same),
            ..spec("core-agent", &[])
        };
        assert!(own.is_own_gateway("gw", &s, None));
        let eq = format!("--agents-dir={same}");
        assert!(own.is_own_gateway("gw", &spec("core-agent", &[&eq, "serve"]), None));

        // Another project's gateway is a chain, not a loop; other commands
        // and other programs are not this gateway.
        let other = dir.path().join("elsewhere/.agents").display().to_string();
        let s = StdioSpec {
            args: args(&other),
            ..spec("core-agent", &[])
        };
        assert!(!own.is_own_gateway("gw", &s, None));
        assert!(!own.is_own_gateway("gw", &spec("core-agent", &["demo-server"]), None));
        assert!(!own.is_own_gateway("gw", &spec("npx", &["-y", "server-everything"]), None));
        assert!(!own.is_own_gateway("gw", &spec("core-agent-helper", &["serve"]), None));
        // `serve --server NAME` starts that one server: a loop only when it
        // names its own entry.
        assert!(!own.is_own_gateway(
            "gw",
            &spec("core-agent", &["serve", "--server", "fs"]),
            None
        ));
        assert!(own.is_own_gateway(
            "gw",
            &spec("core-agent", &["serve", "--server", "gw"]),
            None
        ));
        assert!(own.is_own_gateway("gw", &spec("core-agent", &["serve", "--server=gw"]), None));
    }

    #[test]
    fn this_executable_is_recognized_under_another_name() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("gw");
        std::fs::write(&exe, "").unwrap();
        let link = dir.path().join("bin");
        std::fs::create_dir(&link).unwrap();
        std::os::unix::fs::symlink(&exe, link.join("my-gateway")).unwrap();
        let own = OwnProgram::new(Some(exe.clone()), Path::new(".agents"));
        let path = link.as_os_str();
        assert!(own.is_own_gateway("gw", &spec("my-gateway", &["serve"]), Some(path)));
        assert!(own.is_own_gateway("gw", &spec(exe.to_str().unwrap(), &["serve"]), None));
        assert!(
            own.is_own_gateway("gw", &spec("gw", &["serve"]), None),
            "its own file name"
        );
        assert!(
            !own.is_own_gateway("gw", &spec("my-gateway", &["serve"]), None),
            "not on PATH"
        );
    }

    #[test]
    fn a_lineage_refuses_a_loop_and_a_long_chain() {
        let dir = tempfile::tempdir().unwrap();
        let a = OwnProgram::new(None, &dir.path().join("a/.agents"));
        let b = OwnProgram::new(None, &dir.path().join("b/.agents"));
        let top = Lineage::parse(None);
        assert_eq!(top.refusal(&a, false), None);
        let under_a = Lineage::parse(Some(&top.child_value(&a)));
        assert_eq!(under_a.depth(), 1);
        assert!(
            under_a.refusal(&b, false).is_none(),
            "another project may be chained"
        );
        let refusal = under_a.refusal(&a, false).unwrap();
        assert!(
            under_a.refusal(&a, true).is_none(),
            "one named server may be served"
        );
        assert!(refusal.contains("reads the same project"), "{refusal}");
        assert!(refusal.contains(&a.identity()), "{refusal}");

        let long = ["/x/.agents"; MAX_LINEAGE].join("\n");
        let refusal = Lineage::parse(Some(&long)).refusal(&b, true).unwrap();
        assert!(refusal.contains("chain of 8"), "{refusal}");
        assert_eq!(Lineage::parse(Some("\n\n")).depth(), 0);
    }

    #[test]
    fn relative_and_absolute_agents_dirs_compare_equal() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            absolute(Path::new("./x/../.agents")),
            absolute(&here.join(".agents"))
        );
    }
}
