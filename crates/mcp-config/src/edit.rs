//! Editing a config file in place: add or remove one server and keep the
//! rest of the file (key order, other servers, other fields) as it was.

use std::path::Path;

use serde_json::{Map, Value};

use crate::{Dialect, Error, Problem, Result, Scope};

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
        return Err(invalid(
            path,
            &format!("/{key}/{name}"),
            &format!("a server named `{name}` already exists"),
            &format!("remove it first with `core-agent mcp remove {name}`, or pick another name"),
        ));
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
}
