//! [`OAuthSource`] behind the transport's [`TokenSource`] seam.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Browser, CredentialFile, OAuthError, OAuthSettings, OAuthSource};
use crate::{AuthError, Token, TokenSource};

/// The token source of an OAuth server: opens its [`OAuthSource`] on the
/// first request (the server's start), so preparing a start does no I/O.
pub(crate) struct OAuthTokens {
    server: String,
    file: CredentialFile,
    settings: OAuthSettings,
    browser: Option<Arc<dyn Browser>>,
    source: tokio::sync::OnceCell<OAuthSource>,
}

impl OAuthTokens {
    pub(crate) fn new(
        server: &str,
        file: CredentialFile,
        settings: OAuthSettings,
        browser: Option<Arc<dyn Browser>>,
    ) -> Self {
        OAuthTokens {
            server: server.to_owned(),
            file,
            settings,
            browser,
            source: tokio::sync::OnceCell::new(),
        }
    }

    async fn source(&self) -> Result<&OAuthSource, AuthError> {
        self.source
            .get_or_try_init(|| {
                OAuthSource::open(
                    &self.server,
                    self.file.clone(),
                    &self.settings,
                    self.browser.clone(),
                )
            })
            .await
            .map_err(|e| self.auth_error(e))
    }

    fn auth_error(&self, e: OAuthError) -> AuthError {
        match e {
            OAuthError::LoginNeeded { server, reason } => {
                if let Some(reason) = reason {
                    tracing::info!(server = %server, "oauth: {reason}");
                }
                AuthError::LoginNeeded { server }
            }
            other => AuthError::Other(other.to_string()),
        }
    }
}

/// The secret of a `Bearer` token.
fn secret(token: &Token) -> &str {
    let value = token.authorization();
    value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or(value, |(_, secret)| secret)
}

impl TokenSource for OAuthTokens {
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
        Box::pin(async move {
            let source = self.source().await?;
            let access = source
                .access_token()
                .await
                .map_err(|e| self.auth_error(e))?;
            Ok(Token::bearer(access))
        })
    }

    fn rejected<'a>(&'a self, token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let source = self.source().await?;
            source
                .rejected(secret(token))
                .await
                .map_err(|e| self.auth_error(e))
        })
    }

    fn insufficient_scope<'a>(
        &'a self,
        _token: &'a Token,
        challenge: &'a str,
    ) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async move {
            let source = self.source().await?;
            source
                .step_up(challenge)
                .await
                .map(|()| true)
                .map_err(|e| self.auth_error(e))
        })
    }

    fn strategy(&self) -> String {
        "oauth".to_owned()
    }

    fn detail(&self) -> Option<String> {
        Some(self.file.status().describe())
    }
}
