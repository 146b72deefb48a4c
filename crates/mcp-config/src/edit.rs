//! Editing a config file in place: add or remove one server and keep the
//! rest of the file (key order, other servers, other fields) as it was.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::{ConfigPaths, Dialect, Error, Problem, Result, Scope};

/// What `mcp init` writes.
pub const INIT_TEXT: &str = "{\n  \"version\": 1,\n  \"servers\": {}\n}\n";

/// A server to add, in transport-neutral form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewServer {
    /// A stdio server.
    Stdio {
        /// The executable.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (values may hold placeholders).
        env: Vec<(String, String)>,
    },
    /// A streamable HTTP server.
    Http {
        /// The endpoint.
        url: String,
        /// Headers (values may hold placeholders).
        headers: Vec<(String, String)>,
    },
}

impl NewServer {
    /// The server a command line describes: a `url` with `Name: value`
    /// headers (streamable HTTP), or a command and its arguments with
    /// `NAME=value` environment entries (stdio).
    ///
    /// ```
    /// use core_agent_mcp_config::{AddError, NewServer};
    ///
    /// let server = NewServer::from_args(None, &[], &["K=${K}".into()], &["npx".into(), "srv".into()]);
    /// assert!(matches!(server, Ok(NewServer::Stdio { .. })));
    /// let both = NewServer::from_args(Some("https://x/mcp"), &[], &[], &["npx".into()]);
    /// assert_eq!(both, Err(AddError::BothTransports));
    /// ```
    pub fn from_args(
        url: Option<&str>,
        headers: &[String],
        env: &[String],
        command: &[String],
    ) -> std::result::Result<NewServer, AddError> {
        let server = match (url, command.split_first()) {
            (Some(url), None) => {
                let mut parsed = Vec::new();
                for h in headers {
                    let Some((k, v)) = h.split_once(':') else {
                        return Err(AddError::Header {
                            entry: first_word(h),
                        });
                    };
                    parsed.push((k.trim().to_owned(), v.trim().to_owned()));
                }
                NewServer::Http {
                    url: url.to_owned(),
                    headers: parsed,
                }
            }
            (None, Some((cmd, args))) => {
                let mut parsed = Vec::new();
                for pair in env {
                    let Some((k, v)) = pair.split_once('=') else {
                        return Err(AddError::Env {
                            entry: first_word(pair),
                        });
                    };
                    parsed.push((k.to_owned(), v.to_owned()));
                }
                NewServer::Stdio {
                    command: cmd.clone(),
                    args: args.to_vec(),
                    env: parsed,
                }
            }
            (None, None) => return Err(AddError::NoTransport),
            (Some(_), Some(_)) => return Err(AddError::BothTransports),
        };
        if !env.is_empty() && url.is_some() {
            return Err(AddError::EnvOnHttp);
        }
        Ok(server)
    }

    /// Its environment entries (stdio) or headers (http), as written.
    pub fn pairs(&self) -> &[(String, String)] {
        match self {
            NewServer::Stdio { env, .. } => env,
            NewServer::Http { headers, .. } => headers,
        }
    }
}

/// Why a command line does not describe a server ([`NewServer::from_args`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddError {
    /// A header is not `Name: value`.
    #[error("header `{entry}` is not `Name: value`")]
    Header {
        /// The entry's first word (never the whole value, which may be a secret).
        entry: String,
    },
    /// An environment entry is not `NAME=value`.
    #[error("environment entry `{entry}` is not `NAME=value`")]
    Env {
        /// The entry's first word (never the whole value, which may be a secret).
        entry: String,
    },
    /// Neither a url nor a command.
    #[error("say how to reach the server: give a command or a url")]
    NoTransport,
    /// Both a url and a command.
    #[error("give either a url or a command, not both")]
    BothTransports,
    /// Environment entries for an http server.
    #[error("environment entries are for stdio servers; an http server takes headers")]
    EnvOnHttp,
}

/// What [`remove_from`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// The first file that had the server, and its text without it (for the
    /// caller to write).
    Removed {
        /// The file.
        path: PathBuf,
        /// Its new text.
        text: String,
    },
    /// No file searched has the server.
    NotFound {
        /// The servers the searched files do have, in file order.
        configured: Vec<String>,
    },
}

