//! `list_dir`: one level or more, ignore files, symlinks, bounds, refusals.

use super::*;

#[test]
fn list_dir_shows_one_level_directories_first_with_ignore_files_honoured() {
    let f = fixture();
    check(
        f.call(Tool::ListDir, json!({})),
        expect![[r#"
        {
          "path": ".",
          "entries": [
            {
              "path": "docs",
              "type": "dir"
            },
            {
              "path": "src",
              "type": "dir"
            },
            {
              "path": ".gitignore",
              "type": "file",
              "size": 14
            },
            {
              "path": ".hidden",
              "type": "file",
              "size": 13
            },
            {
              "path": ".ignore",
              "type": "file",
              "size": 12
            },
            {
              "path": "README.md",
              "type": "file",
              "size": 20
            },
            {
              "path": "bad�name.txt",
              "type": "file",
              "size": 20
            },
            {
              "path": "dangling",
              "type": "symlink"
            },
            {
              "path": "data.bin",
              "type": "file",
              "size": 15
            },
            {
              "path": "link_file",
              "type": "symlink"
            },
            {
              "path": "link_in",
              "type": "symlink"
            },
            {
              "path": "link_out",
              "type": "symlink"
            },
            {
              "path": "link_out_file",
              "type": "symlink"
            },
            {
              "path": "long.txt",
              "type": "file",
              "size": 10485761
            }
          ],
          "total": 14,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn list_dir_to_depth_two_puts_each_directory_s_entries_after_it() {
    let f = fixture();
    check(
        f.call(Tool::ListDir, json!({"path": "src", "depth": 2})),
        expect![[r#"
        {
          "path": "src",
          "entries": [
            {
              "path": "src/nested",
              "type": "dir"
            },
            {
              "path": "src/nested/deep.rs",
              "type": "file",
              "size": 21
            },
            {
              "path": "src/lib.rs",
              "type": "file",
              "size": 78
            },
            {
              "path": "src/util.rs",
              "type": "file",
              "size": 67
            }
          ],
          "total": 4,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn list_dir_through_a_symlink_inside_the_root_lists_its_target() {
    let f = fixture();
    check(
        f.call(Tool::ListDir, json!({"path": "link_in"})),
        expect![[r#"
        {
          "path": "link_in",
          "entries": [
            {
              "path": "link_in/nested",
              "type": "dir"
            },
            {
              "path": "link_in/lib.rs",
              "type": "file",
              "size": 78
            },
            {
              "path": "link_in/util.rs",
              "type": "file",
              "size": 67
            }
          ],
          "total": 3,
          "truncated": false
        }
    "#]],
    );
}

#[test]
fn list_dir_is_bounded_and_keeps_the_total() {
    let f = fixture_with(Limits::default().with_max_entries(3));
    check(
        f.call(Tool::ListDir, json!({"depth": 3})),
        expect![[r#"
        {
          "path": ".",
          "entries": [
            {
              "path": "docs",
              "type": "dir"
            },
            {
              "path": "docs/guide.md",
              "type": "file",
              "size": 30
            },
            {
              "path": "src",
              "type": "dir"
            }
          ],
          "total": 19,
          "truncated": true
        }
    "#]],
    );
}

#[test]
fn list_dir_refuses_bad_input() {
    let f = fixture();
    let cases = [
        json!({"depth": 0}),
        json!({"depth": 17}),
        json!({"path": "README.md"}),
        json!({"path": "nope"}),
        json!({"path": "src", "recursive": true}),
    ];
    let out: Vec<String> = cases
        .into_iter()
        .map(|a| f.call(Tool::ListDir, a))
        .collect();
    check(
        out.join(""),
        expect![[r#"
        error: depth must be between 1 and 16; got 0
        error: depth must be between 1 and 16; got 17
        error: `README.md` is not a directory; give a directory, or read the file instead
        error: `nope` does not exist under the root; list the directory to see what is there
        error: bad arguments for `list_dir`: unknown field `recursive`, expected `path` or `depth`; see the tool's input schema
    "#]],
    );
}
