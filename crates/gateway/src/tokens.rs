//! Who may connect over HTTP, as the operator set it up: each token of
//! `config.json` (a [`GatewayToken`]), its secret read from its environment
//! variable, and a front end's default token ([`DefaultToken`]), resolved
//! into an [`Auth`] by [`resolve_tokens`].

use std::path::PathBuf;

use core_agent_mcp_config::{Env, TrustLevel};

use crate::{Auth, Token};

/// The fewest bytes the secret of a configured token may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// One bearer token of the gateway as configured (`gateway.tokens.<name>`
/// in `config.json`, read by [`GatewayConfig::parse`](crate::GatewayConfig::parse)):
/// the secret itself is read from an environment variable, so that no
/// secret is written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayToken {
    /// The key under `gateway.tokens`: how sessions and logs name the caller.
    pub name: String,
    /// `env`: the environment variable that holds the token.
    pub env: String,
    /// `trust_level`: the trust level of sessions opened with this token.
    pub trust_level: TrustLevel,
    /// The file that declares it.
    pub source: PathBuf,
}

/// The token a front end accepts besides the configured ones: named
/// `default`, its secret in the environment variable `env` (the binary's
/// `CORE_AGENT_GATEWAY_TOKEN`), granting `trust_level`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultToken {
    /// The environment variable that holds it; unset or empty: no default token.
    pub env: String,
    /// The trust level of sessions opened with it.
    pub trust_level: TrustLevel,
}

/// Why the configured tokens cannot be served. No variant carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// A configured token's environment variable is not set (or not UTF-8).
    #[error(
        "gateway token `{name}` ({}): ${env} is not set; export it, or remove the token from gateway.tokens",
        file.display()
    )]
    NotSet {
        /// The token's name.
        name: String,
        /// Its environment variable.
        env: String,
        /// The `config.json` that declares it.
        file: PathBuf,
    },
    /// A configured token's secret is shorter than [`MIN_TOKEN_LEN`].
    #[error(
        "gateway token `{name}` ({}): ${env} is shorter than {min} characters; use a long random value (openssl rand -hex 32)",
        file.display()
    )]
    TooShort {
        /// The token's name.
        name: String,
        /// Its environment variable.
        env: String,
        /// The `config.json` that declares it.
        file: PathBuf,
        /// The fewest bytes a secret may have ([`MIN_TOKEN_LEN`]).
        min: usize,
    },
    /// Two tokens have the same secret, so a caller could not be told apart.
    #[error("gateway token `{name}` has the same value as another token; give each its own")]
    Duplicate {
        /// The later of the two (`default` for the default token).
        name: String,
    },
}

