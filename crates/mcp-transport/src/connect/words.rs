//! rmcp's connection errors in words a person can act on.

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// The initialize error in words a person can act on: the HTTP status and
/// `WWW-Authenticate` challenge, or the innermost cause of a connection
/// failure, rather than rmcp's type names.
pub(super) fn init_message(
    e: &ClientInitializeError,
    source: Option<&str>,
    server: &str,
) -> String {
    // The probe failed and so did `initialize`: the latter says why.
    if let ClientInitializeError::LegacyFallbackFailed { fallback, .. } = e {
        return init_message(fallback, source, server);
    }
    if let (Some(challenge), Some(source)) = (e.auth_challenge(), source) {
        return format!(
            "the server refused the token from {source} (HTTP 401, WWW-Authenticate: {challenge}), also after a fresh one; check that these credentials may use this server (scopes, roles)"
        );
    }
    if let Some(challenge) = e.auth_challenge() {
        return format!(
            "the server requires authorization (HTTP 401, WWW-Authenticate: {challenge}); if it supports OAuth, log in to `{server}` first, else add a token to `headers`, e.g. \"Authorization\": \"Bearer ${{TOKEN}}\""
        );
    }
    let text = e.to_string();
    if let Some(i) = text.find("unexpected server response: ") {
        let rest = &text[i + "unexpected server response: ".len()..];
        let status = rest
            .split(", when")
            .next()
            .unwrap_or(rest)
            .trim_end_matches([':', ' ']);
        let hint = if status.contains(" 401") || status.contains(" 403") {
            "; the server wants credentials: add them to `headers`"
        } else if status.contains(" 404") {
            "; check the path of `url` (streamable HTTP endpoints usually end in /mcp)"
        } else {
            ""
        };
        return format!("the server answered {status}{hint}");
    }
    match e {
        ClientInitializeError::TransportError { error, .. } => transport_words(error),
        _ => plain(text),
    }
}

/// An HTTP transport error in words: a connection failure by its innermost
/// cause ("Connection refused (os error 111)", "dns error: …", a redirect
/// loop), else what the server answered.
pub(crate) fn transport_words(error: &rmcp::transport::DynamicTransportError) -> String {
    match error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        Some(StreamableHttpError::Client(client)) => {
            let mut cause: &dyn std::error::Error = client;
            while let Some(next) = cause.source() {
                cause = next;
            }
            let cause = cause.to_string();
            if cause.contains("too many redirects") || cause.contains("exceeded 10 redirects") {
                return format!(
                    "the server redirected more than 10 times ({cause}): a redirect loop; check `url`"
                );
            }
            format!("cannot reach the server: {cause}")
        }
        // rmcp keeps only the status of a 5xx or 429 (no body).
        Some(StreamableHttpError::HttpStatus(failure)) => {
            match http::StatusCode::from_u16(failure.status) {
                Ok(status) if status.is_server_error() => format!(
                    "the server answered HTTP {status}: it failed on its side; its own logs say why"
                ),
                Ok(status) => format!("the server answered HTTP {status}; try again later"),
                Err(_) => format!("the server answered HTTP {}", failure.status),
            }
        }
        Some(StreamableHttpError::ResponseBodyTooLarge { max_size }) => format!(
            "the server's answer was longer than max_message_bytes ({}), so it was not read; raise `limits.max_message_bytes` for this server if such answers are expected",
            crate::child::bytes(*max_size)
        ),
        _ => plain(error.to_string()),
    }
}

/// rmcp's error text without its type names (`Transport [<types>] error: `)
/// and the request it was about (`, when send initialize request`).
fn plain(text: String) -> String {
    let text = match text.find("] error: ") {
        Some(i) => &text[i + "] error: ".len()..],
        None => &text,
    };
    text.split(", when send")
        .next()
        .unwrap_or_default()
        .to_owned()
}
