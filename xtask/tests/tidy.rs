//! Tidy: the layering of DESIGN.md and the workspace's conventions, checked
//! on every crate under `crates/` (found by reading the directory, so a new
//! crate is checked the day it appears).
//!
//! Layering, on `[dependencies]` and `[target.*.dependencies]` (renames
//! resolved; dev- and build-dependencies are free):
//! - `core-agent-mcp-config` depends on none of ours, nor on rmcp, tokio or
//!   reqwest;
//! - policy, permissions, digest and survey never depend on
//!   `core-agent-mcp-transport`, rmcp or tokio, nor on each other;
//! - only `core-agent-gateway` and the binary depend on axum, and only the
//!   binary and `core-agent-fleet` (the replicas' shared state, which
//!   implements the gateway's `Fleet`) depend on the gateway (the host never
//!   serves MCP itself);
//! - only `core-agent-fleet` depends on a PostgreSQL client;
//! - only `core-agent` (the binary's package) depends on clap, and nothing
//!   depends on `core-agent`.
//!
//! Conventions: a `core-agent` package name, an entry in
//! `[workspace.dependencies]` (but for the binary's package), `[lints] workspace = true`, a README.md, and a
//! crate root that opens with its doc; one integration-test binary per crate
//! (`tests/all.rs` and `tests/suite/`).
//!
//! The reader is a few lines of std, so xtask keeps its no-dependency rule:
//! it understands the TOML that manifests use (tables, dotted keys, inline
//! tables, arrays over several lines, comments), not all of TOML.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The config crate: the bottom layer.
const CONFIG: &str = "core-agent-mcp-config";
/// The transport crate: the only library that talks MCP.
const TRANSPORT: &str = "core-agent-mcp-transport";
/// Pure, synchronous siblings.
const PURE: &[&str] = &[
    "core-agent-mcp-policy",
    "core-agent-permissions",
    "core-agent-digest",
    "core-agent-survey",
];
/// The binary's package.
const CLI: &str = "core-agent";
/// The MCP server layer, above the host.
const GATEWAY: &str = "core-agent-gateway";
/// The replicas' shared state, on PostgreSQL, beside the binary.
const FLEET: &str = "core-agent-fleet";
/// PostgreSQL clients, which only the fleet may use.
const POSTGRES_CLIENTS: &[&str] = &["tokio-postgres", "deadpool-postgres", "postgres", "sqlx"];

#[test]
fn layering_and_conventions_hold() {
    let root = workspace_root();
    let crates = match workspace_crates(&root) {
        Ok(crates) => crates,
        Err(e) => panic!("tidy: {e}"),
    };
    let names: BTreeSet<&str> = crates
        .iter()
        .filter_map(|c| c.manifest.name.as_deref())
        .collect();
    for known in [CONFIG, TRANSPORT, PURE[0], PURE[1], PURE[2]] {
        assert!(
            names.contains(known),
            "tidy: {known} not found under crates/ (found {names:?}); is the reader broken?"
        );
    }
    let workspace = match read(&root.join("Cargo.toml")) {
        Ok(text) => parse_manifest(&text),
        Err(e) => panic!("tidy: {e}"),
    };
    let mut problems = Vec::new();
    for krate in &crates {
        problems.extend(layering(&krate.manifest));
        problems.extend(conventions(&root, krate, &workspace.workspace_deps));
    }
    assert!(
        problems.is_empty(),
        "tidy found {} problem(s):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn a_forbidden_edge_is_caught() {
    let digest = parse_manifest(
        r#"
        [package]
        name = "core-agent-digest"

        [dependencies]
        serde.workspace = true
        tokio = { workspace = true, features = ["rt"] }

        [dev-dependencies]
        rmcp.workspace = true
        "#,
    );
    assert_eq!(
        layering(&digest),
        [
            "core-agent-digest depends on tokio: the digest core is pure \
          (DESIGN.md: digest never depends on transport, rmcp or tokio)"
        ]
    );

    let config = parse_manifest(
        r#"
        [package]
        name = "core-agent-mcp-config" # the bottom layer

        [dependencies.core-agent-mcp-policy]
        workspace = true

        [target.'cfg(unix)'.dependencies]
        rt = { package = "tokio", version = "1" }
        "#,
    );
    assert_eq!(
        layering(&config),
        [
            "core-agent-mcp-config depends on core-agent-mcp-policy: config is the bottom layer \
             (DESIGN.md: mcp-config depends on none of our crates)",
            "core-agent-mcp-config depends on tokio: config is synchronous and knows nothing of MCP \
             (DESIGN.md: mcp-config never depends on rmcp, tokio or reqwest)",
        ]
    );

    let host = parse_manifest(
        r#"
        [package]
        name = "core-agent-host"
        [dependencies]
        args.package = "clap"
        core-agent = { path = "../agent-cli" }
        "#,
    );
    assert_eq!(
        layering(&host),
        [
            "core-agent-host depends on clap: only the binary parses arguments \
             (DESIGN.md: nothing below agent-cli depends on clap)",
            "core-agent-host depends on core-agent: the CLI package is the top layer \
             (DESIGN.md: no library crate depends on the binary's package)",
        ]
    );

    let policy = parse_manifest(
        "[package]\nname = \"core-agent-mcp-policy\"\n[dependencies]\n\
         core-agent-mcp-config.workspace = true\ncore-agent-permissions.workspace = true\n",
    );
    assert_eq!(
        layering(&policy),
        [
            "core-agent-mcp-policy depends on core-agent-permissions: policy, permissions, digest \
          and survey are siblings (DESIGN.md: they do not depend on each other; each defines \
          the small input type it needs)"
        ]
    );
}

#[test]
fn the_host_may_not_serve_mcp_itself() {
    let host = parse_manifest(
        r#"
        [package]
        name = "core-agent-host"

        [dependencies]
        axum = "0.8"
        core-agent-gateway.workspace = true
        "#,
    );
    let problems = layering(&host);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0]
            .starts_with("core-agent-host depends on axum: serving MCP is the gateway's layer")
    );
}

