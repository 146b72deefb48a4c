//! `core-agent mcp …`: inspect, check and edit the configured servers, one
//! file per subcommand.

pub(crate) mod add;
pub(crate) mod doctor;
pub(crate) mod init;
pub(crate) mod list;
pub(crate) mod login;
pub(crate) mod remove;
pub(crate) mod trust;

use std::path::Path;

/// Writes `text` to `path` through a temporary file, creating the directory.
fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
