//! A span and a duration per request: each `tools/call`, `resources/read`
//! and `prompts/get` a client session serves runs in a span named after it
//! (`tools/call <tool>`), child of the client's `traceparent`, and is
//! counted in `mcp.server.operation.duration` when it ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, GetPromptResponse, ReadResourceResponse};
use rmcp::service::{RequestContext, RoleServer};
use tracing::Instrument as _;

use crate::Gateway;
use crate::telemetry::Metrics;
#[cfg(feature = "otel")]
use crate::telemetry::TraceParent;

/// One request being served: its span, and what its duration is recorded
/// under when it is dropped (an early return counts as failed, `_OTHER`,
/// unless [`Traced::finish`] said how it ended).
pub(crate) struct Traced {
    span: tracing::Span,
    on: bool,
    metrics: Option<Arc<Metrics>>,
    started: Instant,
    method: &'static str,
    name: Option<String>,
    in_catalog: bool,
    error: Option<&'static str>,
}

impl Traced {
    /// Starts the request `method` (naming `name`, a tool or prompt).
    pub(crate) fn start(
        gateway: &Gateway,
        method: &'static str,
        name: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Traced {
        // A caller's name is cut before it reaches a span or a label.
        let cut = name.map(|n| core_agent_mcp_policy::elide(n, 256));
        let name = cut.as_deref();
        let options = &gateway.inner.options;
        let metrics = options.metrics.clone();
        let on = options.tracing;
        let span = if on {
            request_span(method, name, context)
        } else {
            tracing::Span::none()
        };
        let in_catalog = metrics.is_some()
            && method == "tools/call"
            && name.is_some_and(|n| gateway.inner.host.catalog().get(n).is_some());
        Traced {
            span,
            on,
            started: Instant::now(),
            method,
            name: metrics.as_ref().and(name.map(str::to_owned)),
            in_catalog,
            error: Some("_OTHER"),
            metrics,
        }
    }

    /// Runs `work` (the request's call into the host) in the request's
    /// span, passing the span's context on to the backends. Boxed: the
    /// handler's future stays the size it was (a call's future is large).
    pub(crate) fn wrap<'a, F>(
        &self,
        work: F,
    ) -> Pin<Box<dyn Future<Output = F::Output> + Send + 'a>>
    where
        F: Future + Send + 'a,
    {
        if !self.on {
            return Box::pin(work);
        }
        let work = work.instrument(self.span.clone());
        #[cfg(feature = "otel")]
        let work = core_agent_mcp_transport::with_request_meta(
            Arc::new(crate::telemetry::otel::CurrentSpan),
            work,
        );
        Box::pin(work)
    }

    /// How the request ended.
    pub(crate) fn finish<T: Answer>(&mut self, result: &Result<T, ErrorData>) {
        self.error = match result {
            Ok(answer) if answer.failed() => Some("tool_error"),
            Ok(_) => None,
            Err(e) => Some(error_code(e)),
        };
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if let Some(error) = self.error
            && self.on
        {
            self.span.record("error.type", error);
            self.span.record("otel.status_code", "ERROR");
        }
        if let Some(metrics) = &self.metrics {
            metrics.served(
                self.method,
                self.name.as_deref(),
                self.in_catalog,
                self.started.elapsed(),
                self.error,
            );
        }
    }
}

/// A request's answer: whether it says it failed.
pub(crate) trait Answer {
    fn failed(&self) -> bool;
}

impl Answer for CallToolResponse {
    fn failed(&self) -> bool {
        matches!(self, CallToolResponse::Complete(r) if r.is_error == Some(true))
    }
}

impl Answer for ReadResourceResponse {
    fn failed(&self) -> bool {
        false
    }
}

impl Answer for GetPromptResponse {
    fn failed(&self) -> bool {
        false
    }
}

/// The `error.type` of a JSON-RPC error: its code.
fn error_code(e: &ErrorData) -> &'static str {
    match e.code.0 {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32002 => "-32002",
        -32042 => "-32042",
        _ => "_OTHER",
    }
}

/// The span of one request, with the MCP semantic conventions' attributes,
/// child of the client's `traceparent` when its `_meta` has one (a root
/// span otherwise: never a child of the connection's own spans).
fn request_span(
    method: &'static str,
    name: Option<&str>,
    context: &RequestContext<RoleServer>,
) -> tracing::Span {
    let session = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok());
    let version = context.protocol_version();
    let span = tracing::info_span!(
        parent: None,
        "mcp.request",
        otel.name = %match name {
            Some(name) => format!("{method} {name}"),
            None => method.to_owned(),
        },
        otel.kind = "server",
        mcp.method.name = method,
        mcp.session.id = session,
        jsonrpc.request.id = %context.id,
        mcp.protocol.version = version.as_ref().map(|v| v.as_str()),
        gen_ai.tool.name = (method == "tools/call").then_some(name).flatten(),
        gen_ai.prompt.name = (method == "prompts/get").then_some(name).flatten(),
        gen_ai.operation.name = (method == "tools/call").then_some("execute_tool"),
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    #[cfg(feature = "otel")]
    if let Some(parent) = context
        .meta
        .0
        .get_traceparent()
        .and_then(TraceParent::parse)
    {
        crate::telemetry::otel::set_parent(&span, parent, context.meta.0.get_tracestate());
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    #[test]
    fn a_tool_error_and_json_rpc_codes_are_error_types() {
        assert!(CallToolResponse::Complete(CallToolResult::error(vec![])).failed());
        assert!(!CallToolResponse::Complete(CallToolResult::success(vec![])).failed());
        assert_eq!(error_code(&ErrorData::invalid_params("x", None)), "-32602");
        assert_eq!(
            error_code(&ErrorData::new(rmcp::model::ErrorCode(-1), "x", None)),
            "_OTHER"
        );
    }
}
