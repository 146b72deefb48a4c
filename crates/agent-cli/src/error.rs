/// The result type of the Host.
pub type Result<T> = std::result::Result<T, Error>;

/// Why the Host could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tool is published under that name.
    #[error("no tool named `{name}`{}", did_you_mean(suggestions))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// Close names from the catalog.
        suggestions: Vec<String>,
    },
    /// The call could not be made or did not finish.
    #[error(transparent)]
    Call(#[from] core_agent_mcp_transport::Error),
}

fn did_you_mean(suggestions: &[String]) -> String {
    match suggestions {
        [] => "; run `core-agent tools` to list the tools".to_owned(),
        names => format!(
            "; did you mean {}?",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    }
}
