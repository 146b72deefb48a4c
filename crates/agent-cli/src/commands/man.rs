//! `core-agent man`: the man page, in roff, generated from the clap types.

use std::path::Path;

use clap::CommandFactory;

use crate::FAILED;
use crate::cli::Cli;

/// Prints `core-agent(1)`, or with `dir` writes it and one page per
/// subcommand (`core-agent-mcp-list.1`, …) there, the pages it names.
pub(crate) fn run(dir: Option<&Path>) -> u8 {
    // `help` is a subcommand of the command line, not a page.
    let command = Cli::command().disable_help_subcommand(true);
    let Some(dir) = dir else {
        let mut page = Vec::new();
        if let Err(e) = clap_mangen::Man::new(command).render(&mut page) {
            errln!("core-agent: cannot render the man page: {e}");
            return FAILED;
        }
        out!("{}", String::from_utf8_lossy(&page));
        return 0;
    };
    match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(command, dir)) {
        Ok(()) => {
            outln!(
                "wrote core-agent.1 and a page per subcommand to {}",
                dir.display()
            );
            0
        }
        Err(e) => {
            errln!(
                "core-agent: cannot write the man pages to {}: {e}",
                dir.display()
            );
            FAILED
        }
    }
}
