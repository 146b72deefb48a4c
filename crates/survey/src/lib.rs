#![doc = include_str!("../README.md")]

mod cancel;
mod error;
mod limits;
mod list_dir;
mod root;
mod survey;
mod walk;

pub use cancel::Cancel;
pub use error::{Result, SurveyError};
pub use limits::Limits;
pub use list_dir::{Entry, ListDirInput, ListDirOutput};
pub use root::Root;
pub use survey::Survey;
pub use walk::EntryType;
