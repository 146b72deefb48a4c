//! What a team's own tools see of the gateway: metrics (Prometheus text,
//! and OTLP under the `otel` feature), a span per request whose parent is
//! the client's W3C trace context and whose context goes on to the
//! backends, and the liveness and readiness probes.

mod metrics;
#[cfg(feature = "otel")]
pub(crate) mod otel;
mod probes;
mod traced;
mod traceparent;

pub(crate) use metrics::Gauges;
pub use metrics::Metrics;
#[cfg(feature = "otel")]
pub use otel::{Otel, OtelError};
pub use probes::{DownServer, Readiness};
pub(crate) use traced::Traced;
pub use traceparent::TraceParent;

use std::sync::Arc;

use core_agent_host::{CallRecord, Observer};

/// Tells every observer of the gateway's sessions about each call (the
/// metrics, an audit trail).
pub(crate) struct Observers(pub(crate) Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn observe(&self, call: &CallRecord<'_>) {
        for observer in &self.0 {
            observer.observe(call);
        }
    }

    fn wants_payloads(&self) -> bool {
        self.0.iter().any(|o| o.wants_payloads())
    }
}
