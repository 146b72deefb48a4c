//! Talking to the identity provider: its metadata (discovered from the
//! issuer), its signing keys (JWKS) and its introspection endpoint. Every
//! request has a timeout and a size limit; nothing here logs a token.

use std::str::FromStr;
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde_json::{Map, Value};

/// The longest a request to the provider may take, connection included.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read from the provider.
const MAX_BODY: usize = 1024 * 1024;

/// Why the provider could not be asked, or answered nonsense (worded for
/// the log; never holds a token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unreachable(pub(crate) String);

/// What the gateway needs of the issuer's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metadata {
    pub(crate) jwks_uri: String,
    pub(crate) introspection_endpoint: Option<String>,
}

/// One verification key of the JWKS.
#[derive(Clone)]
pub(crate) struct Key {
    pub(crate) kid: Option<String>,
    /// The key's `alg`, when it names one.
    pub(crate) alg: Option<Algorithm>,
    pub(crate) family: AlgorithmFamily,
    pub(crate) key: DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

/// The HTTP client for the provider.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        // Metadata and keys come from the issuer itself, not from wherever it points.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// The metadata URLs of `issuer`, in the order tried: OpenID Connect
/// Discovery, then RFC 8414 (with the issuer's path after the well-known
/// part, when it has one).
pub(crate) fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = vec![format!("{trimmed}/.well-known/openid-configuration")];
    match url::Url::parse(issuer) {
        Ok(u) if u.path() != "/" && !u.path().is_empty() => {
            let path = u.path().trim_end_matches('/').to_owned();
            let mut base = u.clone();
            base.set_path("");
            let origin = base.as_str().trim_end_matches('/').to_owned();
            urls.push(format!(
                "{origin}/.well-known/oauth-authorization-server{path}"
            ));
        }
        _ => urls.push(format!("{trimmed}/.well-known/oauth-authorization-server")),
    }
    urls
}

/// A JSON object from `url`.
pub(crate) async fn get_json(
    http: &reqwest::Client,
    url: &str,
) -> Result<Map<String, Value>, Unreachable> {
    let response = http
        .get(url)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| Unreachable(format!("{url}: {}", describe(&e))))?;
    read_json(url, response).await
}

/// The body of `response` as a JSON object, at most [`MAX_BODY`] bytes.
async fn read_json(
    url: &str,
    mut response: reqwest::Response,
) -> Result<Map<String, Value>, Unreachable> {
    let status = response.status();
    if !status.is_success() {
        return Err(Unreachable(format!("{url}: HTTP {status}")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Unreachable(format!("{url}: {}", describe(&e))))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(Unreachable(format!(
                "{url}: answer larger than {MAX_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Unreachable(format!("{url}: not a JSON object"))),
    }
}

/// A reqwest error in a few words (never the URL's query, never a token:
/// none is in these requests' URLs).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.to_string()
    }
}

/// Discovers `issuer`'s metadata: the first well-known document that
/// answers, whose `issuer` must be `issuer` itself (RFC 8414 §3.3).
pub(crate) async fn discover(
    http: &reqwest::Client,
    issuer: &str,
) -> Result<Metadata, Unreachable> {
    let mut last = Unreachable(format!("no metadata for {issuer}"));
    for url in metadata_urls(issuer) {
        match get_json(http, &url).await {
            Ok(doc) => return metadata_of(issuer, &url, &doc),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The parts of a metadata document the gateway uses.
pub(crate) fn metadata_of(
    issuer: &str,
    url: &str,
    doc: &Map<String, Value>,
) -> Result<Metadata, Unreachable> {
    let said = doc
        .get("issuer")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if said.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(Unreachable(format!(
            "{url} names issuer `{said}`, not `{issuer}`: check gateway.oauth.issuer"
        )));
    }
    let jwks_uri = doc
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| Unreachable(format!("{url} has no jwks_uri")))?
        .to_owned();
    Ok(Metadata {
        jwks_uri,
        introspection_endpoint: doc
            .get("introspection_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The verification keys at `jwks_uri`.
pub(crate) async fn fetch_keys(
    http: &reqwest::Client,
    jwks_uri: &str,
) -> Result<Vec<Key>, Unreachable> {
    let doc = get_json(http, jwks_uri).await?;
    Ok(keys_of(&doc))
}

/// The signature keys of a JWKS document; keys for encryption, shared
/// secrets (`oct`) and keys this build cannot read are left out.
pub(crate) fn keys_of(doc: &Map<String, Value>) -> Vec<Key> {
    let Some(Value::Array(keys)) = doc.get("keys") else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
        .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
        .filter_map(|jwk| {
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            let family = key.family();
            if family == AlgorithmFamily::Hmac {
                return None;
            }
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
            Some(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                family,
                key,
            })
        })
        .collect()
}

/// Asks `endpoint` about `token` (RFC 7662) as `client_id`; the answer's
/// claims, `active` among them.
pub(crate) async fn introspect(
    http: &reqwest::Client,
    endpoint: &str,
    client_id: &str,
    client_secret: &str,
    token: &str,
) -> Result<Map<String, Value>, Unreachable> {
    let response = http
        .post(endpoint)
        .basic_auth(client_id, Some(client_secret))
        .header(http::header::ACCEPT, "application/json")
        .form(&[("token", token), ("token_type_hint", "access_token")])
        .send()
        .await
        .map_err(|e| Unreachable(format!("{endpoint}: {}", describe(&e))))?;
    read_json(endpoint, response).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_looked_for_where_oidc_and_rfc_8414_put_it() {
        assert_eq!(
            metadata_urls("https://idp.example.com"),
            [
                "https://idp.example.com/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/oauth-authorization-server"
            ]
        );
        assert_eq!(
            metadata_urls("https://idp.example.com/realms/eng/"),
            [
                "https://idp.example.com/realms/eng/.well-known/openid-configuration",
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/eng"
            ]
        );
    }

    #[test]
    fn metadata_must_name_the_configured_issuer() {
        let doc = |v: Value| v.as_object().cloned().unwrap_or_default();
        let ok = metadata_of(
            "https://idp",
            "u",
            &doc(json!({"issuer": "https://idp", "jwks_uri": "https://idp/jwks", "introspection_endpoint": "https://idp/i"})),
        )
        .unwrap();
        assert_eq!(ok.jwks_uri, "https://idp/jwks");
        assert_eq!(ok.introspection_endpoint.as_deref(), Some("https://idp/i"));
        let wrong = metadata_of(
            "https://idp",
            "u",
            &doc(json!({"issuer": "https://evil", "jwks_uri": "x"})),
        );
        assert!(wrong.unwrap_err().0.contains("names issuer `https://evil`"));
        assert!(metadata_of("https://idp", "u", &doc(json!({"issuer": "https://idp"}))).is_err());
    }

    #[test]
    fn only_signature_keys_this_build_reads_are_kept() {
        let doc = json!({"keys": [
            {"kty": "RSA", "kid": "r1", "alg": "RS256", "use": "sig",
             "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
             "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "use": "enc",
             "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
             "e": "AQAB"},
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "weird", "kid": "w"},
            "not a key"
        ]});
        let keys = keys_of(doc.as_object().unwrap());
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert_eq!(keys[0].kid.as_deref(), Some("r1"));
        assert_eq!(keys[0].alg, Some(Algorithm::RS256));
        assert_eq!(keys[0].family, AlgorithmFamily::Rsa);
        assert!(keys_of(json!({"keys": 3}).as_object().unwrap()).is_empty());
    }
}
