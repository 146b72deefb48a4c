use serde::de::DeserializeOwned;

use crate::glob::{GlobInput, GlobOutput};
use crate::grep::{GrepInput, GrepOutput};
use crate::list_dir::{ListDirInput, ListDirOutput};
use crate::read::{ReadManyFilesInput, ReadManyFilesOutput};
use crate::tool::{Output, Tool};
use crate::{Cancel, Limits, Result, Root, SurveyError};

/// The survey tools on one [`Root`], under one set of [`Limits`].
///
/// Every operation is read-only and synchronous, and checks its [`Cancel`]
/// while it walks. Walks honour `.gitignore` (in a git repository or not),
/// `.git/info/exclude` and `.ignore`, as ripgrep does, include hidden files
/// and skip `.git`.
#[derive(Debug, Clone)]
pub struct Survey {
    root: Root,
    limits: Limits,
}

impl Survey {
    /// The tools on `root`, with the default limits.
    pub fn new(root: Root) -> Self {
        Self::with_limits(root, Limits::default())
    }

    /// The tools on `root`, with `limits`.
    pub fn with_limits(root: Root, limits: Limits) -> Self {
        Self { root, limits }
    }

    /// The root.
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// `list_dir`: a directory's entries to `depth`, directories first, then
    /// by name, each directory's entries right after it.
    pub fn list_dir(&self, input: &ListDirInput, cancel: &Cancel) -> Result<ListDirOutput> {
        crate::list_dir::list_dir(&self.root, &self.limits, input, cancel)
    }

    /// `glob`: the files and symlinks below `path` matching `pattern`,
    /// sorted. Walks on all cores.
    pub fn glob(&self, input: &GlobInput, cancel: &Cancel) -> Result<GlobOutput> {
        crate::glob::glob(&self.root, &self.limits, input, cancel)
    }

    /// `grep`: the lines matching `pattern` below `path`, sorted by path,
    /// then line; binary files skipped. Searches on all cores with
    /// ripgrep's searcher.
    pub fn grep(&self, input: &GrepInput, cancel: &Cancel) -> Result<GrepOutput> {
        crate::grep::grep(&self.root, &self.limits, input, cancel)
    }

    /// `read_many_files`: the text of each file given (or matched), each
    /// and all bounded; binary files named and skipped.
    pub fn read_many_files(
        &self,
        input: &ReadManyFilesInput,
        cancel: &Cancel,
    ) -> Result<ReadManyFilesOutput> {
        crate::read::read_many_files(&self.root, &self.limits, input, cancel)
    }

    /// Runs `tool` on JSON arguments (as an MCP `tools/call` carries them);
    /// arguments that do not fit the tool's input give
    /// [`SurveyError::BadArguments`].
    pub fn call(
        &self,
        tool: Tool,
        arguments: serde_json::Value,
        cancel: &Cancel,
    ) -> Result<Output> {
        Ok(match tool {
            Tool::ListDir => Output::ListDir(self.list_dir(&parse(tool, arguments)?, cancel)?),
            Tool::Glob => Output::Glob(self.glob(&parse(tool, arguments)?, cancel)?),
            Tool::Grep => Output::Grep(self.grep(&parse(tool, arguments)?, cancel)?),
            Tool::ReadManyFiles => {
                Output::ReadManyFiles(self.read_many_files(&parse(tool, arguments)?, cancel)?)
            }
        })
    }
}

/// `arguments` as `tool`'s input; `null` is read as `{}`.
fn parse<T: DeserializeOwned>(tool: Tool, arguments: serde_json::Value) -> Result<T> {
    let arguments = match arguments {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other,
    };
    serde_json::from_value(arguments).map_err(|e| SurveyError::BadArguments {
        tool: tool.name(),
        message: e.to_string(),
    })
}