#[test]
fn the_binary_may_use_clap_and_everything_below_it() {
    let cli = parse_manifest(
        r#"
        [package]
        name = "core-agent"
        [dependencies]
        clap.workspace = true
        core-agent-mcp-transport.workspace = true
        core-agent-digest = { workspace = true, features = ["sqlite"] }
        rmcp.workspace = true
        tokio.workspace = true
        "#,
    );
    assert_eq!(layering(&cli), Vec::<String>::new());
}

#[test]
fn the_reader_understands_manifest_toml() {
    let m = parse_manifest(
        r#"
        [package]
        name = "demo"
        description = """
        [dependencies]
        not-a-dep = "inside a string"
        """

        [lints]
        workspace = true

        [features]
        fast = ["dep:fastlib"]

        [dependencies]
        # commented = "1"
        plain = "1"
        "quoted" = "1"
        dotted.workspace = true
        inline = { version = "1", features = [
            "package", # a feature named like the key
        ], package = "renamed" }
        'literal' = { path = "x" } # trailing comment with = and [

        [dependencies.table-form]
        version = "1"
        package = "table-renamed"

        [target.'cfg(target_os = "linux")'.dependencies]
        linux-only = "1"

        [target.x86_64-unknown-linux-gnu.dependencies.target-table]
        version = "1"

        [build-dependencies]
        builder = "1"

        [dev-dependencies]
        tester = "1"

        [[bin]]
        name = "not-the-package"
        "#,
    );
    assert_eq!(m.name.as_deref(), Some("demo"));
    assert!(m.lints_workspace);
    let deps: Vec<&str> = m.deps.iter().map(String::as_str).collect();
    assert_eq!(
        deps,
        [
            "dotted",
            "linux-only",
            "literal",
            "plain",
            "quoted",
            "renamed",
            "table-renamed",
            "target-table"
        ]
    );

    let root = parse_manifest(
        "[workspace.dependencies]\ncore-agent-x = { path = \"crates/x\" }\nserde = \"1\"\n\
         [workspace.lints.rust]\nunsafe_code = \"forbid\"\n",
    );
    assert!(!root.lints_workspace);
    assert_eq!(
        root.workspace_deps
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["core-agent-x", "serde"]
    );
}

// ---------------------------------------------------------------------------
// The rules.

/// The forbidden edges of one crate, each naming the crate, the dependency and the rule.
fn layering(m: &Manifest) -> Vec<String> {
    let Some(name) = m.name.as_deref() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for dep in &m.deps {
        let dep = dep.as_str();
        let why = if name == CONFIG && (dep == CLI || dep.starts_with("core-agent-")) {
            Some(
                "config is the bottom layer (DESIGN.md: mcp-config depends on none of our crates)"
                    .to_owned(),
            )
        } else if name == CONFIG && ["rmcp", "tokio", "reqwest"].contains(&dep) {
            Some(
                "config is synchronous and knows nothing of MCP \
                 (DESIGN.md: mcp-config never depends on rmcp, tokio or reqwest)"
                    .to_owned(),
            )
        } else if PURE.contains(&name) && [TRANSPORT, "rmcp", "tokio"].contains(&dep) {
            let short = short_name(name);
            Some(format!(
                "the {short} core is pure (DESIGN.md: {short} never depends on transport, rmcp or tokio)"
            ))
        } else if PURE.contains(&name) && PURE.contains(&dep) {
            Some(
                "policy, permissions, digest and survey are siblings (DESIGN.md: they do not \
                 depend on each other; each defines the small input type it needs)"
                    .to_owned(),
            )
        } else if name != FLEET && POSTGRES_CLIENTS.contains(&dep) {
            Some(
                "a database client lives in the fleet's crate \
                 (DESIGN.md: keep the pure crates free of a database client)"
                    .to_owned(),
            )
        } else if name != CLI && name != GATEWAY && dep == "axum"
            || ![CLI, GATEWAY, FLEET].contains(&name) && dep == GATEWAY
        {
            Some(
                "serving MCP is the gateway's layer, above the host \
                 (DESIGN.md: only the gateway and the binary know the gateway or axum)"
                    .to_owned(),
            )
        } else if name != CLI && dep == "clap" {
            Some(
                "only the binary parses arguments (DESIGN.md: nothing below agent-cli depends on clap)"
                    .to_owned(),
            )
        } else if name != CLI && dep == CLI {
            Some(
                "the CLI package is the top layer \
                 (DESIGN.md: no library crate depends on the binary's package)"
                    .to_owned(),
            )
        } else {
            None
        };
        if let Some(why) = why {
            problems.push(format!("{name} depends on {dep}: {why}"));
        }
    }
    problems
}

/// `core-agent-mcp-policy` → `policy`.
fn short_name(package: &str) -> &str {
    let rest = package.strip_prefix("core-agent-").unwrap_or(package);
    rest.strip_prefix("mcp-").unwrap_or(rest)
}

