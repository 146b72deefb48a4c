use serde::Serialize;
use serde_json::{Value, json};

use crate::{GlobOutput, GrepOutput, ListDirOutput, ReadManyFilesOutput};

/// The four survey tools, for a host that publishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    /// `list_dir`.
    ListDir,
    /// `glob`.
    Glob,
    /// `grep`.
    Grep,
    /// `read_many_files`.
    ReadManyFiles,
}

impl Tool {
    /// Every tool, in the order to publish them.
    pub const ALL: [Tool; 4] = [Tool::ListDir, Tool::Glob, Tool::Grep, Tool::ReadManyFiles];

    /// The tool's name: `list_dir`, `glob`, `grep`, `read_many_files`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::ListDir => "list_dir",
            Tool::Glob => "glob",
            Tool::Grep => "grep",
            Tool::ReadManyFiles => "read_many_files",
        }
    }

    /// The tool named `name`.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What the tool does, for the model.
    pub fn description(self) -> &'static str {
        match self {
            Tool::ListDir => {
                "List a directory: each entry's path, type (file, dir, symlink) and size, \
                 directories first, then by name, to `depth` levels (default 1). \
                 .gitignore and .ignore are honoured; `total` counts every entry even when \
                 the list is cut."
            }
            Tool::Glob => {
                "Find files by glob (`**/*.rs`, `src/*.{ts,tsx}`), relative to `path`. \
                 Returns the matching paths sorted, and their `count`. \
                 .gitignore and .ignore are honoured."
            }
            Tool::Grep => {
                "Search file contents with a regular expression (ripgrep's syntax and speed). \
                 Returns {path, line, text} for each matching line (with `context` lines \
                 around it if asked), the `total` of matching lines and the `files` matched. \
                 Binary and ignored files are skipped; very long lines are cut around the match."
            }
            Tool::ReadManyFiles => {
                "Read several text files at once, given as `paths` or as a `glob` (not both). \
                 Each file's text is bounded (64 KiB by default) and so are all of them \
                 together (512 KiB); binary and missing files are named in `skipped`."
            }
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The JSON schema of `tool`'s input: an object with `properties`,
/// `required` and no other fields, and no `oneOf`/`anyOf`/`allOf` at the
/// top (which model APIs refuse in a tool's schema).
pub fn input_schema(tool: Tool) -> Value {
    let path = |what: &str| {
        json!({
            "type": "string",
            "description": format!("{what}, relative to the root (default: the root)")
        })
    };
    match tool {
        Tool::ListDir => json!({
            "type": "object",
            "properties": {
                "path": path("The directory to list"),
                "depth": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "How many levels to list (default 1: the directory's own entries)"
                }
            },
            "additionalProperties": false
        }),
        Tool::Glob => json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "The glob, relative to `path`: `*` within a path component, `**` across them, `{a,b}` alternatives"
                },
                "path": path("The directory to search")
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
        Tool::Grep => json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "A regular expression (Rust regex syntax, as ripgrep's); escape `(`, `[`, `.` etc. to match them literally"
                },
                "path": path("The file or directory to search"),
                "glob": {
                    "type": "string",
                    "description": "Only files matching this glob: the file name when it has no `/` (`*.rs`), else the path relative to `path`"
                },
                "case_insensitive": {
                    "type": "boolean",
                    "description": "Ignore case (default false)"
                },
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 10,
                    "description": "Lines of context before and after each match (default 0)"
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
        Tool::ReadManyFiles => json!({
            "type": "object",
            "properties": {
                "paths": {
                    "type": "array",
                    "items": { "type": "string" },
                    "description": "The files, relative to the root (give `paths` or `glob`, not both)"
                },
                "glob": {
                    "type": "string",
                    "description": "A glob relative to the root, instead of `paths`"
                }
            },
            "additionalProperties": false
        }),
    }
}

/// The output of any tool, as [`Survey::call`](crate::Survey::call) returns
/// it; it serializes as the tool's own output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Output {
    /// `list_dir`'s.
    ListDir(ListDirOutput),
    /// `glob`'s.
    Glob(GlobOutput),
    /// `grep`'s.
    Grep(GrepOutput),
    /// `read_many_files`'.
    ReadManyFiles(ReadManyFilesOutput),
}
