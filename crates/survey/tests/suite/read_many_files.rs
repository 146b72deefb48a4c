//! `read_many_files`: what is read, what is skipped, and the bounds.

use super::*;

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
