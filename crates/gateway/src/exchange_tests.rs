use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use core_agent_mcp_config::{ProcessEnv, Template, TokenExchangeSpec};

use super::*;

/// A token endpoint on loopback: counts the exchanges per subject; a
/// subject `bad` is refused (`invalid_grant`, its description quoting the
/// subject), a client secret other than `s3cret` is `invalid_client`.
#[derive(Default)]
struct As {
    exchanges: Mutex<Vec<String>>,
    expires_in: AtomicUsize,
}

async fn token(
    State(state): State<Arc<As>>,
    headers: http::HeaderMap,
    body: String,
) -> axum::response::Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let good = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "gw%3A1:s3cret")
    );
    if basic != good {
        return (
            http::StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    assert_eq!(form["grant_type"], GRANT_TYPE);
    assert_eq!(form["subject_token_type"], ACCESS_TOKEN_TYPE);
    let subject = form["subject_token"].clone();
    if subject == "bad" {
        return (
            http::StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({"error": "invalid_grant", "error_description": "subject bad is not allowed\nhere"})),
        )
            .into_response();
    }
    state.exchanges.lock().unwrap().push(subject.clone());
    let n = state.exchanges.lock().unwrap().len();
    let mut answer = serde_json::json!({
        "access_token": format!("x-{subject}-{}-{n}", form.get("resource").cloned().unwrap_or_default()),
        "issued_token_type": ACCESS_TOKEN_TYPE,
        "token_type": "Bearer",
    });
    let expires = state.expires_in.load(Ordering::Relaxed);
    if expires > 0 {
        answer["expires_in"] = expires.into();
    }
    axum::Json(answer).into_response()
}

async fn authorization_server() -> (String, Arc<As>) {
    let state = Arc::new(As::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let meta = serde_json::json!({"issuer": base, "token_endpoint": format!("{base}/token")});
    let app = axum::Router::new()
        .route("/token", post(token))
        .route(
            "/.well-known/openid-configuration",
            get(move || {
                let meta = meta.clone();
                async move { axum::Json(meta) }
            }),
        )
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, state)
}

fn exchange(server: &str, endpoint: ExchangeEndpoint, secret: &str) -> Arc<TokenExchange> {
    let spec = TokenExchangeSpec {
        endpoint,
        client_id: "gw:1".into(),
        client_secret: Some(Template::parse(secret).unwrap()),
        audience: None,
        resource: None,
        scopes: vec!["read".into()],
    };
    Arc::new(TokenExchange::new(
        server,
        &format!("http://{server}.test/mcp"),
        &spec,
        &ProcessEnv,
    ))
}

fn user(name: &str) -> Subject {
    Subject {
        owner: format!("oauth:idp#{name}"),
        name: name.to_owned(),
        token: format!("subject-token-of-{name}"),
    }
}

#[tokio::test]
async fn tokens_are_exchanged_once_per_user_and_backend_and_cached() {
    let (base, state) = authorization_server().await;
    state.expires_in.store(600, Ordering::Relaxed);
    let x = Exchanger::new();
    let a = exchange(
        "a",
        ExchangeEndpoint::TokenEndpoint(format!("{base}/token")),
        "s3cret",
    );
    let b = exchange("b", ExchangeEndpoint::Issuer(base.clone()), "s3cret");
    let (alice, bob) = (user("alice"), user("bob"));
    let first = x.token(&alice, &a).await.unwrap();
    assert_eq!(
        first.authorization(),
        "Bearer x-subject-token-of-alice-http://a.test/mcp-1"
    );
    for _ in 0..5 {
        assert_eq!(x.token(&alice, &a).await.unwrap(), first);
    }
    let bobs = x.token(&bob, &a).await.unwrap();
    assert_ne!(bobs, first);
    let other = x.token(&alice, &b).await.unwrap();
    assert!(
        other.authorization().contains("http://b.test/mcp"),
        "{}",
        other.authorization()
    );
    assert_eq!(state.exchanges.lock().unwrap().len(), 3);
    // A token the backend refused is dropped: the next call exchanges again.
    x.forget(&alice.owner, "a", &first).await;
    let fresh = x.token(&alice, &a).await.unwrap();
    assert_ne!(fresh, first);
    assert_eq!(state.exchanges.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn concurrent_calls_of_one_user_share_one_exchange_and_a_short_lived_token_is_renewed() {
    let (base, state) = authorization_server().await;
    state.expires_in.store(1, Ordering::Relaxed);
    let x = Arc::new(Exchanger::new());
    let a = exchange(
        "a",
        ExchangeEndpoint::TokenEndpoint(format!("{base}/token")),
        "s3cret",
    );
    let alice = Arc::new(user("alice"));
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (x, a, alice) = (x.clone(), a.clone(), alice.clone());
            tokio::spawn(async move { x.token(&alice, &a).await.unwrap() })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    assert_eq!(state.exchanges.lock().unwrap().len(), 1);
    // Valid 1 s, renewed a tenth of it before.
    tokio::time::sleep(Duration::from_millis(950)).await;
    x.token(&alice, &a).await.unwrap();
    assert_eq!(state.exchanges.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn refusals_name_the_error_and_never_the_token() {
    let (base, _state) = authorization_server().await;
    let x = Exchanger::new();
    let endpoint = ExchangeEndpoint::TokenEndpoint(format!("{base}/token"));
    let bad = Subject {
        token: "bad".into(),
        ..user("mallory")
    };
    let e = x
        .token(&bad, &exchange("a", endpoint.clone(), "s3cret"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HTTP 400 invalid_grant (subject *** is not allowed here)"),
        "{e}"
    );
    assert!(e.contains("sign in again"), "{e}");
    let alice = user("alice");
    let e = x
        .token(&alice, &exchange("a", endpoint, "wrong"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HTTP 401 invalid_client") && e.contains("client_secret"),
        "{e}"
    );
    assert!(
        !e.contains("subject-token-of") && !e.contains("wrong"),
        "{e}"
    );
    let e = x
        .token(
            &alice,
            &exchange(
                "a",
                ExchangeEndpoint::TokenEndpoint("http://127.0.0.1:1/token".into()),
                "s3cret",
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, AuthError::Unreachable { .. }), "{e}");
}

#[test]
fn a_caller_without_a_signed_in_token_is_refused_by_name() {
    let tokens = CallerExchange {
        exchanger: Arc::new(Exchanger::new()),
        caller: Err("ops".into()),
    };
    let e = match tokens.source(&exchange(
        "tickets",
        ExchangeEndpoint::Issuer("https://as".into()),
        "s",
    )) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a caller without a token got a source"),
    };
    assert!(
        e.contains("server `tickets` acts for each user") && e.contains("`ops` did not sign in"),
        "{e}"
    );
}
