//! `grep`: binary and ignored files, options, long lines, caps, bad regexes.

use super::*;

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
