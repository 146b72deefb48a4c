//! What tells a client where to sign in: the protected-resource metadata
//! (RFC 9728) and the `WWW-Authenticate` challenges (RFC 6750).

use serde_json::{Value, json};

use super::{OAuthConfig, Rejection};

/// The well-known path of protected-resource metadata.
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata URL for `audience`: its origin, the well-known path, then
/// its own path (`https://gw/mcp` → `https://gw/.well-known/oauth-protected-resource/mcp`).
pub(crate) fn metadata_url(audience: &str) -> String {
    match url::Url::parse(audience) {
        Ok(u) => {
            let path = u.path().trim_end_matches('/').to_owned();
            let mut origin = u.clone();
            origin.set_path("");
            origin.set_query(None);
            origin.set_fragment(None);
            format!(
                "{}{WELL_KNOWN}{path}",
                origin.as_str().trim_end_matches('/')
            )
        }
        Err(_) => format!("{}{WELL_KNOWN}", audience.trim_end_matches('/')),
    }
}

/// The protected-resource metadata document (RFC 9728 §2).
pub(crate) fn protected_resource_metadata(config: &OAuthConfig) -> Value {
    let mut doc = json!({
        "resource": config.audience,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "core-agent gateway",
    });
    let algs: Vec<String> = config.algorithms.iter().map(|a| format!("{a:?}")).collect();
    doc["resource_signing_alg_values_supported"] = json!(algs);
    let mut scopes: Vec<&str> = config.scopes_supported.iter().map(String::as_str).collect();
    for s in &config.required_scopes {
        if !scopes.contains(&s.as_str()) {
            scopes.push(s);
        }
    }
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc
}

/// A quoted-string of RFC 9110: `"` and `\` escaped, control characters dropped.
fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The `WWW-Authenticate` value for `rejection` (a 401's or a 403's).
pub(crate) fn challenge(config: &OAuthConfig, rejection: &Rejection) -> String {
    let mut parts = vec![format!(
        "resource_metadata={}",
        quoted(&metadata_url(&config.audience))
    )];
    let wanted: Vec<&str> = config
        .required_scopes
        .iter()
        .chain(&config.scopes_supported)
        .map(String::as_str)
        .collect();
    match rejection {
        Rejection::Invalid(_) => {
            parts.push("error=\"invalid_token\"".to_owned());
            parts.push(
                "error_description=\"the access token is not valid for this gateway\"".to_owned(),
            );
        }
        Rejection::InsufficientScope { scope } => {
            parts.push("error=\"insufficient_scope\"".to_owned());
            parts.push(format!("scope={}", quoted(scope)));
            return format!("Bearer {}", parts.join(", "));
        }
        Rejection::Missing | Rejection::Unavailable { .. } => {}
    }
    if !wanted.is_empty() {
        let mut seen = Vec::new();
        for s in wanted {
            if !seen.contains(&s) {
                seen.push(s);
            }
        }
        parts.push(format!("scope={}", quoted(&seen.join(" "))));
    }
    format!("Bearer {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_puts_the_resource_path_after_the_well_known_one() {
        for (audience, want) in [
            (
                "https://gw.example.com/mcp",
                "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "http://127.0.0.1:8940/mcp/",
                "http://127.0.0.1:8940/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://gw.example.com",
                "https://gw.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://gw.example.com/a/b?x=1",
                "https://gw.example.com/.well-known/oauth-protected-resource/a/b",
            ),
        ] {
            assert_eq!(metadata_url(audience), want, "{audience}");
        }
    }

    #[test]
    fn the_document_names_the_resource_its_issuer_and_scopes() {
        let mut config = OAuthConfig::new("https://idp.example.com", "https://gw.example.com/mcp");
        config.scopes_supported = vec!["mcp:tools".into(), "mcp:admin".into()];
        config.required_scopes = vec!["mcp:tools".into(), "openid".into()];
        config.algorithms = vec![
            jsonwebtoken::Algorithm::RS256,
            jsonwebtoken::Algorithm::EdDSA,
        ];
        assert_eq!(
            protected_resource_metadata(&config),
            json!({
                "resource": "https://gw.example.com/mcp",
                "authorization_servers": ["https://idp.example.com"],
                "bearer_methods_supported": ["header"],
                "resource_name": "core-agent gateway",
                "resource_signing_alg_values_supported": ["RS256", "EdDSA"],
                "scopes_supported": ["mcp:tools", "mcp:admin", "openid"],
            })
        );
    }

    #[test]
    fn challenges_say_where_to_sign_in_and_what_went_wrong() {
        let mut config = OAuthConfig::new("https://idp", "https://gw/mcp");
        let meta = "resource_metadata=\"https://gw/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(
            challenge(&config, &Rejection::Missing),
            format!("Bearer {meta}")
        );
        assert_eq!(
            challenge(&config, &Rejection::Invalid("expired".into())),
            format!(
                "Bearer {meta}, error=\"invalid_token\", error_description=\"the access token is not valid for this gateway\""
            )
        );
        config.scopes_supported = vec!["mcp:tools".into()];
        assert_eq!(
            challenge(&config, &Rejection::Missing),
            format!("Bearer {meta}, scope=\"mcp:tools\"")
        );
        assert_eq!(
            challenge(
                &config,
                &Rejection::InsufficientScope {
                    scope: "mcp:\"admin\"".into()
                }
            ),
            format!("Bearer {meta}, error=\"insufficient_scope\", scope=\"mcp:\\\"admin\\\"\"")
        );
    }
}
