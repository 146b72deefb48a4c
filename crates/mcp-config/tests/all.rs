//! Table-driven tests over the config fixtures in `tests/fixtures`:
//! every `bad/*.json` must fail with exactly the text in its `.err` file, and
//! every `good/*.json` must load into exactly the summary in its `.out` file.
//! Run with `UPDATE_EXPECT=1` to rewrite the expectations after a deliberate
//! change, then read the diff: it is what a user will see.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use core_agent_mcp_config::{
    Config, ConfigPaths, Dialect, Env, LeftOutReason, Problem, Scope, Transport, load, parse_file,
};
use proptest::prelude::*;

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// Compares `actual` with the file, or rewrites it under `UPDATE_EXPECT=1`.
fn check(expected_file: &Path, actual: &str) -> Option<String> {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(expected_file, actual).unwrap();
        return None;
    }
    let expected = std::fs::read_to_string(expected_file).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{}:\n--- expected\n{expected}\n--- actual\n{actual}",
            expected_file.display()
        )
    })
}

/// Loads one fixture as the project file, with a relative path as a user
/// would type it.
fn load_fixture(path: &Path) -> core_agent_mcp_config::Result<Config> {
    let relative = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let mut problems = Vec::new();
    parse_file(&text, relative, Scope::Project, &mut problems)?;
    if !problems.is_empty() {
        return Err(core_agent_mcp_config::Error::Invalid { problems });
    }
    load(&ConfigPaths::only(path))
}

#[test]
fn bad_fixtures_fail_with_the_expected_messages() {
    let mut failures = Vec::new();
    for path in fixtures("bad") {
        let actual = match load_fixture(&path) {
            Ok(_) => "loaded without error\n".to_owned(),
            Err(e) => format!("{e}\n"),
        };
        failures.extend(check(&path.with_extension("err"), &actual));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn good_fixtures_load_into_the_expected_model() {
    let mut failures = Vec::new();
    for path in fixtures("good") {
        let actual = match load_fixture(&path) {
            Ok(config) => summary(&config),
            Err(e) => format!("failed: {e}\n"),
        };
        failures.extend(check(&path.with_extension("out"), &actual));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A stable, readable account of a loaded config.
fn summary(config: &Config) -> String {
    let mut out = String::new();
    for s in &config.servers {
        let spec = &s.spec;
        let transport = match &spec.transport {
            Transport::Stdio(t) => {
                let env: Vec<String> = t
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.raw()))
                    .collect();
                format!("stdio {} {:?} env={env:?}", t.command, t.args)
            }
            Transport::Http(t) => {
                let headers: Vec<String> = t
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.raw()))
                    .collect();
                format!("http {} headers={headers:?} auth={:?}", t.url, t.auth)
            }
        };
        out.push_str(&format!(
            "{} [{}]: {transport}\n",
            s.name,
            s.dialect.as_str()
        ));
        if spec.pin != core_agent_mcp_config::PinMode::Warn {
            out.push_str(&format!("    pin={}\n", spec.pin.as_str()));
        }
        if spec.limits != core_agent_mcp_config::Limits::default() {
            out.push_str(&format!("    limits={:?}\n", spec.limits));
        }
        out.push_str(&format!(
            "    tools={:?} blocked={:?} trust={:?} policies={:?} cloud={:?} read_only={} agentic_never={} notes={:?}\n",
            spec.tools,
            spec.blocked_tools,
            spec.allowed_trust_levels,
            spec.tool_policies,
            spec.cloud,
            spec.read_only,
            spec.agentic_never,
            spec.tool_notes
        ));
    }
    for left in &config.left_out {
        out.push_str(&format!(
            "left out {} [{}]: {}\n",
            left.name,
            left.reason.kind(),
            left.reason
        ));
    }
    let root = format!("{}/", env!("CARGO_MANIFEST_DIR"));
    for warning in &config.warnings {
        let text = warning.to_string();
        out.push_str(&format!(
            "warning [{}]: {}\n",
            warning.kind.as_str(),
            text.strip_prefix(&root).unwrap_or(&text)
        ));
    }
    for (name, value) in config.wrap.entries() {
        if let Some((v, _)) = value {
            out.push_str(&format!("{name} = {v}\n"));
        }
    }
    out
}

