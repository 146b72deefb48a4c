//! The gateway as an OAuth 2.1 resource server: access tokens checked
//! against the issuer's keys (JWTs) or its introspection endpoint (opaque
//! tokens), their claims mapped to a trust level, and the documents and
//! headers that tell a client where to sign in (RFC 9728, RFC 6750).
//!
//! Keys are fetched once and kept; an unknown `kid` refreshes them at most
//! once per `jwks_refresh_secs`, whoever asks; keys already fetched keep
//! working while the provider is away. Nothing here logs a token.

mod claims;
mod metadata;
pub(crate) mod provider;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use core_agent_mcp_config::Env;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use claims::{DefaultTrust, Identity, TrustMatch, TrustRule};
pub(crate) use metadata::{WELL_KNOWN, challenge, protected_resource_metadata};
pub use settings::{DEFAULT_ALGORITHMS, IntrospectionConfig, OAuthConfig};

use crate::Caller;
use provider::{Key, Metadata, Unreachable};

/// The longest `Authorization` header looked at; a longer one is refused.
pub const MAX_AUTHORIZATION_BYTES: usize = 8 * 1024;
/// How long keys are trusted before they are refreshed in the background.
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);
/// How long an introspection answer is kept, at most (less when the token
/// expires sooner).
const INTROSPECTION_TTL: Duration = Duration::from_secs(30);
/// How long a refused opaque token is remembered.
const INTROSPECTION_NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// Introspection answers kept, at most.
const INTROSPECTION_CACHE: usize = 10_000;
/// How long a JWT that checked out is taken without checking it again (its
/// hash looked up instead of its signature verified), at most: never past
/// its `exp`, and forgotten whenever the issuer's keys change.
const VERIFIED_TTL: u64 = 300;
/// Verified JWTs kept, at most.
const VERIFIED_CACHE: usize = 10_000;

/// Why a request's token was not accepted, and how to answer it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// No `Authorization: Bearer` header: 401 with where to sign in.
    #[error("no bearer token")]
    Missing,
    /// A token that is malformed, oversized, expired, for another audience
    /// or issuer, badly signed, or signed by an unknown key: 401
    /// `invalid_token`. The reason is for the log, never the token.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// A valid token whose claims grant no trust level or lack a required
    /// scope: 403 `insufficient_scope`, naming the scopes that would do.
    #[error("insufficient scope (needs {scope})")]
    InsufficientScope {
        /// The scope (space-separated scopes) that would be accepted.
        scope: String,
    },
    /// The provider cannot be reached and no key it already gave applies:
    /// 503 with `Retry-After`.
    #[error("the identity provider cannot be reached: {reason}")]
    Unavailable {
        /// What failed (for the log).
        reason: String,
        /// When to try again.
        retry_after: Duration,
    },
}

/// Checks bearer tokens for the gateway (`gateway.oauth`). Cheap to clone.
#[derive(Clone)]
pub struct ResourceServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("issuer", &self.inner.config.issuer)
            .field("audience", &self.inner.config.audience)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: OAuthConfig,
    http: reqwest::Client,
    /// One prepared validation per accepted algorithm.
    validations: HashMap<Algorithm, Validation>,
    /// The expanded client id and secret of introspection.
    introspection: Option<(String, String)>,
    metadata: RwLock<Option<Arc<Metadata>>>,
    keys: RwLock<Arc<KeySet>>,
    /// Held while the keys are fetched: one fetch at a time, whoever asks.
    refresh: tokio::sync::Mutex<Refresh>,
    /// Introspection answers by the token's SHA-256, until when each is kept.
    introspected: Mutex<HashMap<[u8; 32], (Instant, Introspected)>>,
    /// JWTs that checked out, by their SHA-256: until when (Unix seconds)
    /// each is taken as it is, and its caller. A client sends the same
    /// token on every request until it expires; its signature is verified
    /// once.
    verified: Mutex<HashMap<[u8; 32], (u64, Caller)>>,
}

/// An introspection answer: the token's claims, or why it is refused.
type Introspected = Result<Map<String, Value>, String>;

