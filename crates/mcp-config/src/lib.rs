#![doc = include_str!("../README.md")]

mod check;
mod convert;
mod diagnose;
mod dotenv;
mod edit;
mod env;
mod error;
mod lineage;
mod load;
pub mod peer;
mod position;
mod schema;
mod secrets;
mod spec;
mod suggest;
mod template;
mod wrap;

pub use check::{FileProblems, parse_json, read_optional};
pub use convert::FileConfig;
pub use diagnose::{Finding, Severity, diagnose, secret_kind};
pub use dotenv::{DotEnv, Layered};
pub use edit::{
    AddError, INIT_TEXT, NewServer, Removal, add_server, remove_from, remove_server, server_names,
};
pub use env::{Env, ProcessEnv};
pub use error::{Error, Problem, Result};
pub use lineage::{LINEAGE_VAR, Lineage, MAX_LINEAGE, OwnProgram};
pub use load::{ConfigPaths, find_agents_dir, load, parse_file};
pub use peer::{Unexpanded, UnexpandedReason};
pub use position::{escape_pointer, locate};
pub use schema::{CORE_SCHEMA, MCP_SERVERS_SCHEMA, schema};
pub use secrets::{MIN_SECRET_BYTES, REDACTED, Redactor};
pub use spec::{
    AuthSpec, BUILTIN, BuiltinTools, Cloud, Config, ConfigFile, ConfigWarning, ConfigWarningKind,
    Dialect, EnvInherit, ExchangeEndpoint, HttpSpec, LeftOut, LeftOutReason, Limits, ModelPrice,
    ModelPrices, OAuthSpec, PinMode, Scope, ServerEntry, ServerSpec, Setting, StdioSpec,
    TokenExchangeSpec, Transport, TrustLevel,
};
pub use suggest::{closest, suggestions};
pub use template::{Expanded, Template};
pub use wrap::WrapSettings;
