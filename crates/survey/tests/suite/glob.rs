//! `glob`: sorted matches, symlinks, ignored directories, bad patterns.

use super::*;

#[test]
fn glob_finds_files_sorted_with_the_count() {
    let f = fixture();
    check(
        f.call(Tool::Glob, json!({"pattern": "**/*.rs"})),
        expect![[r#"
        {
          "path": ".",
          "paths": [
            "src/lib.rs",
            "src/nested/deep.rs",
            "src/util.rs"
          ],
          "count": 3,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn glob_star_stays_in_one_directory_and_lists_symlinks_without_following() {
    let f = fixture();
    check(
        f.call(Tool::Glob, json!({"pattern": "*"})),
        expect![[r#"
        {
          "path": ".",
          "paths": [
            ".gitignore",
            ".hidden",
            ".ignore",
            "README.md",
            "bad�name.txt",
            "dangling",
            "data.bin",
            "link_file",
            "link_in",
            "link_out",
            "link_out_file",
            "long.txt"
          ],
          "count": 12,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn glob_under_a_path_and_through_a_named_ignored_directory() {
    let f = fixture();
    let out = [
        f.call(Tool::Glob, json!({"pattern": "*.rs", "path": "src"})),
        f.call(Tool::Glob, json!({"pattern": "./src/{lib,util}.rs"})),
        f.call(Tool::Glob, json!({"pattern": "target/*.txt"})),
        f.call(Tool::Glob, json!({"pattern": "link_out/*"})),
    ];
    check(
        out.join(""),
        expect![[r#"
        {
          "path": "src",
          "paths": [
            "src/lib.rs",
            "src/util.rs"
          ],
          "count": 2,
          "truncated": false
        }
        {
          "path": ".",
          "paths": [
            "src/lib.rs",
            "src/util.rs"
          ],
          "count": 2,
          "truncated": false
        }
        {
          "path": ".",
          "paths": [
            "target/debug.txt"
          ],
          "count": 1,
          "truncated": false
        }
        {
          "path": ".",
          "paths": [],
          "count": 0,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn glob_refuses_bad_patterns() {
    let f = fixture();
    let out = [
        f.call(Tool::Glob, json!({"pattern": "/etc/*"})),
        f.call(Tool::Glob, json!({"pattern": "../outside/*"})),
        f.call(Tool::Glob, json!({"pattern": "src/[a"})),
        f.call(Tool::Glob, json!({"path": "src"})),
    ];
    check(
        out.join(""),
        expect![[r#"
        error: bad glob `/etc/*`: globs match paths relative to `path`; drop the leading `/`
        error: bad glob `../outside/*`: a glob cannot climb with `..`; give the directory as `path` instead
        error: bad glob `src/[a`: unclosed character class; missing ']'
        error: bad arguments for `glob`: missing field `pattern`; see the tool's input schema
    "#]],
    );
}
