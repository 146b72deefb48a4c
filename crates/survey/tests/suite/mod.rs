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
use serde::Serialize;
use serde_json::json;

mod confinement;
mod glob;
mod grep;
mod list_dir;
mod read_many_files;
mod schemas;

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
