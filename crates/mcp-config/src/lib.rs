#![doc = include_str!("../README.md")]

mod env;
mod error;
mod load;
mod spec;
mod template;

pub use env::{Env, ProcessEnv};
pub use error::{Error, Problem, Result};
pub use load::{ConfigPaths, load};
pub use spec::{
    AuthSpec, Config, ConfigFile, HttpSpec, Scope, ServerEntry, ServerSpec, Setting, StdioSpec,
    Transport,
};
pub use template::{Expanded, Template};
