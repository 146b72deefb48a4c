//! What a hostile caller (or a hostile tree) tries: regex bombs, calls
//! that should stop, symlinks out of the root, hidden files.

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use crate::{Cancel, Hidden, Limits, Root, Survey, SurveyError, Tool};

const MARKER: &str = "OUTSIDE-MARKER-7f3a";

fn call(survey: &Survey, tool: Tool, args: Value) -> Result<String, SurveyError> {
    survey
        .call(tool, args, &Cancel::new())
        .map(|out| serde_json::to_string(&out).unwrap_or_default())
}

#[test]
fn a_regex_bomb_is_refused_by_the_size_limit_before_it_is_built() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "word\n").unwrap();
    let survey = Survey::new(Root::new(dir.path()).unwrap());
    // 25,000 Unicode word classes: hundreds of MB compiled without a limit.
    let err = call(&survey, Tool::Grep, json!({"pattern": r"\w{500}{50}"})).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, SurveyError::BadPattern { what: "regex", .. }),
        "{text}"
    );
    assert!(
        text.contains("more than 1048576 bytes (the limit)"),
        "{text}"
    );
    // Past the length limit, nothing is compiled at all.
    let long = "a".repeat(Limits::default().max_pattern_bytes + 1);
    let err = call(&survey, Tool::Grep, json!({"pattern": long})).unwrap_err();
    assert!(err.to_string().contains("over the limit of 1024"), "{err}");
    let err = call(&survey, Tool::Glob, json!({"pattern": "*".repeat(2000)})).unwrap_err();
    assert!(err.to_string().contains("over the limit of 1024"), "{err}");
    // An ordinary pattern still works.
    let ok = call(&survey, Tool::Grep, json!({"pattern": r"\w{4}"})).unwrap();
    assert!(ok.contains("\"total\":1"), "{ok}");
}

#[test]
fn a_cancelled_search_stops_within_a_block_even_without_matches() {
    let dir = tempfile::tempdir().unwrap();
    // 16 MiB without a match: 256 blocks of 64 KiB.
    let line = "a".repeat(1023) + "\n";
    fs::write(dir.path().join("big.txt"), line.repeat(16 * 1024)).unwrap();
    let survey = Survey::new(Root::new(dir.path()).unwrap());
    let input = crate::GrepInput {
        pattern: "zzz".into(),
        path: Some("big.txt".into()),
        glob: None,
        case_insensitive: false,
        context: None,
    };
    // Cancelled at the 4th look at the flag: two before compiling and
    // after, one at the walk's entry, then the first block.
    let cancel = Cancel::after(4);
    let result = survey.grep(&input, &cancel);
    assert!(matches!(result, Err(SurveyError::Cancelled)), "{result:?}");
    // Work counted in looks at the flag: one per block read. Uncancelled,
    // the file takes 256 blocks.
    assert!(cancel.checks() <= 8, "{} checks", cancel.checks());
    let whole = Cancel::after(u64::MAX);
    survey.grep(&input, &whole).unwrap();
    assert!(whole.checks() >= 200, "{} checks", whole.checks());
}

/// A root with `inside.txt`, and beside it (outside) `secret.txt` holding
/// the marker and a directory `outdir` holding another.
fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::create_dir_all(top.path().join("outdir")).unwrap();
    fs::write(top.path().join("secret.txt"), format!("{MARKER}\n")).unwrap();
    fs::write(top.path().join("outdir/s.txt"), format!("{MARKER}\n")).unwrap();
    fs::write(root.join("inside.txt"), "inside\n").unwrap();
    (top, root)
}

