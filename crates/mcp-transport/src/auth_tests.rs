//! The authenticated client against a real rmcp streamable HTTP server on
//! loopback, behind a gate that checks the bearer token like a hosted server.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};

use super::*;

/// A server with no tools: `tools/list` is enough to make requests.
#[derive(Clone)]
struct Empty;

impl ServerHandler for Empty {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// What the gate saw of one POST.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    headers: HashMap<String, String>,
    refused: bool,
}

/// The tokens the gate accepts, and every POST it saw.
#[derive(Default)]
struct Gate {
    accepted: Mutex<HashSet<String>>,
    seen: Mutex<Vec<Seen>>,
    /// Answer 401 with `WWW-Authenticate` (rmcp's `AuthRequired`) or bare.
    challenge: bool,
}

impl Gate {
    fn accept(&self, tokens: &[&str]) {
        *self.accepted.lock().unwrap() = tokens.iter().map(|t| t.to_string()).collect();
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `Empty` over streamable HTTP on 127.0.0.1 behind `gate`; returns the URL.
async fn serve(gate: Arc<Gate>) -> String {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    let mcp = StreamableHttpService::new(
        || Ok(Empty),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (gate, mcp) = (gate.clone(), mcp.clone());
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let (gate, mut mcp) = (gate.clone(), mcp.clone());
                async move { Ok::<_, Infallible>(gated(&gate, &mut mcp, req).await) }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}

async fn gated(
    gate: &Gate,
    mcp: &mut StreamableHttpService<Empty, LocalSessionManager>,
    req: hyper::Request<Incoming>,
) -> hyper::Response<Body> {
    // Only POSTs carry requests; a stateless server has no GET stream, and
    // answering that first keeps the counts below about POSTs alone.
    if req.method() != hyper::Method::POST {
        return respond(405, None);
    }
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let headers = req
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    let token = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "));
    let refused = !token.is_some_and(|t| gate.accepted.lock().unwrap().contains(t));
    gate.seen.lock().unwrap().push(Seen {
        authorization,
        headers,
        refused,
    });
    if refused {
        return respond(401, gate.challenge.then_some("Bearer realm=\"test\""));
    }
    let response = tower_service::Service::call(mcp, req).await.unwrap();
    response.map(|body| body.boxed())
}

fn respond(status: u16, challenge: Option<&str>) -> hyper::Response<Body> {
    let mut response = hyper::Response::builder().status(status);
    if let Some(challenge) = challenge {
        response = response.header("www-authenticate", challenge);
    }
    response.body(Full::new(Bytes::new()).boxed()).unwrap()
}

/// Hands out `t1`, `t2`, … : a new token after each rejection.
#[derive(Default)]
struct Counting {
    generation: AtomicUsize,
    tokens: AtomicUsize,
    rejected: AtomicUsize,
    extra: Option<(HeaderName, HeaderValue)>,
}

impl TokenSource for Counting {
    fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
        self.tokens.fetch_add(1, Ordering::SeqCst);
        let mut token = Token::bearer(format!("t{}", self.generation.load(Ordering::SeqCst) + 1));
        if let Some((name, value)) = &self.extra {
            token = token.with_header(name.clone(), value.clone());
        }
        Box::pin(std::future::ready(Ok(token)))
    }

    fn rejected<'a>(&'a self, token: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
        self.rejected.fetch_add(1, Ordering::SeqCst);
        // Only the token in use is dropped: a stale rejection changes nothing.
        let current = format!("Bearer t{}", self.generation.load(Ordering::SeqCst) + 1);
        if token.authorization() == current {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn strategy(&self) -> String {
        "counting".to_owned()
    }

    fn detail(&self) -> Option<String> {
        Some("test".to_owned())
    }
}

async fn connect(
    url: &str,
    source: Arc<Counting>,
    headers: &[(&str, &str)],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let custom = headers
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    let client = AuthClient::new(reqwest::Client::new(), Some(source));
    ().serve(StreamableHttpClientTransport::with_client(client, config))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_sources_authorization_replaces_a_static_one_and_other_headers_pass_through() {
    let gate = Arc::new(Gate::default());
    gate.accept(&["t1"]);
    let url = serve(gate.clone()).await;
    let source = Arc::new(Counting {
        extra: Some((
            HeaderName::from_static("x-goog-user-project"),
            HeaderValue::from_static("quota-1"),
        )),
        ..Counting::default()
    });
    let client = connect(
        &url,
        source.clone(),
        &[("Authorization", "Bearer static"), ("X-Trace", "abc")],
    )
    .await;
    client.list_tools(None).await.unwrap();
    client.cancel().await.unwrap();

    let seen = gate.seen();
    // initialize, notifications/initialized, tools/list.
    assert!(seen.len() >= 3, "{seen:?}");
    for post in &seen {
        assert_eq!(post.authorization.as_deref(), Some("Bearer t1"), "{post:?}");
        assert_eq!(post.headers["x-trace"], "abc", "{post:?}");
        assert_eq!(post.headers["x-goog-user-project"], "quota-1", "{post:?}");
        assert!(!post.refused);
    }
    // Asked once per request, never rejected.
    assert_eq!(source.tokens.load(Ordering::SeqCst), seen.len());
    assert_eq!(source.rejected.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_401_drops_the_token_once_and_the_request_is_retried_with_a_new_one() {
    let gate = Arc::new(Gate {
        challenge: true,
        ..Gate::default()
    });
    gate.accept(&["t1"]);
    let url = serve(gate.clone()).await;
    let source = Arc::new(Counting::default());
    let client = connect(&url, source.clone(), &[]).await;
    let before = gate.seen().len();

    // The server revokes t1 mid-session.
    gate.accept(&["t2"]);
    client.list_tools(None).await.unwrap();
    client.cancel().await.unwrap();

    let seen: Vec<_> = gate.seen().into_iter().skip(before).collect();
    let sent: Vec<_> = seen
        .iter()
        .map(|s| (s.authorization.clone().unwrap_or_default(), s.refused))
        .collect();
    assert_eq!(
        sent,
        [
            ("Bearer t1".to_owned(), true),
            ("Bearer t2".to_owned(), false)
        ]
    );
    assert_eq!(source.rejected.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_new_token_refused_too_fails_the_request_without_a_loop() {
    // A bare 401 (no challenge) takes rmcp's other error path.
    let gate = Arc::new(Gate::default());
    gate.accept(&["t1"]);
    let url = serve(gate.clone()).await;
    let source = Arc::new(Counting::default());
    let client = connect(&url, source.clone(), &[]).await;
    let before = gate.seen().len();

    gate.accept(&[]);
    let err = client.list_tools(None).await.unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");

    let seen: Vec<_> = gate.seen().into_iter().skip(before).collect();
    let sent: Vec<_> = seen
        .iter()
        .map(|s| (s.authorization.clone().unwrap_or_default(), s.refused))
        .collect();
    assert_eq!(
        sent,
        [
            ("Bearer t1".to_owned(), true),
            ("Bearer t2".to_owned(), true)
        ]
    );
    assert_eq!(source.rejected.load(Ordering::SeqCst), 1);
    assert_eq!(source.generation.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_source_that_fails_fails_the_request_with_its_own_words() {
    struct Broken;
    impl TokenSource for Broken {
        fn token(&self) -> BoxFuture<'_, Result<Token, AuthError>> {
            Box::pin(std::future::ready(Err(AuthError::NotConfigured {
                source_tried: "nowhere".to_owned(),
                fix: "configure it".to_owned(),
            })))
        }
        fn rejected<'a>(&'a self, _: &'a Token) -> BoxFuture<'a, Result<(), AuthError>> {
            Box::pin(std::future::ready(Ok(())))
        }
        fn strategy(&self) -> String {
            "broken".to_owned()
        }
    }
    let gate = Arc::new(Gate::default());
    let url = serve(gate.clone()).await;
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    let client = AuthClient::new(reqwest::Client::new(), Some(Arc::new(Broken)));
    let err =
        ().serve(StreamableHttpClientTransport::with_client(client, config))
            .await
            .unwrap_err();
    assert_eq!(
        auth_error_in(&err),
        Some(AuthError::NotConfigured {
            source_tried: "nowhere".to_owned(),
            fix: "configure it".to_owned()
        })
    );
    // Nothing reached the server.
    assert!(gate.seen().is_empty());
}

#[test]
fn a_token_never_shows_its_secret() {
    let token = Token::bearer("s3cret")
        .with_header(
            HeaderName::from_static("x-goog-user-project"),
            HeaderValue::from_static("p"),
        )
        .expiring_at(SystemTime::UNIX_EPOCH);
    assert_eq!(token.to_string(), "Bearer ***");
    let debug = format!("{token:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert_eq!(
        debug,
        "Token { authorization: Bearer ***, extra_headers: [\"x-goog-user-project\"], expires_at: Some(SystemTime { tv_sec: 0, tv_nsec: 0 }) }"
    );
    assert_eq!(token.authorization(), "Bearer s3cret");
}

#[test]
fn auth_shows_the_strategy_and_the_sources_description() {
    assert_eq!(Auth::None.to_string(), "none");
    assert_eq!(Auth::Static.to_string(), "static");
    let adc = Auth::Source {
        kind: "google-adc".to_owned(),
        detail: Some("service account key /k.json".to_owned()),
    };
    assert_eq!(
        (adc.kind(), adc.detail()),
        ("google-adc", Some("service account key /k.json"))
    );
    assert_eq!(adc.to_string(), "google-adc (service account key /k.json)");
    let bare = Auth::of(&StaticToken(Token::bearer("t")));
    assert_eq!((bare.kind(), bare.detail()), ("static", None));
    assert_eq!(bare.to_string(), "static");
}

#[tokio::test]
async fn the_transports_response_limits_reach_the_wrapped_client() {
    // A 16-byte limit (on SSE events and JSON bodies alike) cannot hold the
    // initialize result, so the handshake fails only if the limit got through.
    let gate = Arc::new(Gate::default());
    gate.accept(&["t1"]);
    let url = serve(gate.clone()).await;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    config.max_sse_event_size = 16;
    config.max_json_response_size = 16;
    let client = AuthClient::new(reqwest::Client::new(), Some(Arc::new(Counting::default())));
    let err =
        ().serve(StreamableHttpClientTransport::with_client(client, config))
            .await
            .unwrap_err();
    // The oversized SSE event ends the stream before the result arrives.
    assert_eq!(err.to_string(), "connection closed: initialize response");
    // The same server and token without the limit: it connects.
    let client = connect(&url, Arc::new(Counting::default()), &[]).await;
    client.cancel().await.unwrap();
}
