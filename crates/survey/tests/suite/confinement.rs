//! Confinement: paths that leave the root are refused, and the check agrees
//! with canonicalization (property tests).

use super::*;
use proptest::prelude::*;

#[test]
fn paths_that_leave_the_root_are_refused() {
    let f = fixture();
    let root = f.root().display().to_string();
    let outside = f.dir.path().join("outside").display().to_string();
    let cases = [
        (Tool::ListDir, json!({"path": ".."})),
        (Tool::ListDir, json!({"path": "src/../.."})),
        (Tool::ListDir, json!({"path": "/"})),
        (Tool::ListDir, json!({"path": outside})),
        (Tool::ListDir, json!({"path": "link_out"})),
        (Tool::Glob, json!({"pattern": "*", "path": "link_out"})),
        (
            Tool::Grep,
            json!({"pattern": "hello", "path": "../outside"}),
        ),
        (
            Tool::Grep,
            json!({"pattern": "hello", "path": "link_out_file"}),
        ),
        (
            Tool::Grep,
            json!({"pattern": "hello", "path": "link_out/secret.txt"}),
        ),
        (
            Tool::ReadManyFiles,
            json!({"paths": ["README.md", "link_out_file"]}),
        ),
        (Tool::ReadManyFiles, json!({"paths": ["/etc/passwd"]})),
    ];
    let out: Vec<String> = cases
        .into_iter()
        .map(|(tool, args)| format!("{tool} {args}\n  {}", f.call(tool, args.clone())))
        .collect();
    check(
        out.join("\n").replace(&outside, "<tmp>/outside"),
        expect![[r#"
        list_dir {"path":".."}
          error: `..` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        list_dir {"path":"src/../.."}
          error: `src/../..` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        list_dir {"path":"/"}
          error: `/` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        list_dir {"path":"<tmp>/outside"}
          error: `<tmp>/outside` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        list_dir {"path":"link_out"}
          error: `link_out` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        glob {"pattern":"*","path":"link_out"}
          error: `link_out` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        grep {"pattern":"hello","path":"../outside"}
          error: `../outside` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        grep {"pattern":"hello","path":"link_out_file"}
          error: `link_out_file` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        grep {"pattern":"hello","path":"link_out/secret.txt"}
          error: `link_out/secret.txt` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        read_many_files {"paths":["README.md","link_out_file"]}
          error: `link_out_file` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it

        read_many_files {"paths":["/etc/passwd"]}
          error: `/etc/passwd` is outside the root `<root>`: give a path relative to the root (or an absolute path inside it), without `..` leaving it and without symlinks that point out of it
    "#]],
    );

    // An absolute path inside the root is accepted.
    let inside = format!("{root}/src");
    let listed = f.survey.list_dir(
        &ListDirInput {
            path: Some(inside),
            depth: None,
        },
        &Cancel::new(),
    );
    assert_eq!(listed.unwrap().path, "src");
}

#[test]
fn a_dangling_symlink_is_judged_by_its_target() {
    let f = fixture();
    symlink("../../nowhere", f.root().join("dangling_out")).unwrap();
    let root = Root::new(f.root()).unwrap();
    assert!(root.resolve("dangling").is_ok());
    assert!(matches!(
        root.resolve("dangling_out"),
        Err(SurveyError::OutsideRoot { .. })
    ));
}

#[test]
fn a_root_must_be_a_directory() {
    let f = fixture();
    let err = Root::new(f.root().join("README.md")).unwrap_err();
    check(
        f.error(&err),
        expect![[r#"
        error: cannot use `<root>/README.md` as the survey root: not a directory; give an existing directory
    "#]],
    );
    let err = Root::new(f.root().join("nope")).unwrap_err();
    check(
        f.error(&err),
        expect![[r#"
        error: cannot use `<root>/nope` as the survey root: No such file or directory (os error 2); give an existing directory
    "#]],
    );
}
/// A root with `a/b/`, `a/f`, `c/`, `c/g` beside an outside `x/` (no symlinks).
fn plain_tree() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write(&root.join("a/f"), "f");
    write(&root.join("c/g"), "g");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::create_dir_all(dir.path().join("x")).unwrap();
    let root = Root::new(&root).unwrap();
    (dir, root)
}

/// Relative paths of `.`, `..`, existing and missing names, and the root's
/// own name (so `../root/a` comes back in).
fn relative_path() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just("."),
        Just(".."),
        Just("a"),
        Just("b"),
        Just("c"),
        Just("f"),
        Just("g"),
        Just("x"),
        Just("root"),
        Just("missing"),
    ];
    proptest::collection::vec(part, 0..8).prop_map(|parts| parts.join("/"))
}

/// Lexical normalization, as the reference.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Runs `check` on 512 relative paths against one tree.
fn for_paths<S: Strategy>(strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(512));
    if let Err(e) = runner.run(&strategy, check) {
        panic!("{e}");
    }
}

/// Without symlinks: accepted exactly when the lexically normal path stays
/// inside, and then it is that path; when every component exists the OS's
/// canonical path agrees; the same path given absolute is judged the same.
#[test]
fn confinement_agrees_with_normalization() {
    let (_dir, root) = plain_tree();
    for_paths(relative_path(), |rel| {
        let joined = root.path().join(&rel);
        let normal = lexical(&joined);
        let inside = normal.starts_with(root.path());
        match root.resolve(&rel) {
            Ok(resolved) => {
                prop_assert!(inside, "{rel} accepted as {}", resolved.display());
                prop_assert_eq!(&resolved, &normal);
            }
            Err(SurveyError::OutsideRoot { path, .. }) => {
                prop_assert!(!inside, "{rel} refused");
                prop_assert_eq!(path, rel.clone());
            }
            Err(e) => prop_assert!(false, "{rel}: {e}"),
        }
        if let Ok(canonical) = std::fs::canonicalize(&joined) {
            prop_assert_eq!(canonical.starts_with(root.path()), inside, "{}", rel);
            if inside {
                prop_assert_eq!(canonical, normal);
            }
        }
        let absolute = joined.display().to_string();
        prop_assert_eq!(root.resolve(&absolute).is_ok(), inside, "{}", absolute);
        Ok(())
    });
}

/// With a symlink in (`in` → `a`) and one out (`out` → the outside `x`):
/// whatever is accepted has its deepest existing ancestor's real path
/// inside the root; a path through `out` is always refused, and nothing
/// else is refused unless it leaves the root lexically.
#[test]
fn confinement_follows_symlinks_to_their_real_place() {
    let (dir, root) = plain_tree();
    symlink("a", root.path().join("in")).unwrap();
    symlink(dir.path().join("x"), root.path().join("out")).unwrap();
    let paths = (relative_path(), 0usize..3).prop_map(|(rel, via)| match via {
        0 => rel,
        1 => format!("in/{rel}"),
        _ => format!("out/{rel}"),
    });
    for_paths(paths, |rel| {
        let normal = lexical(&root.path().join(&rel));
        let through_out = normal.starts_with(root.path().join("out"));
        match root.resolve(&rel) {
            Ok(resolved) => {
                prop_assert!(!through_out, "{rel} accepted through `out`");
                let mut existing = resolved.as_path();
                while std::fs::symlink_metadata(existing).is_err() {
                    existing = existing.parent().unwrap();
                }
                let real = std::fs::canonicalize(existing).unwrap();
                prop_assert!(
                    real.starts_with(root.path()),
                    "{rel} is really {}",
                    real.display()
                );
            }
            Err(SurveyError::OutsideRoot { .. }) => {
                prop_assert!(
                    through_out || !normal.starts_with(root.path()),
                    "{rel} refused"
                );
            }
            Err(e) => prop_assert!(false, "{rel}: {e}"),
        }
        Ok(())
    });
}
