//! Claims → trust: the caller's identity and trust level from a validated
//! token's claims, by the rules of `gateway.oauth.trust`.

use core_agent_mcp_config::TrustLevel;
use serde::Serialize;
use serde_json::{Map, Value};

/// Who signed in, as the identity provider says: put on the [`Caller`](crate::Caller)
/// and the session, shown by `/sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    /// The token's `iss`: the identity provider.
    pub issuer: String,
    /// The token's `sub`: the user (or client) at that provider.
    pub subject: String,
    /// The `email` claim, when the token has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The `name` claim (else `preferred_username`), when the token has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Identity {
    /// The key sessions and digest payloads are owned by: issuer and
    /// subject, so two providers' users with the same `sub`, or a user and
    /// a static token of the same name, are never one owner.
    pub fn owner(&self) -> String {
        format!("oauth:{}#{}", self.issuer, self.subject)
    }

    /// What logs and `/sessions` call the caller: the email, else the name,
    /// else the subject.
    pub fn display(&self) -> String {
        self.email
            .clone()
            .or_else(|| self.name.clone())
            .unwrap_or_else(|| self.subject.clone())
    }
}

/// What one rule of `gateway.oauth.trust` matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustMatch {
    /// `{"scope": "mcp:admin"}`: the token grants this scope (`scope`, or `scp`).
    Scope(String),
    /// `{"claim": "groups", "value": "eng"}`: the claim is this value, or a
    /// list that holds it.
    Claim {
        /// The claim's name (a top-level claim of the token).
        name: String,
        /// The value it must be or hold.
        value: Value,
    },
}

/// One rule of `gateway.oauth.trust`: a caller it matches gets at least
/// `level`, and the first matching rule that has `rate_limits` sets the
/// caller's (over its trust level's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustRule {
    /// What the rule matches.
    pub matches: TrustMatch,
    /// The level it grants.
    pub level: TrustLevel,
    /// `rate_limits`: what a caller it matches may spend (each limit unset
    /// here falls back to the trust level's).
    pub rate_limits: Option<crate::Budget>,
}

/// `gateway.oauth.default`: what a caller no rule matches gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultTrust {
    /// This trust level.
    Level(TrustLevel),
    /// Refused with 403 `insufficient_scope` (the default).
    #[default]
    Refuse,
}

/// The scopes a token grants: `scope` (space-separated, RFC 9068 and 7662)
/// or `scp` (a list or a string).
pub(crate) fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => out.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(items)) => {
                out.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
    }
    out
}

/// Whether `rule` matches a token with `claims` and `scopes`.
fn matches(rule: &TrustMatch, claims: &Map<String, Value>, scopes: &[String]) -> bool {
    match rule {
        TrustMatch::Scope(scope) => scopes.iter().any(|s| s == scope),
        TrustMatch::Claim { name, value } => match claims.get(name) {
            Some(Value::Array(items)) => items.contains(value),
            Some(Value::String(s)) if value.is_string() && name == "scope" => {
                s.split_whitespace().any(|w| Some(w) == value.as_str())
            }
            Some(found) => found == value,
            None => false,
        },
    }
}

/// The trust level `claims` earn: the most trusted level of every rule that
/// matches, else `default`; `None` when the caller is refused.
pub(crate) fn trust_of(
    claims: &Map<String, Value>,
    rules: &[TrustRule],
    default: DefaultTrust,
) -> Option<TrustLevel> {
    let scopes = scopes(claims);
    let granted = rules
        .iter()
        .filter(|r| matches(&r.matches, claims, &scopes))
        .map(|r| r.level)
        .min();
    match (granted, default) {
        (Some(level), _) | (None, DefaultTrust::Level(level)) => Some(level),
        (None, DefaultTrust::Refuse) => None,
    }
}

/// The rate limits of the first rule that matches `claims` and sets them.
pub(crate) fn rate_limits_of(
    claims: &Map<String, Value>,
    rules: &[TrustRule],
) -> Option<crate::Budget> {
    let scopes = scopes(claims);
    rules
        .iter()
        .filter(|r| r.rate_limits.is_some())
        .find(|r| matches(&r.matches, claims, &scopes))
        .and_then(|r| r.rate_limits)
}