/// Three files in one temporary project, for merge tests.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new(agents: Option<&str>, dot_mcp: Option<&str>, user: Option<&str>) -> Layout {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".agents")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        for (rel, text) in [
            (".agents/mcp.json", agents),
            (".mcp.json", dot_mcp),
            ("home/mcp.json", user),
        ] {
            if let Some(text) = text {
                std::fs::write(dir.path().join(rel), text).unwrap();
            }
        }
        Layout { dir }
    }

    fn paths(&self) -> ConfigPaths {
        ConfigPaths::new(
            self.dir.path().join(".agents"),
            Some(self.dir.path().join("home/mcp.json")),
        )
    }
}

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

fn server_file(names_and_commands: &[(String, String)]) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = names_and_commands
        .iter()
        .map(|(n, c)| {
            (
                n.clone(),
                serde_json::json!({"transport": "stdio", "command": c}),
            )
        })
        .collect();
    serde_json::json!({"version": 1, "servers": servers}).to_string()
}

fn peer_file(servers: &BTreeMap<String, bool>) -> String {
    let servers: serde_json::Map<String, serde_json::Value> = servers
        .iter()
        .map(|(n, disabled)| {
            (
                n.clone(),
                serde_json::json!({"command": "srv", "disabled": disabled, "autoApprove": ["t"]}),
            )
        })
        .collect();
    serde_json::json!({"mcpServers": servers}).to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Disabled or not, the highest file that names a server decides: every
    /// name is started or left out, never both, from that file; and each
    /// started server has exactly one warning, from that file.
    #[test]
    fn left_out_entries_merge_like_servers(
        dot_mcp in proptest::collection::btree_map("[a-c]{1,2}", any::<bool>(), 0..4),
        user in proptest::collection::btree_map("[a-c]{1,2}", any::<bool>(), 0..4),
    ) {
        let layout = Layout::new(None, Some(&peer_file(&dot_mcp)), Some(&peer_file(&user)));
        let config = load(&layout.paths()).unwrap();
        let mut want: BTreeMap<String, (bool, Scope)> =
            user.into_iter().map(|(n, d)| (n, (d, Scope::User))).collect();
        want.extend(dot_mcp.into_iter().map(|(n, d)| (n, (d, Scope::Project))));
        let mut got: BTreeMap<String, (bool, Scope)> = BTreeMap::new();
        for s in &config.servers {
            prop_assert!(got.insert(s.name.clone(), (false, s.scope)).is_none());
        }
        for l in &config.left_out {
            prop_assert_eq!(&l.reason, &LeftOutReason::Disabled);
            prop_assert!(got.insert(l.name.clone(), (true, l.scope)).is_none());
        }
        prop_assert_eq!(got, want);
        let mut warned: Vec<(String, PathBuf)> = config
            .warnings
            .iter()
            .map(|w| (w.server.clone().unwrap(), w.file.clone()))
            .collect();
        let started: Vec<(String, PathBuf)> = config
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.source.clone()))
            .collect();
        warned.sort();
        prop_assert_eq!(warned, started);
    }

    /// For any two files, loading twice gives the same result, every name of
    /// either file is present once, and a name in both comes from the project.
    #[test]
    fn merging_is_deterministic_and_respects_precedence(
        project in proptest::collection::btree_map("[a-c]{1,2}", "[a-z]{1,5}", 0..4),
        user in proptest::collection::btree_map("[a-c]{1,2}", "[a-z]{1,5}", 0..4),
    ) {
        let p: Vec<(String, String)> = project.clone().into_iter().collect();
        let u: Vec<(String, String)> = user.clone().into_iter().collect();
        let layout = Layout::new(Some(&server_file(&p)), None, Some(&server_file(&u)));
        let first = load(&layout.paths()).unwrap();
        let second = load(&layout.paths()).unwrap();
        prop_assert_eq!(&first.servers, &second.servers);
        let mut want: BTreeMap<String, (String, Scope)> =
            user.into_iter().map(|(n, c)| (n, (c, Scope::User))).collect();
        want.extend(project.into_iter().map(|(n, c)| (n, (c, Scope::Project))));
        let got: BTreeMap<String, (String, Scope)> = first
            .servers
            .iter()
            .map(|s| {
                let Transport::Stdio(t) = &s.spec.transport else { unreachable!() };
                (s.name.clone(), (t.command.clone(), s.scope))
            })
            .collect();
        prop_assert_eq!(got, want);
    }
}