#[cfg(unix)]
#[test]
fn a_symlink_pointing_out_is_not_followed_by_any_tool() {
    use std::os::unix::fs::symlink;
    let (top, root) = tree();
    symlink(top.path().join("secret.txt"), root.join("link.txt")).unwrap();
    symlink(top.path().join("outdir"), root.join("sub/out")).unwrap();
    let survey = Survey::new(Root::new(&root).unwrap());
    let calls = [
        (Tool::ListDir, json!({"depth": 4})),
        (Tool::ListDir, json!({"path": "sub/out"})),
        (Tool::Glob, json!({"pattern": "**/*"})),
        (Tool::Glob, json!({"pattern": "sub/out/*"})),
        (Tool::Grep, json!({"pattern": MARKER})),
        (Tool::Grep, json!({"pattern": MARKER, "path": "link.txt"})),
        (Tool::Grep, json!({"pattern": MARKER, "path": "sub/out"})),
        (Tool::ReadManyFiles, json!({"paths": ["link.txt"]})),
        (Tool::ReadManyFiles, json!({"paths": ["sub/out/s.txt"]})),
        (Tool::ReadManyFiles, json!({"glob": "**/*"})),
    ];
    for (tool, args) in calls {
        let out = call(&survey, tool, args.clone());
        if let Ok(text) = &out {
            assert!(!text.contains(MARKER), "{tool} {args}: {text}");
            assert!(!text.contains("s.txt"), "{tool} {args}: {text}");
        }
    }
}

