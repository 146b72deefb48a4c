//! `core-agent completions SHELL`: a completion script, generated from the
//! clap types, so it always knows every subcommand and flag.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

pub(crate) fn run(shell: Shell) -> u8 {
    // Into memory first: the generator panics on a failed write, and a
    // closed stdout (`| head`) is not worth a panic.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut visible(), "core-agent", &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if shell == Shell::Bash {
        // clap_complete spells a hyphenated name two ways in bash: the loop
        // reaches `core__agent__subcmd__mcp`, the case arms are labelled
        // `core__subcmd__agent__subcmd__mcp`, so nothing past the first word
        // completes (clap-rs/clap#6421). One spelling fixes it, and is a
        // no-op once the generator is fixed.
        script = script.replace("core__subcmd__agent", "core__agent");
    }
    out!("{script}");
    0
}

/// The command line without its hidden subcommand: the generators would
/// offer `__supervise`, the supervisor's entry, which is not for people.
fn visible() -> clap::Command {
    let full = Cli::command();
    let mut visible = clap::Command::new("core-agent")
        .version(env!("CORE_AGENT_VERSION"))
        .propagate_version(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = full.get_about() {
        visible = visible.about(about.clone());
    }
    visible
}