/// The keys, and when they were fetched.
#[derive(Debug, Default)]
struct KeySet {
    keys: Vec<Key>,
    fetched: Option<Instant>,
    /// Counts the fetches, so a waiter sees that another did its work.
    generation: u64,
}

/// The last fetch of the keys.
#[derive(Debug, Default)]
struct Refresh {
    attempted: Option<Instant>,
    /// Why it failed, when it did.
    failed: Option<String>,
}

/// Why [`ResourceServer::new`] cannot build a resource server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// An introspection client id or secret expands to nothing.
    #[error(
        "gateway.oauth.introspection.{field} ({}) is empty: set the variable it names ({raw})",
        file.display()
    )]
    EmptyCredential {
        /// `client_id` or `client_secret`.
        field: &'static str,
        /// The template as written (names the variable, holds no secret).
        raw: String,
        /// The `config.json` that sets it.
        file: std::path::PathBuf,
    },
    /// The HTTP client could not be built (no TLS roots, …).
    #[error("cannot make an HTTP client for the identity provider: {0}")]
    Client(String),
}

impl ResourceServer {
    /// A resource server for `config`, the introspection credentials read
    /// through `env`. It fetches nothing yet: see [`ResourceServer::warm_up`].
    ///
    /// # Errors
    /// [`OAuthError::EmptyCredential`] when an introspection credential
    /// expands to nothing; [`OAuthError::Client`] when no HTTP client can be made.
    pub fn new(config: OAuthConfig, env: &dyn Env) -> Result<ResourceServer, OAuthError> {
        let introspection = match &config.introspection {
            Some(i) => {
                let id = i.client_id.expand(env).value;
                let secret = i.client_secret.expand(env).value;
                for (field, value, raw) in [
                    ("client_id", &id, i.client_id.raw()),
                    ("client_secret", &secret, i.client_secret.raw()),
                ] {
                    if value.is_empty() {
                        return Err(OAuthError::EmptyCredential {
                            field,
                            raw: raw.to_owned(),
                            file: config.source.clone(),
                        });
                    }
                }
                Some((id, secret))
            }
            None => None,
        };
        let validations = config
            .algorithms
            .iter()
            .map(|&alg| {
                let mut v = Validation::new(alg);
                v.set_issuer(&[config.issuer.as_str()]);
                v.set_audience(&[config.audience.as_str()]);
                v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
                v.leeway = config.leeway_secs;
                v.validate_nbf = true;
                (alg, v)
            })
            .collect();
        Ok(ResourceServer {
            inner: Arc::new(Inner {
                http: provider::client().map_err(OAuthError::Client)?,
                validations,
                introspection,
                metadata: RwLock::new(None),
                keys: RwLock::default(),
                refresh: tokio::sync::Mutex::new(Refresh::default()),
                introspected: Mutex::new(HashMap::new()),
                verified: Mutex::new(HashMap::new()),
                config,
            }),
        })
    }

    /// The configuration it checks tokens by.
    pub fn config(&self) -> &OAuthConfig {
        &self.inner.config
    }

    /// Discovers the issuer's metadata and fetches its keys now, so the
    /// first caller does not wait for them.
    ///
    /// # Errors
    /// What failed, worded for the operator, when the provider cannot be
    /// reached or answers nonsense; the gateway still serves, and the keys
    /// are fetched again when a token needs them.
    pub async fn warm_up(&self) -> Result<usize, String> {
        let mut refresh = self.inner.refresh.lock().await;
        self.fetch(&mut refresh).await.map_err(|e| e.0)?;
        Ok(self.keys().keys.len())
    }

    /// The URL of the gateway's protected-resource metadata (RFC 9728):
    /// the audience's path after `/.well-known/oauth-protected-resource`.
    pub fn metadata_url(&self) -> String {
        metadata::metadata_url(&self.inner.config.audience)
    }

