//! The survey tools on a fixture tree built in a temp dir: golden outputs
//! (refresh with `UPDATE_EXPECT=1` and read the diff), the refusals of paths
//! that leave the root, and the confinement check against canonicalization.

#![allow(clippy::unwrap_used, missing_docs)]

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use core_agent_survey::{
    Cancel, GrepInput, Limits, ListDirInput, ReadManyFilesInput, Root, Survey, SurveyError, Tool,
    input_schema,
};
use expect_test::{Expect, expect};
use proptest::prelude::*;
use serde::Serialize;
use serde_json::json;

/// Where the needle sits in `long.txt`, a 10 MB file of one line.
const LONG_NEEDLE_AT: usize = 6_000_000;
const LONG_BYTES: usize = 10 * 1024 * 1024;

/// A temp dir holding `root/` (the survey root) and `outside/`.
struct Fixture {
    dir: tempfile::TempDir,
    survey: Survey,
}

impl Fixture {
    fn root(&self) -> &Path {
        self.survey.root().path()
    }

    /// Runs a tool on JSON arguments; the output as pretty JSON, or the
    /// error's message with the root shown as `<root>`.
    fn call(&self, tool: Tool, args: serde_json::Value) -> String {
        match self.survey.call(tool, args, &Cancel::new()) {
            Ok(out) => pretty(&out),
            Err(e) => self.error(&e),
        }
    }

    fn error(&self, e: &SurveyError) -> String {
        let text = format!("error: {e}\n");
        let text = text.replace(&self.root().display().to_string(), "<root>");
        text.replace(&self.dir.path().display().to_string(), "<tmp>")
    }
}

fn pretty<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The tree:
///
/// ```text
/// outside/secret.txt          reached only through escaping symlinks
/// root/.git/HEAD              skipped
/// root/.gitignore             target/, *.log
/// root/.ignore                private.txt
/// root/.hidden                shown (hidden files are included)
/// root/README.md
/// root/app.log                gitignored
/// root/bad\xffname.txt        a name that is not UTF-8
/// root/data.bin               binary (NUL), contains "hello"
/// root/dangling -> missing.txt
/// root/docs/guide.md
/// root/link_file -> README.md
/// root/link_in -> src
/// root/link_out -> ../outside
/// root/link_out_file -> ../outside/secret.txt
/// root/long.txt               10 MB, one line, "needle" at 6 MB
/// root/private.txt            .ignore'd
/// root/src/lib.rs, util.rs, nested/deep.rs
/// root/target/debug.txt       gitignored
/// ```
fn fixture() -> Fixture {
    fixture_with(Limits::default())
}

