//! Table-driven tests over the config fixtures in `tests/fixtures`:
//! every `bad/*.json` must fail with exactly the text in its `.err` file, and
//! every `good/*.json` must load into exactly the summary in its `.out` file.
//! Run with `UPDATE_EXPECT=1` to rewrite the expectations after a deliberate
//! change, then read the diff: it is what a user will see.

use super::*;

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