    /// The caller `authorization` (an `Authorization` header) names.
    ///
    /// # Errors
    /// A [`Rejection`] saying how to answer the request.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Caller, Rejection> {
        let token = bearer(authorization)?;
        let claims = if looks_like_jwt(token) {
            let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let now = now();
            if let Some(caller) = self.inner.verified.lock().ok().and_then(|cache| {
                cache
                    .get(&hash)
                    .filter(|(until, _)| now < *until)
                    .map(|(_, caller)| caller.clone())
            }) {
                return Ok(caller);
            }
            let claims = self.check_jwt(token).await?;
            let caller = self.caller_of(&claims)?;
            let expires = claims.get("exp").and_then(Value::as_u64).unwrap_or(now);
            let until = expires.min(now + VERIFIED_TTL);
            if let Ok(mut cache) = self.inner.verified.lock() {
                if cache.len() >= VERIFIED_CACHE {
                    cache.retain(|_, (u, _)| now < *u);
                    if cache.len() >= VERIFIED_CACHE {
                        cache.clear();
                    }
                }
                cache.insert(hash, (until, caller.clone()));
            }
            return Ok(caller);
        } else if self.inner.introspection.is_some() {
            self.check_opaque(token).await?
        } else {
            return Err(Rejection::Invalid(
                "not a JWT, and gateway.oauth.introspection is not set".to_owned(),
            ));
        };
        self.caller_of(&claims)
    }

    /// The caller of validated `claims`: the identity, and the trust level
    /// the rules give it; refused when a required scope is missing or no
    /// rule matches and the default refuses.
    fn caller_of(&self, claims: &Map<String, Value>) -> Result<Caller, Rejection> {
        let config = &self.inner.config;
        let granted = claims::scopes(claims);
        let missing: Vec<&str> = config
            .required_scopes
            .iter()
            .filter(|s| !granted.contains(s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Rejection::InsufficientScope {
                scope: config.required_scopes.join(" "),
            });
        }
        let identity = claims::identity_of(&config.issuer, claims)
            .ok_or_else(|| Rejection::Invalid("no `sub` claim".to_owned()))?;
        let Some(level) = claims::trust_of(claims, &config.trust, config.default) else {
            return Err(Rejection::InsufficientScope {
                scope: self.trust_scopes(),
            });
        };
        let mut caller = Caller::signed_in(identity, level);
        caller.rate_limits = claims::rate_limits_of(claims, &config.trust);
        Ok(caller)
    }

    /// The scopes the trust rules name (what a refused caller could ask
    /// for), else the required and supported ones.
    fn trust_scopes(&self) -> String {
        let config = &self.inner.config;
        let from_rules: Vec<&str> = config
            .trust
            .iter()
            .filter_map(|r| match &r.matches {
                TrustMatch::Scope(s) => Some(s.as_str()),
                TrustMatch::Claim { .. } => None,
            })
            .collect();
        if !from_rules.is_empty() {
            return from_rules.join(" ");
        }
        config
            .required_scopes
            .iter()
            .chain(&config.scopes_supported)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn keys(&self) -> Arc<KeySet> {
        self.inner
            .keys
            .read()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    /// The claims of a JWT whose signature, `alg`, `iss`, `aud`, `exp`,
    /// `nbf` and `sub` check out.
    async fn check_jwt(&self, token: &str) -> Result<Map<String, Value>, Rejection> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Rejection::Invalid(format!("malformed JWT header ({e})")))?;
        let Some(validation) = self.inner.validations.get(&header.alg) else {
            return Err(Rejection::Invalid(format!(
                "algorithm {:?} is not accepted (gateway.oauth.algorithms)",
                header.alg
            )));
        };
        let config = &self.inner.config;
        if config.require_at_jwt && !header.typ.as_deref().is_some_and(is_at_jwt) {
            return Err(Rejection::Invalid(format!(
                "the JWT's typ is {}, not at+jwt (gateway.oauth.require_at_jwt: only RFC 9068 access tokens)",
                header.typ.as_deref().unwrap_or("missing")
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation) {
            Ok(data) => {
                check_lifetime(&data.claims, config, now()).map_err(Rejection::Invalid)?;
                Ok(data.claims)
            }
            Err(e) => Err(Rejection::Invalid(jwt_error(&e))),
        }
    }

    /// The key that signed a token with `kid` and `alg`: from the keys
    /// held, else from a refresh (at most one per `jwks_refresh_secs`).
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Key, Rejection> {
        let held = self.keys();
        if let Some(key) = find(&held, kid, alg)? {
            if held.fetched.is_some_and(|t| t.elapsed() > KEYS_MAX_AGE) {
                self.refresh_in_background();
            }
            return Ok(key);
        }
        let seen = held.generation;
        let mut refresh = self.inner.refresh.lock().await;
        // Another request may have fetched them while this one waited.
        let held = self.keys();
        if held.generation == seen {
            let interval = Duration::from_secs(self.inner.config.jwks_refresh_secs);
            let recent = refresh.attempted.filter(|t| t.elapsed() < interval);
            match (recent, &refresh.failed) {
                (Some(at), Some(reason)) => {
                    return Err(Rejection::Unavailable {
                        reason: reason.clone(),
                        retry_after: interval
                            .saturating_sub(at.elapsed())
                            .max(Duration::from_secs(1)),
                    });
                }
                (Some(_), None) => {
                    return Err(Rejection::Invalid(format!(
                        "no key {} among the issuer's keys",
                        kid.unwrap_or("(no kid)")
                    )));
                }
                (None, _) => {
                    tracing::info!(
                        kid = kid.unwrap_or("(none)"),
                        "a token names a key not held: fetching the issuer's keys again"
                    );
                    if let Err(e) = self.fetch(&mut refresh).await {
                        return Err(Rejection::Unavailable {
                            reason: e.0,
                            retry_after: interval.max(Duration::from_secs(1)),
                        });
                    }
                }
            }
        }
        drop(refresh);
        find(&self.keys(), kid, alg)?.ok_or_else(|| {
            Rejection::Invalid(format!(
                "no key {} among the issuer's keys",
                kid.unwrap_or("(no kid)")
            ))
        })
    }

    /// Fetches the metadata (once) and the keys, under the refresh lock.
    async fn fetch(&self, refresh: &mut Refresh) -> Result<(), Unreachable> {
        refresh.attempted = Some(Instant::now());
        let result = async {
            let metadata = self.metadata().await?;
            provider::fetch_keys(&self.inner.http, &metadata.jwks_uri).await
        }
        .await;
        match result {
            Ok(keys) => {
                refresh.failed = None;
                tracing::info!(
                    issuer = %self.inner.config.issuer,
                    keys = keys.len(),
                    "fetched the identity provider's signing keys"
                );
                // A token verified with a key the issuer no longer
                // publishes is verified again.
                if let Ok(mut cache) = self.inner.verified.lock() {
                    cache.clear();
                }
                if let Ok(mut held) = self.inner.keys.write() {
                    let generation = held.generation + 1;
                    *held = Arc::new(KeySet {
                        keys,
                        fetched: Some(Instant::now()),
                        generation,
                    });
                }
                Ok(())
            }
            Err(e) => {
                tracing::warn!(
                    issuer = %self.inner.config.issuer,
                    "cannot fetch the identity provider's keys ({e}); the keys already held keep working"
                );
                refresh.failed = Some(e.0.clone());
                Err(e)
            }
        }
    }

    /// Refreshes the keys in a task of their own, unless a fetch runs.
    fn refresh_in_background(&self) {
        let this = self.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Ok(mut refresh) = this.inner.refresh.try_lock() {
                    let _ = this.fetch(&mut refresh).await;
                }
            });
        }
    }

    /// The issuer's metadata, discovered once.
    async fn metadata(&self) -> Result<Arc<Metadata>, Unreachable> {
        if let Some(m) = self.inner.metadata.read().ok().and_then(|m| m.clone()) {
            return Ok(m);
        }
        let found =
            Arc::new(provider::discover(&self.inner.http, &self.inner.config.issuer).await?);
        if let Ok(mut m) = self.inner.metadata.write() {
            *m = Some(found.clone());
        }
        Ok(found)
    }

    /// The claims of an opaque token, from the introspection endpoint (or
    /// its recent answer about the same token), checked like a JWT's.
    async fn check_opaque(&self, token: &str) -> Result<Map<String, Value>, Rejection> {
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let cached = self.inner.introspected.lock().ok().and_then(|cache| {
            cache
                .get(&hash)
                .filter(|(until, _)| Instant::now() < *until)
                .map(|(_, r)| r.clone())
        });
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let answer = self.introspect(token).await?;
                let ttl = match &answer {
                    Ok(claims) => claims
                        .get("exp")
                        .and_then(Value::as_u64)
                        .map(|exp| Duration::from_secs(exp.saturating_sub(now())))
                        .map_or(INTROSPECTION_TTL, |left| left.min(INTROSPECTION_TTL)),
                    Err(_) => INTROSPECTION_NEGATIVE_TTL,
                };
                if let Ok(mut cache) = self.inner.introspected.lock() {
                    if cache.len() >= INTROSPECTION_CACHE {
                        let now = Instant::now();
                        cache.retain(|_, (until, _)| *until > now);
                        if cache.len() >= INTROSPECTION_CACHE {
                            cache.clear();
                        }
                    }
                    cache.insert(hash, (Instant::now() + ttl, answer.clone()));
                }
                answer
            }
        };
        answer.map_err(Rejection::Invalid)
    }

    /// Asks the introspection endpoint; `Ok(Err(reason))` when it says the
    /// token is not good for this gateway.
    async fn introspect(
        &self,
        token: &str,
    ) -> Result<Result<Map<String, Value>, String>, Rejection> {
        let unavailable = |reason: String| Rejection::Unavailable {
            reason,
            retry_after: Duration::from_secs(5),
        };
        let Some((id, secret)) = &self.inner.introspection else {
            return Ok(Err("introspection is not configured".to_owned()));
        };
        let endpoint = match self
            .inner
            .config
            .introspection
            .as_ref()
            .and_then(|i| i.endpoint.clone())
        {
            Some(endpoint) => endpoint,
            None => self
                .metadata()
                .await
                .map_err(|e| unavailable(e.0))?
                .introspection_endpoint
                .clone()
                .ok_or_else(|| {
                    unavailable(
                        "the issuer's metadata names no introspection_endpoint: set gateway.oauth.introspection.endpoint"
                            .to_owned(),
                    )
                })?,
        };
        let claims = provider::introspect(&self.inner.http, &endpoint, id, secret, token)
            .await
            .map_err(|e| {
                tracing::warn!("cannot introspect a token ({e})");
                unavailable(e.0)
            })?;
        Ok(self.check_introspected(claims))
    }

    /// An introspection answer checked as a JWT's claims are: active, the
    /// issuer (when named), the audience, `exp` and `nbf`.
    fn check_introspected(&self, claims: Map<String, Value>) -> Result<Map<String, Value>, String> {
        let config = &self.inner.config;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err("the introspection endpoint says the token is not active".to_owned());
        }
        if let Some(iss) = claims.get("iss")
            && iss.as_str() != Some(config.issuer.as_str())
        {
            return Err("wrong issuer".to_owned());
        }
        let audience_ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == config.audience,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(&config.audience)),
            _ => false,
        };
        if !audience_ok {
            return Err("wrong audience".to_owned());
        }
        let now = now();
        if claims
            .get("exp")
            .and_then(Value::as_u64)
            .is_some_and(|exp| exp + config.leeway_secs < now)
        {
            return Err("expired".to_owned());
        }
        if claims
            .get("nbf")
            .and_then(Value::as_u64)
            .is_some_and(|nbf| nbf > now + config.leeway_secs)
        {
            return Err("not yet valid".to_owned());
        }
        check_lifetime(&claims, config, now)?;
        let mut claims = claims;
        claims
            .entry("iss")
            .or_insert_with(|| Value::String(config.issuer.clone()));
        Ok(claims)
    }
}