/// The tokens HTTP callers may present: each of `configured`, in order,
/// its secret read through `env` and at least [`MIN_TOKEN_LEN`] long, then
/// `default`'s when its variable is set and not empty (it is not held to
/// the minimum: the operator chose it for this run).
///
/// `Ok(None)` when there is no token at all (none configured, the default
/// variable unset): the front end then makes one with [`Auth::generate`]
/// and shows it to the operator, or refuses to serve.
///
/// # Errors
/// The first configured token whose variable is unset ([`TokenError::NotSet`])
/// or too short ([`TokenError::TooShort`]); else the first token whose secret
/// another before it has ([`TokenError::Duplicate`]).
pub fn resolve_tokens(
    configured: &[GatewayToken],
    default: &DefaultToken,
    env: &dyn Env,
) -> Result<Option<Auth>, TokenError> {
    let mut accepted = Vec::new();
    for t in configured {
        match env.var(&t.env) {
            Some(secret) if secret.len() >= MIN_TOKEN_LEN => accepted.push(Token {
                name: t.name.clone(),
                secret,
                trust_level: t.trust_level,
            }),
            Some(_) => {
                return Err(TokenError::TooShort {
                    name: t.name.clone(),
                    env: t.env.clone(),
                    file: t.source.clone(),
                    min: MIN_TOKEN_LEN,
                });
            }
            None => {
                return Err(TokenError::NotSet {
                    name: t.name.clone(),
                    env: t.env.clone(),
                    file: t.source.clone(),
                });
            }
        }
    }
    match env.var(&default.env) {
        Some(secret) if !secret.is_empty() => accepted.push(Token {
            name: "default".to_owned(),
            secret,
            trust_level: default.trust_level,
        }),
        _ if accepted.is_empty() => return Ok(None),
        _ => {}
    }
    if let Some(dup) = accepted
        .iter()
        .enumerate()
        .find(|(i, t)| accepted[..*i].iter().any(|u| u.secret == t.secret))
    {
        return Err(TokenError::Duplicate {
            name: dup.1.name.clone(),
        });
    }
    Ok(Some(Auth::Tokens(accepted)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const BOT: &str = "bot-secret-0123456789";
    const ME: &str = "me-secret-0123456789";

    fn token(name: &str, env: &str, trust_level: TrustLevel) -> GatewayToken {
        GatewayToken {
            name: name.to_owned(),
            env: env.to_owned(),
            trust_level,
            source: PathBuf::from(".agents/config.json"),
        }
    }

    fn configured() -> Vec<GatewayToken> {
        vec![
            token("bot", "BOT_TOKEN", TrustLevel::Public),
            token("me", "ME_TOKEN", TrustLevel::Creator),
        ]
    }

    fn default() -> DefaultToken {
        DefaultToken {
            env: "DEFAULT_TOKEN".to_owned(),
            trust_level: TrustLevel::User,
        }
    }

    fn env(vars: &[(&str, &str)]) -> BTreeMap<String, String> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The accepted tokens as `name level secret`, or the error's message.
    fn resolved(configured: &[GatewayToken], vars: &[(&str, &str)]) -> String {
        match resolve_tokens(configured, &default(), &env(vars)) {
            Ok(Some(Auth::Tokens(tokens))) => tokens
                .iter()
                .map(|t| format!("{} {} {}", t.name, t.trust_level.as_str(), t.secret))
                .collect::<Vec<_>>()
                .join(", "),
            Ok(Some(Auth::Open(level))) => format!("open {}", level.as_str()),
            Ok(None) => "none: generate one".to_owned(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn each_configured_token_is_read_from_its_variable_then_the_default() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("BOT_TOKEN", BOT), ("ME_TOKEN", ME)],
                "bot public bot-secret-0123456789, me creator me-secret-0123456789",
            ),
            (
                &[
                    ("BOT_TOKEN", BOT),
                    ("ME_TOKEN", ME),
                    ("DEFAULT_TOKEN", "short"),
                ],
                "bot public bot-secret-0123456789, me creator me-secret-0123456789, default user short",
            ),
            (
                &[("BOT_TOKEN", BOT), ("ME_TOKEN", ME), ("DEFAULT_TOKEN", "")],
                "bot public bot-secret-0123456789, me creator me-secret-0123456789",
            ),
        ];
        for (vars, want) in cases {
            assert_eq!(resolved(&configured(), vars), *want, "{vars:?}");
        }
    }

    #[test]
    fn the_default_token_alone_or_none_at_all() {
        assert_eq!(
            resolved(&[], &[("DEFAULT_TOKEN", "chosen-by-the-operator")]),
            "default user chosen-by-the-operator"
        );
        assert_eq!(resolved(&[], &[]), "none: generate one");
        assert_eq!(
            resolved(&[], &[("DEFAULT_TOKEN", "")]),
            "none: generate one"
        );
        assert_eq!(
            resolved(&[], &[("BOT_TOKEN", BOT)]),
            "none: generate one",
            "a variable no token names is not read"
        );
    }

    #[test]
    fn a_missing_or_short_variable_names_the_token_its_file_and_the_fix() {
        assert_eq!(
            resolved(&configured(), &[("BOT_TOKEN", BOT), ("DEFAULT_TOKEN", ME)]),
            "error: gateway token `me` (.agents/config.json): $ME_TOKEN is not set; export it, or remove the token from gateway.tokens"
        );
        assert_eq!(
            resolved(
                &configured(),
                &[("BOT_TOKEN", "0123456789abcde"), ("ME_TOKEN", ME)]
            ),
            "error: gateway token `bot` (.agents/config.json): $BOT_TOKEN is shorter than 16 characters; use a long random value (openssl rand -hex 32)"
        );
        assert_eq!(
            resolved(
                &configured(),
                &[("BOT_TOKEN", "0123456789abcdef"), ("ME_TOKEN", ME)]
            ),
            "bot public 0123456789abcdef, me creator me-secret-0123456789",
            "{MIN_TOKEN_LEN} bytes are enough"
        );
        // The first configured token in trouble is the one named.
        let err = resolve_tokens(&configured(), &default(), &env(&[])).unwrap_err();
        assert_eq!(
            err,
            TokenError::NotSet {
                name: "bot".to_owned(),
                env: "BOT_TOKEN".to_owned(),
                file: PathBuf::from(".agents/config.json"),
            }
        );
    }

    #[test]
    fn two_tokens_with_one_secret_are_refused_naming_the_later() {
        assert_eq!(
            resolved(&configured(), &[("BOT_TOKEN", BOT), ("ME_TOKEN", BOT)]),
            "error: gateway token `me` has the same value as another token; give each its own"
        );
        assert_eq!(
            resolved(
                &configured(),
                &[("BOT_TOKEN", BOT), ("ME_TOKEN", ME), ("DEFAULT_TOKEN", ME)]
            ),
            "error: gateway token `default` has the same value as another token; give each its own"
        );
    }

    #[test]
    fn errors_and_debug_output_carry_no_secret() {
        let auth = resolve_tokens(
            &configured(),
            &default(),
            &env(&[("BOT_TOKEN", BOT), ("ME_TOKEN", ME)]),
        );
        let shown = format!("{auth:?}");
        assert!(!shown.contains(BOT) && !shown.contains(ME), "{shown}");
        let err = resolve_tokens(
            &configured(),
            &default(),
            &env(&[("BOT_TOKEN", BOT), ("ME_TOKEN", BOT)]),
        );
        let shown = format!("{err:?} {}", err.as_ref().map(drop).unwrap_err());
        assert!(!shown.contains(BOT), "{shown}");
    }
}
