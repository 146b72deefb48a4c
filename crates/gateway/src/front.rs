//! The HTTP front, what runs before a request reaches rmcp: the accept
//! loop (a cap on open connections, in total and per address, and a
//! deadline on each request head), the `Origin` check, and the screening
//! of a `POST /mcp` body (read within a deadline, then checked to be one
//! JSON-RPC message whose id is not already in flight on its session).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::HttpOptions;

/// What a connection past the caps is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 0\r\n\r\n";

/// Open connections, counted in total and per address.
struct Connections {
    total: Arc<Semaphore>,
    max_total: u32,
    max_per_address: usize,
    per_address: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection: its place in the counts, given back on drop.
struct Slot {
    _permit: OwnedSemaphorePermit,
    ip: IpAddr,
    connections: Arc<Connections>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut table) = self.connections.per_address.lock()
            && let Some(n) = table.get_mut(&self.ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                table.remove(&self.ip);
            }
        }
    }
}

impl Connections {
    fn new(max_total: usize, max_per_address: usize) -> Arc<Connections> {
        let max_total = u32::try_from(max_total.max(1))
            .unwrap_or(u32::MAX)
            .min(1 << 20);
        Arc::new(Connections {
            total: Arc::new(Semaphore::new(max_total as usize)),
            max_total,
            max_per_address: max_per_address.max(1),
            per_address: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection from `ip`, or `None` past either cap.
    fn admit(self: &Arc<Connections>, ip: IpAddr) -> Option<Slot> {
        let permit = self.total.clone().try_acquire_owned().ok()?;
        let mut table = self.per_address.lock().ok()?;
        let n = table.entry(ip).or_insert(0);
        if *n >= self.max_per_address {
            return None;
        }
        *n += 1;
        Some(Slot {
            _permit: permit,
            ip,
            connections: self.clone(),
        })
    }

    /// Resolves once every connection has closed.
    async fn all_closed(&self) {
        let _ = self.total.acquire_many(self.max_total).await;
    }
}

/// Serves `router` on `listener` until `shutdown` resolves: then stops
/// accepting, asks every connection to close once its answer in progress
/// is sent, and returns when they all have.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    options: &HttpOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let connections =
        Connections::new(options.max_connections, options.max_connections_per_address);
    let closing = CancellationToken::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (tcp, address) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it
                    // was accepted: wait a little rather than spin.
                    tracing::debug!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = connections.admit(address.ip()) else {
            tracing::debug!("refused a connection from {address}: too many open");
            let _ = tcp.try_write(BUSY);
            continue;
        };
        // Answers go out as several small writes (headers, then SSE events):
        // with Nagle's algorithm on, each waits for the client's delayed ACK,
        // some 40 ms per call on a kept-alive connection.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let router = router.clone();
        let closing = closing.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |mut request: Request<_>| {
                request.extensions_mut().insert(ConnectInfo(address));
                let mut router = router.clone();
                async move { router.call(request.map(Body::new)).await }
            });
            let connection = builder.serve_connection(TokioIo::new(tcp), service);
            tokio::pin!(connection);
            tokio::select! {
                r = connection.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("connection from {address} ended: {e}");
                    }
                }
                () = closing.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    closing.cancel();
    connections.all_closed().await;
    Ok(())
}

/// Whether `origin` (an `Origin` header) is one of `allowed`: the same
/// scheme and host, and the same port, unless the allowed entry names
/// none (then any port). `null` and malformed origins never are.
pub(crate) fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let Some(origin) = Origin::parse(origin) else {
        return false;
    };
    allowed.iter().any(|a| {
        Origin::parse(a).is_some_and(|a| {
            a.scheme.eq_ignore_ascii_case(origin.scheme)
                && a.host.eq_ignore_ascii_case(origin.host)
                && (a.port.is_none() || a.port == origin.port)
        })
    })
}

/// Whether `text` is an origin `allowed_origins` can name.
pub(crate) fn valid_origin(text: &str) -> bool {
    Origin::parse(text).is_some()
}

/// An origin's parts: `scheme://host[:port]`.
struct Origin<'a> {
    scheme: &'a str,
    host: &'a str,
    port: Option<&'a str>,
}

impl Origin<'_> {
    fn parse(text: &str) -> Option<Origin<'_>> {
        let (scheme, rest) = text.trim().split_once("://")?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if scheme.is_empty() || rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
            return None;
        }
        let (host, port) = if rest.starts_with('[') {
            let (v6, after) = rest.split_once(']')?;
            let host = &rest[..=v6.len()];
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':')?)),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty()
            || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return None;
        }
        Some(Origin { scheme, host, port })
    }
}

/// The `Origin` headers a browser on the machine itself sends: loopback
/// names, on any port.
pub(crate) fn loopback_origins() -> Vec<String> {
    ["http", "https"]
        .iter()
        .flat_map(|scheme| {
            ["localhost", "127.0.0.1", "[::1]"].map(|host| format!("{scheme}://{host}"))
        })
        .collect()
}

