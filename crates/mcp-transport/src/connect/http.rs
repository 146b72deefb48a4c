//! A streamable HTTP server: its headers, its token source (or its
//! callers' tokens, per call), no redirects, then the handshake.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::handshake::{HandshakeError, Lifecycle, Started, handshake};
use super::words::init_message;
use crate::auth::{self, AuthClient, TokenSource};
use crate::error::StartError;
use crate::handler::Handler;
use crate::options::StartOptions;

pub(crate) async fn start_http(
    handler: Handler,
    url: &str,
    headers: &[(String, String)],
    (source, per_call): (Option<Arc<dyn TokenSource>>, bool),
    max_message: usize,
    options: &StartOptions,
) -> Started {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let header_name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            StartError::InvalidHeader {
                name: name.clone(),
                part: "name",
            }
        })?;
        let header_value =
            http::HeaderValue::from_str(value).map_err(|_| StartError::InvalidHeader {
                name: name.clone(),
                part: "value",
            })?;
        custom.insert(header_name, header_value);
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    // One body or SSE event past the limit ends the request with
    // `ResponseBodyTooLarge`, never an unbounded read.
    config.max_sse_event_size = max_message;
    config.max_json_response_size = max_message;
    let described = source.as_ref().map(|s| s.describe());
    let name = handler.server.clone();
    let outcome = match source {
        None if !per_call => {
            let transport = StreamableHttpClientTransport::from_config(config);
            handshake(handler, transport, options.timeout, Lifecycle::Probe).await
        }
        source => {
            // One token before anything else, so a misconfiguration fails
            // this server's start with the source's own words.
            if let Some(source) = &source {
                let first = tokio::time::timeout(options.timeout, source.token()).await;
                match first {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(StartError::Auth(e)),
                    Err(_) => {
                        return Err(StartError::Timeout {
                            after: options.timeout,
                            stdout: None,
                            stderr: Vec::new(),
                        });
                    }
                }
            }
            // No idle pooling, as rmcp's own client; and no redirects at all,
            // so a token never follows one to another origin.
            let inner = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| StartError::Initialize {
                    message: format!("cannot build the HTTP client: {e}"),
                    stdout: None,
                    stderr: Vec::new(),
                })?;
            let client = AuthClient::new(inner, source);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            handshake(handler, transport, options.timeout, Lifecycle::Probe).await
        }
    };
    match outcome {
        Some(Ok(service)) => Ok((service, None)),
        Some(Err(HandshakeError::Init(e) | HandshakeError::LateDiscover(e))) => {
            match auth::auth_error_in(&e) {
                Some(auth) => Err(StartError::Auth(auth)),
                None => Err(StartError::Initialize {
                    message: init_message(&e, described.as_deref(), &name),
                    stdout: None,
                    stderr: Vec::new(),
                }),
            }
        }
        Some(Err(HandshakeError::List(e))) => Err(StartError::ListTools {
            message: e.to_string(),
        }),
        None => Err(StartError::Timeout {
            after: options.timeout,
            stdout: None,
            stderr: Vec::new(),
        }),
    }
}
