//! Placeholders in `command`, `args` and `url`, as the tools that write the
//! mcpServers dialect expand them.
//!
//! Claude Code expands `${VAR}` and `${VAR:-default}` in a `.mcp.json`
//! server's `command`, `args`, `env`, `url` and `headers`; Cursor expands
//! `${env:NAME}`, `${workspaceFolder}` and `${userHome}`. core-agent's own
//! dialect expands placeholders in `env` and `headers` only (`command`,
//! `args` and `url` are taken as written). An entry in the mcpServers
//! dialect gets its writers' expansion:
//!
//! | written | expands to |
//! |---|---|
//! | `${NAME}`, `${env:NAME}` | the variable (`.env` under the process environment), or nothing when unset |
//! | `${NAME:-default}` | the variable, or `default` when it is unset or empty |
//! | `${workspaceFolder}` | the project directory (the one that holds the file, or `.agents`'s parent) |
//! | `${workspaceFolderBasename}` | its last component |
//! | `${userHome}` | `HOME` |
//! | `${pathSeparator}`, `${/}` | `/` |
//!
//! Anything else in `${…}` (VS Code's `${input:…}` and `${config:…}`, a
//! shell's `${1:-x}`) is left as written, and
//! [`ServerEntry::unexpanded`] reports it, as it reports a variable that is
//! set nowhere and has no default.

use std::path::{Path, PathBuf};

use crate::Env;
use crate::spec::{Dialect, Scope, ServerEntry, Transport};

/// One part of a text.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Var {
        name: &'a str,
        default: Option<&'a str>,
    },
    Builtin(Builtin),
    /// A `${…}` this dialect does not expand, whole.
    Foreign(&'a str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    WorkspaceFolder,
    WorkspaceFolderBasename,
    UserHome,
    PathSeparator,
}

/// `text` in pieces. `$${` stays a literal `${`.
fn scan(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        if i > 0 && rest.as_bytes()[i - 1] == b'$' {
            // `$${`: the text up to the first `$`, then `${` as text.
            out.push(Piece::Text(&rest[..i - 1]));
            out.push(Piece::Text("${"));
            rest = &rest[i + 2..];
            continue;
        }
        out.push(Piece::Text(&rest[..i]));
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push(Piece::Text(&rest[i..]));
            rest = "";
            break;
        };
        let inner = &after[..end];
        let whole = &rest[i..i + 2 + end + 1];
        out.push(piece(inner, whole));
        rest = &after[end + 1..];
    }
    out.push(Piece::Text(rest));
    out.retain(|p| *p != Piece::Text(""));
    out
}

fn piece<'a>(inner: &'a str, whole: &'a str) -> Piece<'a> {
    match inner {
        "workspaceFolder" => return Piece::Builtin(Builtin::WorkspaceFolder),
        "workspaceFolderBasename" => return Piece::Builtin(Builtin::WorkspaceFolderBasename),
        "userHome" => return Piece::Builtin(Builtin::UserHome),
        "pathSeparator" | "/" => return Piece::Builtin(Builtin::PathSeparator),
        _ => {}
    }
    let (spec, default) = match inner.split_once(":-") {
        Some((spec, default)) => (spec, Some(default)),
        None => (inner, None),
    };
    let name = spec.strip_prefix("env:").unwrap_or(spec);
    if crate::template::is_var_name(name) {
        Piece::Var { name, default }
    } else {
        Piece::Foreign(whole)
    }
}

/// A placeholder of `command`, `args` or `url` that does not expand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpanded {
    /// Where: `command`, `args/2` or `url`.
    pub field: String,
    /// The placeholder as written (`${PORT}`, `${input:token}`).
    pub placeholder: String,
    /// Why it does not expand, and what to do.
    pub reason: UnexpandedReason,
}

/// Why a placeholder does not expand.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnexpandedReason {
    /// A variable set neither in the environment nor in `.env`, without a
    /// default: it expands to nothing.
    Unset {
        /// The variable.
        name: String,
    },
    /// VS Code's `${input:…}`: a value VS Code asks for when the server
    /// starts; core-agent asks nothing, and leaves it as written.
    Input,
    /// Another `${…}` this dialect does not expand; left as written.
    Unknown,
}

impl ServerEntry {
    /// Whether `command`, `args` and `url` take placeholders: in the
    /// mcpServers dialect, as its writers expand them.
    fn expands_launch(&self) -> bool {
        self.dialect == Dialect::McpServers
    }