/// Whether a JWT header's `typ` names an RFC 9068 access token.
fn is_at_jwt(typ: &str) -> bool {
    let typ = typ.strip_prefix("application/").unwrap_or(typ);
    typ.eq_ignore_ascii_case("at+jwt")
}

/// Refuses a token issued in the future (`iat` past `now` and the leeway)
/// or living longer than `max_token_lifetime_secs` (`exp` − `iat`; without
/// an `iat`, `exp` − `now`).
fn check_lifetime(
    claims: &Map<String, Value>,
    config: &OAuthConfig,
    now: u64,
) -> Result<(), String> {
    let iat = match claims.get("iat") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(iat) => Some(iat),
            None => return Err("its iat is not a whole number of seconds".to_owned()),
        },
    };
    if let Some(iat) = iat
        && iat > now.saturating_add(config.leeway_secs)
    {
        return Err(format!(
            "it was issued in the future (iat {} s from now)",
            iat - now
        ));
    }
    if let Some(exp) = claims.get("exp").and_then(Value::as_u64) {
        let lifetime = exp.saturating_sub(iat.unwrap_or(now));
        if lifetime
            > config
                .max_token_lifetime_secs
                .saturating_add(config.leeway_secs)
        {
            return Err(format!(
                "it lives {lifetime} s, longer than {} s (gateway.oauth.max_token_lifetime_secs)",
                config.max_token_lifetime_secs
            ));
        }
    }
    Ok(())
}

