//! The resource server against a small identity provider of its own: the
//! metadata, the keys (counted as they are fetched) and introspection,
//! served on loopback; tokens signed with Ed25519 keys made here.

use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use axum::routing::{get, post};
use base64::Engine;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;

const AUDIENCE: &str = "http://127.0.0.1:1/mcp";

struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    x: String,
}

impl SigningKey {
    fn new(kid: &str) -> SigningKey {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8).unwrap();
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        SigningKey {
            kid: kid.into(),
            pkcs8,
            x,
        }
    }

    fn jwk(&self) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": self.kid, "x": self.x})
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(&self.pkcs8)).unwrap()
    }
}

/// The provider: its issuer URL, its keys, and how often they were fetched.
struct Idp {
    issuer: String,
    jwks: Arc<Mutex<Value>>,
    fetched: Arc<AtomicUsize>,
    introspected: Arc<AtomicUsize>,
    stop: CancellationToken,
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn idp(keys: &[&SigningKey]) -> Idp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let jwks = Arc::new(Mutex::new(
        json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}),
    ));
    let fetched = Arc::new(AtomicUsize::new(0));
    let introspected = Arc::new(AtomicUsize::new(0));
    let (i, j, f, n) = (
        issuer.clone(),
        jwks.clone(),
        fetched.clone(),
        introspected.clone(),
    );
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move || {
                let i = i.clone();
                async move {
                    axum::Json(json!({"issuer": i, "jwks_uri": format!("{i}/jwks"), "introspection_endpoint": format!("{i}/introspect")}))
                }
            }),
        )
        .route(
            "/jwks",
            get(move || {
                f.fetch_add(1, Ordering::SeqCst);
                let keys = j.lock().unwrap().clone();
                async move { axum::Json(keys) }
            }),
        )
        .route(
            "/introspect",
            post(move |headers: http::HeaderMap, body: String| {
                n.fetch_add(1, Ordering::SeqCst);
                async move {
                    // Basic czpz = "s:s"? No: the client here is "rs" / "rs-secret".
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                    let ok = auth == format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("rs:rs-secret"));
                    let active = ok && body.contains("token=opaque-good");
                    axum::Json(if active {
                        json!({"active": true, "sub": "op-1", "aud": AUDIENCE, "scope": "mcp:tools", "exp": now() + 600})
                    } else {
                        json!({"active": false})
                    })
                }
            }),
        );
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { s.cancelled().await })
            .await;
    });
    Idp {
        issuer,
        jwks,
        fetched,
        introspected,
        stop,
    }
}

fn config(issuer: &str) -> OAuthConfig {
    OAuthConfig::new(issuer, AUDIENCE)
        .with_trust(
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
            ],
            DefaultTrust::Refuse,
        )
        .with_jwks_refresh_secs(0)
        .with_leeway_secs(5)
}

struct NoEnv;
impl Env for NoEnv {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "RS_ID" => Some("rs".into()),
            "RS_SECRET" => Some("rs-secret".into()),
            _ => None,
        }
    }
}

fn server(config: OAuthConfig) -> ResourceServer {
    ResourceServer::new(config, &NoEnv).unwrap()
}

fn claims(issuer: &str, extra: Value) -> Value {
    let mut c =
        json!({"iss": issuer, "aud": AUDIENCE, "sub": "alice", "exp": now() + 300, "iat": now()});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            c.insert(k.clone(), v.clone());
        }
    }
    c
}

fn bearer_of(token: &str) -> String {
    format!("Bearer {token}")
}

use core_agent_mcp_config::TrustLevel;