fn fixture_with(limits: Limits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write(
        &dir.path().join("outside/secret.txt"),
        "hello from outside\n",
    );
    write(&root.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&root.join(".gitignore"), "target/\n*.log\n");
    write(&root.join(".ignore"), "private.txt\n");
    write(&root.join(".hidden"), "hello hidden\n");
    write(&root.join("README.md"), "# Demo\n\nhello world\n");
    write(&root.join("app.log"), "hello log\n");
    write(
        &root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.txt")),
        "hello non-utf8 name\n",
    );
    write(&root.join("data.bin"), b"hello\0binary\x01\x02\n");
    write(
        &root.join("docs/guide.md"),
        "Hello, guide.\nSee the README.\n",
    );
    let mut long = "0123456789".repeat(LONG_BYTES / 10).into_bytes();
    long[LONG_NEEDLE_AT..LONG_NEEDLE_AT + 6].copy_from_slice(b"needle");
    long.push(b'\n');
    write(&root.join("long.txt"), long);
    write(&root.join("private.txt"), "hello private\n");
    write(
        &root.join("src/lib.rs"),
        "pub mod util;\n\n/// Says hello.\npub fn hello() -> &'static str {\n    \"hello\"\n}\n",
    );
    write(
        &root.join("src/util.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n// TODO: subtract\n",
    );
    write(&root.join("src/nested/deep.rs"), "// deep\nfn deep() {}\n");
    write(&root.join("target/debug.txt"), "hello from target\n");
    symlink("missing.txt", root.join("dangling")).unwrap();
    symlink("README.md", root.join("link_file")).unwrap();
    symlink("src", root.join("link_in")).unwrap();
    symlink("../outside", root.join("link_out")).unwrap();
    symlink("../outside/secret.txt", root.join("link_out_file")).unwrap();
    let survey = Survey::with_limits(Root::new(&root).unwrap(), limits);
    Fixture { dir, survey }
}

fn check(actual: String, expect: Expect) {
    expect.assert_eq(&actual);
}

// ---------------------------------------------------------------------------
// list_dir

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

// ---------------------------------------------------------------------------
// glob

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

// ---------------------------------------------------------------------------
// grep

#[test]
fn grep_skips_binary_ignored_and_symlinked_files() {
    let f = fixture();
    check(
        f.call(Tool::Grep, json!({"pattern": "hello"})),
        expect![[r#"
        {
          "matches": [
            {
              "path": ".hidden",
              "line": 1,
              "text": "hello hidden"
            },
            {
              "path": "README.md",
              "line": 3,
              "text": "hello world"
            },
            {
              "path": "bad�name.txt",
              "line": 1,
              "text": "hello non-utf8 name"
            },
            {
              "path": "src/lib.rs",
              "line": 3,
              "text": "/// Says hello."
            },
            {
              "path": "src/lib.rs",
              "line": 4,
              "text": "pub fn hello() -> &'static str {"
            },
            {
              "path": "src/lib.rs",
              "line": 5,
              "text": "    \"hello\""
            }
          ],
          "total": 6,
          "files": 4,
          "truncated": false,
          "binary_files": 1
        }
    "#]],
    );
}

#[test]
fn grep_with_case_insensitivity_context_and_a_glob() {
    let f = fixture();
    let out = [
        f.call(
            Tool::Grep,
            json!({"pattern": "HELLO|readme", "case_insensitive": true, "glob": "*.md"}),
        ),
        f.call(
            Tool::Grep,
            json!({"pattern": r"a \+ b", "context": 1, "path": "src"}),
        ),
        f.call(
            Tool::Grep,
            json!({"pattern": "fn", "glob": "nested/*.rs", "path": "src"}),
        ),
        f.call(Tool::Grep, json!({"pattern": "hello", "path": "link_file"})),
    ];
    check(
        out.join(""),
        expect![[r#"
        {
          "matches": [
            {
              "path": "README.md",
              "line": 3,
              "text": "hello world"
            },
            {
              "path": "docs/guide.md",
              "line": 1,
              "text": "Hello, guide."
            },
            {
              "path": "docs/guide.md",
              "line": 2,
              "text": "See the README."
            }
          ],
          "total": 3,
          "files": 2,
          "truncated": false,
          "binary_files": 0
        }
        {
          "matches": [
            {
              "path": "src/util.rs",
              "line": 1,
              "text": "pub fn add(a: i32, b: i32) -> i32 {",
              "context": true
            },
            {
              "path": "src/util.rs",
              "line": 2,
              "text": "    a + b"
            },
            {
              "path": "src/util.rs",
              "line": 3,
              "text": "}",
              "context": true
            }
          ],
          "total": 1,
          "files": 1,
          "truncated": false,
          "binary_files": 0
        }
        {
          "matches": [
            {
              "path": "src/nested/deep.rs",
              "line": 2,
              "text": "fn deep() {}"
            }
          ],
          "total": 1,
          "files": 1,
          "truncated": false,
          "binary_files": 0
        }
        {
          "matches": [
            {
              "path": "link_file",
              "line": 3,
              "text": "hello world"
            }
          ],
          "total": 1,
          "files": 1,
          "truncated": false,
          "binary_files": 0
        }
    "#]],
    );
}

#[test]
fn grep_cuts_a_very_long_line_around_the_match() {
    let f = fixture();
    let out = f
        .survey
        .grep(
            &GrepInput {
                pattern: "needle".into(),
                path: None,
                glob: None,
                case_insensitive: false,
                context: None,
            },
            &Cancel::new(),
        )
        .unwrap();
    assert_eq!(out.total, 1);
    let text = &out.matches[0].text;
    assert!(text.contains("needle"), "{text:.200}");
    check(
        pretty(&out),
        expect![[r#"
        {
          "matches": [
            {
              "path": "long.txt",
              "line": 1,
              "text": "[… 5999900 chars cut] 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789needle6789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 [… 4485360 chars cut]"
            }
          ],
          "total": 1,
          "files": 1,
          "truncated": false,
          "binary_files": 1
        }
    "#]],
    );
}

#[test]
fn grep_caps_the_records_and_keeps_the_total() {
    let f = fixture_with(Limits::default().with_max_matches(2));
    check(
        f.call(
            Tool::Grep,
            json!({"pattern": "hello|fn", "case_insensitive": true}),
        ),
        expect![[r#"
            {
              "matches": [
                {
                  "path": ".hidden",
                  "line": 1,
                  "text": "hello hidden"
                },
                {
                  "path": "README.md",
                  "line": 3,
                  "text": "hello world"
                }
              ],
              "total": 9,
              "files": 7,
              "truncated": true,
              "binary_files": 1
            }
        "#]],
    );
}

#[test]
fn grep_refuses_a_bad_regex() {
    let f = fixture();
    check(
        f.call(Tool::Grep, json!({"pattern": "fn("})),
        expect![[r#"
        error: bad regex `fn(`: unclosed group; to match one of `\.+*?()|[]{}^$` literally, escape it with `\`
    "#]],
    );
}

// ---------------------------------------------------------------------------
// read_many_files

#[test]
fn read_many_files_reads_text_and_names_what_it_skips() {
    let f = fixture();
    check(
        f.call(
            Tool::ReadManyFiles,
            json!({"paths": ["README.md", "data.bin", "src", "missing.txt", "link_file", "src/../docs/guide.md"]}),
        ),
        expect![[r##"
            {
              "files": [
                {
                  "path": "README.md",
                  "bytes": 20,
                  "truncated": false,
                  "text": "# Demo\n\nhello world\n"
                },
                {
                  "path": "link_file",
                  "bytes": 20,
                  "truncated": false,
                  "text": "# Demo\n\nhello world\n"
                },
                {
                  "path": "docs/guide.md",
                  "bytes": 30,
                  "truncated": false,
                  "text": "Hello, guide.\nSee the README.\n"
                }
              ],
              "skipped": [
                {
                  "path": "data.bin",
                  "reason": "binary"
                },
                {
                  "path": "src",
                  "reason": "not_a_file"
                },
                {
                  "path": "missing.txt",
                  "reason": "not_found"
                }
              ],
              "count": 6,
              "omitted": 0
            }
        "##]],
    );
}

#[test]
fn read_many_files_by_glob_bounds_each_file_and_the_total() {
    let f = fixture_with(
        Limits::default()
            .with_max_file_bytes(20)
            .with_max_total_bytes(50),
    );
    check(
        f.call(Tool::ReadManyFiles, json!({"glob": "**/*.rs"})),
        expect![[r#"
        {
          "files": [
            {
              "path": "src/lib.rs",
              "bytes": 78,
              "truncated": true,
              "text": "pub mod util;\n\n/// S\n[… 58 bytes cut]"
            },
            {
              "path": "src/nested/deep.rs",
              "bytes": 21,
              "truncated": true,
              "text": "// deep\nfn deep() {}\n[… 1 byte cut]"
            },
            {
              "path": "src/util.rs",
              "bytes": 67,
              "truncated": true,
              "text": "pub fn add\n[… 57 bytes cut]"
            }
          ],
          "skipped": [],
          "count": 3,
          "omitted": 0
        }
    "#]],
    );
    check(
        f.call(Tool::ReadManyFiles, json!({"glob": "bad*"})),
        expect![[r#"
            {
              "files": [
                {
                  "path": "bad�name.txt",
                  "bytes": 20,
                  "truncated": false,
                  "text": "hello non-utf8 name\n"
                }
              ],
              "skipped": [],
              "count": 1,
              "omitted": 0
            }
        "#]],
    );
    check(
        f.call(Tool::ReadManyFiles, json!({"glob": "link_*"})),
        expect![[r##"
            {
              "files": [
                {
                  "path": "link_file",
                  "bytes": 20,
                  "truncated": false,
                  "text": "# Demo\n\nhello world\n"
                }
              ],
              "skipped": [
                {
                  "path": "link_in",
                  "reason": "not_a_file"
                },
                {
                  "path": "link_out",
                  "reason": "outside_root"
                },
                {
                  "path": "link_out_file",
                  "reason": "outside_root"
                }
              ],
              "count": 4,
              "omitted": 0
            }
        "##]],
    );
}

#[test]
fn read_many_files_cuts_a_long_file_at_64_kib() {
    let f = fixture();
    let out = f
        .survey
        .read_many_files(
            &ReadManyFilesInput {
                paths: Some(vec!["long.txt".into()]),
                glob: None,
            },
            &Cancel::new(),
        )
        .unwrap();
    let file = &out.files[0];
    assert!(file.truncated);
    assert_eq!(file.bytes, LONG_BYTES as u64 + 1);
    assert!(file.text.starts_with("0123456789"));
    assert!(
        file.text
            .ends_with(&format!("\n[… {} bytes cut]", LONG_BYTES + 1 - 65536)),
        "{}",
        &file.text[file.text.len() - 60..]
    );
}

#[test]
fn read_many_files_wants_paths_or_glob() {
    let f = fixture();
    let out = [
        f.call(Tool::ReadManyFiles, json!({})),
        f.call(
            Tool::ReadManyFiles,
            json!({"paths": ["README.md"], "glob": "*"}),
        ),
        f.call(Tool::ReadManyFiles, json!({"paths": "README.md"})),
    ];
    check(
        out.join(""),
        expect![[r#"
        error: give either `paths` (a list of files) or `glob` (a pattern), not both
        error: give either `paths` (a list of files) or `glob` (a pattern), not both
        error: bad arguments for `read_many_files`: invalid type: string "README.md", expected a sequence; see the tool's input schema
    "#]],
    );
}

// ---------------------------------------------------------------------------
// Confinement

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

// ---------------------------------------------------------------------------
// Cancellation, schemas

#[test]
fn a_cancelled_operation_says_so() {
    let f = fixture();
    let cancel = Cancel::new();
    cancel.cancel();
    for tool in Tool::ALL {
        let args = match tool {
            Tool::ListDir => json!({}),
            Tool::Glob => json!({"pattern": "*"}),
            Tool::Grep => json!({"pattern": "hello"}),
            Tool::ReadManyFiles => json!({"paths": ["README.md"]}),
        };
        let err = f.survey.call(tool, args, &cancel).unwrap_err();
        assert!(matches!(err, SurveyError::Cancelled), "{tool}: {err}");
    }
}

/// Every property of a schema is accepted by the tool, and nothing else is.
#[test]
fn each_schema_describes_its_input() {
    let f = fixture();
    for tool in Tool::ALL {
        let schema = input_schema(tool);
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(Tool::from_name(tool.name()), Some(tool));
        assert!(!tool.description().is_empty());
        let sample = |name: &str| match (tool, name) {
            (Tool::Grep, "pattern") => json!("hello"),
            _ => json!("*.md"),
        };
        let properties = schema["properties"].as_object().unwrap();
        for (name, property) in properties {
            let value = match property["type"].as_str().unwrap() {
                "string" if name == "pattern" || name == "glob" => sample(name),
                "string" => json!("."),
                "integer" => json!(1),
                "boolean" => json!(true),
                "array" => json!(["README.md"]),
                other => panic!("{tool}.{name}: type {other}"),
            };
            let mut args = json!({});
            for required in schema["required"].as_array().into_iter().flatten() {
                args[required.as_str().unwrap()] = sample(required.as_str().unwrap());
            }
            args[name] = value;
            let result = f.survey.call(tool, args.clone(), &Cancel::new());
            assert!(result.is_ok(), "{tool} {args}: {}", result.unwrap_err());
        }
        let mut args = json!({"unknown": 1});
        for required in schema["required"].as_array().into_iter().flatten() {
            args[required.as_str().unwrap()] = sample(required.as_str().unwrap());
        }
        let err = f.survey.call(tool, args, &Cancel::new()).unwrap_err();
        let SurveyError::BadArguments { message, .. } = &err else {
            panic!("{tool}: {err}");
        };
        // serde lists the fields it expects: the schema must name the same.
        let mut expected: Vec<&str> = message
            .split_once("expected ")
            .unwrap()
            .1
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        expected.sort_unstable();
        let mut named: Vec<&str> = properties.keys().map(String::as_str).collect();
        named.sort_unstable();
        assert_eq!(named, expected, "{tool}");
        for key in ["oneOf", "anyOf", "allOf"] {
            assert!(schema.get(key).is_none(), "{tool}: {key}");
        }
    }
}

// ---------------------------------------------------------------------------
// The confinement check against canonicalization.

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