    /// The stdio server's `command` and `args` as it is started: placeholders
    /// expanded from `env` in the mcpServers dialect (see the table in
    /// [`crate::peer`]), as written in core-agent's own. `None` for an HTTP
    /// server.
    pub fn launch_command(&self, env: &dyn Env) -> Option<(String, Vec<String>)> {
        let Transport::Stdio(stdio) = &self.spec.transport else {
            return None;
        };
        if !self.expands_launch() {
            return Some((stdio.command.clone(), stdio.args.clone()));
        }
        let root = self.workspace_folder();
        Some((
            expand(&stdio.command, env, &root),
            stdio.args.iter().map(|a| expand(a, env, &root)).collect(),
        ))
    }

    /// The HTTP server's `url` as it is reached (see
    /// [`ServerEntry::launch_command`]). `None` for a stdio server.
    pub fn launch_url(&self, env: &dyn Env) -> Option<String> {
        let Transport::Http(http) = &self.spec.transport else {
            return None;
        };
        if !self.expands_launch() {
            return Some(http.url.clone());
        }
        Some(expand(&http.url, env, &self.workspace_folder()))
    }

    /// Each placeholder of `command`, `args` or `url` that will not expand
    /// under `env`, in the mcpServers dialect (none in core-agent's own).
    pub fn unexpanded(&self, env: &dyn Env) -> Vec<Unexpanded> {
        let mut out = Vec::new();
        for (field, text) in self.launch_texts() {
            for p in scan(text) {
                let (placeholder, reason) = match p {
                    Piece::Var {
                        name,
                        default: None,
                    } if env.var(name).is_none() => (
                        format!("${{{name}}}"),
                        UnexpandedReason::Unset {
                            name: name.to_owned(),
                        },
                    ),
                    Piece::Foreign(whole) if whole.starts_with("${input:") => {
                        (whole.to_owned(), UnexpandedReason::Input)
                    }
                    Piece::Foreign(whole) => (whole.to_owned(), UnexpandedReason::Unknown),
                    _ => continue,
                };
                out.push(Unexpanded {
                    field: field.clone(),
                    placeholder,
                    reason,
                });
            }
        }
        out
    }

    /// The variables the placeholders of `command`, `args` and `url` read.
    pub(crate) fn launch_variables(&self) -> Vec<String> {
        self.launch_texts()
            .into_iter()
            .flat_map(|(_, text)| {
                scan(text).into_iter().filter_map(|p| match p {
                    Piece::Var { name, .. } => Some(name.to_owned()),
                    _ => None,
                })
            })
            .collect()
    }

    /// `(field, text)` of `command`, each of `args` and `url`, when they
    /// take placeholders.
    fn launch_texts(&self) -> Vec<(String, &str)> {
        if !self.expands_launch() {
            return Vec::new();
        }
        match &self.spec.transport {
            Transport::Stdio(stdio) => {
                std::iter::once(("command".to_owned(), stdio.command.as_str()))
                    .chain(
                        stdio
                            .args
                            .iter()
                            .enumerate()
                            .map(|(i, a)| (format!("args/{i}"), a.as_str())),
                    )
                    .collect()
            }
            Transport::Http(http) => vec![("url".to_owned(), http.url.as_str())],
        }
    }

    /// `${workspaceFolder}`: the directory that holds a project file (the
    /// parent of an agents directory such as `.agents`), else the current
    /// directory.
    fn workspace_folder(&self) -> PathBuf {
        let here = || std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        if self.scope != Scope::Project {
            return here();
        }
        let Some(dir) = self.source.parent() else {
            return here();
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        // `<root>/.mcp.json` is at the root; `<root>/.agents/mcp.json` one below.
        let root = if self.source.file_name().is_some_and(|n| n == ".mcp.json") {
            dir
        } else {
            dir.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        };
        std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf())
    }
}

