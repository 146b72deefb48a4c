/// The result type of the Host.
pub type Result<T> = std::result::Result<T, Error>;

/// Why the Host could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No tool is published under that name.
    #[error(
        "no tool named `{}`{}",
        elided(name),
        did_you_mean(suggestions, "tools")
    )]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// Close names from the catalog.
        suggestions: Vec<String>,
    },
    /// The tool exists on its server but was left out of the catalog
    /// (quarantined by its pin, a schema too large, past `max_tools`).
    #[error("`{name}` is not published: {reason}")]
    Withheld {
        /// The name asked for.
        name: String,
        /// The catalog warning that left it out, with what to do.
        reason: String,
    },
    /// The caller's trust level may not see or call the tool.
    #[error("`{name}` is not available at trust level `{level}`; it allows {allowed}")]
    Restricted {
        /// The tool.
        name: String,
        /// The caller's level.
        level: String,
        /// The levels it allows.
        allowed: String,
    },
    /// The permission gate refused the call.
    #[error("permission denied: {reason}; {advice}")]
    Denied {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
        /// What would allow it.
        advice: String,
        /// The gate asked and nobody approved (a front end can add how to
        /// approve, such as a `--yes` flag).
        unanswered_ask: bool,
    },
    /// A built-in tool was called with arguments it cannot use.
    #[error("`{name}`: {message}")]
    BadArguments {
        /// The built-in.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A host tool's call did not finish in time and was cancelled.
    #[error("`{name}` did not finish within {} ms and was cancelled; narrow it (a smaller path, a tighter pattern) or raise the call timeout", after.as_millis())]
    TimedOut {
        /// The tool.
        name: String,
        /// The limit that was hit.
        after: std::time::Duration,
    },
    /// No prompt the caller may see has this name.
    #[error(
        "no prompt named `{}`{}",
        elided(name),
        did_you_mean(suggestions, "prompts")
    )]
    UnknownPrompt {
        /// The name asked for.
        name: String,
        /// Close names among the caller's prompts.
        suggestions: Vec<String>,
    },
    /// No server the caller may see owns this resource URI.
    #[error("no server offers the resource `{}`: {hint}", elided(uri))]
    UnknownResource {
        /// The URI asked for.
        uri: String,
        /// What the URI should look like, or which server names are close.
        hint: String,
    },
    /// `trust` could not pin a server's tools.
    #[error("{message}")]
    Pin {
        /// What went wrong, and what to do.
        message: String,
    },
    /// The call could not be made or did not finish.
    #[error(transparent)]
    Call(#[from] core_agent_mcp_transport::Error),
    /// A setting needs a crate feature this build was compiled without.
    #[error("{what} needs the `{feature}` feature of core-agent-host, which this build lacks")]
    FeatureOff {
        /// The feature (`sqlite`, `llm`).
        feature: &'static str,
        /// What asked for it (`a session database`).
        what: &'static str,
    },
    /// The digest's store could not be opened.
    #[error(transparent)]
    Digest(#[from] core_agent_digest::Error),
}

/// A caller-supplied name or URI as an error shows it: at most 256 bytes,
/// a longer one cut with its size and hash.
fn elided(text: &str) -> std::borrow::Cow<'_, str> {
    core_agent_mcp_policy::elide(text, 256)
}

fn did_you_mean(suggestions: &[String], what: &str) -> String {
    match suggestions {
        [] => format!("; list the {what} with {what}/list"),
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
