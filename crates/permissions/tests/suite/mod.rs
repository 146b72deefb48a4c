//! Loading `config.json` files: precedence, merged lists, and errors that
//! name the file and the field.

#![allow(clippy::unwrap_used, missing_docs)]

use std::path::PathBuf;

use core_agent_permissions::{Mode, PermissionsConfig};

mod errors;
mod precedence;

fn files(project: Option<&str>, user: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("project.json");
    let u = dir.path().join("user.json");
    if let Some(t) = project {
        std::fs::write(&p, t).unwrap();
    }
    if let Some(t) = user {
        std::fs::write(&u, t).unwrap();
    }
    (dir, p, u)
}
