//! OpenTelemetry over OTLP (HTTP/protobuf): the exporters the standard
//! `OTEL_EXPORTER_OTLP_*` variables configure, the `tracing` layer that
//! turns the gateway's and the host's spans into OpenTelemetry spans, the
//! client's trace context as a request span's parent, and the current
//! span's context passed on in a backend request's `_meta`.

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _, ObservableGauge};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};

use crate::telemetry::Gauges;
use crate::telemetry::TraceParent;
use crate::telemetry::metrics::Metrics;

/// The variables that turn export on: one endpoint for every signal, or one
/// per signal.
const ENDPOINTS: [&str; 3] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

/// The crates whose spans are exported: the gateway's request spans and
/// the host's gate, backend and digest spans, nothing else's.
const TARGETS: [&str; 2] = ["core_agent_gateway", "core_agent_host"];

/// OpenTelemetry export over OTLP (HTTP/protobuf), configured by the
/// standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` and
/// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`), `OTEL_EXPORTER_OTLP_HEADERS`
/// (sent, never logged), `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`
/// (default `core-agent`), `OTEL_RESOURCE_ATTRIBUTES` and
/// `OTEL_METRIC_EXPORT_INTERVAL`.
///
/// Spans and metrics are exported by the SDK's own threads in batches: a
/// call never waits on the collector, and when the queue is full (a
/// collector that is slow or away) spans are dropped, not the call
/// delayed. [`Otel::shutdown`] flushes what is queued.
pub struct Otel {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otel")
            .field("traces", &self.tracer.is_some())
            .field("metrics", &self.meter.is_some())
            .finish()
    }
}

/// Why [`Otel::from_env`] could not set up an exporter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The OTLP exporter of `signal` (`traces`, `metrics`) refused its
    /// configuration (an endpoint that is not a URL, a malformed header).
    #[error(
        "cannot set up the OTLP {signal} exporter: {reason}; check the OTEL_EXPORTER_OTLP_* variables"
    )]
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// What the exporter said, with the headers' values left out.
        reason: String,
    },
}

impl Otel {
    /// The exporters the `OTEL_EXPORTER_OTLP_*` variables of this process
    /// configure: `None` when no endpoint variable is set (nothing is
    /// exported, and nothing costs anything). Traces are exported when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` or `…_TRACES_ENDPOINT` is set, metrics
    /// when `OTEL_EXPORTER_OTLP_ENDPOINT` or `…_METRICS_ENDPOINT` is.
    /// `OTEL_SDK_DISABLED=true` turns both off.
    ///
    /// Call it outside an async runtime's worker (the exporters' blocking
    /// HTTP clients are made here).
    ///
    /// # Errors
    /// [`OtelError::Exporter`] when an exporter refuses its configuration.
    pub fn from_env() -> Result<Option<Otel>, OtelError> {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
            || !ENDPOINTS.iter().any(|v| set(v))
        {
            return Ok(None);
        }
        let traces = set(ENDPOINTS[0]) || set(ENDPOINTS[1]);
        let metrics = set(ENDPOINTS[0]) || set(ENDPOINTS[2]);
        Otel::build(None, traces, metrics).map(Some)
    }

    /// Traces and metrics to the collector at `endpoint` (its base URL:
    /// `/v1/traces` and `/v1/metrics` are added), whatever the endpoint
    /// variables say; the other `OTEL_*` variables still apply.
    ///
    /// # Errors
    /// [`OtelError::Exporter`] when an exporter refuses its configuration.
    pub fn to_endpoint(endpoint: &str) -> Result<Otel, OtelError> {
        Otel::build(Some(endpoint.trim_end_matches('/')), true, true)
    }