/// The identity of validated `claims`: its `sub` (a JWT's is required by the
/// validation), else, for an introspected token issued to a client on its
/// own behalf, `client:<client_id>`.
pub(crate) fn identity_of(issuer: &str, claims: &Map<String, Value>) -> Option<Identity> {
    let text = |k: &str| {
        claims
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Some(Identity {
        issuer: issuer.to_owned(),
        subject: text("sub").or_else(|| text("client_id").map(|c| format!("client:{c}")))?,
        email: text("email"),
        name: text("name").or_else(|| text("preferred_username")),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules() -> Vec<TrustRule> {
        vec![
            TrustRule {
                matches: TrustMatch::Scope("mcp:admin".into()),
                level: TrustLevel::Creator,
                rate_limits: None,
            },
            TrustRule {
                matches: TrustMatch::Claim {
                    name: "groups".into(),
                    value: json!("eng"),
                },
                level: TrustLevel::User,
                rate_limits: None,
            },
            TrustRule {
                matches: TrustMatch::Claim {
                    name: "email_verified".into(),
                    value: json!(true),
                },
                level: TrustLevel::Public,
                rate_limits: None,
            },
        ]
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_most_trusted_matching_rule_wins_else_the_default() {
        let r = rules();
        let table = [
            (
                json!({"scope": "openid mcp:admin"}),
                DefaultTrust::Refuse,
                Some(TrustLevel::Creator),
            ),
            (
                json!({"scp": ["mcp:admin"]}),
                DefaultTrust::Refuse,
                Some(TrustLevel::Creator),
            ),
            (
                json!({"scope": "mcp:admin", "groups": ["eng"]}),
                DefaultTrust::Refuse,
                Some(TrustLevel::Creator),
            ),
            (
                json!({"groups": ["ops", "eng"]}),
                DefaultTrust::Refuse,
                Some(TrustLevel::User),
            ),
            (
                json!({"groups": "eng"}),
                DefaultTrust::Refuse,
                Some(TrustLevel::User),
            ),
            (
                json!({"email_verified": true, "groups": []}),
                DefaultTrust::Refuse,
                Some(TrustLevel::Public),
            ),
            (
                json!({"email_verified": "true"}),
                DefaultTrust::Refuse,
                None,
            ),
            // A scope that only starts like the rule's is not it.
            (
                json!({"scope": "mcp:administrator"}),
                DefaultTrust::Refuse,
                None,
            ),
            (
                json!({"groups": ["engineering"]}),
                DefaultTrust::Level(TrustLevel::Public),
                Some(TrustLevel::Public),
            ),
            (
                json!({}),
                DefaultTrust::Level(TrustLevel::User),
                Some(TrustLevel::User),
            ),
            (json!({}), DefaultTrust::Refuse, None),
        ];
        for (c, default, want) in table {
            assert_eq!(trust_of(&claims(c.clone()), &r, default), want, "{c}");
        }
    }

    #[test]
    fn identity_keys_on_issuer_and_subject_and_shows_a_readable_name() {
        let c = claims(json!({"sub": "u1", "email": "a@example.com", "preferred_username": "al"}));
        let id = identity_of("https://idp", &c).unwrap();
        assert_eq!(id.owner(), "oauth:https://idp#u1");
        assert_eq!(id.display(), "a@example.com");
        assert_eq!(id.name.as_deref(), Some("al"));
        let other = identity_of("https://other", &c).unwrap();
        assert_ne!(id.owner(), other.owner());
        assert!(identity_of("https://idp", &claims(json!({"sub": ""}))).is_none());
        let client = identity_of("https://idp", &claims(json!({"client_id": "ci-bot"}))).unwrap();
        assert_eq!(client.subject, "client:ci-bot");
        assert!(identity_of("https://idp", &claims(json!({"sub": 7}))).is_none());
        let bare = identity_of("https://idp", &claims(json!({"sub": "u2"}))).unwrap();
        assert_eq!(bare.display(), "u2");
    }
}
