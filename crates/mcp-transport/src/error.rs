use std::time::Duration;

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a server could not be started.
///
/// Each message says what happened in words a person can act on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The stdio `command` does not exist.
    #[error(
        "command not found: `{command}`; install it or fix `command` (PATH is searched when it has no `/`)"
    )]
    NotFound {
        /// The command as configured.
        command: String,
    },
    /// The stdio `command` could not be spawned for another reason.
    #[error("cannot start `{command}`: {message}")]
    Spawn {
        /// The command as configured.
        command: String,
        /// The operating system's reason.
        message: String,
    },
    /// The child exited before the handshake finished.
    #[error(
        "exited during start ({status}){}{}",
        noise_suffix(stdout),
        stderr_suffix(stderr)
    )]
    Exited {
        /// How it exited (`exit status: 1`, `signal: 9`).
        status: String,
        /// The first line it wrote to stdout that was not a protocol message.
        stdout: Option<String>,
        /// The last lines it wrote to stderr.
        stderr: Vec<String>,
    },
    /// Start (spawn or connect, initialize, list tools) took too long.
    #[error("did not finish starting within {}{}; is the server stuck, or does it need a longer start timeout?", humanize(*after), noise_suffix(stdout))]
    Timeout {
        /// The limit that was hit.
        after: Duration,
        /// The first line a stdio child wrote to stdout that was not a protocol message.
        stdout: Option<String>,
        /// The last lines a stdio child wrote to stderr.
        stderr: Vec<String>,
    },
    /// The handshake failed (HTTP status, protocol error, connection refused).
    #[error(
        "initialize failed: {message}{}{}",
        noise_suffix(stdout),
        stderr_suffix(stderr)
    )]
    Initialize {
        /// What went wrong.
        message: String,
        /// The first line a stdio child wrote to stdout that was not a protocol message.
        stdout: Option<String>,
        /// The last lines a stdio child wrote to stderr.
        stderr: Vec<String>,
    },
    /// The server answered `initialize` but `tools/list` failed.
    #[error("tools/list failed: {message}")]
    ListTools {
        /// What went wrong.
        message: String,
    },
    /// A header name or value cannot be sent over HTTP.
    #[error("header `{name}` is not a valid HTTP header {part}; fix it in `headers`")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// `name` or `value`.
        part: &'static str,
    },
    /// The server's token source has no token (no credentials, a refused
    /// grant, an unreachable token endpoint, a login needed).
    #[error("cannot get a token: {0}")]
    Auth(crate::AuthError),
    /// The config asks for something this build does not do.
    #[error("{what} is not supported by this version of core-agent; {fix}")]
    Unsupported {
        /// The unsupported feature.
        what: String,
        /// What to do instead.
        fix: String,
    },
}

impl StartError {
    /// Whether the server cannot start until someone logs in to it (MCP
    /// OAuth): a front end then names its login command beside the error.
    pub fn needs_login(&self) -> bool {
        matches!(self, StartError::Auth(crate::AuthError::LoginNeeded { .. }))
    }
}

/// Why a tool call failed (as opposed to the tool reporting `isError`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server is not connected (it failed to start, or was shut down).
    #[error("server `{server}` is not connected")]
    NotConnected {
        /// The server.
        server: String,
    },
    /// The call did not finish in time; the request was cancelled on the server.
    #[error("`{tool}` on server `{server}` did not answer within {}; the request was cancelled", humanize(*after))]
    Timeout {
        /// The server.
        server: String,
        /// The server's name for the tool.
        tool: String,
        /// The limit that was hit.
        after: Duration,
    },
    /// The call's timeout passed while it waited for one of the server's
    /// call slots (`max_concurrent_calls`, all busy); it was never sent.
    #[error("`{tool}` on server `{server}` timed out after {} waiting for a free call slot (all of the server's concurrent calls were busy); it was not sent, retry later or raise the server's concurrent call limit", humanize(*after))]
    Busy {
        /// The server.
        server: String,
        /// The server's name for the tool.
        tool: String,
        /// The call's timeout, spent waiting.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error or the connection failed.
    #[error("`{tool}` on server `{server}` failed: {message}")]
    Call {
        /// The server.
        server: String,
        /// The server's name for the tool.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The server's connection ended during the call: a stdio server
    /// exited (or an HTTP server's connection closed).
    #[error(
        "server `{server}` {how} during the call to `{tool}`{next}{}",
        stderr_suffix(stderr)
    )]
    Crashed {
        /// The server.
        server: String,
        /// The server's name for the tool.
        tool: String,
        /// What happened: `exited with status 1`, `was killed by signal 9 (SIGKILL)`.
        how: String,
        /// What happens next, such as ` (restarting it in 1 s)`; empty when
        /// the server is not restarted.
        next: String,
        /// The last lines it wrote to stderr.
        stderr: Vec<String>,
    },
    /// The server's connection ended earlier and it is not restarted.
    #[error("server `{server}` is down: it {reason}")]
    Down {
        /// The server.
        server: String,
        /// How its connection ended, and why it is not restarted.
        reason: String,
    },
    /// The server answered a request with a JSON-RPC error (an unknown
    /// prompt, a missing argument, a resource it does not have): its code
    /// and message, to pass on as they are.
    #[error("`{what}` on server `{server}` was refused: {message}")]
    #[non_exhaustive]
    Refused {
        /// The server.
        server: String,
        /// The request, such as `prompts/get greet`.
        what: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
        /// The server's `data`, when it sent any.
        data: Option<Box<serde_json::Value>>,
    },
    /// The server asked for input (`input_required`) in a call made under
    /// [`crate::relaying`]: its requests, for the caller to put to its own
    /// client and send back with [`crate::Resume`].
    #[error("`{tool}` on server `{server}` asked for input the caller must give")]
    InputRequired {
        /// The server.
        server: String,
        /// The server's name for the tool.
        tool: String,
        /// What it asked, and its `requestState`.
        asked: Box<rmcp::model::InputRequiredResult>,
    },
    /// The server does not offer what was asked (it did not declare the
    /// capability in its handshake).
    #[error("server `{server}` does not offer {what}")]
    NotOffered {
        /// The server.
        server: String,
        /// `resources`, `prompts`, `completions` or `logging`.
        what: &'static str,
    },
    /// The server acts for each user (`auth.token_exchange`), and no token
    /// could be had for the user of this call (none signed in, a refused
    /// exchange, an unreachable authorization server): nothing was sent.
    #[error("`{what}` on server `{server}` was not sent: {error}")]
    CallerToken {
        /// The server.
        server: String,
        /// The server's name for the tool, or the request (`resources/read …`).
        what: String,
        /// Why there is no token, in the token source's words.
        error: Box<crate::AuthError>,
    },
    /// The server is being restarted and was not back within the call's timeout.
    #[error("server `{server}` is being restarted and was not back within {}; it {reason}", humanize(*after))]
    Restarting {
        /// The server.
        server: String,
        /// How its connection ended.
        reason: String,
        /// The call's timeout.
        after: Duration,
    },
}

fn noise_suffix(line: &Option<String>) -> String {
    match line {
        Some(line) => format!(
            " (it wrote non-protocol text to stdout: `{line}`; a stdio server must write only JSON-RPC there, and log to stderr)"
        ),
        None => String::new(),
    }
}

pub(crate) fn stderr_suffix(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with:\n    {}", lines.join("\n    "))
    }
}

pub(crate) fn humanize(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
