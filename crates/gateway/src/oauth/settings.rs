//! `gateway.oauth` as configured: the issuer, the audience, what is
//! accepted, and the claims → trust rules.

use std::path::PathBuf;

use core_agent_mcp_config::Template;
use jsonwebtoken::Algorithm;

use super::claims::{DefaultTrust, TrustRule};

/// The algorithms accepted when `gateway.oauth.algorithms` is not set:
/// every asymmetric one (never `none`, never a shared-secret `HS*`).
pub const DEFAULT_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// `gateway.oauth`: the gateway as an OAuth 2.1 resource server. Read by
/// [`GatewayConfig::parse`](crate::GatewayConfig::parse); the first file
/// that sets it (the project's) wins as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// `issuer`: the authorization server's issuer URL; its metadata is
    /// discovered from it, and tokens must carry it as `iss`.
    pub issuer: String,
    /// `audience`: the gateway's canonical URL (RFC 8707), such as
    /// `https://gateway.example.com/mcp`; tokens must carry it in `aud`.
    pub audience: String,
    /// `algorithms`: the JWS algorithms accepted ([`DEFAULT_ALGORITHMS`]).
    pub algorithms: Vec<Algorithm>,
    /// `leeway_secs`: clock skew allowed on `exp`, `nbf` and `iat` (60).
    pub leeway_secs: u64,
    /// `require_at_jwt`: the provider issues RFC 9068 access tokens, so a
    /// JWT's header must say `typ: at+jwt` (false): an ID token or another
    /// JWT the issuer signed is then refused.
    pub require_at_jwt: bool,
    /// `max_token_lifetime_secs`: a token whose lifetime (`exp` − `iat`,
    /// or what is left of it when it has no `iat`) is longer is refused,
    /// as is one issued in the future (`iat` past now and the leeway);
    /// 86400 (24 h).
    pub max_token_lifetime_secs: u64,
    /// `jwks_refresh_secs`: the fewest seconds between two fetches of the
    /// keys for an unknown `kid` (10), so a flood of unknown kids does not
    /// hammer the provider. `config.json` takes 1 to 3600; 0 (through
    /// [`OAuthConfig::with_jwks_refresh_secs`] only) fetches them for every
    /// unknown `kid`.
    pub jwks_refresh_secs: u64,
    /// `scopes_supported`: the scopes the protected-resource metadata lists.
    pub scopes_supported: Vec<String>,
    /// `required_scopes`: scopes every token must grant (403 `insufficient_scope` else).
    pub required_scopes: Vec<String>,
    /// `introspection`: checks opaque (non-JWT) tokens (RFC 7662).
    pub introspection: Option<IntrospectionConfig>,
    /// `trust`: the claims → trust rules; the most trusted match wins.
    pub trust: Vec<TrustRule>,
    /// `default`: the level of a caller no rule matches, or a refusal.
    pub default: DefaultTrust,
    /// The `config.json` that sets it.
    pub source: PathBuf,
}

impl OAuthConfig {
    /// A token's longest lifetime, by default (24 h).
    pub const MAX_TOKEN_LIFETIME_SECS: u64 = 24 * 60 * 60;

    /// `require_at_jwt`.
    #[must_use]
    pub fn with_require_at_jwt(mut self, require: bool) -> OAuthConfig {
        self.require_at_jwt = require;
        self
    }

    /// `max_token_lifetime_secs`.
    #[must_use]
    pub fn with_max_token_lifetime_secs(mut self, secs: u64) -> OAuthConfig {
        self.max_token_lifetime_secs = secs;
        self
    }

    /// `issuer` and `audience`, every other setting at its default (no rule,
    /// every caller refused until rules or a default level are set).
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> OAuthConfig {
        OAuthConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            algorithms: DEFAULT_ALGORITHMS.to_vec(),
            leeway_secs: 60,
            require_at_jwt: false,
            max_token_lifetime_secs: OAuthConfig::MAX_TOKEN_LIFETIME_SECS,
            jwks_refresh_secs: 10,
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            introspection: None,
            trust: Vec::new(),
            default: DefaultTrust::Refuse,
            source: PathBuf::new(),
        }
    }

    /// `trust` and `default`.
    #[must_use]
    pub fn with_trust(mut self, rules: Vec<TrustRule>, default: DefaultTrust) -> OAuthConfig {
        self.trust = rules;
        self.default = default;
        self
    }

    /// `jwks_refresh_secs`.
    #[must_use]
    pub fn with_jwks_refresh_secs(mut self, secs: u64) -> OAuthConfig {
        self.jwks_refresh_secs = secs;
        self
    }

    /// `leeway_secs`.
    #[must_use]
    pub fn with_leeway_secs(mut self, secs: u64) -> OAuthConfig {
        self.leeway_secs = secs;
        self
    }

    /// `introspection`.
    #[must_use]
    pub fn with_introspection(mut self, introspection: Option<IntrospectionConfig>) -> OAuthConfig {
        self.introspection = introspection;
        self
    }
}

/// `gateway.oauth.introspection`: where and as whom opaque tokens are
/// checked (RFC 7662). The client's id and secret are templates
/// (`${env:NAME}`), expanded when the gateway starts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IntrospectionConfig {
    /// `endpoint`: the introspection URL; `None`: the issuer metadata's
    /// `introspection_endpoint`.
    pub endpoint: Option<String>,
    /// `client_id`.
    pub client_id: Template,
    /// `client_secret`.
    pub client_secret: Template,
}

impl IntrospectionConfig {
    /// Introspection as `client_id` with `client_secret`, at the endpoint
    /// the issuer's metadata names.
    pub fn new(client_id: Template, client_secret: Template) -> IntrospectionConfig {
        IntrospectionConfig {
            endpoint: None,
            client_id,
            client_secret,
        }
    }
}