/// The conventions of STYLE.md that a file listing can check.
fn conventions(root: &Path, krate: &Crate, workspace_deps: &BTreeSet<String>) -> Vec<String> {
    let dir = krate
        .dir
        .strip_prefix(root)
        .unwrap_or(&krate.dir)
        .display()
        .to_string();
    let Some(name) = krate.manifest.name.as_deref() else {
        return vec![format!("{dir}/Cargo.toml has no [package] name")];
    };
    let mut problems = Vec::new();
    if name != CLI && !name.starts_with("core-agent-") {
        problems.push(format!(
            "{dir}: package {name} lacks the core-agent- prefix (DESIGN.md: package names share one prefix)"
        ));
    }
    // The binary's package is depended on by nothing, so it needs no entry.
    if name != CLI && !workspace_deps.contains(name) {
        problems.push(format!(
            "{name} is not in the root [workspace.dependencies] \
             (STYLE.md: every internal crate is listed there with path and version)"
        ));
    }
    if !krate.manifest.lints_workspace {
        problems.push(format!(
            "{name} lacks `[lints] workspace = true` in {dir}/Cargo.toml (STYLE.md: lints once, at the root)"
        ));
    }
    if !krate.dir.join("README.md").is_file() {
        problems.push(format!(
            "{name} has no {dir}/README.md (STYLE.md: the README is the crate doc)"
        ));
    }
    let roots = ["src/lib.rs", "src/main.rs"];
    match roots
        .iter()
        .map(|r| krate.dir.join(r))
        .find(|p| p.is_file())
    {
        None => problems.push(format!(
            "{name} has neither {dir}/src/lib.rs nor {dir}/src/main.rs"
        )),
        Some(path) => match read(&path) {
            Err(e) => problems.push(e),
            Ok(text) => {
                let first = text
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("");
                if !(first.starts_with("//!")
                    || first.starts_with(r#"#![doc = include_str!("../README.md")]"#))
                {
                    let file = path
                        .strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    problems.push(format!(
                        "{file} does not open with its crate doc \
                         (STYLE.md: `#![doc = include_str!(\"../README.md\")]` or a `//!` overview)"
                    ));
                }
            }
        },
    }
    problems
}

// ---------------------------------------------------------------------------
// The workspace.

/// One crate under `crates/`.
#[derive(Debug)]
struct Crate {
    dir: PathBuf,
    manifest: Manifest,
}

fn workspace_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// Every directory under `crates/` that holds a `Cargo.toml`, sorted.
fn workspace_crates(root: &Path) -> Result<Vec<Crate>, String> {
    let crates_dir = root.join("crates");
    let entries = std::fs::read_dir(&crates_dir)
        .map_err(|e| format!("cannot list {}: {e}", crates_dir.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", crates_dir.display()))?;
        if entry.path().join("Cargo.toml").is_file() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let manifest = parse_manifest(&read(&dir.join("Cargo.toml"))?);
            Ok(Crate { dir, manifest })
        })
        .collect()
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// The reader.

/// What tidy needs from one Cargo.toml.
#[derive(Debug, Default)]
struct Manifest {
    /// `[package] name`.
    name: Option<String>,
    /// The packages (renames resolved) of `[dependencies]` and `[target.*.dependencies]`.
    deps: BTreeSet<String>,
    /// `[lints] workspace = true`.
    lints_workspace: bool,
    /// The keys of `[workspace.dependencies]` (in the root manifest).
    workspace_deps: BTreeSet<String>,
}

fn parse_manifest(text: &str) -> Manifest {
    let mut m = Manifest::default();
    // Dependency key → package, so `package = "…"` can rename it in any form.
    let mut deps: BTreeMap<String, String> = BTreeMap::new();
    let mut table: Vec<String> = Vec::new();
    for statement in statements(text) {
        if let Some(header) = statement.strip_prefix("[[") {
            // An array of tables (`[[bin]]`, `[[test]]`): nothing tidy reads.
            table = vec![format!("[[{}", header.trim_end_matches(']'))];
            continue;
        }
        if let Some(header) = statement.strip_prefix('[') {
            table = split_key(header.trim_end().trim_end_matches(']'));
            if let Some((key, [])) = dependency(&table) {
                deps.entry(key.clone()).or_insert_with(|| key.clone());
            }
            continue;
        }
        let Some((key, value)) = split_once_outside_quotes(&statement, '=') else {
            continue;
        };
        let value = value.trim();
        let path: Vec<String> = table.iter().cloned().chain(split_key(key)).collect();
        match path
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["package", "name"] => m.name = Some(unquote(value)),
            ["lints", "workspace"] => m.lints_workspace = value == "true",
            ["workspace", "dependencies", key, ..] => {
                m.workspace_deps.insert((*key).to_owned());
            }
            _ => {}
        }
        if let Some((key, rest)) = dependency(&path) {
            // A rename (`package = "…"`) replaces; anything else only adds the key.
            let rename = match rest {
                [] => inline_value(value, "package"),
                [p] if p == "package" => Some(unquote(value)),
                _ => None,
            };
            match rename {
                Some(package) => {
                    deps.insert(key.clone(), package);
                }
                None => {
                    deps.entry(key.clone()).or_insert_with(|| key.clone());
                }
            }
        }
    }
    m.deps = deps.into_values().collect();
    m
}

/// For a key path inside `[dependencies]` or `[target.<cfg>.dependencies]`:
/// the dependency's key and the path below it.
fn dependency(path: &[String]) -> Option<(&String, &[String])> {
    match path {
        [d, key, rest @ ..] if d == "dependencies" => Some((key, rest)),
        [t, _, d, key, rest @ ..] if t == "target" && d == "dependencies" => Some((key, rest)),
        _ => None,
    }
}

/// Splits the text into statements (a header or a `key = value`), joining
/// the lines of a value whose brackets are still open and dropping comments.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0_i32;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                let triple = chars.peek() == Some(&c) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek() == Some(&c)
                };
                current.push(c);
                if triple {
                    current.push(c);
                    current.push(c);
                    chars.next();
                    chars.next();
                }
                string_body(&mut chars, &mut current, c, triple);
            }
            '#' => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            '[' | '{' => {
                depth += 1;
                current.push(c);
            }
            ']' | '}' => {
                depth -= 1;
                current.push(c);
            }
            '\n' if depth <= 0 => {
                depth = 0;
                let statement = current.trim();
                if !statement.is_empty() {
                    out.push(statement.to_owned());
                }
                current.clear();
            }
            '\n' => current.push(' '),
            _ => current.push(c),
        }
    }
    let statement = current.trim();
    if !statement.is_empty() {
        out.push(statement.to_owned());
    }
    out
}

