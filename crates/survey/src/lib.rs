#![doc = include_str!("../README.md")]

#[cfg(test)]
mod abuse;
mod cancel;
mod error;
mod glob;
mod grep;
mod hidden;
mod limits;
mod list_dir;
mod open;
mod read;
mod root;
mod survey;
mod text;
mod tool;
mod walk;

pub use cancel::Cancel;
pub use error::{Result, SurveyError};
pub use glob::{GlobInput, GlobOutput};
pub use grep::{GrepInput, GrepLine, GrepOutput};
pub use hidden::Hidden;
pub use limits::Limits;
pub use list_dir::{Entry, ListDirInput, ListDirOutput};
pub use read::{FileText, ReadManyFilesInput, ReadManyFilesOutput, SkipReason, Skipped};
pub use root::Root;
pub use survey::Survey;
pub use tool::{Output, Tool, input_schema};
pub use walk::EntryType;
