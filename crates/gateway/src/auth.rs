//! Who may connect over HTTP: bearer tokens, each with a name and a trust
//! level, compared in constant time; beside them, callers signed in with
//! an identity provider (`oauth`), who carry their identity.

use core_agent_mcp_config::TrustLevel;
use subtle::ConstantTimeEq;

use crate::oauth::Identity;

/// The caller of one HTTP request, as its token says: put in the request's
/// extensions by the auth layer, read by the MCP session it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (`gateway.tokens.<name>`, `default`, or `anonymous`
    /// under `--no-auth`), or a signed-in user's email, name or subject.
    pub name: String,
    /// The trust level of sessions this caller opens.
    pub trust_level: TrustLevel,
    /// Who signed in, for a caller whose token an identity provider issued.
    pub identity: Option<Identity>,
    /// Rate limits its claims set (`gateway.oauth.trust`'s `rate_limits`),
    /// over its token's and trust level's.
    pub rate_limits: Option<crate::Budget>,
}

impl Caller {
    /// A caller known by a static token's `name` (or the fixed caller of
    /// stdio and `--no-auth`).
    pub fn new(name: impl Into<String>, trust_level: TrustLevel) -> Caller {
        Caller {
            name: name.into(),
            trust_level,
            identity: None,
            rate_limits: None,
        }
    }

    /// A caller signed in as `identity`, at the level its claims earn.
    pub fn signed_in(identity: Identity, trust_level: TrustLevel) -> Caller {
        Caller {
            name: identity.display(),
            trust_level,
            identity: Some(identity),
            rate_limits: None,
        }
    }

    /// What owns this caller's sessions and digest payloads: the issuer and
    /// subject of a signed-in caller (`oauth:<issuer>#<sub>`), else the
    /// token's name. A session is used, and a payload read, only by its owner.
    pub fn owner(&self) -> String {
        match &self.identity {
            Some(identity) => identity.owner(),
            None => self.name.clone(),
        }
    }
}

/// One accepted bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The name sessions and logs show.
    pub name: String,
    /// The secret.
    pub secret: String,
    /// The trust level it grants.
    pub trust_level: TrustLevel,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("trust_level", &self.trust_level)
            .finish_non_exhaustive()
    }
}

/// How HTTP callers are recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Every request must carry `Authorization: Bearer <one of these>`.
    Tokens(Vec<Token>),
    /// No token is checked (`--no-auth`): every caller gets this level.
    Open(TrustLevel),
}

impl Auth {
    /// A fresh random token (256 bits, hex) named `default` with `level`,
    /// and its secret, to be shown once to the operator.
    pub fn generate(level: TrustLevel) -> std::io::Result<(Auth, String)> {
        let secret = random_token()?;
        let token = Token {
            name: "default".to_owned(),
            secret: secret.clone(),
            trust_level: level,
        };
        Ok((Auth::Tokens(vec![token]), secret))
    }

    /// The caller a request's `Authorization` header identifies, if any.
    /// Every token is compared, in constant time, whatever matches first.
    pub fn caller(&self, authorization: Option<&str>) -> Option<Caller> {
        let tokens = match self {
            Auth::Open(level) => {
                return Some(Caller::new("anonymous", *level));
            }
            Auth::Tokens(tokens) => tokens,
        };
        let presented = authorization?
            .strip_prefix("Bearer ")
            .or_else(|| authorization?.strip_prefix("bearer "))?
            .trim();
        let mut found = None;
        for token in tokens {
            if bool::from(presented.as_bytes().ct_eq(token.secret.as_bytes())) && found.is_none() {
                found = Some(Caller::new(token.name.clone(), token.trust_level));
            }
        }
        found
    }

    /// Whether requests go unchecked.
    pub fn is_open(&self) -> bool {
        matches!(self, Auth::Open(_))
    }
}

/// 32 random bytes as 64 hex digits.
pub(crate) fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Auth {
        Auth::Tokens(vec![
            Token {
                name: "bot".into(),
                secret: "public-secret".into(),
                trust_level: TrustLevel::Public,
            },
            Token {
                name: "me".into(),
                secret: "creator-secret".into(),
                trust_level: TrustLevel::Creator,
            },
        ])
    }

    #[test]
    fn each_token_names_its_caller_and_anything_else_is_nobody() {
        let auth = tokens();
        let name = |h: Option<&str>| auth.caller(h).map(|c| (c.name, c.trust_level));
        assert_eq!(
            name(Some("Bearer public-secret")),
            Some(("bot".into(), TrustLevel::Public))
        );
        assert_eq!(
            name(Some("Bearer creator-secret")),
            Some(("me".into(), TrustLevel::Creator))
        );
        for bad in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer creator-secre"),
            Some("Bearer creator-secretX"),
            Some("creator-secret"),
            Some("Basic creator-secret"),
        ] {
            assert_eq!(name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn generated_tokens_are_long_random_and_distinct() {
        let (auth, a) = Auth::generate(TrustLevel::Creator).unwrap_or_else(|e| panic!("{e}"));
        let (_, b) = Auth::generate(TrustLevel::Creator).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(auth.caller(Some(&format!("Bearer {a}"))).is_some());
        assert!(auth.caller(Some(&format!("Bearer {b}"))).is_none());
    }

    #[test]
    fn open_auth_lets_everyone_in_at_its_level() {
        let auth = Auth::Open(TrustLevel::User);
        assert_eq!(
            auth.caller(None).map(|c| c.trust_level),
            Some(TrustLevel::User)
        );
    }
}