/// Copies a string's body and its closing quote(s) from `chars` to `out`.
fn string_body(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
    quote: char,
    triple: bool,
) {
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '\\' && quote == '"' {
            if let Some(escaped) = chars.next() {
                out.push(escaped);
            }
        } else if c == quote {
            if !triple {
                return;
            }
            let mut ahead = chars.clone();
            if ahead.next() == Some(quote) && ahead.next() == Some(quote) {
                out.push(quote);
                out.push(quote);
                chars.next();
                chars.next();
                return;
            }
        } else if c == '\n' && !triple {
            return;
        }
    }
}

/// `a."b.c".'d'` → `["a", "b.c", "d"]`.
fn split_key(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = key;
    while let Some((part, tail)) = split_once_outside_quotes(rest, '.') {
        parts.push(unquote(part));
        rest = tail;
    }
    parts.push(unquote(rest));
    parts
}

/// Splits at the first `sep` outside quotes and brackets.
fn split_once_outside_quotes(s: &str, sep: char) -> Option<(&str, &str)> {
    let mut quote = None;
    let mut depth = 0_i32;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '[' || c == '{' => depth += 1,
            None if c == ']' || c == '}' => depth -= 1,
            None if c == sep && depth == 0 => return Some((&s[..i], &s[i + c.len_utf8()..])),
            None => {}
        }
    }
    None
}

/// The string value of `key` in an inline table `{ … }`.
fn inline_value(value: &str, key: &str) -> Option<String> {
    let body = value.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut rest = body;
    loop {
        let (item, tail) = split_once_outside_quotes(rest, ',').unwrap_or((rest, ""));
        if let Some((k, v)) = split_once_outside_quotes(item, '=')
            && split_key(k) == [key]
        {
            return Some(unquote(v));
        }
        if tail.is_empty() {
            return None;
        }
        rest = tail;
    }
}

/// Trims, and strips one pair of surrounding `"` or `'`.
fn unquote(s: &str) -> String {
    let s = s.trim();
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner.to_owned();
        }
    }
    s.to_owned()
}

// ---------------------------------------------------------------------------
// Licenses: each package carries the root's two license files, byte for byte,
// so every `.crate` holds the texts its `license = "MIT OR Apache-2.0"` names.

/// The license files at the root, each copied into every package directory.
const LICENSES: &[&str] = &["LICENSE-MIT", "LICENSE-APACHE"];

