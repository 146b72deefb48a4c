//! Calls made for a user: a server whose entry says `auth.token_exchange`
//! gets, on each `tools/call`, a token of the user the call is made for,
//! never the connection's own credentials and never the user's own token.
//!
//! The seam is [`CallerTokens`], put in scope around a caller's calls by
//! [`with_caller_tokens`] (a front end that signs its users in implements
//! it; this crate knows nothing of how). The token it gives travels with
//! the one request in the request's extensions, so the connection shared
//! by every caller sends each request with its own caller's token.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use core_agent_mcp_config::{Env, ExchangeEndpoint, TokenExchangeSpec};

use crate::auth::{AuthError, Token, TokenSource};

/// `auth.token_exchange` of one server, its placeholders expanded: what a
/// [`CallerTokens`] needs to obtain a token for that server. `Debug` never
/// shows the client secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenExchange {
    server: String,
    url: String,
    endpoint: ExchangeEndpoint,
    client_id: String,
    client_secret: Option<String>,
    audience: Option<String>,
    resource: Option<String>,
    scopes: Vec<String>,
}

impl TokenExchange {
    /// The settings of `server` (at `url`) from its entry's `spec`, with
    /// `client_secret` expanded through `env`.
    pub fn new(server: &str, url: &str, spec: &TokenExchangeSpec, env: &dyn Env) -> TokenExchange {
        TokenExchange {
            server: server.to_owned(),
            url: url.to_owned(),
            endpoint: spec.endpoint.clone(),
            client_id: spec.client_id.clone(),
            client_secret: spec.client_secret.as_ref().map(|t| t.expand(env).value),
            audience: spec.audience.clone(),
            resource: spec.resource.clone(),
            scopes: spec.scopes.clone(),
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the exchange is sent: the token endpoint, or the issuer naming it.
    pub fn endpoint(&self) -> &ExchangeEndpoint {
        &self.endpoint
    }

    /// The client the exchange authenticates as.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Its secret, if it has one. This is a secret: never log it.
    pub fn client_secret(&self) -> Option<&str> {
        self.client_secret.as_deref()
    }

    /// The `audience` to ask for, if set.
    pub fn audience(&self) -> Option<&str> {
        self.audience.as_deref()
    }

    /// The `resource` to ask for: as set, else the server's URL when no
    /// `audience` is set either (RFC 8707: the server's own URI).
    pub fn resource(&self) -> Option<&str> {
        match (&self.resource, &self.audience) {
            (Some(resource), _) => Some(resource),
            (None, None) => Some(&self.url),
            (None, Some(_)) => None,
        }
    }

    /// The scopes to ask for (empty: the authorization server's choice).
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Where tokens come from, for reports: `token exchange at <endpoint>`.
    pub(crate) fn describe(&self) -> String {
        match &self.endpoint {
            ExchangeEndpoint::TokenEndpoint(url) => format!("per user, exchanged at {url}"),
            ExchangeEndpoint::Issuer(url) => format!("per user, exchanged at issuer {url}"),
            _ => "per user".to_owned(),
        }
    }
}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchange")
            .field("server", &self.server)
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// The tokens of the caller whose calls are in scope
/// ([`with_caller_tokens`]), one source per server that asks for them.
///
/// Asked once per request to such a server, on the calling task, before
/// the request is sent: [`CallerTokens::source`] must be quick (no I/O);
/// the source's [`TokenSource::token`] then obtains the token (an
/// exchange, or a cached one) under the call's timeout. When the server
/// answers 401, the source's [`TokenSource::rejected`] is told and the
/// request is sent once more with a new token.
pub trait CallerTokens: Send + Sync {
    /// The source of this caller's tokens for the server `exchange`
    /// describes, or why this caller has none (it did not sign in with a
    /// token that can be exchanged).
    fn source(&self, exchange: &Arc<TokenExchange>) -> Result<Arc<dyn TokenSource>, AuthError>;
}

tokio::task_local! {
    static CALLER: Arc<dyn CallerTokens>;
}

/// Runs `calls` so that each request they send to a server whose entry
/// asks for token exchange carries a token `tokens` gives for it.
/// Outside such a scope, those requests fail (there is no user to act for).
pub async fn with_caller_tokens<F: Future>(tokens: Arc<dyn CallerTokens>, calls: F) -> F::Output {
    CALLER.scope(tokens, calls).await
}

/// One request's credential: the caller's token for it, and the source to
/// tell of a 401 and to ask again. Travels in the request's extensions.
#[derive(Clone)]
pub(crate) struct CallerCredential {
    pub(crate) token: Token,
    pub(crate) source: Arc<dyn TokenSource>,
}

impl fmt::Debug for CallerCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallerCredential")
            .field("token", &self.token)
            .field("source", &self.source.describe())
            .finish()
    }
}

