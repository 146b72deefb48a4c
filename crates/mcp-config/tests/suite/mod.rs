//! Loading `mcp.json` files: the fixtures in `tests/fixtures` (table-driven),
//! files merged by precedence, and properties of the merge.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use core_agent_mcp_config::{
    Config, ConfigPaths, Dialect, Env, LeftOutReason, Problem, Scope, Transport, load, parse_file,
};

mod fixtures;
mod merge;
mod props;

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