/// Finds server `name` in the files of `paths` (highest precedence first,
/// only those of `scope` when given) and removes it from the first that has
/// it. Files that do not exist or cannot be read are skipped. Writes nothing.
pub fn remove_from(paths: &ConfigPaths, name: &str, scope: Option<Scope>) -> Result<Removal> {
    let mut configured = Vec::new();
    for (path, file_scope) in paths.files() {
        if scope.is_some_and(|w| w != file_scope) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        match remove_server(&path, &text, name)? {
            Some(text) => return Ok(Removal::Removed { path, text }),
            None => configured.extend(server_names(&path, &text).unwrap_or_default()),
        }
    }
    Ok(Removal::NotFound { configured })
}

/// At most 24 characters of `s`, up to its first whitespace.
fn first_word(s: &str) -> String {
    s.chars()
        .take_while(|c| !c.is_whitespace())
        .take(24)
        .collect()
}

/// Adds server `name` to the file text `text` (`None`: the file does not
/// exist yet, so a core-dialect file is created) and returns the new text.
/// The server is written in the file's own dialect. Fails when the name is
/// taken or the result would not load.
pub fn add_server(
    path: &Path,
    text: Option<&str>,
    name: &str,
    server: &NewServer,
) -> Result<String> {
    let mut root = parse(path, text.unwrap_or(INIT_TEXT))?;
    let dialect = Dialect::detect(&root);
    let key = dialect.servers_key();
    let Some(obj) = root.as_object_mut() else {
        return Err(invalid(
            path,
            "",
            "the file does not hold a JSON object",
            "fix the file first",
        ));
    };
    let servers = obj.entry(key).or_insert_with(|| Value::Object(Map::new()));
    let Some(servers) = servers.as_object_mut() else {
        return Err(invalid(
            path,
            &format!("/{key}"),
            &format!("`{key}` is not an object"),
            "fix the file first",
        ));
    };
    if servers.contains_key(name) {
        return Err(Error::NameTaken {
            path: path.to_owned(),
            pointer: format!("/{key}/{}", crate::escape_pointer(name)),
            server: name.to_owned(),
        });
    }
    servers.insert(name.to_owned(), server_value(dialect, server));
    finish(path, &root)
}

/// Removes server `name` from `text` and returns the new text, or `None`
/// when the file has no such server.
pub fn remove_server(path: &Path, text: &str, name: &str) -> Result<Option<String>> {
    let mut root = parse(path, text)?;
    let key = Dialect::detect(&root).servers_key();
    let removed = root
        .get_mut(key)
        .and_then(Value::as_object_mut)
        .and_then(|servers| servers.shift_remove(name))
        .is_some();
    if !removed {
        return Ok(None);
    }
    if let Some(policies) = root
        .pointer_mut("/auggy/servers")
        .and_then(Value::as_object_mut)
    {
        policies.shift_remove(name);
    }
    finish(path, &root).map(Some)
}

/// The names of the servers in `text`, in file order.
pub fn server_names(path: &Path, text: &str) -> Result<Vec<String>> {
    let root = parse(path, text)?;
    let key = Dialect::detect(&root).servers_key();
    Ok(root
        .get(key)
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default())
}