#[tokio::test]
async fn a_good_token_names_its_caller_and_its_claims_decide_the_level() {
    let k = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let rs = server(config(&idp.issuer));
    assert_eq!(rs.warm_up().await, Ok(1));
    let admin = k.sign(&claims(
        &idp.issuer,
        json!({"scope": "openid mcp:admin", "email": "alice@example.com"}),
    ));
    let caller = rs.authenticate(Some(&bearer_of(&admin))).await.unwrap();
    assert_eq!(caller.trust_level, TrustLevel::Creator);
    assert_eq!(caller.name, "alice@example.com");
    assert_eq!(caller.owner(), format!("oauth:{}#alice", idp.issuer));
    let eng = k.sign(&claims(
        &idp.issuer,
        json!({"sub": "bob", "groups": ["eng"]}),
    ));
    let caller = rs.authenticate(Some(&bearer_of(&eng))).await.unwrap();
    assert_eq!(
        (caller.name.as_str(), caller.trust_level),
        ("bob", TrustLevel::User)
    );
    // Nothing matches and the default refuses: 403 naming the scope.
    let nobody = k.sign(&claims(&idp.issuer, json!({"sub": "carol"})));
    assert_eq!(
        rs.authenticate(Some(&bearer_of(&nobody))).await,
        Err(Rejection::InsufficientScope {
            scope: "mcp:admin".into()
        })
    );
    // The keys were fetched once, whatever the number of tokens.
    assert_eq!(idp.fetched.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tokens_for_another_audience_or_issuer_expired_unsigned_or_forged_are_invalid() {
    let k = SigningKey::new("k1");
    let forger = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let rs = server(config(&idp.issuer));
    rs.warm_up().await.unwrap();
    let good = claims(&idp.issuer, json!({"scope": "mcp:admin"}));
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "kid": "k1"})),
        b64(&good)
    );
    let hs = {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("k1".into());
        jsonwebtoken::encode(
            &h,
            &good,
            &EncodingKey::from_secret(k.x.as_bytes()).unwrap(),
        )
        .unwrap()
    };
    let cases = [
        ("wrong audience", k.sign(&claims(&idp.issuer, json!({"aud": "http://127.0.0.1:2/mcp", "scope": "mcp:admin"})))),
        ("wrong issuer", k.sign(&claims("http://127.0.0.1:3", json!({"scope": "mcp:admin"})))),
        ("expired", k.sign(&claims(&idp.issuer, json!({"exp": now() - 60, "scope": "mcp:admin"})))),
        ("not yet valid", k.sign(&claims(&idp.issuer, json!({"nbf": now() + 120, "scope": "mcp:admin"})))),
        ("no sub", k.sign(&json!({"iss": idp.issuer, "aud": AUDIENCE, "exp": now() + 60, "scope": "mcp:admin"}))),
        ("forged", forger.sign(&good)),
        ("alg none", unsigned),
        ("HS256 with the public key", hs),
        ("not a JWT", "opaque-good".to_owned()),
    ];
    for (what, token) in cases {
        match rs.authenticate(Some(&bearer_of(&token))).await {
            Err(Rejection::Invalid(reason)) => {
                assert!(!reason.contains(&token), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(
        rs.authenticate(Some(&bearer_of(&k.sign(&good))))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn rfc_9068_providers_tokens_must_say_at_jwt_and_no_token_may_live_absurdly_long() {
    let k = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let sign_typ = |typ: Option<&str>, claims: &Value| {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        header.typ = typ.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(&k.pkcs8)).unwrap()
    };
    let good = claims(&idp.issuer, json!({"scope": "mcp:admin"}));
    let at = sign_typ(Some("at+jwt"), &good);
    let app_at = sign_typ(Some("application/at+JWT"), &good);
    let id_token = sign_typ(Some("JWT"), &good);
    let untyped = sign_typ(None, &good);
    // By default any typ passes; with require_at_jwt only at+jwt.
    let lax = server(config(&idp.issuer));
    let strict = server(config(&idp.issuer).with_require_at_jwt(true));
    for token in [&at, &app_at, &id_token, &untyped] {
        assert!(lax.authenticate(Some(&bearer_of(token))).await.is_ok());
    }
    for token in [&at, &app_at] {
        assert!(strict.authenticate(Some(&bearer_of(token))).await.is_ok());
    }
    for token in [&id_token, &untyped] {
        match strict.authenticate(Some(&bearer_of(token))).await {
            Err(Rejection::Invalid(reason)) => assert!(reason.contains("at+jwt"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
    // Lifetimes: at most 24 h by default, or what is set; iat not in the future.
    let hour = 3600;
    let cases = [
        (
            "a day",
            json!({"iat": now(), "exp": now() + 24 * hour}),
            true,
            true,
        ),
        (
            "a year",
            json!({"iat": now(), "exp": now() + 365 * 24 * hour}),
            false,
            false,
        ),
        (
            "issued a year ago, valid a year",
            json!({"iat": now() - 365 * 24 * hour, "exp": now() + 300}),
            false,
            false,
        ),
        (
            "issued in an hour",
            json!({"iat": now() + hour, "exp": now() + 2 * hour}),
            false,
            false,
        ),
        (
            "iat within the leeway",
            json!({"iat": now() + 3, "exp": now() + 300}),
            true,
            true,
        ),
        (
            "no iat, a week left",
            json!({"iat": null, "exp": now() + 7 * 24 * hour}),
            false,
            true,
        ),
        (
            "two hours",
            json!({"iat": now(), "exp": now() + 2 * hour}),
            true,
            true,
        ),
        (
            "iat not a number",
            json!({"iat": "yesterday", "exp": now() + 300}),
            false,
            false,
        ),
    ];
    let one_hour = server(config(&idp.issuer).with_max_token_lifetime_secs(hour));
    let week = server(config(&idp.issuer).with_max_token_lifetime_secs(8 * 24 * hour));
    for (what, times, by_default, with_a_week) in cases {
        let mut c = claims(&idp.issuer, json!({"scope": "mcp:admin"}));
        for (k, v) in times.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        let token = k.sign(&c);
        let verdict = |r: Result<Caller, Rejection>| match r {
            Ok(_) => true,
            Err(Rejection::Invalid(_)) => false,
            Err(other) => panic!("{what}: {other:?}"),
        };
        let got = verdict(lax.authenticate(Some(&bearer_of(&token))).await);
        assert_eq!(got, by_default, "{what}, by default");
        let got = verdict(week.authenticate(Some(&bearer_of(&token))).await);
        assert_eq!(got, with_a_week, "{what}, at most a week");
        if what == "two hours" {
            assert!(!verdict(
                one_hour.authenticate(Some(&bearer_of(&token))).await
            ));
        }
    }
}

#[tokio::test]
async fn malformed_missing_and_oversized_headers_are_refused_before_any_work() {
    let rs = server(config("http://127.0.0.1:9"));
    assert_eq!(rs.authenticate(None).await, Err(Rejection::Missing));
    let huge = format!("Bearer {}", "a".repeat(MAX_AUTHORIZATION_BYTES));
    for bad in [
        "",
        "Bearer",
        "Bearer ",
        "Basic YTpi",
        "Bearer a b",
        "Bearer a\u{1}b",
        huge.as_str(),
    ] {
        assert!(
            matches!(rs.authenticate(Some(bad)).await, Err(Rejection::Invalid(_))),
            "{:?}",
            &bad[..bad.len().min(20)]
        );
    }
    assert_eq!(bearer(Some("bearer abc.def.ghi")), Ok("abc.def.ghi"));
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_a_flood_of_unknown_kids_does_not_hammer_the_provider() {
    let k1 = SigningKey::new("k1");
    let k2 = SigningKey::new("k2");
    let idp = idp(&[&k1]).await;
    let rs = server(config(&idp.issuer).with_jwks_refresh_secs(30));
    // 50 tokens with kids nobody has, at once, before any key is held: one
    // fetch for all of them.
    let tokens: Vec<String> = (0..50)
        .map(|i| {
            k1.sign_as(
                &format!("nope-{i}"),
                &claims(&idp.issuer, json!({"scope": "mcp:admin"})),
            )
        })
        .collect();
    let checks = tokens.iter().map(|t| {
        let rs = rs.clone();
        let h = bearer_of(t);
        async move { rs.authenticate(Some(&h)).await }
    });
    for r in futures::future::join_all(checks).await {
        assert!(matches!(r, Err(Rejection::Invalid(_))), "{r:?}");
    }
    assert_eq!(
        idp.fetched.load(Ordering::SeqCst),
        1,
        "one fetch for the flood"
    );
    // With no refresh allowed for 30 s, a rotated key waits; with 0 s it is fetched.
    *idp.jwks.lock().unwrap() = json!({"keys": [k1.jwk(), k2.jwk()]});
    let rotated = k2.sign(&claims(&idp.issuer, json!({"scope": "mcp:admin"})));
    assert!(matches!(
        rs.authenticate(Some(&bearer_of(&rotated))).await,
        Err(Rejection::Invalid(_))
    ));
    *idp.jwks.lock().unwrap() = json!({"keys": [k1.jwk()]});
    let eager = server(config(&idp.issuer));
    eager.warm_up().await.unwrap();
    assert!(matches!(
        eager.authenticate(Some(&bearer_of(&rotated))).await,
        Err(Rejection::Invalid(_))
    ));
    *idp.jwks.lock().unwrap() = json!({"keys": [k2.jwk()]});
    let caller = eager
        .authenticate(Some(&bearer_of(&rotated)))
        .await
        .unwrap();
    assert_eq!(caller.trust_level, TrustLevel::Creator);
}

#[tokio::test]
async fn while_the_provider_is_down_held_keys_work_and_others_get_503() {
    let k1 = SigningKey::new("k1");
    let k2 = SigningKey::new("k2");
    let idp = idp(&[&k1]).await;
    let issuer = idp.issuer.clone();
    let rs = server(config(&issuer));
    rs.warm_up().await.unwrap();
    drop(idp);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = k1.sign(&claims(&issuer, json!({"scope": "mcp:admin"})));
    assert!(rs.authenticate(Some(&bearer_of(&held))).await.is_ok());
    let unknown = k2.sign(&claims(&issuer, json!({"scope": "mcp:admin"})));
    let started = Instant::now();
    match rs.authenticate(Some(&bearer_of(&unknown))).await {
        Err(Rejection::Unavailable { retry_after, .. }) => {
            assert!(retry_after >= Duration::from_secs(1))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() < provider::REQUEST_TIMEOUT * 3,
        "never a hang"
    );
    // A gateway that never reached the provider has no key at all.
    let cold = server(config(&issuer));
    assert!(cold.warm_up().await.is_err());
    assert!(matches!(
        cold.authenticate(Some(&bearer_of(&held))).await,
        Err(Rejection::Unavailable { .. })
    ));
}

#[tokio::test]
async fn opaque_tokens_are_introspected_once_and_checked_like_jwts() {
    let k = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let mut config = config(&idp.issuer).with_introspection(Some(IntrospectionConfig::new(
        core_agent_mcp_config::Template::parse("${env:RS_ID}").unwrap(),
        core_agent_mcp_config::Template::parse("${env:RS_SECRET}").unwrap(),
    )));
    config.trust.push(TrustRule {
        matches: TrustMatch::Scope("mcp:tools".into()),
        level: TrustLevel::Public,
        rate_limits: None,
    });
    config.required_scopes = vec!["mcp:tools".into()];
    let rs = server(config);
    for _ in 0..3 {
        let caller = rs.authenticate(Some("Bearer opaque-good")).await.unwrap();
        assert_eq!(
            (caller.name.as_str(), caller.trust_level),
            ("op-1", TrustLevel::Public)
        );
    }
    assert_eq!(
        idp.introspected.load(Ordering::SeqCst),
        1,
        "answers are kept a while"
    );
    assert!(matches!(
        rs.authenticate(Some("Bearer opaque-bad")).await,
        Err(Rejection::Invalid(_))
    ));
    // A JWT that lacks the required scope: 403 naming it.
    let jwt = k.sign(&claims(&idp.issuer, json!({"scope": "mcp:admin"})));
    assert_eq!(
        rs.authenticate(Some(&bearer_of(&jwt))).await,
        Err(Rejection::InsufficientScope {
            scope: "mcp:tools".into()
        })
    );
    let mut missing = OAuthConfig::new(&idp.issuer, AUDIENCE);
    missing.introspection = Some(IntrospectionConfig::new(
        core_agent_mcp_config::Template::parse("${env:NOPE}").unwrap(),
        core_agent_mcp_config::Template::parse("${env:RS_SECRET}").unwrap(),
    ));
    let err = ResourceServer::new(missing, &NoEnv)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("client_id") && err.contains("${env:NOPE}"),
        "{err}"
    );
}

#[tokio::test]
async fn a_verified_token_is_not_verified_again_until_the_keys_change() {
    let k1 = SigningKey::new("k1");
    let k2 = SigningKey::new("k2");
    let idp = idp(&[&k1]).await;
    let rs = server(config(&idp.issuer));
    rs.warm_up().await.unwrap();
    let token = bearer_of(&k1.sign(&claims(&idp.issuer, json!({"scope": "mcp:admin"}))));
    assert!(rs.authenticate(Some(&token)).await.is_ok());
    // The issuer drops k1: the token is still taken, from what was verified…
    *idp.jwks.lock().unwrap() = json!({"keys": [k2.jwk()]});
    assert!(rs.authenticate(Some(&token)).await.is_ok());
    assert_eq!(idp.fetched.load(Ordering::SeqCst), 1);
    // …until the keys are fetched again (here for k2's first token): then
    // it is checked anew, and k1 is gone.
    let next = bearer_of(&k2.sign(&claims(&idp.issuer, json!({"scope": "mcp:admin"}))));
    assert!(rs.authenticate(Some(&next)).await.is_ok());
    assert!(matches!(
        rs.authenticate(Some(&token)).await,
        Err(Rejection::Invalid(_))
    ));
    // A token is never taken past its `exp`, verified or not.
    let short = bearer_of(&k2.sign(&claims(
        &idp.issuer,
        json!({"scope": "mcp:admin", "exp": now() + 1}),
    )));
    assert!(rs.authenticate(Some(&short)).await.is_ok());
    let strict = server(config(&idp.issuer).with_leeway_secs(0));
    assert!(strict.authenticate(Some(&short)).await.is_ok());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(matches!(
        strict.authenticate(Some(&short)).await,
        Err(Rejection::Invalid(_))
    ));
}

#[tokio::test]
async fn an_introspection_endpoint_that_is_down_gets_503_never_a_hang() {
    let k = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let issuer = idp.issuer.clone();
    let mut config = config(&issuer).with_introspection(Some(IntrospectionConfig::new(
        core_agent_mcp_config::Template::parse("${env:RS_ID}").unwrap(),
        core_agent_mcp_config::Template::parse("${env:RS_SECRET}").unwrap(),
    )));
    config.default = DefaultTrust::Level(TrustLevel::Public);
    let rs = server(config);
    rs.warm_up().await.unwrap();
    drop(idp);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    match rs.authenticate(Some("Bearer opaque-good")).await {
        Err(Rejection::Unavailable {
            retry_after,
            reason,
        }) => {
            assert!(retry_after >= Duration::from_secs(1));
            assert!(!reason.contains("opaque-good"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() < provider::REQUEST_TIMEOUT * 2,
        "never a hang"
    );
}

#[tokio::test]
async fn a_claim_rule_with_rate_limits_sets_the_callers_over_its_levels() {
    use crate::{Budget, Limit, RateLimits};
    let k = SigningKey::new("k1");
    let idp = idp(&[&k]).await;
    let mut config = config(&idp.issuer);
    // Ahead of the plain `eng` rule: a `bulk` member gets more calls, and
    // the other limits stay the user level's.
    config.trust.insert(
        0,
        TrustRule {
            matches: TrustMatch::Claim {
                name: "groups".into(),
                value: json!("bulk"),
            },
            level: TrustLevel::User,
            rate_limits: Some(Budget::default().with_calls_per_minute(Some(Limit::Max(6000)))),
        },
    );
    let rs = server(config);
    let limits = RateLimits::default();
    let bulk = k.sign(&claims(
        &idp.issuer,
        json!({"sub": "bob", "groups": ["eng", "bulk"]}),
    ));
    let caller = rs.authenticate(Some(&bearer_of(&bulk))).await.unwrap();
    let budget = limits.budget(&caller);
    assert_eq!(budget.calls_per_minute, Some(Limit::Max(6000)));
    assert_eq!(
        budget.concurrent_calls,
        RateLimits::USER.concurrent_calls,
        "unset limits fall back to the level's"
    );
    let eng = k.sign(&claims(
        &idp.issuer,
        json!({"sub": "dan", "groups": ["eng"]}),
    ));
    let caller = rs.authenticate(Some(&bearer_of(&eng))).await.unwrap();
    assert_eq!(caller.rate_limits, None);
    assert_eq!(limits.budget(&caller), RateLimits::USER);
}