#[test]
fn every_package_carries_the_root_licenses() {
    let root = workspace_root();
    let mut dirs: Vec<PathBuf> = match workspace_crates(&root) {
        Ok(crates) => crates.into_iter().map(|c| c.dir).collect(),
        Err(e) => panic!("tidy: {e}"),
    };
    dirs.extend(["tests", "fuzz", "xtask"].map(|d| root.join(d)));
    let problems = license_problems(&root, &dirs);
    assert!(
        problems.is_empty(),
        "tidy found {} license problem(s):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn a_missing_or_changed_license_copy_is_caught() {
    let tmp = std::env::temp_dir().join(format!("tidy-licenses-{}", std::process::id()));
    let (good, changed, missing) = (tmp.join("good"), tmp.join("changed"), tmp.join("missing"));
    for dir in [&tmp, &good, &changed, &missing] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for dir in [&tmp, &good, &changed] {
        std::fs::write(dir.join("LICENSE-MIT"), "mit text\n").unwrap();
        std::fs::write(dir.join("LICENSE-APACHE"), "apache text\n").unwrap();
    }
    std::fs::write(changed.join("LICENSE-APACHE"), "apache text, edited\n").unwrap();
    std::fs::write(missing.join("LICENSE-MIT"), "mit text\n").unwrap();
    let problems = license_problems(&tmp, &[good, changed, missing]);
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(
        problems,
        [
            "changed/LICENSE-APACHE differs from the root's LICENSE-APACHE (copy the root file: \
             each package ships its own copy)",
            "missing/LICENSE-APACHE is missing (copy the root's LICENSE-APACHE: each package \
             ships its own copy)",
        ]
    );
}

/// Each of `dirs` holds a copy of each root license file, identical to the root's.
fn license_problems(root: &Path, dirs: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for license in LICENSES {
        let original = match std::fs::read(root.join(license)) {
            Ok(bytes) => bytes,
            Err(e) => {
                problems.push(format!("the root {license} cannot be read: {e}"));
                continue;
            }
        };
        for dir in dirs {
            let shown = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
            match std::fs::read(dir.join(license)) {
                Err(_) => problems.push(format!(
                    "{shown}/{license} is missing (copy the root's {license}: each package ships its own copy)"
                )),
                Ok(copy) if copy != original => problems.push(format!(
                    "{shown}/{license} differs from the root's {license} (copy the root file: each package ships its own copy)"
                )),
                Ok(_) => {}
            }
        }
    }
    problems.sort();
    problems
}

// ---------------------------------------------------------------------------
// No CLI wording in library sources: a library error or report carries the
// data (the server, the setting, the option) and the binary words it for its
// users, so a crates.io user of a library never reads `core-agent mcp login`.
//
// Checked: the code of `crates/*/src` but the binary's (`crates/agent-cli`),
// string literals and attributes included. Allowed: comments, doc comments
// included, because they speak to the reader of the source about which part
// of the binary uses an item ("as `core-agent mcp list --json` prints it"),
// and reach no user at run time; and test code (`#[cfg(test)]` items, files
// named `tests.rs` or `*_tests.rs`), which may assert what the binary prints.

/// Command lines of the binary; each matches only as a whole word, so
/// `core-agent mcp.json` is not one.
const CLI_COMMANDS: &[&str] = &[
    "core-agent mcp",
    "core-agent serve",
    "core-agent tools",
    "core-agent call",
];
/// The binary's flags; a prefix matches (`--max-sessions-per-token`).
const CLI_FLAGS: &[&str] = &["--allow-host", "--no-mcp-digest", "--max-sessions"];

#[test]
fn library_sources_do_not_word_the_cli() {
    let root = workspace_root();
    let crates = match workspace_crates(&root) {
        Ok(crates) => crates,
        Err(e) => panic!("tidy: {e}"),
    };
    let mut problems = Vec::new();
    for krate in crates
        .iter()
        .filter(|c| c.manifest.name.as_deref() != Some(CLI))
    {
        let mut files = Vec::new();
        rust_files(&krate.dir.join("src"), &mut files);
        for file in files {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if stem == "tests" || stem.ends_with("_tests") {
                continue;
            }
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            match read(&file) {
                Ok(text) => problems.extend(cli_wording(&shown, &text)),
                Err(e) => problems.push(e),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "tidy found CLI wording in {} library line(s) (a library error carries the data; \
         the binary, crates/agent-cli, words it):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn cli_wording_in_library_code_is_caught() {
    let text = r#"
//! Loads the servers `core-agent mcp list` shows: comments may name the binary.
/// The error `core-agent serve --http` prints.
#[error("login needed: run `core-agent mcp login {server}`")]
LoginNeeded { server: String },
const HINT: &str = "raise the limit (--max-sessions-per-token)";
const FILE: &str = "core-agent mcp.json files and core-agent tooling are fine";
    let s = format!(
        "review it, then run \
         `core-agent tools`"); // and a trailing `core-agent call` comment counts
#[cfg(test)]
mod tests {
    #[test]
    fn prints() { assert_eq!(x, "run `core-agent mcp login gh`"); }
}
fn after_the_tests() -> &'static str { "--no-mcp-digest" }
"#;
    assert_eq!(
        cli_wording("crates/x/src/lib.rs", text),
        [
            "crates/x/src/lib.rs:4: `core-agent mcp`",
            "crates/x/src/lib.rs:6: `--max-sessions`",
            "crates/x/src/lib.rs:10: `core-agent tools`",
            "crates/x/src/lib.rs:10: `core-agent call`",
            "crates/x/src/lib.rs:16: `--no-mcp-digest`",
        ]
    );
}

/// Each line of `text`'s non-test code that names a CLI command or flag, as
/// `file:line: `wording``.
fn cli_wording(file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            skip_item(&mut lines);
            continue;
        }
        for command in CLI_COMMANDS {
            let whole_word = line.match_indices(command).any(|(at, _)| {
                !line[at + command.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || "-_.".contains(c))
            });
            if whole_word {
                problems.push(format!("{file}:{}: `{command}`", i + 1));
            }
        }
        for flag in CLI_FLAGS {
            if line.contains(flag) {
                problems.push(format!("{file}:{}: `{flag}`", i + 1));
            }
        }
    }
    problems
}

/// Skips the item after a `#[cfg(test)]`: to its `;` or its closing brace.
fn skip_item<'a>(lines: &mut impl Iterator<Item = (usize, &'a str)>) {
    let mut depth = 0_i32;
    let mut opened = false;
    for (_, line) in lines {
        let code = line.split("//").next().unwrap_or("");
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
            return;
        }
    }
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

// ---------------------------------------------------------------------------
// ARCHITECTURE.md's API lines: each library crate's paragraph has one line
// `**API** (`crates/<dir>/src/lib.rs`): `A`, `B`, …` naming, in any order,
// everything its lib.rs exports: the last name of each `pub use` (or its
// `as` alias; `path::*` for a glob), each `pub mod`, and each `pub` item
// declared in lib.rs itself. The check fails on a name either side lacks.

#[test]
fn architecture_lists_each_crates_api() {
    let root = workspace_root();
    let architecture = match read(&root.join("ARCHITECTURE.md")) {
        Ok(text) => text,
        Err(e) => panic!("tidy: {e}"),
    };
    let crates = match workspace_crates(&root) {
        Ok(crates) => crates,
        Err(e) => panic!("tidy: {e}"),
    };
    let mut libs = Vec::new();
    for krate in &crates {
        let lib = krate.dir.join("src").join("lib.rs");
        if !lib.is_file() {
            continue;
        }
        let shown = lib
            .strip_prefix(&root)
            .unwrap_or(&lib)
            .display()
            .to_string();
        match read(&lib) {
            Ok(text) => libs.push((shown, lib_exports(&text))),
            Err(e) => panic!("tidy: {e}"),
        }
    }
    assert!(
        libs.len() >= 5,
        "tidy: found only {libs:?}; is the reader broken?"
    );
    let problems = api_problems(&architecture, &libs);
    assert!(
        problems.is_empty(),
        "tidy: ARCHITECTURE.md's API lines differ from the lib.rs files:\n  {}\n",
        problems.join("\n  ")
    );
}

