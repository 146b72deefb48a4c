//! A supervisor binary, as a library user with a binary of their own writes
//! it: the words after the program are `<parent-pid> <grace-ms> <command>
//! [<args>…]`, and [`supervise::run`] does the rest. The tests start stdio
//! servers through it with `StartOptions::supervisor` set to
//! `Supervisor::new(<this example>)`.

use core_agent_mcp_transport::supervise::{self, Exit, Plan};

#[allow(clippy::print_stderr)]
fn main() {
    let exit = match Plan::parse(std::env::args_os().skip(1)) {
        Ok(plan) => supervise::run(&plan),
        Err(e) => Exit::usage(e),
    };
    if let Some(message) = &exit.message {
        eprintln!("{message}");
    }
    std::process::exit(exit.code);
}