/// The key among `held` for `kid` and `alg`: the one with that `kid`
/// (refused when its type or `alg` does not fit `alg`), or, for a token
/// without a `kid`, the only key of `alg`'s family.
fn find(held: &KeySet, kid: Option<&str>, alg: Algorithm) -> Result<Option<Key>, Rejection> {
    let fits = |k: &Key| k.family == alg.family() && k.alg.is_none_or(|a| a == alg);
    match kid {
        Some(kid) => match held.keys.iter().find(|k| k.kid.as_deref() == Some(kid)) {
            Some(k) if fits(k) => Ok(Some(k.clone())),
            Some(_) => Err(Rejection::Invalid(format!(
                "key {kid} is not a key for {alg:?}"
            ))),
            None => Ok(None),
        },
        None => {
            let mut fitting = held.keys.iter().filter(|k| fits(k));
            match (fitting.next(), fitting.next()) {
                (Some(k), None) => Ok(Some(k.clone())),
                (Some(_), Some(_)) => Err(Rejection::Invalid(
                    "the token names no kid and the issuer has several keys".to_owned(),
                )),
                (None, _) => Ok(None),
            }
        }
    }
}

/// The token of a `Bearer` `Authorization` header.
fn bearer(authorization: Option<&str>) -> Result<&str, Rejection> {
    let header = authorization.ok_or(Rejection::Missing)?;
    if header.len() > MAX_AUTHORIZATION_BYTES {
        return Err(Rejection::Invalid(format!(
            "Authorization header over {MAX_AUTHORIZATION_BYTES} bytes"
        )));
    }
    let (scheme, token) = header
        .split_once(' ')
        .ok_or_else(|| Rejection::Invalid("Authorization is not `Bearer <token>`".to_owned()))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Rejection::Invalid(
            "Authorization is not `Bearer <token>`".to_owned(),
        ));
    }
    let token = token.trim();
    // RFC 6750's b64token: no spaces, no control characters.
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
    {
        return Err(Rejection::Invalid(
            "the bearer token is malformed".to_owned(),
        ));
    }
    Ok(token)
}

/// Whether `token` has the three parts of a signed JWT.
fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|&b| b == b'.').count() == 2
}

/// A JWT check's failure in a few words (for the log).
fn jwt_error(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "expired".to_owned(),
        K::ImmatureSignature => "not yet valid (nbf)".to_owned(),
        K::InvalidAudience => "wrong audience".to_owned(),
        K::InvalidIssuer => "wrong issuer".to_owned(),
        K::InvalidSignature => "bad signature".to_owned(),
        K::InvalidAlgorithm => "algorithm not accepted".to_owned(),
        K::MissingRequiredClaim(c) => format!("no `{c}` claim"),
        other => format!("malformed ({other:?})"),
    }
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