    fn build(endpoint: Option<&str>, traces: bool, metrics: bool) -> Result<Otel, OtelError> {
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none_or(|v| v.is_empty()) {
            resource = resource.with_service_name("core-agent");
        }
        let resource = resource.build();
        let tracer = if traces {
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary);
            if let Some(base) = endpoint {
                exporter = exporter.with_endpoint(format!("{base}/v1/traces"));
            }
            let exporter = exporter.build().map_err(|e| exporter_error("traces", &e))?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource.clone())
                    .build(),
            )
        } else {
            None
        };
        let meter = if metrics {
            let mut exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary);
            if let Some(base) = endpoint {
                exporter = exporter.with_endpoint(format!("{base}/v1/metrics"));
            }
            let exporter = exporter
                .build()
                .map_err(|e| exporter_error("metrics", &e))?;
            Some(
                SdkMeterProvider::builder()
                    .with_reader(PeriodicReader::builder(exporter).build())
                    .with_resource(resource)
                    .build(),
            )
        } else {
            None
        };
        Ok(Otel { tracer, meter })
    }

    /// Whether spans are exported.
    pub fn traces(&self) -> bool {
        self.tracer.is_some()
    }

    /// The `tracing` layer that exports the gateway's and the host's spans
    /// (at `info` and above, whatever the rest of the subscriber logs);
    /// `None` when traces are not exported. Add it to the process's
    /// subscriber, and give the gateway
    /// [`GatewayOptions::with_tracing`](crate::GatewayOptions::with_tracing).
    pub fn layer<S>(&self) -> Option<Box<dyn Layer<S> + Send + Sync>>
    where
        S: tracing::Subscriber
            + for<'span> tracing_subscriber::registry::LookupSpan<'span>
            + Send
            + Sync,
    {
        let tracer = self.tracer.as_ref()?.tracer("core-agent");
        let targets = TARGETS.iter().fold(Targets::new(), |t, target| {
            t.with_target(*target, LevelFilter::INFO)
        });
        Some(Box::new(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_tracked_inactivity(false)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_filter(targets),
        ))
    }

    /// Exports `metrics` over OTLP too, when metrics are exported.
    pub fn export_metrics(&self, metrics: &std::sync::Arc<Metrics>) {
        if let Some(meter) = &self.meter {
            metrics.export_to(Instruments::new(meter, std::sync::Arc::downgrade(metrics)));
        }
    }

    /// Exports what is still queued, then stops the exporters; waits at
    /// most about `limit` for a collector that does not answer. Blocks:
    /// call it outside an async runtime's worker (after the runtime's
    /// `block_on` returned, or in `spawn_blocking`).
    pub fn shutdown(&self, limit: Duration) {
        let (tracer, meter) = (self.tracer.clone(), self.meter.clone());
        let done = std::thread::spawn(move || {
            if let Some(tracer) = tracer {
                let _ = tracer.force_flush();
                let _ = tracer.shutdown();
            }
            if let Some(meter) = meter {
                let _ = meter.force_flush();
                let _ = meter.shutdown();
            }
        });
        let deadline = std::time::Instant::now() + limit;
        while !done.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The exporter's error, without any value of the headers variables (they
/// may hold API keys).
fn exporter_error(signal: &'static str, e: &dyn std::fmt::Display) -> OtelError {
    let mut reason = e.to_string();
    for name in [
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    ] {
        if let Ok(headers) = std::env::var(name) {
            for part in headers.split([',', '=']).map(str::trim) {
                if part.len() >= 3 {
                    reason = reason.replace(part, "***");
                }
            }
        }
    }
    OtelError::Exporter { signal, reason }
}

/// Makes the client's `traceparent` (and `tracestate`) the parent of `span`.
pub(crate) fn set_parent(span: &tracing::Span, parent: TraceParent, state: Option<&str>) {
    let state = state
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.span_id),
        TraceFlags::new(parent.flags),
        true,
        state,
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(context));
}

/// Passes the current span's context on in a backend request's `_meta`.
pub(crate) struct CurrentSpan;

impl core_agent_mcp_transport::RequestMeta for CurrentSpan {
    fn add_to(&self, meta: &mut core_agent_mcp_transport::model::JsonObject) {
        let context = tracing::Span::current().context();
        let span = context.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return;
        }
        let parent = TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        };
        meta.insert("traceparent".into(), parent.to_string().into());
        let state = sc.trace_state().header();
        if !state.is_empty() {
            meta.insert("tracestate".into(), state.into());
        }
    }
}

/// What a gauge reads: values, each with the server it is about (if any).
type Reading = fn(&Gauges) -> Vec<(u64, Option<String>)>;

/// The metrics' OpenTelemetry instruments.
pub(crate) struct Instruments {
    /// The gauges' callbacks live in the meter provider; these keep them named.
    _gauges: [ObservableGauge<u64>; 3],
    served: Histogram<f64>,
    asked: Histogram<f64>,
    gate: Counter<u64>,
    digested: Counter<u64>,
    saved: Counter<u64>,
}

