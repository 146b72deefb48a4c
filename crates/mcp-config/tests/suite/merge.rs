//! Files merged by precedence, `.env`, and problems that carry their place.

use super::*;

#[test]
fn only_keeps_one_server_or_says_which_are_configured() {
    let layout = Layout::new(
        Some(
            r#"{"version": 1, "servers": {"demo": {"transport": "stdio", "command": "d"}, "docs": {"transport": "stdio", "command": "e"}}}"#,
        ),
        Some(r#"{"mcpServers": {"off": {"command": "o", "disabled": true}}}"#),
        None,
    );
    let config = load(&layout.paths()).unwrap();
    let only = config.only("demo").unwrap();
    let names: Vec<&str> = only.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["demo"]);
    assert!(only.left_out.is_empty());
    let root = layout.dir.path().display().to_string();
    let said = |name: &str| {
        config
            .only(name)
            .unwrap_err()
            .to_string()
            .replace(&root, "<root>")
    };
    assert_eq!(
        said("dmeo"),
        "no server named `dmeo` is configured (none in <root>/.agents/mcp.json, <root>/.mcp.json); \
         did you mean `demo`?; the configured servers are: demo, docs"
    );
    assert_eq!(
        said("zzzzzzzz"),
        "no server named `zzzzzzzz` is configured (none in <root>/.agents/mcp.json, <root>/.mcp.json); \
         the configured servers are: demo, docs"
    );
    assert_eq!(
        said("off"),
        "<root>/.mcp.json: server `off`: disabled (\"disabled\": true); set it to false or remove it to start the server"
    );
    let empty = Layout::new(None, None, None);
    let err = load(&empty.paths()).unwrap().only("demo").unwrap_err();
    assert_eq!(
        err.to_string(),
        "no server named `demo` is configured (no config file was found); add one to mcp.json first"
    );
}

#[test]
fn three_files_merge_by_name_in_precedence_order() {
    let layout = Layout::new(
        Some(
            r#"{"version": 1, "agentic_wrap_threshold": 100, "servers": {"a": {"transport": "stdio", "command": "from-agents"}}}"#,
        ),
        Some(
            r#"{"mcpServers": {"a": {"command": "from-dot-mcp"}, "b": {"url": "https://b/mcp"}}}"#,
        ),
        Some(
            r#"{"version": 1, "agentic_wrap_threshold": 5, "agentic_wrap_model": "m", "servers": {"b": {"transport": "stdio", "command": "from-user"}, "c": {"transport": "stdio", "command": "user-only"}}}"#,
        ),
    );
    let config = load(&layout.paths()).unwrap();
    let got: Vec<(String, Scope, Dialect, String)> = config
        .servers
        .iter()
        .map(|s| {
            let what = match &s.spec.transport {
                Transport::Stdio(t) => t.command.clone(),
                Transport::Http(t) => t.url.clone(),
            };
            let file = s.source.file_name().unwrap().to_string_lossy().into_owned();
            (
                s.name.clone(),
                s.scope,
                s.dialect,
                format!("{what} from {file}"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "a".into(),
                Scope::Project,
                Dialect::Core,
                "from-agents from mcp.json".into()
            ),
            (
                "b".into(),
                Scope::Project,
                Dialect::McpServers,
                "https://b/mcp from .mcp.json".into()
            ),
            (
                "c".into(),
                Scope::User,
                Dialect::Core,
                "user-only from mcp.json".into()
            ),
        ]
    );
    let threshold = config.wrap.threshold.unwrap();
    assert_eq!(threshold.value, 100);
    assert!(threshold.source.ends_with(".agents/mcp.json"));
    let model = config.wrap.model.unwrap();
    assert_eq!(model.value, "m");
    assert!(model.source.ends_with("home/mcp.json"));
    let found: Vec<bool> = config.files.iter().map(|f| f.found).collect();
    assert_eq!(found, [true, true, true]);
}

#[test]
fn dotenv_supplies_variables_and_the_environment_wins() {
    let layout = Layout::new(None, None, None);
    std::fs::write(
        layout.dir.path().join(".env"),
        "CA_CFG_TEST_FROM_FILE=file\nPATH=not-the-real-path\n",
    )
    .unwrap();
    let config = load(&layout.paths()).unwrap();
    let env = config.dotenv.over_process();
    assert_eq!(env.var("CA_CFG_TEST_FROM_FILE").as_deref(), Some("file"));
    assert_ne!(env.var("PATH").as_deref(), Some("not-the-real-path"));
}

#[test]
fn a_bad_dotenv_names_file_and_line() {
    let layout = Layout::new(None, None, None);
    std::fs::write(layout.dir.path().join(".env"), "A=1\nB\n").unwrap();
    let err = load(&layout.paths()).unwrap_err().to_string();
    assert!(
        err.ends_with(".env:2:1: /: `B` is not `NAME=value`; write one `NAME=value` per line"),
        "{err}"
    );
}

#[test]
fn problems_carry_file_line_column_server_and_pointer() {
    let text =
        "{\"version\": 1,\n \"servers\": {\"fs\": {\"transport\": \"stdio\", \"comand\": \"x\"}}}";
    let mut problems = Vec::new();
    parse_file(text, Path::new("p/mcp.json"), Scope::User, &mut problems).unwrap();
    let first: &Problem = &problems[0];
    assert_eq!(
        (
            first.line,
            first.column,
            first.server.as_deref(),
            first.pointer.as_str()
        ),
        (Some(2), Some(43), Some("fs"), "/servers/fs/comand")
    );
}