/// Why a request body was refused before rmcp read it: the JSON-RPC
/// error code, the HTTP status, the message, and the request's id when it
/// has one. Returned by [`check_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (JSON-RPC {code}, HTTP {status})")]
#[non_exhaustive]
pub struct MessageError {
    /// The JSON-RPC error code: -32700 (not JSON), -32600 (not a single
    /// valid JSON-RPC message) or -32602 (a known method with params it
    /// cannot take).
    pub code: i32,
    /// The HTTP status of the answer: 400, or 200 for -32602 (a valid
    /// request, answered with an error).
    pub status: u16,
    /// What was wrong, and what to send instead.
    pub message: String,
    /// The request's id, when it had a valid one.
    pub id: Option<Value>,
}

impl MessageError {
    const PARSE: i32 = -32700;
    const INVALID_REQUEST: i32 = -32600;
    const INVALID_PARAMS: i32 = -32602;

    fn invalid(message: &str, id: Option<Value>) -> MessageError {
        MessageError {
            code: MessageError::INVALID_REQUEST,
            status: 400,
            message: message.to_owned(),
            id,
        }
    }

    /// The JSON-RPC error answer.
    fn response(&self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        let body = json!({
            "jsonrpc": "2.0",
            "id": self.id.clone().unwrap_or(Value::Null),
            "error": {"code": self.code, "message": self.message},
        });
        (status, axum::Json(body)).into_response()
    }
}

/// The request methods of MCP a client may send: one of these whose
/// params rmcp cannot read is invalid params, not an unknown method.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// Checks that `body` is one JSON-RPC message an MCP server takes over
/// streamable HTTP: JSON (else -32700), an object, not a batch, with
/// `"jsonrpc": "2.0"`, a string or integer `id` when it has one (never
/// `null`), a string `method` or a `result`/`error`, and object `params`
/// (else -32600); a known method's params of the right shape (else -32602).
///
/// ```
/// use core_agent_gateway::check_message;
///
/// assert!(check_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
/// assert_eq!(check_message(b"{").unwrap_err().code, -32700);
/// assert_eq!(check_message(b"[]").unwrap_err().code, -32600);
/// assert_eq!(check_message(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err().code, -32600);
/// let bad = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":[1,2]}}"#;
/// assert_eq!(check_message(bad).unwrap_err().code, -32602);
/// ```
///
/// # Errors
/// [`MessageError`] with the JSON-RPC code and HTTP status to answer.
pub fn check_message(body: &[u8]) -> Result<(), MessageError> {
    checked(body).map(|_| ())
}

/// [`check_message`], keeping the request's id (`None` for a
/// notification or a response).
fn checked(body: &[u8]) -> Result<Option<Value>, MessageError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| MessageError {
        code: MessageError::PARSE,
        status: 400,
        message: format!("the body is not JSON ({e}); send one JSON-RPC message"),
        id: None,
    })?;
    let object = match &value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(MessageError::invalid(
                "batches are not accepted: send one JSON-RPC message per request",
                None,
            ));
        }
        _ => {
            return Err(MessageError::invalid(
                "the body is not a JSON-RPC message: send an object with \"jsonrpc\": \"2.0\"",
                None,
            ));
        }
    };
    let id = match object.get("id") {
        None => None,
        Some(id @ Value::String(_)) => Some(id.clone()),
        Some(id @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(id.clone()),
        Some(_) => {
            return Err(MessageError::invalid(
                "the id must be a string or a whole number (not null)",
                None,
            ));
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(MessageError::invalid(
            "the message needs \"jsonrpc\": \"2.0\"",
            id,
        ));
    }
    let method = match object.get("method") {
        None => None,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => return Err(MessageError::invalid("the method must be a string", id)),
    };
    match method {
        None if id.is_none() => {
            return Err(MessageError::invalid(
                "the message has neither a method nor an id",
                None,
            ));
        }
        None if object.contains_key("result") == object.contains_key("error") => {
            return Err(MessageError::invalid(
                "a response needs one of result and error",
                id,
            ));
        }
        _ => {}
    }
    let invalid_params = |message: String| MessageError {
        code: MessageError::INVALID_PARAMS,
        status: if id.is_some() { 200 } else { 400 },
        message,
        id: id.clone(),
    };
    if method.is_some() && object.get("params").is_some_and(|p| !p.is_object()) {
        return Err(invalid_params("params must be an object".to_owned()));
    }
    // Read from the parsed value in place (no copy of the body's tree).
    let message =
        <ClientJsonRpcMessage as serde::Deserialize>::deserialize(&value).map_err(|e| {
            MessageError::invalid(&format!("not a valid JSON-RPC message ({e})"), id.clone())
        })?;
    if let ClientJsonRpcMessage::Request(request) = &message
        && let ClientRequest::CustomRequest(custom) = &request.request
        && METHODS.contains(&custom.method.as_str())
    {
        return Err(invalid_params(format!(
            "the params of {} are not of the shape it takes",
            custom.method
        )));
    }
    Ok(if method.is_some() { id } else { None })
}

/// The request ids in flight, per session: a second request with the id
/// of one still unanswered would take its answer.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    ids: Mutex<HashSet<(String, String)>>,
}