#[cfg(unix)]
#[test]
fn a_symlink_swapped_in_while_reading_never_yields_the_outside_file() {
    use std::os::unix::fs::symlink;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (top, root) = tree();
    let target = root.join("sub/f.txt");
    fs::write(&target, "inside\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, secret) = (stop.clone(), root.clone(), top.path().join("secret.txt"));
        std::thread::spawn(move || {
            let (link, file) = (root.join("sub/.l"), root.join("sub/.f"));
            while !stop.load(Ordering::Relaxed) {
                // Atomic swaps: a regular file, then a symlink out.
                let _ = fs::remove_file(&link);
                let _ = symlink(&secret, &link);
                let _ = fs::rename(&link, root.join("sub/f.txt"));
                let _ = fs::write(&file, "inside\n");
                let _ = fs::rename(&file, root.join("sub/f.txt"));
            }
        })
    };
    let survey = Survey::new(Root::new(&root).unwrap());
    let calls = [
        (
            Tool::Grep,
            json!({"pattern": "[A-Z]|inside", "path": "sub/f.txt"}),
        ),
        (
            Tool::Grep,
            json!({"pattern": "[A-Z]|inside", "path": "sub"}),
        ),
        (Tool::ReadManyFiles, json!({"paths": ["sub/f.txt"]})),
        (Tool::ReadManyFiles, json!({"glob": "sub/*.txt"})),
    ];
    let mut read = 0;
    for round in 0..600 {
        let (tool, args) = &calls[round % calls.len()];
        if let Ok(text) = call(&survey, *tool, args.clone()) {
            assert!(!text.contains(MARKER), "round {round}, {tool}: {text}");
            read += usize::from(text.contains("inside"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    // The reads did happen (between swaps, the file is there).
    assert!(read > 0);
}

/// A project with the files a public caller must not see.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for (path, text) in [
        (".env", "TOKEN=SECRET-env\n"),
        (".env.local", "TOKEN=SECRET-envlocal\n"),
        (".git/config", "[remote] url=SECRET-git\n"),
        (".agents/audit.jsonl", "{\"SECRET-audit\": 1}\n"),
        (".agents/config.json", "{\"SECRET-config\": 1}\n"),
        (".gitignore", "private/\nnotes.txt\n"),
        ("private/keys.txt", "SECRET-ignored-dir\n"),
        ("notes.txt", "SECRET-ignored-file\n"),
        ("state/store.db", "SECRET-db\n"),
        ("state/store.db-wal", "SECRET-wal\n"),
        ("src/main.rs", "fn main() {} // SECRET-not, visible\n"),
    ] {
        fs::create_dir_all(p.join(path).parent().unwrap()).unwrap();
        fs::write(p.join(path), text).unwrap();
    }
    dir
}

#[test]
fn a_hiding_root_leaves_secrets_vcs_ignored_and_own_files_out() {
    let dir = project();
    let p = dir.path();
    #[cfg(unix)]
    std::os::unix::fs::symlink(p.join(".env"), p.join("src/env-link")).unwrap();
    let hidden = Hidden::new().with_file(p.join("state/store.db"));
    let public = Survey::new(Root::new(p).unwrap().with_hidden(hidden));
    let calls = [
        (Tool::ListDir, json!({"depth": 5})),
        (Tool::Glob, json!({"pattern": "**/*"})),
        (Tool::Glob, json!({"pattern": ".agents/*"})),
        (Tool::Glob, json!({"pattern": "private/*"})),
        (Tool::Grep, json!({"pattern": "SECRET"})),
        (Tool::Grep, json!({"pattern": "SECRET", "path": "src"})),
        (Tool::ReadManyFiles, json!({"glob": "**/*"})),
        (Tool::ReadManyFiles, json!({"glob": "**/.*"})),
        (
            Tool::ReadManyFiles,
            json!({"paths": [
                ".env", ".env.local", ".git/config", ".agents/audit.jsonl", "private/keys.txt",
                "notes.txt", "state/store.db", "state/store.db-wal", "src/env-link", "src/main.rs",
            ]}),
        ),
    ];
    for (tool, args) in calls {
        let text = call(&public, tool, args.clone()).unwrap();
        for secret in [
            "env",
            "envlocal",
            "git",
            "audit",
            "config",
            "ignored-dir",
            "ignored-file",
            "db",
            "wal",
        ] {
            assert!(
                !text.contains(&format!("SECRET-{secret}\\n")),
                "{tool} {args}: {text}"
            );
        }
        let named = args.get("paths").is_some();
        let names = text.contains("audit.jsonl") || text.contains("\".env");
        assert!(named || !names, "{tool} {args}: {text}");
    }
    // Named outright: refused, saying why.
    for (tool, args) in [
        (Tool::ListDir, json!({"path": ".agents"})),
        (Tool::Grep, json!({"pattern": "x", "path": ".git"})),
        (Tool::Grep, json!({"pattern": "x", "path": "private"})),
        (Tool::Glob, json!({"pattern": "*", "path": ".agents"})),
    ] {
        let err = call(&public, tool, args.clone()).unwrap_err();
        assert!(
            matches!(err, SurveyError::Hidden { .. }),
            "{tool} {args}: {err}"
        );
    }
    let read = call(
        &public,
        Tool::ReadManyFiles,
        json!({"paths": [".env", "src/main.rs"]}),
    )
    .unwrap();
    assert!(
        read.contains("\"reason\":\"hidden\"") && read.contains("SECRET-not"),
        "{read}"
    );

    // The creator's root hides nothing named outright.
    let creator = Survey::new(Root::new(p).unwrap());
    let text = call(
        &creator,
        Tool::ReadManyFiles,
        json!({"paths": [".env", ".git/config", ".agents/audit.jsonl"]}),
    )
    .unwrap();
    for secret in ["env", "git", "audit"] {
        assert!(text.contains(&format!("SECRET-{secret}")), "{text}");
    }
}

#[test]
fn the_hidden_list_extends() {
    let dir = project();
    let hidden = Hidden::new()
        .with_pattern("src/*.rs")
        .unwrap()
        .with_pattern("*.db*")
        .unwrap();
    let public = Survey::new(Root::new(dir.path()).unwrap().with_hidden(hidden));
    let text = call(&public, Tool::Grep, json!({"pattern": "SECRET"})).unwrap();
    assert!(text.contains("\"total\":0"), "{text}");
    let err = call(
        &public,
        Tool::Grep,
        json!({"pattern": "x", "path": "src/main.rs"}),
    )
    .unwrap_err();
    assert!(matches!(err, SurveyError::Hidden { .. }), "{err}");
    assert!(!Hidden::new().is_hidden(Path::new("src/main.rs")));
}
