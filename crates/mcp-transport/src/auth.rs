//! Tokens for authenticated HTTP servers: the [`TokenSource`] seam, the
//! HTTP client that asks it for a token on every request, and the one place
//! that picks a source for a server ([`source_for`]).
//!
//! The auth layer wraps innermost (spec, "Header precedence"): the source's
//! `Authorization` always replaces one written in `headers`; every other
//! static header passes through unchanged.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use core_agent_mcp_config::{AuthSpec, Env, OAuthSpec, ServerEntry, Transport};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::behalf::CallerCredential;
#[cfg(feature = "oauth")]
use crate::oauth::{OAuthSettings, OAuthTokens};
use crate::{StartError, StartOptions};

/// An access token: the whole `Authorization` header value and the headers
/// that go with it. `Debug` and `Display` never show the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The full `Authorization` header value, e.g. `Bearer ya29…`.
    authorization: String,
    /// Headers sent with it, e.g. `X-Goog-User-Project`.
    extra_headers: Vec<(HeaderName, HeaderValue)>,
    expires_at: Option<SystemTime>,
}

impl Token {
    /// A bearer token: `Authorization: Bearer <secret>`.
    pub fn bearer(secret: impl Into<String>) -> Self {
        Token {
            authorization: format!("Bearer {}", secret.into()),
            extra_headers: Vec::new(),
            expires_at: None,
        }
    }

    /// A token whose `Authorization` value is `authorization` as given
    /// (a scheme other than `Bearer`, or a value a library built whole).
    pub fn from_authorization(authorization: impl Into<String>) -> Self {
        Token {
            authorization: authorization.into(),
            extra_headers: Vec::new(),
            expires_at: None,
        }
    }

    /// Sends `name: value` with every request that carries this token
    /// (replacing a static header of the same name).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.extra_headers.retain(|(n, _)| *n != name);
        self.extra_headers.push((name, value));
        self
    }

    /// Records when the token stops being valid.
    pub fn expiring_at(mut self, at: SystemTime) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// The full `Authorization` header value. This is the secret: never log it.
    pub fn authorization(&self) -> &str {
        &self.authorization
    }

    /// The headers sent with the token.
    pub fn extra_headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.extra_headers
    }

    /// When the token expires, when the source knows.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    /// The scheme of the `Authorization` value (`Bearer`), which is not secret.
    fn scheme(&self) -> &str {
        self.authorization
            .split_once(' ')
            .map_or("***", |(scheme, _)| scheme)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Token")
            .field("authorization", &format_args!("{} ***", self.scheme()))
            .field("extra_headers", &headers)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ***", self.scheme())
    }
}

/// Why a [`TokenSource`] has no token. No message ever contains a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No credentials were found where the source looks for them.
    #[error("no credentials found ({source_tried}); {fix}")]
    NotConfigured {
        /// Where the source looked, e.g. "GOOGLE_APPLICATION_CREDENTIALS, …".
        source_tried: String,
        /// What to run or set.
        fix: String,
    },
    /// Credentials were found, but the token endpoint refused them (a bad
    /// key, a revoked grant, a scope that was not granted).
    #[error("{source_used} refused to issue a token: {reason}; {fix}")]
    Refused {
        /// The credentials used, as [`TokenSource::describe`] says.
        source_used: String,
        /// What the endpoint said (without any secret).
        reason: String,
        /// What to do.
        fix: String,
    },
    /// The token endpoint or metadata server could not be reached.
    #[error("cannot reach {endpoint} for {source_used}: {reason}")]
    Unreachable {
        /// The credentials used.
        source_used: String,
        /// The host or URL tried.
        endpoint: String,
        /// The innermost cause.
        reason: String,
    },
    /// The server needs an interactive login (MCP OAuth) first; a front
    /// end names its login command beside it.
    #[error("server `{server}` needs a login")]
    LoginNeeded {
        /// The server's name.
        server: String,
    },
    /// Anything else, in words a person can act on.
    #[error("{0}")]
    Other(String),
}