impl Instruments {
    fn new(provider: &SdkMeterProvider, metrics: std::sync::Weak<Metrics>) -> Instruments {
        let meter = provider.meter("core-agent");
        let gauge = |name: &'static str, description: &'static str, read: Reading| {
            let metrics = metrics.clone();
            meter
                .u64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |observer| {
                    let Some(gauges) = metrics.upgrade().and_then(|m| m.gauges()) else {
                        return;
                    };
                    for (value, server) in read(&gauges) {
                        match server {
                            Some(server) => observer
                                .observe(value, &[KeyValue::new("core_agent.server", server)]),
                            None => observer.observe(value, &[]),
                        }
                    }
                })
                .build()
        };
        let gauges = [
            gauge(
                "core_agent.sessions.open",
                "MCP client sessions open now.",
                |g| vec![(u64::try_from(g.sessions_open).unwrap_or(u64::MAX), None)],
            ),
            gauge(
                "core_agent.calls.in_flight",
                "Calls running now, over every session.",
                |g| vec![(u64::try_from(g.calls_in_flight).unwrap_or(u64::MAX), None)],
            ),
            gauge(
                "core_agent.backend.up",
                "Whether each configured MCP server is up (1) or not (0).",
                |g| {
                    g.backends
                        .iter()
                        .map(|(server, up)| (u64::from(*up), Some(server.clone())))
                        .collect()
                },
            ),
        ];
        let bounds = vec![
            0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
        ];
        Instruments {
            _gauges: gauges,
            served: meter
                .f64_histogram("mcp.server.operation.duration")
                .with_unit("s")
                .with_description("Duration of the MCP requests the gateway served.")
                .with_boundaries(bounds.clone())
                .build(),
            asked: meter
                .f64_histogram("mcp.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of the MCP requests the gateway sent to its backends.")
                .with_boundaries(bounds)
                .build(),
            gate: meter
                .u64_counter("core_agent.gate.decisions")
                .with_description("Calls the gateway decided, by decision.")
                .build(),
            digested: meter
                .u64_counter("core_agent.digest.results")
                .with_description("Results the digest replaced, by method.")
                .build(),
            saved: meter
                .u64_counter("core_agent.digest.saved")
                .with_unit("By")
                .with_description("Bytes the digest kept out of the callers' context, by method.")
                .build(),
        }
    }

    pub(crate) fn served(
        &self,
        method: &'static str,
        name: &str,
        seconds: f64,
        error: Option<&'static str>,
    ) {
        let mut attrs = vec![KeyValue::new("mcp.method.name", method)];
        if !name.is_empty() {
            attrs.push(KeyValue::new(name_key(method), name.to_owned()));
        }
        if let Some(e) = error {
            attrs.push(KeyValue::new("error.type", e));
        }
        self.served.record(seconds, &attrs);
    }

    pub(crate) fn observed(
        &self,
        method: &'static str,
        asked: Option<(&str, Duration)>,
        name: &str,
        error: Option<&'static str>,
        decision: Option<&'static str>,
        digested: Option<&core_agent_host::DigestedResult>,
    ) {
        if let Some((server, took)) = asked {
            let mut attrs = vec![
                KeyValue::new("mcp.method.name", method),
                KeyValue::new("core_agent.server", server.to_owned()),
            ];
            if !name.is_empty() {
                attrs.push(KeyValue::new(name_key(method), name.to_owned()));
            }
            if let Some(e) = error {
                attrs.push(KeyValue::new("error.type", e));
            }
            self.asked.record(took.as_secs_f64(), &attrs);
        }
        if let Some(decision) = decision {
            let mut attrs = vec![KeyValue::new("decision", decision)];
            if !name.is_empty() {
                attrs.push(KeyValue::new("gen_ai.tool.name", name.to_owned()));
            }
            self.gate.add(1, &attrs);
        }
        if let Some(d) = digested {
            let attrs = [KeyValue::new("method", d.method.clone())];
            self.digested.add(1, &attrs);
            self.saved
                .add(d.raw_bytes.saturating_sub(d.digest_bytes), &attrs);
        }
    }
}

fn name_key(method: &str) -> &'static str {
    if method == "prompts/get" {
        "gen_ai.prompt.name"
    } else {
        "gen_ai.tool.name"
    }
}
