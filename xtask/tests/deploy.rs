//! The config files the Kubernetes ConfigMap (`deploy/kubernetes/
//! configmap.yaml`) mounts as the replicas' `.agents` directory are read by
//! the crates that read them in `core-agent`: `mcp.json` by
//! `core-agent-mcp-config`, `config.json` by `core-agent-permissions` (its
//! `gateway` section as written), with no problem. `cargo xtask
//! deploy-check` runs this test.

// Test code throughout: a failed read is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// The text of the block scalar `key: |` of a YAML file (indentation
/// removed), the one form the ConfigMap uses.
fn block_scalar(yaml: &str, key: &str) -> Option<String> {
    let mut lines = yaml.lines();
    let header = lines.by_ref().find(|l| l.trim() == format!("{key}: |"))?;
    let key_indent = header.len() - header.trim_start().len();
    let mut body = Vec::new();
    let mut indent = None;
    for line in lines {
        if line.trim().is_empty() {
            body.push(String::new());
            continue;
        }
        let this = line.len() - line.trim_start().len();
        if this <= key_indent {
            break;
        }
        let at = *indent.get_or_insert(this);
        body.push(line.get(at..).unwrap_or(line.trim_start()).to_owned());
    }
    Some(body.join("\n"))
}

#[test]
fn the_configmap_holds_an_mcp_json_and_a_config_json_core_agent_accepts() {
    let yaml = std::fs::read_to_string(root().join("deploy/kubernetes/configmap.yaml")).unwrap();

    let mcp = block_scalar(&yaml, "mcp.json").expect("no `mcp.json: |` in the ConfigMap");
    let mut problems = Vec::new();
    let parsed = core_agent_mcp_config::parse_file(
        &mcp,
        Path::new("mcp.json"),
        core_agent_mcp_config::Scope::Project,
        &mut problems,
    );
    assert!(
        parsed.is_ok() && problems.is_empty(),
        "the ConfigMap's mcp.json is refused: {:?} {problems:?}\n{mcp}",
        parsed.err()
    );

    let config = block_scalar(&yaml, "config.json").expect("no `config.json: |` in the ConfigMap");
    let value: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert!(value.get("gateway").is_some(), "{config}");
    let dir = std::env::temp_dir().join(format!("deploy-configmap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.json");
    std::fs::write(&file, &config).unwrap();
    let loaded = core_agent_permissions::PermissionsConfig::load(&file, None);
    let _ = std::fs::remove_dir_all(&dir);
    let loaded = loaded.unwrap_or_else(|e| panic!("the ConfigMap's config.json is refused: {e}"));
    assert!(
        !format!("{loaded:?}").is_empty(),
        "the permissions config loads"
    );
}

#[test]
fn block_scalars_are_read_to_their_end() {
    let yaml = "data:\n  a.json: |\n    {\n      \"x\": 1\n    }\n  b.json: |\n    []\nkind: X\n";
    assert_eq!(block_scalar(yaml, "a.json").unwrap(), "{\n  \"x\": 1\n}");
    assert_eq!(block_scalar(yaml, "b.json").unwrap(), "[]");
    assert_eq!(block_scalar(yaml, "c.json"), None);
}