/// Where an authenticated server's tokens come from.
///
/// The HTTP client asks [`TokenSource::token`] before every request, so an
/// implementation caches its token and refreshes it before it expires. When
/// the server answers 401, the client calls [`TokenSource::rejected`] with the
/// token it sent, asks for a token again and retries the request once; if
/// that one is refused too, the 401 goes to the caller (never a loop).
pub trait TokenSource: Send + Sync + 'static {
    /// A token valid now (cached; refreshed before expiry).
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>>;

    /// The server answered 401 to `token`: drop it so the next
    /// [`TokenSource::token`] fetches a new one.
    fn rejected<'a>(&'a self, token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>>;

    /// The server answered 403 `insufficient_scope` to `token`, with this
    /// `WWW-Authenticate` value: `Ok(true)` when the source obtained a token
    /// with more scope (an OAuth step-up) and the request should be sent once
    /// more. The default cannot, so the 403 reaches the caller.
    fn insufficient_scope<'a>(
        &'a self,
        _token: &'a Token,
        _challenge: &'a str,
    ) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(std::future::ready(Ok(false)))
    }

    /// The strategy, one word for reports: `google-adc`, `oauth`, `static`.
    fn strategy(&self) -> String;

    /// Where its tokens come from or how they stand, never a secret:
    /// `service account key /path/key.json`, `logged in, expires in 52 min`.
    /// The default says nothing more than the strategy.
    fn detail(&self) -> Option<String> {
        None
    }

    /// The strategy and its detail, for messages and logs:
    /// `google-adc (service account key /path/key.json)`.
    fn describe(&self) -> String {
        match self.detail() {
            Some(detail) => format!("{} ({detail})", self.strategy()),
            None => self.strategy(),
        }
    }
}

/// A fixed token (for a library user who already holds one). `rejected` can
/// do nothing about a refusal, so the 401 reaches the caller after one retry.
#[derive(Debug, Clone)]
pub struct StaticToken(pub Token);

impl TokenSource for StaticToken {
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
        Box::pin(std::future::ready(Ok(self.0.clone())))
    }

    fn rejected<'a>(&'a self, _token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn strategy(&self) -> String {
        "static".to_owned()
    }
}

/// How a server's requests are authenticated, as `mcp list` and doctor show
/// it (`auth: none | static | google-adc (…)`); never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// No `auth` and no `Authorization` in `headers`.
    None,
    /// An `Authorization` written in `headers`, sent as written.
    Static,
    /// A token source: its [`TokenSource::strategy`] and
    /// [`TokenSource::detail`] (`google-adc`, `service account key
    /// /path/key.json`).
    Source {
        /// The strategy (`google-adc`, `oauth`).
        kind: String,
        /// Where its tokens come from or how they stand, if it says.
        detail: Option<String>,
    },
}

impl Auth {
    /// The strategy alone: `none`, `static`, or the source's
    /// (`google-adc`).
    pub fn kind(&self) -> &str {
        match self {
            Auth::None => "none",
            Auth::Static => "static",
            Auth::Source { kind, .. } => kind,
        }
    }

    /// The source's detail, if any (`service account key /k.json`).
    pub fn detail(&self) -> Option<&str> {
        match self {
            Auth::Source { detail, .. } => detail.as_deref(),
            _ => None,
        }
    }

    /// A token source's report.
    pub(crate) fn of(source: &dyn TokenSource) -> Auth {
        Auth::Source {
            kind: source.strategy(),
            detail: source.detail(),
        }
    }
}

impl fmt::Display for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.detail() {
            Some(detail) => write!(f, "{} ({detail})", self.kind()),
            None => f.write_str(self.kind()),
        }
    }
}