/// The credential of the caller in scope for a request to the server
/// `exchange` describes: its token obtained now, so a refusal fails the
/// call with the source's own words.
pub(crate) async fn credential(
    exchange: &Arc<TokenExchange>,
) -> Result<CallerCredential, AuthError> {
    let source = CALLER
        .try_with(|tokens| tokens.source(exchange))
        .map_err(|_| AuthError::NotConfigured {
            source_tried: format!(
                "server `{}` acts for each user (auth.token_exchange), and this call is made for no signed-in user",
                exchange.server()
            ),
            fix: "call it through the gateway as a user signed in with the identity provider, or give the server `headers` and remove `auth.token_exchange`".to_owned(),
        })??;
    let token = source.token().await?;
    Ok(CallerCredential { token, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core_agent_mcp_config::{ProcessEnv, Template};
    use futures::future::BoxFuture;

    fn exchange(audience: Option<&str>, resource: Option<&str>) -> TokenExchange {
        let spec = TokenExchangeSpec {
            endpoint: ExchangeEndpoint::TokenEndpoint("https://as/token".into()),
            client_id: "gw".into(),
            client_secret: Some(Template::parse("s3cret-value").unwrap()),
            audience: audience.map(str::to_owned),
            resource: resource.map(str::to_owned),
            scopes: vec!["a".into()],
        };
        TokenExchange::new("tickets", "https://t.example/mcp", &spec, &ProcessEnv)
    }

    #[test]
    fn the_resource_defaults_to_the_servers_url_and_debug_hides_the_secret() {
        assert_eq!(
            exchange(None, None).resource(),
            Some("https://t.example/mcp")
        );
        assert_eq!(exchange(Some("tickets"), None).resource(), None);
        assert_eq!(
            exchange(Some("t"), Some("https://r")).resource(),
            Some("https://r")
        );
        let x = exchange(None, None);
        assert_eq!(x.client_secret(), Some("s3cret-value"));
        let shown = format!("{x:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("***"),
            "{shown}"
        );
    }

    struct Fixed(&'static str);

    impl TokenSource for Fixed {
        fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
            Box::pin(std::future::ready(Ok(Token::bearer(self.0))))
        }
        fn rejected<'a>(&'a self, _: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
            Box::pin(std::future::ready(Ok(())))
        }
        fn strategy(&self) -> String {
            "test".into()
        }
    }

    struct User(Option<&'static str>);

    impl CallerTokens for User {
        fn source(&self, _: &Arc<TokenExchange>) -> Result<Arc<dyn TokenSource>, AuthError> {
            match self.0 {
                Some(t) => Ok(Arc::new(Fixed(t))),
                None => Err(AuthError::Other(
                    "caller `ops` has no token to exchange".into(),
                )),
            }
        }
    }

    #[tokio::test]
    async fn a_credential_comes_from_the_caller_in_scope_only() {
        let x = Arc::new(exchange(None, None));
        let outside = credential(&x).await.unwrap_err().to_string();
        assert!(
            outside.contains("server `tickets` acts for each user"),
            "{outside}"
        );
        let inside = with_caller_tokens(Arc::new(User(Some("xyz"))), credential(&x))
            .await
            .unwrap();
        assert_eq!(inside.token.authorization(), "Bearer xyz");
        assert!(!format!("{inside:?}").contains("xyz"));
        let refused = with_caller_tokens(Arc::new(User(None)), credential(&x))
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("no token to exchange"));
    }
}