#[test]
fn an_api_line_that_drifted_is_caught() {
    let lib = r#"
//! The crate doc: `pub use not::This;`
mod error;
pub mod oauth;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use error::{Error, Result};
pub use route::{
    Digested, Method,
    nested::{deep, Other as Renamed}, self,
};
pub use rmcp::model;
pub use prelude::*;
pub(crate) use hidden::Internal;
pub struct Gateway {
    pub mode: Mode,
}
impl Gateway {
    pub fn new() -> Gateway { Gateway { mode: Mode } }
}
pub async fn serve() {}
pub const LIMIT: usize = 3;
pub type Alias = u8;
"#;
    let exports = lib_exports(lib);
    assert_eq!(
        exports.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "Alias",
            "Digested",
            "Error",
            "Gateway",
            "LIMIT",
            "Method",
            "Renamed",
            "Result",
            "SqliteStore",
            "deep",
            "model",
            "oauth",
            "prelude::*",
            "route",
            "serve"
        ]
    );
    let architecture = "\
## Crates
**API** (`crates/x/src/lib.rs`): `Alias`, `Digested`, `Error`, `Gateway`, `LIMIT`, `Method`, \
`Renamed`, `Result`, `SqliteStore`, `deep`, `model`, `oauth`, `prelude::*`, `route`, `Gone`.
";
    let libs = vec![
        ("crates/x/src/lib.rs".to_owned(), exports),
        (
            "crates/y/src/lib.rs".to_owned(),
            BTreeSet::from(["Y".to_owned()]),
        ),
    ];
    assert_eq!(
        api_problems(architecture, &libs),
        [
            "crates/x/src/lib.rs exports `serve`, which ARCHITECTURE.md's API line does not list",
            "ARCHITECTURE.md lists `Gone` for crates/x/src/lib.rs, which does not export it",
            "ARCHITECTURE.md has no `**API** (`crates/y/src/lib.rs`): …` line",
        ]
    );
}

/// What ARCHITECTURE.md's API lines get wrong about `libs` (lib.rs path, exports).
fn api_problems(architecture: &str, libs: &[(String, BTreeSet<String>)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (lib, exports) in libs {
        let marker = format!("**API** (`{lib}`):");
        let lines: Vec<&str> = architecture
            .lines()
            .filter(|l| l.contains(&marker))
            .collect();
        let line = match lines.as_slice() {
            [line] => line,
            [] => {
                problems.push(format!(
                    "ARCHITECTURE.md has no `**API** (`{lib}`): …` line"
                ));
                continue;
            }
            _ => {
                problems.push(format!(
                    "ARCHITECTURE.md has {} API lines for {lib}; keep one",
                    lines.len()
                ));
                continue;
            }
        };
        let listed = line
            .split_once(&marker)
            .map(|(_, rest)| rest)
            .unwrap_or("")
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect::<BTreeSet<String>>();
        for name in exports.difference(&listed) {
            problems.push(format!(
                "{lib} exports `{name}`, which ARCHITECTURE.md's API line does not list"
            ));
        }
        for name in listed.difference(exports) {
            problems.push(format!(
                "ARCHITECTURE.md lists `{name}` for {lib}, which does not export it"
            ));
        }
    }
    problems
}

/// The names a lib.rs exports: see the section comment above.
fn lib_exports(text: &str) -> BTreeSet<String> {
    let mut exports = BTreeSet::new();
    let mut depth = 0_i32;
    let mut pending_use: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("//") {
            continue;
        }
        if let Some(tree) = pending_use.as_mut() {
            tree.push(' ');
            tree.push_str(t);
            if t.contains(';') {
                use_leaves(tree.trim_end_matches(';'), &mut exports);
                pending_use = None;
            }
            continue;
        }
        if depth == 0 {
            if let Some(tree) = t.strip_prefix("pub use ") {
                if tree.contains(';') {
                    use_leaves(tree.split(';').next().unwrap_or(""), &mut exports);
                } else {
                    pending_use = Some(tree.to_owned());
                }
                continue;
            }
            if let Some(item) = t.strip_prefix("pub ") {
                let words: Vec<&str> = item
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .collect();
                let kinds = [
                    "fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union",
                ];
                let at = words.iter().position(|w| kinds.contains(w));
                if let Some(name) = at.and_then(|at| words.get(at + 1)) {
                    exports.insert((*name).to_owned());
                }
            }
        }
        let code = t.split("//").next().unwrap_or("");
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
    }
    exports
}

/// The leaf names of a use tree: `a::{b, c::{d as e}, self}` → `b`, `e`, `a`.
fn use_leaves(tree: &str, out: &mut BTreeSet<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix = tree[..open].trim_end_matches("::").trim();
        let inner = tree[open + 1..].trim_end().trim_end_matches('}');
        let mut rest = inner;
        loop {
            let (part, tail) = split_once_outside_quotes(rest, ',').unwrap_or((rest, ""));
            let part = part.trim();
            if part == "self" {
                out.insert(prefix.rsplit("::").next().unwrap_or(prefix).to_owned());
            } else if !part.is_empty() {
                use_leaves(part, out);
            }
            if tail.is_empty() {
                break;
            }
            rest = tail;
        }
        return;
    }
    if let Some((_, alias)) = tree.split_once(" as ") {
        out.insert(alias.trim().to_owned());
    } else if let Some(path) = tree.strip_suffix("::*") {
        out.insert(format!("{}::*", path.rsplit("::").next().unwrap_or(path)));
    } else {
        out.insert(tree.rsplit("::").next().unwrap_or(tree).to_owned());
    }
}