/// Picks the token source for `entry`: `None` for a server without `auth`
/// (a static `Authorization` in `headers`, if any, is sent as written).
///
/// This is the one place a new strategy is added: one arm per
/// [`AuthSpec`] variant. Building a source does no I/O; the first token is
/// fetched when the server starts, so a misconfiguration fails that server.
pub(crate) fn source_for(
    entry: &ServerEntry,
    env: &dyn Env,
    options: &StartOptions,
) -> Result<Option<Arc<dyn TokenSource>>, StartError> {
    let Transport::Http(http) = &entry.spec.transport else {
        return Ok(None);
    };
    #[cfg(feature = "oauth")]
    let oauth = |spec: Option<&OAuthSpec>| -> Result<Arc<dyn TokenSource>, StartError> {
        let file = options
            .credentials
            .as_ref()
            .map(|dir| dir.file(&entry.name, &http.url));
        match file {
            Some(file) if file.status().is_logged_in() => {
                let settings = spec
                    .map(|s| OAuthSettings::from_spec(s, env))
                    .unwrap_or_default();
                Ok(Arc::new(OAuthTokens::new(
                    &entry.name,
                    file,
                    settings,
                    options.browser.clone(),
                )))
            }
            _ => Err(StartError::Auth(AuthError::LoginNeeded {
                server: entry.name.clone(),
            })),
        }
    };
    // Without these features nothing reads the credentials or the env.
    #[cfg(not(feature = "oauth"))]
    let _ = options;
    #[cfg(not(any(feature = "oauth", feature = "google")))]
    let _ = env;
    #[cfg(not(feature = "oauth"))]
    let oauth = |_: Option<&OAuthSpec>| -> Result<Arc<dyn TokenSource>, StartError> {
        Err(StartError::Unsupported {
            what: "`auth.oauth` (MCP OAuth)".to_owned(),
            fix: "build core-agent-mcp-transport with its `oauth` feature, or remove `auth` and pass a token in `headers`".to_owned(),
        })
    };
    match &http.auth {
        Some(AuthSpec::OAuth(spec)) => oauth(Some(spec)).map(Some),
        // No `auth`, but a login stored credentials for this server at this
        // URL: it answered 401 once and was logged in to.
        #[cfg(feature = "oauth")]
        None if options
            .credentials
            .as_ref()
            .is_some_and(|dir| dir.file(&entry.name, &http.url).status().is_logged_in()) =>
        {
            oauth(None).map(Some)
        }
        None => Ok(None),
        // The connection uses `headers`; each call, its caller's token (`behalf`).
        Some(AuthSpec::TokenExchange(_)) => Ok(None),
        #[cfg(feature = "google")]
        Some(AuthSpec::GoogleOAuth { scopes }) => Ok(Some(crate::google::source(scopes, env))),
        #[cfg(not(feature = "google"))]
        Some(AuthSpec::GoogleOAuth { .. }) => Err(StartError::Unsupported {
            what: "`auth.google_oauth` (Google Application Default Credentials)".to_owned(),
            fix: "build core-agent-mcp-transport with its `google` feature, or remove `auth` and pass a token in `headers`".to_owned(),
        }),
        // `AuthSpec` is non-exhaustive: a strategy this build does not know.
        Some(_) => Err(StartError::Unsupported {
            what: "this `auth` strategy".to_owned(),
            fix: "remove `auth` and pass a token in `headers`, e.g. \"Authorization\": \"Bearer ${env:TOKEN}\"".to_owned(),
        }),
    }
}

/// The streamable HTTP client of a server with a [`TokenSource`]: every
/// request carries the source's current token as `Authorization` (replacing
/// any written in `headers`) plus the token's extra headers; a 401 makes the
/// source drop the token, and the request is sent once more with a new one.
///
/// A request that carries its caller's credential (a server with
/// `auth.token_exchange`, [`crate::behalf`]) is sent with that instead:
/// the caller's token replaces the connection's `Authorization`, and a 401
/// is told to the caller's source.
#[derive(Clone)]
pub(crate) struct AuthClient {
    inner: reqwest::Client,
    /// The connection's own source; `None`: `headers` as written.
    source: Option<Arc<dyn TokenSource>>,
}

impl AuthClient {
    pub(crate) fn new(inner: reqwest::Client, source: Option<Arc<dyn TokenSource>>) -> Self {
        AuthClient { inner, source }
    }

    /// Runs `send` with the token's headers (the caller's, else the
    /// connection's); on a 401, once more with a new token.
    async fn authorized<T, F, Fut>(
        &self,
        caller: Option<CallerCredential>,
        headers: HashMap<HeaderName, HeaderValue>,
        send: F,
    ) -> Result<T, StreamableHttpError<reqwest::Error>>
    where
        F: Fn(HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let (source, token) = match caller {
            Some(CallerCredential { token, source }) => (source, token),
            None => match &self.source {
                Some(source) => (source.clone(), source.token().await.map_err(auth_failed)?),
                None => return send(headers).await,
            },
        };
        match send(with_token(&token, headers.clone())?).await {
            Err(e) if is_unauthorized(&e) => {
                tracing::debug!(source = %source.describe(), "the server answered 401; refreshing the token once");
                source.rejected(&token).await.map_err(auth_failed)?;
                let fresh = source.token().await.map_err(auth_failed)?;
                send(with_token(&fresh, headers)?).await
            }
            Err(StreamableHttpError::InsufficientScope(e)) => {
                tracing::debug!(source = %source.describe(), "the server answered 403 insufficient_scope; one step-up");
                if source
                    .insufficient_scope(&token, &e.www_authenticate_header)
                    .await
                    .map_err(auth_failed)?
                {
                    let fresh = source.token().await.map_err(auth_failed)?;
                    send(with_token(&fresh, headers)?).await
                } else {
                    Err(StreamableHttpError::InsufficientScope(e))
                }
            }
            result => result,
        }
    }
}

