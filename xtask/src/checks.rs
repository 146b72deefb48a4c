//! The CI steps beyond the tests: each library crate's feature combinations,
//! the documentation with `-D warnings`, and the packages as uploaded.

use std::process::Command;
use std::time::Instant;

use crate::json::{self, Json};
use crate::{Result, cargo, run};

/// One `cargo check` (or `cargo test`) of one library crate with one set
/// of features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeatureCheck {
    /// `check` or `test`.
    pub(crate) command: &'static str,
    pub(crate) package: String,
    /// The cargo arguments after `-p <package>`.
    pub(crate) args: Vec<String>,
}

impl FeatureCheck {
    /// `check core-agent-digest --no-default-features --features sqlite`.
    pub(crate) fn label(&self) -> String {
        format!("{} {} {}", self.command, self.package, self.args.join(" "))
    }
}

/// The checks for every library crate of `cargo metadata --no-deps` output: a
/// published package with a `lib` target is checked with
/// `--no-default-features`, each feature alone (on top of no defaults), and
/// `--all-features`, and its tests run with `--no-default-features` (the
/// workspace's own test run unifies features, so it never builds a crate
/// without the features its siblings enable).
pub(crate) fn feature_plan(metadata: &Json) -> Result<Vec<FeatureCheck>> {
    let packages = metadata
        .get("packages")
        .ok_or("cargo metadata printed no `packages`")?;
    let mut plan = Vec::new();
    for package in packages.items() {
        let name = package
            .get("name")
            .and_then(Json::as_str)
            .ok_or("a package in cargo metadata has no name")?;
        // `publish = false` shows as `[]`; publishable packages as `null`.
        let published = !matches!(package.get("publish"), Some(Json::Array(r)) if r.is_empty());
        let is_lib = package
            .get("targets")
            .map(Json::items)
            .unwrap_or_default()
            .iter()
            .any(|t| {
                t.get("kind")
                    .map(Json::items)
                    .unwrap_or_default()
                    .iter()
                    .any(|k| k.as_str() == Some("lib"))
            });
        if !published || !is_lib {
            continue;
        }
        let check = |args: &[&str]| FeatureCheck {
            command: "check",
            package: name.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        plan.push(check(&["--no-default-features"]));
        let features = package.get("features").map(Json::keys).unwrap_or_default();
        for feature in features.iter().filter(|f| **f != "default") {
            plan.push(check(&["--no-default-features", "--features", feature]));
        }
        plan.push(check(&["--all-features"]));
        plan.push(FeatureCheck {
            command: "test",
            ..check(&["--no-default-features"])
        });
    }
    Ok(plan)
}

/// `cargo xtask features`: runs every check of [`feature_plan`], then names
/// each crate and feature set that failed.
pub(crate) fn features() -> Result<()> {
    let mut metadata = cargo();
    metadata.args(["metadata", "--format-version", "1", "--no-deps"]);
    let out = metadata
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let metadata = json::parse(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| format!("cannot read cargo metadata's output: {e}"))?;
    let plan = feature_plan(&metadata)?;
    let mut failed = Vec::new();
    for check in &plan {
        let started = Instant::now();
        let mut cmd = cargo();
        cmd.args([check.command, "--quiet", "-p", &check.package])
            .args(&check.args);
        let ok = cmd.status().is_ok_and(|s| s.success());
        println!(
            "features: {} {} ({:.1} s)",
            check.label(),
            if ok { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(check.label());
        }
    }
    if failed.is_empty() {
        println!("features: {} checks passed", plan.len());
        Ok(())
    } else {
        Err(format!(
            "{} of {} feature checks failed (`cargo check -p` with):\n  {}",
            failed.len(),
            plan.len(),
            failed.join("\n  ")
        ))
    }
}

/// `cargo xtask doc`: the workspace's docs, every feature on (as docs.rs
/// builds them), warnings denied.
pub(crate) fn doc() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["doc", "--workspace", "--no-deps", "--all-features"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(
        cmd,
        "RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps",
    )
}

/// `cargo xtask package`: packages every crate and builds each from its
/// `.crate`, so an `include` list that drops a needed file fails here.
/// Needs a clean work tree (as CI's clone is).
pub(crate) fn package() -> Result<()> {
    forget_stale_extractions()?;
    let mut cmd = cargo();
    cmd.args(["package", "--workspace"]);
    run(cmd, "cargo package --workspace").map_err(|e| {
        format!(
            "{e} (it packages what git tracks: commit your changes first, as CI's clean clone has)"
        )
    })
}

/// Removes what an earlier `cargo package` unpacked of our own crates.
///
/// `cargo package --workspace` builds each package against the others
/// through a temporary local registry, which cargo unpacks under
/// `$CARGO_HOME/registry/src/-<hash>/<name>-<version>/`, and it never
/// unpacks a version there again. The hash depends on the checkout's path, so
/// a machine that keeps `CARGO_HOME` and clones to the same path each run (a
/// CI runner) verified a new commit against the sources of an older one, with
/// the same version number. Local registries are the directories whose name
/// starts with `-` (crates.io's carry its host name); only our packages'
/// directories in them are removed.
fn forget_stale_extractions() -> Result<()> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(home) => std::path::PathBuf::from(home),
        None => match std::env::var_os("HOME") {
            Some(home) => std::path::PathBuf::from(home).join(".cargo"),
            None => return Ok(()),
        },
    };
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(packages) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for package in packages.flatten() {
            if is_ours(&package.file_name().to_string_lossy()) {
                std::fs::remove_dir_all(package.path()).map_err(|e| {
                    format!(
                        "could not remove the stale unpacked package {}: {e}",
                        package.path().display()
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// Whether an unpacked package directory (`<name>-<version>`) is one of ours.
fn is_ours(dir: &str) -> bool {
    dir.starts_with("core-agent-")
}

/// Runs `step`, then prints how long it took.
pub(crate) fn timed(name: &str, step: impl FnOnce() -> Result<()>) -> Result<()> {
    let started = Instant::now();
    let result = step();
    println!(
        "xtask: {name} {} in {:.0} s",
        if result.is_ok() { "passed" } else { "failed" },
        started.elapsed().as_secs_f64()
    );
    result
}

/// A `cargo` command, for [`timed`] steps that are one command.
pub(crate) fn cargo_step(args: &[&str], what: &str) -> Result<()> {
    let mut cmd: Command = cargo();
    cmd.args(args);
    run(cmd, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_covers_each_library_feature_and_skips_the_rest() {
        let metadata = json::parse(
            r#"{"packages": [
              {"name": "core-agent", "publish": null, "features": {},
               "targets": [{"kind": ["bin"]}]},
              {"name": "core-agent-host", "publish": null,
               "features": {"default": [], "demo": ["dep:rmcp"], "sqlite": []},
               "targets": [{"kind": ["lib"]}, {"kind": ["example"]}]},
              {"name": "core-agent-e2e", "publish": [], "features": {},
               "targets": [{"kind": ["lib"]}]}
            ]}"#,
        )
        .unwrap();
        let plan: Vec<String> = feature_plan(&metadata)
            .unwrap()
            .iter()
            .map(FeatureCheck::label)
            .collect();
        assert_eq!(
            plan,
            [
                "check core-agent-host --no-default-features",
                "check core-agent-host --no-default-features --features demo",
                "check core-agent-host --no-default-features --features sqlite",
                "check core-agent-host --all-features",
                "test core-agent-host --no-default-features",
            ]
        );
    }
}