// ---------------------------------------------------------------------------
// One integration-test binary per crate (STYLE.md, Tests): `crates/*/tests`
// holds `all.rs`, which declares `mod suite;` and nothing else (after its
// `//!` doc), the topics under `suite/` (declared in `suite/mod.rs`), and
// fixtures that are not Rust. Each other `.rs` at the top, and each folder
// with a `main.rs`, is one more binary to build and link; a `.rs` in a
// fixture folder is a module no binary declares. `[[test]]` entries in a
// manifest would name binaries past this check, so there are none. The
// workspace's own `tests/` (the e2e package) is not a crate's and is free.

#[test]
fn each_crate_has_one_integration_test_binary() {
    let root = workspace_root();
    let crates = match workspace_crates(&root) {
        Ok(crates) => crates,
        Err(e) => panic!("tidy: {e}"),
    };
    let mut problems = Vec::new();
    let mut binaries = 0;
    for krate in &crates {
        let shown = krate
            .dir
            .strip_prefix(&root)
            .unwrap_or(&krate.dir)
            .display()
            .to_string();
        binaries += usize::from(krate.dir.join("tests/all.rs").is_file());
        problems.extend(test_layout_problems(&shown, &krate.dir));
    }
    assert!(
        binaries >= 5,
        "tidy: found only {binaries} tests/all.rs under crates/; is the walk broken?"
    );
    assert!(
        problems.is_empty(),
        "tidy found {} test layout problem(s):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn a_second_test_binary_or_a_stray_module_is_caught() {
    let tmp = std::env::temp_dir().join(format!("tidy-tests-{}", std::process::id()));
    let (good, bad) = (tmp.join("good"), tmp.join("bad"));
    for dir in [
        good.join("tests/suite"),
        good.join("tests/fixtures/bad"),
        bad.join("tests/common"),
        bad.join("tests/golden"),
        bad.join("tests/cli"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for (path, text) in [
        (good.join("Cargo.toml"), "[package]\nname = \"good\"\n"),
        (good.join("tests/all.rs"), "//! The doc.\n\nmod suite;\n"),
        (good.join("tests/suite/mod.rs"), "mod calls;\n"),
        (good.join("tests/suite/calls.rs"), ""),
        (good.join("tests/fixtures/bad/x.json"), "{}"),
        (good.join("tests/fixtures/bad/x.err"), "error"),
        (
            bad.join("Cargo.toml"),
            "[package]\nname = \"bad\"\n\n[[test]]\nname = \"extra\"\npath = \"x.rs\"\n",
        ),
        (bad.join("tests/all.rs"), "mod suite;\nmod common;\n"),
        (bad.join("tests/http.rs"), ""),
        (bad.join("tests/common/mod.rs"), ""),
        (bad.join("tests/golden/case.rs"), ""),
        (bad.join("tests/golden/case.out"), ""),
        (bad.join("tests/cli/main.rs"), ""),
    ] {
        std::fs::write(path, text).unwrap();
    }
    let good_problems = test_layout_problems("good", &good);
    let bad_problems = test_layout_problems("bad", &bad);
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(good_problems, Vec::<String>::new());
    assert_eq!(
        bad_problems,
        [
            "bad/Cargo.toml has a [[test]] entry (STYLE.md: one integration-test binary per \
             crate, tests/all.rs, found by cargo without an entry)",
            "bad/tests/all.rs declares more than `mod suite;` (STYLE.md: the topics are \
             modules of suite/, declared in suite/mod.rs)",
            "bad/tests/all.rs has no suite/mod.rs beside it (STYLE.md: the topics live in \
             tests/suite/)",
            "bad/tests/cli is one more test binary (STYLE.md: one integration-test binary per \
             crate; make it a module of tests/suite/)",
            "bad/tests/common holds Rust (common/mod.rs) outside suite/ (STYLE.md: shared test \
             code is a module of tests/suite/; fixture folders hold no .rs)",
            "bad/tests/golden holds Rust (golden/case.rs) outside suite/ (STYLE.md: shared test \
             code is a module of tests/suite/; fixture folders hold no .rs)",
            "bad/tests/http.rs is one more test binary (STYLE.md: one integration-test binary \
             per crate; make it a module of tests/suite/)",
        ]
    );
}

/// The problems of one crate's `tests/` layout, sorted; `shown` is the
/// crate's directory as the messages name it.
fn test_layout_problems(shown: &str, dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    match read(&dir.join("Cargo.toml")) {
        Ok(text) if text.lines().any(|l| l.trim() == "[[test]]") => problems.push(format!(
            "{shown}/Cargo.toml has a [[test]] entry (STYLE.md: one integration-test binary per \
             crate, tests/all.rs, found by cargo without an entry)"
        )),
        Ok(_) => {}
        Err(e) => problems.push(e),
    }
    let tests = dir.join("tests");
    let Ok(entries) = std::fs::read_dir(&tests) else {
        return problems;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let at = format!("{shown}/tests/{name}");
        if name == "all.rs" {
            match read(&path) {
                Ok(text) => {
                    let code: Vec<&str> = text
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with("//"))
                        .collect();
                    if code != ["mod suite;"] {
                        problems.push(format!(
                            "{at} declares more than `mod suite;` (STYLE.md: the topics are \
                             modules of suite/, declared in suite/mod.rs)"
                        ));
                    }
                }
                Err(e) => problems.push(e),
            }
            if !tests.join("suite/mod.rs").is_file() {
                problems.push(format!(
                    "{at} has no suite/mod.rs beside it (STYLE.md: the topics live in tests/suite/)"
                ));
            }
        } else if name == "suite" && path.is_dir() {
            continue;
        } else if path.extension().is_some_and(|e| e == "rs") || path.join("main.rs").is_file() {
            problems.push(format!(
                "{at} is one more test binary (STYLE.md: one integration-test binary per crate; \
                 make it a module of tests/suite/)"
            ));
        } else if path.is_dir() {
            let mut files = Vec::new();
            rust_files(&path, &mut files);
            if let Some(file) = files.first() {
                let inner = file.strip_prefix(&tests).unwrap_or(file).display();
                problems.push(format!(
                    "{at} holds Rust ({inner}) outside suite/ (STYLE.md: shared test code is a \
                     module of tests/suite/; fixture folders hold no .rs)"
                ));
            }
        }
    }
    if tests.join("suite").is_dir() && !tests.join("all.rs").is_file() {
        problems.push(format!(
            "{shown}/tests/suite has no all.rs to declare it (STYLE.md: tests/all.rs is the \
             crate's one integration-test binary)"
        ));
    }
    problems.sort();
    problems
}

// ---------------------------------------------------------------------------
// Options stay open: every `pub struct` of a library crate whose name ends
// in `Options`, `Settings`, `Limits` or `Config` carries `#[non_exhaustive]`,
// so that a field added in a minor release breaks no user (they build one
// with `Default` or a constructor and the `with_*` methods, and read its
// fields). The binary's package (`crates/agent-cli`) publishes no API.

/// The names that mark an options-like struct.
const OPTIONS_SUFFIXES: &[&str] = &["Options", "Settings", "Limits", "Config"];

/// `(file, struct)` pairs that may stay exhaustive, each with its reason.
const EXHAUSTIVE_ALLOWED: &[(&str, &str, &str)] = &[];

#[test]
fn options_structs_are_non_exhaustive() {
    let root = workspace_root();
    let crates = match workspace_crates(&root) {
        Ok(crates) => crates,
        Err(e) => panic!("tidy: {e}"),
    };
    let mut problems = Vec::new();
    let mut seen = 0;
    for krate in crates
        .iter()
        .filter(|c| c.manifest.name.as_deref() != Some(CLI))
    {
        let mut files = Vec::new();
        rust_files(&krate.dir.join("src"), &mut files);
        for file in files {
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            match read(&file) {
                Ok(text) => {
                    seen += options_structs(&text).len();
                    problems.extend(exhaustive_options(&shown, &text));
                }
                Err(e) => problems.push(e),
            }
        }
    }
    assert!(
        seen >= 10,
        "tidy: found only {seen} options-like structs; is the reader broken?"
    );
    assert!(
        problems.is_empty(),
        "tidy found {} exhaustive options struct(s) (STYLE.md: a field added later must break \
         no user; add `#[non_exhaustive]`, a `Default` or constructor and `with_*` methods, or \
         allow it in EXHAUSTIVE_ALLOWED with the reason):\n  {}\n",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn an_exhaustive_options_struct_is_caught() {
    let text = r#"
/// Open.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct HostOptions {
    pub a: u8,
}

/// Closed.
#[derive(Debug)]
pub struct StartOptions { pub a: u8 }

macro_rules! settings {
    () => {
        /// Generated, open.
        #[non_exhaustive]
        #[derive(Debug)]
        pub struct WrapSettings {}
    };
}

#[non_exhaustive]
pub struct Plan;
pub(crate) struct InnerConfig;
pub struct Limits<T> { pub inner: T }
/// `pub struct NotConfig` in a doc line is no struct.
pub struct ConfigPaths;
"#;
    assert_eq!(
        options_structs(text),
        [
            (5, "HostOptions"),
            (11, "StartOptions"),
            (18, "WrapSettings"),
            (25, "Limits")
        ]
    );
    assert_eq!(
        exhaustive_options("crates/x/src/lib.rs", text),
        [
            "crates/x/src/lib.rs:11: pub struct StartOptions",
            "crates/x/src/lib.rs:25: pub struct Limits",
        ]
    );
}

/// The options-like `pub struct`s of `text`, as (line, name).
fn options_structs(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.trim_start().strip_prefix("pub struct ")?;
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            OPTIONS_SUFFIXES
                .iter()
                .any(|s| name.ends_with(s))
                .then_some((i + 1, name))
        })
        .collect()
}

/// Each options-like struct of `text` whose attributes (the `#[…]` and doc
/// lines right above it) lack `#[non_exhaustive]` and that
/// [`EXHAUSTIVE_ALLOWED`] does not name, as `file:line: pub struct Name`.
fn exhaustive_options(file: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    options_structs(text)
        .into_iter()
        .filter(|(line, name)| {
            let open = lines[..line - 1]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .any(|l| l == "#[non_exhaustive]");
            !open
                && !EXHAUSTIVE_ALLOWED
                    .iter()
                    .any(|(f, n, _)| *f == file && n == name)
        })
        .map(|(line, name)| format!("{file}:{line}: pub struct {name}"))
        .collect()
}
