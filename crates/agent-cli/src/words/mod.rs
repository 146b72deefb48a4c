//! The binary's wording of library errors: the libraries carry the data
//! (which server, which setting), these name the commands and flags.

pub(crate) mod commands;
pub(crate) mod config;