/// A request id held in flight until its answer has been sent.
pub(crate) struct Held {
    key: (String, String),
    in_flight: Arc<InFlight>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut ids) = self.in_flight.ids.lock() {
            ids.remove(&self.key);
        }
    }
}

/// Reads and checks a `POST /mcp` body (within `options.body_timeout`,
/// at most `options.max_body_bytes`), and holds its id in flight on
/// `session`; the request comes back with the body put back, and `Err`
/// is the answer to send instead.
pub(crate) async fn screen(
    request: Request,
    options: &HttpOptions,
    session: Option<&str>,
    in_flight: &Arc<InFlight>,
) -> Result<(Request, Option<Held>), Response> {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, options.max_body_bytes);
    let bytes = match tokio::time::timeout(options.body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(crate::http::problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request body is over {} bytes, or was cut short",
                    options.max_body_bytes
                ),
            ));
        }
        Err(_) => {
            let mut response = crate::http::problem(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the request body did not arrive within {} s",
                    options.body_timeout.as_secs()
                ),
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Err(response);
        }
    };
    let id = checked(&bytes).map_err(|e| e.response())?;
    let held = match (session, id) {
        (Some(session), Some(id)) => {
            let key = (session.to_owned(), id.to_string());
            let fresh = in_flight
                .ids
                .lock()
                .is_ok_and(|mut ids| ids.insert(key.clone()));
            if !fresh {
                return Err(MessageError::invalid(
                    "id already in use: a request with this id is still in flight on this session; use a new id",
                    Some(id),
                )
                .response());
            }
            Some(Held {
                key,
                in_flight: in_flight.clone(),
            })
        }
        _ => None,
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), held))
}

/// `response`, keeping `held` until its body has been sent or dropped.
pub(crate) fn hold_until_sent(response: Response, held: impl Send + Sync + 'static) -> Response {
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &held;
            chunk
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_malformed_message_gets_its_code_and_status() {
        let table: &[(&str, Option<(i32, u16)>)] = &[
            (r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x/custom","params":{}}"#,
                None,
            ),
            ("{", Some((-32700, 400))),
            ("", Some((-32700, 400))),
            ("\u{feff}{}", Some((-32700, 400))),
            ("[]", Some((-32600, 400))),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                Some((-32600, 400)),
            ),
            ("42", Some((-32600, 400))),
            ("\"x\"", Some((-32600, 400))),
            ("null", Some((-32600, 400))),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                Some((-32600, 400)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                Some((-32600, 400)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                Some((-32600, 400)),
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                Some((-32600, 400)),
            ),
            (r#"{"id":1,"method":"ping"}"#, Some((-32600, 400))),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
                Some((-32600, 400)),
            ),
            (r#"{"jsonrpc":"2.0"}"#, Some((-32600, 400))),
            (r#"{"jsonrpc":"2.0","id":1}"#, Some((-32600, 400))),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
                Some((-32602, 200)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1,2]}}"#,
                Some((-32602, 200)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}"#,
                Some((-32602, 200)),
            ),
        ];
        for (body, want) in table {
            let got = check_message(body.as_bytes())
                .err()
                .map(|e| (e.code, e.status));
            assert_eq!(got, *want, "{body}");
        }
    }

    #[test]
    fn an_answer_names_the_id_when_the_request_had_a_valid_one() {
        let e = check_message(br#"{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{}}"#)
            .unwrap_err();
        assert_eq!(e.id, Some(json!("q")));
        let e = check_message(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert_eq!(e.id, None);
    }

    #[test]
    fn origins_match_scheme_and_host_and_the_port_when_one_is_named() {
        let mut allowed = loopback_origins();
        allowed.push("https://app.example.com:8443".to_owned());
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:9",
            "HTTP://LOCALHOST",
            "https://app.example.com:8443",
        ] {
            assert!(origin_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "null",
            "",
            "http://evil.example",
            "http://localhost.evil",
            "http://127.0.0.1.evil:80",
            "https://app.example.com",
            "https://app.example.com:443",
            "http://app.example.com:8443",
            "file://",
            "http://localhost:3000/path",
            "http://user@localhost",
            "http://[::1",
            "http://localhost:",
            "http://localhost:x",
        ] {
            assert!(!origin_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn connections_are_capped_in_total_and_per_address_and_given_back() {
        let connections = Connections::new(3, 2);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let a1 = connections.admit(a);
        let a2 = connections.admit(a);
        assert!(a1.is_some() && a2.is_some());
        assert!(connections.admit(a).is_none(), "a third from one address");
        let b1 = connections.admit(b);
        assert!(b1.is_some());
        assert!(connections.admit(b).is_none(), "a fourth in total");
        drop(a1);
        assert!(
            connections.admit(b).is_some(),
            "a closed one frees its place"
        );
        drop((a2, b1));
        assert!(connections.per_address.lock().unwrap().get(&a).is_none());
    }
}