fn parse(path: &Path, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::Syntax {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

fn server_value(dialect: Dialect, server: &NewServer) -> Value {
    let pairs = |items: &[(String, String)]| -> Value {
        Value::Object(
            items
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    let mut obj = Map::new();
    match server {
        NewServer::Stdio { command, args, env } => {
            if dialect == Dialect::Core {
                obj.insert("transport".into(), "stdio".into());
            }
            obj.insert("command".into(), command.clone().into());
            if !args.is_empty() {
                obj.insert("args".into(), args.clone().into());
            }
            if !env.is_empty() {
                obj.insert("env".into(), pairs(env));
            }
        }
        NewServer::Http { url, headers } => {
            let (key, value) = match dialect {
                Dialect::Core => ("transport", "http"),
                Dialect::McpServers => ("type", "http"),
            };
            obj.insert(key.into(), value.into());
            obj.insert("url".into(), url.clone().into());
            if !headers.is_empty() {
                obj.insert("headers".into(), pairs(headers));
            }
        }
    }
    Value::Object(obj)
}

/// Renders `root` and checks that the result loads.
fn finish(path: &Path, root: &Value) -> Result<String> {
    let mut text = serde_json::to_string_pretty(root)
        .map_err(|e| invalid(path, "", &e.to_string(), "report a bug"))?;
    text.push('\n');
    let mut problems = Vec::new();
    crate::parse_file(&text, path, Scope::Project, &mut problems)?;
    if problems.is_empty() {
        Ok(text)
    } else {
        Err(Error::Invalid { problems })
    }
}

fn invalid(path: &Path, pointer: &str, message: &str, fix: &str) -> Error {
    Error::Invalid {
        problems: vec![Problem {
            path: path.to_owned(),
            line: None,
            column: None,
            server: None,
            pointer: pointer.to_owned(),
            message: message.to_owned(),
            fix: fix.to_owned(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> NewServer {
        NewServer::Stdio {
            command: "srv".into(),
            args: vec!["-v".into()],
            env: vec![("K".into(), "${K}".into())],
        }
    }

    #[test]
    fn add_keeps_order_and_other_content() {
        let text = "{\"version\": 1, \"agentic_wrap\": false, \"servers\": {\"z\": {\"transport\": \"stdio\", \"command\": \"z\", \"args\": [\"1\"]}, \"a\": {\"transport\": \"http\", \"url\": \"https://a/mcp\"}}}";
        let out = add_server(Path::new("m.json"), Some(text), "m", &stdio()).unwrap();
        assert_eq!(
            out,
            r#"{
  "version": 1,
  "agentic_wrap": false,
  "servers": {
    "z": {
      "transport": "stdio",
      "command": "z",
      "args": [
        "1"
      ]
    },
    "a": {
      "transport": "http",
      "url": "https://a/mcp"
    },
    "m": {
      "transport": "stdio",
      "command": "srv",
      "args": [
        "-v"
      ],
      "env": {
        "K": "${K}"
      }
    }
  }
}
"#
        );
        assert!(
            add_server(Path::new("m.json"), Some(&out), "m", &stdio())
                .unwrap_err()
                .to_string()
                .contains("already exists")
        );
    }

    #[test]
    fn add_writes_the_files_own_dialect_and_creates_missing_files() {
        let http = NewServer::Http {
            url: "https://h/mcp".into(),
            headers: vec![("A".into(), "b".into())],
        };
        let out = add_server(
            Path::new(".mcp.json"),
            Some("{\"mcpServers\": {}}"),
            "h",
            &http,
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"h\": {\n      \"type\": \"http\",\n      \"url\": \"https://h/mcp\",\n      \"headers\": {\n        \"A\": \"b\"\n      }\n    }\n  }\n}\n"
        );
        let created = add_server(Path::new("new.json"), None, "s", &stdio()).unwrap();
        assert!(created.starts_with("{\n  \"version\": 1,\n  \"servers\": {\n    \"s\": {"));
    }

    #[test]
    fn add_refuses_what_would_not_load() {
        let bad = NewServer::Http {
            url: "ftp://nope".into(),
            headers: vec![],
        };
        let err = add_server(Path::new("m.json"), None, "x", &bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not an http:// or https:// URL"), "{err}");
    }

    #[test]
    fn remove_takes_out_the_server_and_its_policy() {
        let text = "{\"mcpServers\": {\"a\": {\"command\": \"a\"}, \"b\": {\"command\": \"b\"}}, \"auggy\": {\"servers\": {\"a\": {\"allowedTools\": []}}}}";
        let out = remove_server(Path::new(".mcp.json"), text, "a")
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"b\": {\n      \"command\": \"b\"\n    }\n  },\n  \"auggy\": {\n    \"servers\": {}\n  }\n}\n"
        );
        assert_eq!(
            remove_server(Path::new(".mcp.json"), text, "nope").unwrap(),
            None
        );
        assert_eq!(
            server_names(Path::new(".mcp.json"), text).unwrap(),
            ["a", "b"]
        );
    }

    fn words(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn args_make_a_server_or_say_what_is_wrong() {
        let http = NewServer::from_args(
            Some("https://x/mcp"),
            &words(&["Authorization : Bearer ${T}"]),
            &[],
            &[],
        );
        assert_eq!(
            http,
            Ok(NewServer::Http {
                url: "https://x/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer ${T}".into())],
            })
        );
        let stdio = NewServer::from_args(None, &[], &words(&["K=a=b"]), &words(&["srv", "-v"]));
        assert_eq!(
            stdio,
            Ok(NewServer::Stdio {
                command: "srv".into(),
                args: words(&["-v"]),
                env: vec![("K".into(), "a=b".into())],
            })
        );
        /// url, headers, env, command, and the error.
        type Case<'a> = (
            Option<&'a str>,
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            AddError,
        );
        let table: [Case<'_>; 6] = [
            (
                Some("https://x"),
                &["no-colon secret-value"],
                &[],
                &[],
                AddError::Header {
                    entry: "no-colon".into(),
                },
            ),
            (
                None,
                &[],
                &["ghp_0123456789abcdefghijklmnop"],
                &["srv"],
                AddError::Env {
                    entry: "ghp_0123456789abcdefghi".chars().chain(['j']).collect(),
                },
            ),
            (None, &[], &[], &[], AddError::NoTransport),
            (
                Some("https://x"),
                &[],
                &[],
                &["srv"],
                AddError::BothTransports,
            ),
            (Some("https://x"), &[], &["K=v"], &[], AddError::EnvOnHttp),
            // A bad header is reported before env on an http server.
            (
                Some("https://x"),
                &["bad"],
                &["K=v"],
                &[],
                AddError::Header {
                    entry: "bad".into(),
                },
            ),
        ];
        for (url, headers, env, command, want) in table {
            let got = NewServer::from_args(url, &words(headers), &words(env), &words(command));
            assert_eq!(
                got,
                Err(want.clone()),
                "{url:?} {headers:?} {env:?} {command:?}"
            );
        }
    }

    #[test]
    fn remove_from_takes_the_first_file_of_the_scope_that_has_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join(".agents/mcp.json");
        let user = dir.path().join("user.json");
        std::fs::create_dir_all(project.parent().unwrap()).unwrap();
        std::fs::write(
            &project,
            "{\"version\": 1, \"servers\": {\"p\": {\"transport\": \"stdio\", \"command\": \"p\"}}}",
        )
        .unwrap();
        std::fs::write(
            &user,
            "{\"mcpServers\": {\"u\": {\"command\": \"u\"}, \"p\": {\"command\": \"p\"}}}",
        )
        .unwrap();
        let mut paths = ConfigPaths::only(&project);
        paths.user = Some(user.clone());

        match remove_from(&paths, "p", None).unwrap() {
            Removal::Removed { path, text } => {
                assert_eq!(path, project);
                assert!(!text.contains("\"p\""), "{text}");
            }
            other => panic!("{other:?}"),
        }
        match remove_from(&paths, "p", Some(Scope::User)).unwrap() {
            Removal::Removed { path, .. } => assert_eq!(path, user),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            remove_from(&paths, "nope", None).unwrap(),
            Removal::NotFound {
                configured: words(&["p", "u", "p"]),
            }
        );
        assert_eq!(
            remove_from(&paths, "u", Some(Scope::Project)).unwrap(),
            Removal::NotFound {
                configured: words(&["p"]),
            }
        );
        // Nothing was written.
        assert!(std::fs::read_to_string(&user).unwrap().contains("\"u\""));
    }

    #[test]
    fn a_taken_name_is_an_error_that_names_it() {
        let text = "{\"version\": 1, \"servers\": {\"a/b\": {\"transport\": \"stdio\", \"command\": \"a\"}}}";
        let err = add_server(Path::new("m.json"), Some(text), "a/b", &stdio()).unwrap_err();
        assert!(
            matches!(&err, Error::NameTaken { server, pointer, .. } if server == "a/b" && pointer == "/servers/a~1b"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "m.json: /servers/a~1b: a server named `a/b` already exists; remove it first, or pick another name"
        );
    }
}