/// `text` with its placeholders expanded; foreign ones left as written.
fn expand(text: &str, env: &dyn Env, root: &Path) -> String {
    let mut out = String::with_capacity(text.len());
    for p in scan(text) {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Foreign(whole) => out.push_str(whole),
            Piece::Var { name, default } => crate::template::push_var(&mut out, env, name, default),
            Piece::Builtin(Builtin::WorkspaceFolder) => out.push_str(&root.to_string_lossy()),
            Piece::Builtin(Builtin::WorkspaceFolderBasename) => out.push_str(
                &root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            Piece::Builtin(Builtin::UserHome) => out.push_str(&env.var("HOME").unwrap_or_default()),
            Piece::Builtin(Builtin::PathSeparator) => out.push('/'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::spec::{HttpSpec, ServerSpec, StdioSpec};

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn stdio(dialect: Dialect, source: &str, command: &str, args: &[&str]) -> ServerEntry {
        ServerEntry {
            name: "s".into(),
            scope: Scope::Project,
            source: PathBuf::from(source),
            dialect,
            spec: ServerSpec::new(Transport::Stdio(StdioSpec {
                command: command.into(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                env: BTreeMap::new(),
            })),
        }
    }

    fn http(dialect: Dialect, url: &str) -> ServerEntry {
        ServerEntry {
            spec: ServerSpec::new(Transport::Http(HttpSpec {
                url: url.into(),
                headers: BTreeMap::new(),
                auth: None,
            })),
            ..stdio(dialect, "/p/.mcp.json", "x", &[])
        }
    }

    /// Claude Code's documented examples, and Cursor's.
    #[test]
    fn the_mcp_servers_dialect_expands_what_its_writers_expand() {
        let vars = env(&[
            ("PORT", "8123"),
            ("API_BASE_URL", "https://api.example.com"),
            ("HOME", "/home/u"),
            ("EMPTY", ""),
        ]);
        let e = stdio(
            Dialect::McpServers,
            "/work/proj/.mcp.json",
            "${HOME}/bin/server",
            &[
                "--port",
                "${PORT}",
                "--level=${LOG_LEVEL:-info}",
                "${EMPTY:-fallback}",
                "${workspaceFolder}/data",
                "${userHome}${/}x",
                "${workspaceFolderBasename}",
            ],
        );
        let (command, args) = e.launch_command(&vars).unwrap();
        assert_eq!(command, "/home/u/bin/server");
        assert_eq!(
            args,
            [
                "--port",
                "8123",
                "--level=info",
                "fallback",
                "/work/proj/data",
                "/home/u/x",
                "proj"
            ]
        );
        let e = http(
            Dialect::McpServers,
            "${API_BASE_URL:-https://api.example.com}/mcp",
        );
        assert_eq!(
            e.launch_url(&env(&[])).unwrap(),
            "https://api.example.com/mcp"
        );
        let e = http(Dialect::McpServers, "http://127.0.0.1:${PORT}/mcp");
        assert_eq!(e.launch_url(&vars).unwrap(), "http://127.0.0.1:8123/mcp");
        assert!(e.unexpanded(&vars).is_empty());
        assert_eq!(e.launch_variables(), ["PORT"]);
    }

    #[test]
    fn core_agents_own_dialect_takes_command_args_and_url_as_written() {
        let e = stdio(Dialect::Core, "/p/.agents/mcp.json", "srv", &["${PORT}"]);
        assert_eq!(
            e.launch_command(&env(&[("PORT", "1")])).unwrap().1,
            ["${PORT}"]
        );
        assert!(e.unexpanded(&env(&[])).is_empty());
        assert!(e.launch_variables().is_empty());
    }

    #[test]
    fn what_does_not_expand_is_left_as_written_and_reported() {
        let e = stdio(
            Dialect::McpServers,
            "/p/.mcp.json",
            "sh",
            &["-c", "echo ${1:-x} $${HOME}", "${input:token}", "${PORT}"],
        );
        let (_, args) = e.launch_command(&env(&[])).unwrap();
        assert_eq!(args, ["-c", "echo ${1:-x} ${HOME}", "${input:token}", ""]);
        let found: Vec<(String, String, UnexpandedReason)> = e
            .unexpanded(&env(&[]))
            .into_iter()
            .map(|u| (u.field, u.placeholder, u.reason))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "args/1".to_owned(),
                    "${1:-x}".to_owned(),
                    UnexpandedReason::Unknown
                ),
                (
                    "args/2".to_owned(),
                    "${input:token}".to_owned(),
                    UnexpandedReason::Input
                ),
                (
                    "args/3".to_owned(),
                    "${PORT}".to_owned(),
                    UnexpandedReason::Unset {
                        name: "PORT".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn the_workspace_folder_is_the_project_directory() {
        let e = stdio(
            Dialect::McpServers,
            "/w/p/.agents/mcp.json",
            "x",
            &["${workspaceFolder}"],
        );
        assert_eq!(e.launch_command(&env(&[])).unwrap().1, ["/w/p"]);
        let e = stdio(
            Dialect::McpServers,
            "/w/p/.mcp.json",
            "x",
            &["${workspaceFolder}"],
        );
        assert_eq!(e.launch_command(&env(&[])).unwrap().1, ["/w/p"]);
    }

    #[test]
    fn an_unclosed_placeholder_is_text() {
        assert_eq!(scan("a${b"), [Piece::Text("a"), Piece::Text("${b")]);
    }
}