impl fmt::Debug for AuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthClient")
            .field("source", &self.source.as_ref().map(|s| s.describe()))
            .finish_non_exhaustive()
    }
}

/// The caller's credential a `tools/call` carries in its extensions, if any.
fn caller_credential(message: &ClientJsonRpcMessage) -> Option<CallerCredential> {
    match message {
        ClientJsonRpcMessage::Request(request) => match &request.request {
            ClientRequest::CallToolRequest(call) => {
                call.extensions.get::<CallerCredential>().cloned()
            }
            _ => None,
        },
        _ => None,
    }
}

/// The request's headers with the token's: its `Authorization` replaces any
/// static one, its extra headers replace static headers of the same name.
fn with_token(
    token: &Token,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> Result<HashMap<HeaderName, HeaderValue>, StreamableHttpError<reqwest::Error>> {
    let mut authorization = HeaderValue::from_str(token.authorization()).map_err(|_| {
        auth_failed(AuthError::Other(
            "the token source produced an Authorization value that is not a valid HTTP header"
                .to_owned(),
        ))
    })?;
    authorization.set_sensitive(true);
    headers.insert(http::header::AUTHORIZATION, authorization);
    for (name, value) in token.extra_headers() {
        headers.insert(name.clone(), value.clone());
    }
    Ok(headers)
}

/// An [`AuthError`] as the transport's error; [`auth_error_in`] finds it again.
fn auth_failed(e: AuthError) -> StreamableHttpError<reqwest::Error> {
    StreamableHttpError::Io(std::io::Error::other(e))
}

/// The [`AuthError`] behind a failed `initialize`, when a token source failed.
pub(crate) fn auth_error_in(e: &rmcp::service::ClientInitializeError) -> Option<AuthError> {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            find_auth_error(&*error.error)
        }
        _ => None,
    }
}

/// The [`AuthError`] in `e`'s chain of causes.
fn find_auth_error(e: &(dyn std::error::Error + 'static)) -> Option<AuthError> {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<AuthError>() {
            return Some(found.clone());
        }
        if let Some(StreamableHttpError::Io(io)) =
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
            && let Some(found) = io.get_ref().and_then(|i| i.downcast_ref::<AuthError>())
        {
            return Some(found.clone());
        }
        cause = e.source();
    }
    None
}

/// Whether the server answered 401: with a challenge (rmcp's `AuthRequired`),
/// as a failed GET or DELETE (reqwest's status), or as a POST without a
/// challenge (rmcp reports it as `HTTP 401 …`).
fn is_unauthorized(e: &StreamableHttpError<reqwest::Error>) -> bool {
    match e {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::Client(e) => e.status() == Some(reqwest::StatusCode::UNAUTHORIZED),
        StreamableHttpError::UnexpectedServerResponse(text) => text.starts_with("HTTP 401 "),
        _ => false,
    }
}

type Sse = BoxStream<'static, Result<sse_stream::Sse, SseError>>;

impl StreamableHttpClient for AuthClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            None,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            None,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
        let caller = caller_credential(&message);
        self.authorized(caller, custom_headers, |headers| {
            let (uri, message, session_id) = (uri.clone(), message.clone(), session_id.clone());
            async move {
                self.inner
                    .post_message_with_response_limits(
                        uri, message, session_id, None, headers, limits,
                    )
                    .await
            }
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.authorized(None, custom_headers, |headers| {
            let (uri, session_id) = (uri.clone(), session_id.clone());
            async move {
                self.inner
                    .delete_session(uri, session_id, None, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Sse, StreamableHttpError<reqwest::Error>> {
        self.authorized(None, custom_headers, |headers| {
            let (uri, session_id, last) = (uri.clone(), session_id.clone(), last_event_id.clone());
            async move {
                self.inner
                    .get_stream(uri, session_id, last, None, headers)
                    .await
            }
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Sse, StreamableHttpError<reqwest::Error>> {
        self.authorized(None, custom_headers, |headers| {
            let (uri, session_id, last) = (uri.clone(), session_id.clone(), last_event_id.clone());
            async move {
                self.inner
                    .get_stream_with_max_sse_event_size(
                        uri,
                        session_id,
                        last,
                        None,
                        headers,
                        max_sse_event_size,
                    )
                    .await
            }
        })
        .await
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
