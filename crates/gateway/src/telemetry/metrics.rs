//! The gateway's metrics: what it serves and what it asks its backends,
//! kept in memory and rendered in the Prometheus text format (and recorded
//! as OpenTelemetry instruments too, under the `otel` feature).
//!
//! Names and attributes follow the OpenTelemetry semantic conventions for
//! MCP (`mcp.server.operation.duration`, `mcp.client.operation.duration`,
//! `mcp.method.name`, `gen_ai.tool.name`, `error.type`); in the Prometheus
//! text, dots become underscores and durations get their `_seconds` unit.
//! Labels stay bounded: a tool or prompt name is a label only once it is
//! known (in the catalog, or resolved by the host); any other name a client
//! sends is counted without one.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use core_agent_host::{CallRecord, Kind, Observer, Outcome};

/// The histogram buckets of both operation durations, in seconds (those the
/// MCP semantic conventions advise).
const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The gateway's metrics. Give one to
/// [`GatewayOptions::with_metrics`](crate::GatewayOptions::with_metrics);
/// the gateway then records each
/// request it serves and, as an [`Observer`] of its sessions, each call it
/// makes to a backend, each gate decision and each digest.
/// [`Gateway::metrics_text`](crate::Gateway::metrics_text) renders them.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<Series>,
    /// Tool and prompt names the host resolved: labels they may be.
    known: RwLock<HashSet<String>>,
    /// Reads the gauges from the gateway that records here.
    source: std::sync::OnceLock<GaugeSource>,
    #[cfg(feature = "otel")]
    otel: std::sync::OnceLock<crate::telemetry::otel::Instruments>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Which operation a duration is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Op {
    method: &'static str,
    error: Option<&'static str>,
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Observations at or under each bucket's bound (not cumulative).
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct Digest {
    results: u64,
    raw_bytes: u64,
    saved_bytes: u64,
}

#[derive(Debug, Default)]
struct Series {
    /// `mcp.server.operation.duration`, by operation, then by tool or
    /// prompt name ("" for none).
    served: HashMap<Op, HashMap<String, Histogram>>,
    /// `mcp.client.operation.duration`, by operation, then by server and
    /// tool or prompt name.
    asked: HashMap<Op, HashMap<(String, String), Histogram>>,
    /// Gate decisions, by verdict and tool name.
    gate: HashMap<&'static str, HashMap<String, u64>>,
    /// Digested results, by method.
    digest: HashMap<String, Digest>,
    /// Calls refused by a caller's rate limits, by limit.
    rate_limited: HashMap<&'static str, u64>,
}

/// Reads the gauges (`None` once the gateway is gone).
pub(crate) type GaugeSource = Box<dyn Fn() -> Option<Gauges> + Send + Sync>;

/// What the metrics read from the gateway when rendered.
pub(crate) struct Gauges {
    pub(crate) sessions_open: usize,
    pub(crate) calls_in_flight: usize,
    /// Every configured server and whether it is up.
    pub(crate) backends: Vec<(String, bool)>,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Where the gauges are read (the first gateway given these metrics).
    pub(crate) fn read_gauges_from(&self, source: GaugeSource) {
        let _ = self.source.set(source);
    }

    /// The gauges now, when a gateway records here.
    #[cfg(feature = "otel")]
    pub(crate) fn gauges(&self) -> Option<Gauges> {
        self.source.get().and_then(|read| read())
    }

    /// The label a tool or prompt name gets: itself once known, else none.
    fn label<'a>(&self, name: &'a str, known_elsewhere: bool) -> &'a str {
        if known_elsewhere || self.known.read().is_ok_and(|k| k.contains(name)) {
            name
        } else {
            ""
        }
    }

    /// Records a request the gateway served: `method`, the tool or prompt
    /// it named (a label only when `in_catalog` or resolved before), how
    /// long it took, and its `error.type` when it failed.
    pub(crate) fn served(
        &self,
        method: &'static str,
        name: Option<&str>,
        in_catalog: bool,
        took: Duration,
        error: Option<&'static str>,
    ) {
        let name = name.map_or("", |n| self.label(n, in_catalog));
        let seconds = took.as_secs_f64();
        if let Ok(mut series) = self.series.lock() {
            let by_name = series.served.entry(Op { method, error }).or_default();
            match by_name.get_mut(name) {
                Some(h) => h.observe(seconds),
                None => by_name.entry(name.to_owned()).or_default().observe(seconds),
            }
        }
        #[cfg(feature = "otel")]
        if let Some(otel) = self.otel.get() {
            otel.served(method, name, seconds, error);
        }
    }

    /// Counts a call refused by its caller's rate limits (`limit`: which).
    pub(crate) fn rate_limited(&self, limit: &'static str) {
        if let Ok(mut series) = self.series.lock() {
            *series.rate_limited.entry(limit).or_default() += 1;
        }
    }

    /// Renders every series in the Prometheus text exposition format
    /// (version 0.0.4), with `gauges` read from the gateway.
    pub(crate) fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(4096);
        let Ok(series) = self.series.lock() else {
            return out;
        };
        header(
            &mut out,
            "mcp_server_operation_duration_seconds",
            "histogram",
            "Duration of the MCP requests the gateway served.",
        );
        let mut served: Vec<_> = series
            .served
            .iter()
            .flat_map(|(op, by)| by.iter().map(move |(name, h)| (op, name, h)))
            .collect();
        served.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        for (op, name, h) in served {
            let mut labels = vec![("mcp_method_name", op.method)];
            if !name.is_empty() {
                labels.push((name_label(op.method), name));
            }
            if let Some(e) = op.error {
                labels.push(("error_type", e));
            }
            histogram(
                &mut out,
                "mcp_server_operation_duration_seconds",
                &labels,
                h,
            );
        }
        header(
            &mut out,
            "mcp_client_operation_duration_seconds",
            "histogram",
            "Duration of the MCP requests the gateway sent to its backends.",
        );
        let mut asked: Vec<_> = series
            .asked
            .iter()
            .flat_map(|(op, by)| by.iter().map(move |(key, h)| (op, key, h)))
            .collect();
        asked.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        for (op, (server, name), h) in asked {
            let mut labels = vec![
                ("mcp_method_name", op.method),
                ("core_agent_server", server),
            ];
            if !name.is_empty() {
                labels.push((name_label(op.method), name));
            }
            if let Some(e) = op.error {
                labels.push(("error_type", e));
            }
            histogram(
                &mut out,
                "mcp_client_operation_duration_seconds",
                &labels,
                h,
            );
        }
        header(
            &mut out,
            "core_agent_gate_decisions_total",
            "counter",
            "Calls the gateway decided, by decision (allow, ask, deny, restricted, withheld, unknown).",
        );
        let mut gate: Vec<_> = series
            .gate
            .iter()
            .flat_map(|(d, by)| by.iter().map(move |(name, n)| (*d, name, *n)))
            .collect();
        gate.sort();
        for (decision, name, n) in gate {
            let mut labels = vec![("decision", decision)];
            if !name.is_empty() {
                labels.push(("gen_ai_tool_name", name));
            }
            sample(&mut out, "core_agent_gate_decisions_total", &labels, n);
        }
        let mut digest: Vec<_> = series.digest.iter().collect();
        digest.sort_by(|a, b| a.0.cmp(b.0));
        for (metric, help, pick) in [
            (
                "core_agent_digest_results_total",
                "Results the digest replaced, by method.",
                (|d: &Digest| d.results) as fn(&Digest) -> u64,
            ),
            (
                "core_agent_digest_raw_bytes_total",
                "Bytes of the raw results the digest replaced, by method.",
                |d: &Digest| d.raw_bytes,
            ),
            (
                "core_agent_digest_saved_bytes_total",
                "Bytes the digest kept out of the callers' context, by method.",
                |d: &Digest| d.saved_bytes,
            ),
        ] {
            header(&mut out, metric, "counter", help);
            for (method, d) in &digest {
                sample(&mut out, metric, &[("method", method.as_str())], pick(d));
            }
        }
        header(
            &mut out,
            "core_agent_rate_limited_total",
            "counter",
            "Tool calls refused by their caller's rate limits, by limit (calls_per_minute, result_bytes_per_minute, concurrent_calls).",
        );
        let mut limited: Vec<_> = series.rate_limited.iter().collect();
        limited.sort();
        for (limit, n) in limited {
            sample(
                &mut out,
                "core_agent_rate_limited_total",
                &[("limit", limit)],
                n,
            );
        }
        drop(series);
        header(
            &mut out,
            "core_agent_sessions_open",
            "gauge",
            "MCP client sessions open now.",
        );
        sample(
            &mut out,
            "core_agent_sessions_open",
            &[],
            gauges.sessions_open,
        );
        header(
            &mut out,
            "core_agent_calls_in_flight",
            "gauge",
            "Calls running now, over every session.",
        );
        sample(
            &mut out,
            "core_agent_calls_in_flight",
            &[],
            gauges.calls_in_flight,
        );
        header(
            &mut out,
            "core_agent_backend_up",
            "gauge",
            "Whether each configured MCP server is up (1) or not (0).",
        );
        for (server, up) in &gauges.backends {
            sample(
                &mut out,
                "core_agent_backend_up",
                &[("core_agent_server", server)],
                u8::from(*up),
            );
        }
        out
    }

    #[cfg(feature = "otel")]
    pub(crate) fn export_to(&self, instruments: crate::telemetry::otel::Instruments) {
        let _ = self.otel.set(instruments);
    }
}

impl Observer for Metrics {
    /// Counts and durations only: the arguments are not copied for it, nor
    /// the results measured.
    fn wants_payloads(&self) -> bool {
        false
    }

    fn observe(&self, call: &CallRecord<'_>) {
        let resolved = !matches!(call.verdict.as_str(), "unknown");
        // A name the host resolved is a catalog's (or a host tool's): bounded.
        let name = match call.kind {
            Kind::Tool | Kind::Prompt if resolved => {
                let known = self.known.read().is_ok_and(|k| k.contains(call.name));
                if !known && let Ok(mut k) = self.known.write() {
                    k.insert(call.name.to_owned());
                }
                call.name
            }
            _ => "",
        };
        let method = match call.kind {
            Kind::Tool => "tools/call",
            Kind::Resource => "resources/read",
            Kind::Prompt => "prompts/get",
            _ => "",
        };
        let error = match call.outcome {
            Outcome::Ok => None,
            Outcome::ToolError => Some("tool_error"),
            _ => Some("_OTHER"),
        };
        // The backend request: its own time for a tool, the whole call for
        // a resource or prompt (which has no gate to wait on).
        let backend = match call.kind {
            Kind::Tool => call.backend,
            _ => call.server.map(|_| call.duration),
        };
        let gated = call.kind == Kind::Tool;
        let Ok(mut series) = self.series.lock() else {
            return;
        };
        if let (Some(server), Some(took)) = (call.server, backend) {
            let by = series.asked.entry(Op { method, error }).or_default();
            let key = (server.to_owned(), name.to_owned());
            by.entry(key).or_default().observe(took.as_secs_f64());
        }
        if gated {
            *series
                .gate
                .entry(call.verdict.as_str())
                .or_default()
                .entry(name.to_owned())
                .or_default() += 1;
        }
        if let Some(d) = call.digested {
            let entry = series.digest.entry(d.method.clone()).or_default();
            entry.results += 1;
            entry.raw_bytes += d.raw_bytes;
            entry.saved_bytes += d.raw_bytes.saturating_sub(d.digest_bytes);
        }
        drop(series);
        #[cfg(feature = "otel")]
        if let Some(otel) = self.otel.get() {
            otel.observed(
                method,
                call.server.zip(backend),
                name,
                error,
                gated.then(|| call.verdict.as_str()),
                call.digested,
            );
        }
    }
}

/// The label of the name a method's request carries.
fn name_label(method: &str) -> &'static str {
    if method == "prompts/get" {
        "gen_ai_prompt_name"
    } else {
        "gen_ai_tool_name"
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    write_labels(out, labels, None);
    let _ = writeln!(out, " {value}");
}

fn histogram(out: &mut String, name: &str, labels: &[(&str, &str)], h: &Histogram) {
    let mut cumulative = 0;
    for (bound, n) in BUCKETS.iter().zip(h.buckets) {
        cumulative += n;
        let _ = write!(out, "{name}_bucket");
        write_labels(out, labels, Some(&bound.to_string()));
        let _ = writeln!(out, " {cumulative}");
    }
    let _ = write!(out, "{name}_bucket");
    write_labels(out, labels, Some("+Inf"));
    let _ = writeln!(out, " {}", h.count);
    let _ = write!(out, "{name}_sum");
    write_labels(out, labels, None);
    let _ = writeln!(out, " {}", h.sum);
    let _ = write!(out, "{name}_count");
    write_labels(out, labels, None);
    let _ = writeln!(out, " {}", h.count);
}

fn write_labels(out: &mut String, labels: &[(&str, &str)], le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    for (k, v) in labels.iter().copied().chain(le.map(|le| ("le", le))) {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn gauges() -> Gauges {
        Gauges {
            sessions_open: 2,
            calls_in_flight: 0,
            backends: vec![("demo".into(), true), ("down".into(), false)],
        }
    }

    #[test]
    fn the_exposition_is_prometheus_text_with_escaped_bounded_labels() {
        let m = Metrics::new();
        m.served(
            "tools/call",
            Some("demo_divide"),
            true,
            Duration::from_millis(15),
            None,
        );
        m.served(
            "tools/call",
            Some("demo_divide"),
            true,
            Duration::from_millis(700),
            Some("tool_error"),
        );
        // Not in the catalog, never resolved: no label of its own.
        m.served(
            "tools/call",
            Some("made_up_1"),
            false,
            Duration::from_millis(1),
            None,
        );
        m.served(
            "tools/call",
            Some("made_up_2"),
            false,
            Duration::from_millis(1),
            None,
        );
        m.served("initialize", None, false, Duration::from_millis(3), None);
        m.rate_limited("calls_per_minute");
        m.rate_limited("calls_per_minute");
        m.rate_limited("concurrent_calls");
        let text = m.render(&gauges());
        assert!(!text.contains("made_up"), "{text}");
        expect![[r##"
            # HELP mcp_server_operation_duration_seconds Duration of the MCP requests the gateway served.
            # TYPE mcp_server_operation_duration_seconds histogram
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.01"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.02"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.05"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.1"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.2"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="0.5"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="1"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="2"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="5"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="10"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="30"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="60"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="120"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="300"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="initialize",le="+Inf"} 1
            mcp_server_operation_duration_seconds_sum{mcp_method_name="initialize"} 0.003
            mcp_server_operation_duration_seconds_count{mcp_method_name="initialize"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.01"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.02"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.05"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.1"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.2"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="0.5"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="1"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="2"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="5"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="10"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="30"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="60"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="120"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="300"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="+Inf"} 2
            mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call"} 0.002
            mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"} 2
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.01"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.02"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.05"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.1"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.2"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="0.5"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="1"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="2"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="5"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="10"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="30"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="60"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="120"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="300"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",le="+Inf"} 1
            mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide"} 0.015
            mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.01"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.02"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.05"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.1"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.2"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="0.5"} 0
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="1"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="2"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="5"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="10"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="30"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="60"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="120"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="300"} 1
            mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error",le="+Inf"} 1
            mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error"} 0.7
            mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="demo_divide",error_type="tool_error"} 1
            # HELP mcp_client_operation_duration_seconds Duration of the MCP requests the gateway sent to its backends.
            # TYPE mcp_client_operation_duration_seconds histogram
            # HELP core_agent_gate_decisions_total Calls the gateway decided, by decision (allow, ask, deny, restricted, withheld, unknown).
            # TYPE core_agent_gate_decisions_total counter
            # HELP core_agent_digest_results_total Results the digest replaced, by method.
            # TYPE core_agent_digest_results_total counter
            # HELP core_agent_digest_raw_bytes_total Bytes of the raw results the digest replaced, by method.
            # TYPE core_agent_digest_raw_bytes_total counter
            # HELP core_agent_digest_saved_bytes_total Bytes the digest kept out of the callers' context, by method.
            # TYPE core_agent_digest_saved_bytes_total counter
            # HELP core_agent_rate_limited_total Tool calls refused by their caller's rate limits, by limit (calls_per_minute, result_bytes_per_minute, concurrent_calls).
            # TYPE core_agent_rate_limited_total counter
            core_agent_rate_limited_total{limit="calls_per_minute"} 2
            core_agent_rate_limited_total{limit="concurrent_calls"} 1
            # HELP core_agent_sessions_open MCP client sessions open now.
            # TYPE core_agent_sessions_open gauge
            core_agent_sessions_open 2
            # HELP core_agent_calls_in_flight Calls running now, over every session.
            # TYPE core_agent_calls_in_flight gauge
            core_agent_calls_in_flight 0
            # HELP core_agent_backend_up Whether each configured MCP server is up (1) or not (0).
            # TYPE core_agent_backend_up gauge
            core_agent_backend_up{core_agent_server="demo"} 1
            core_agent_backend_up{core_agent_server="down"} 0
        "##]].assert_eq(&text);
        assert!(text.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",gen_ai_tool_name=\"demo_divide\",error_type=\"tool_error\"} 1\n"
        ));
        assert!(text.contains("core_agent_sessions_open 2\n"));
        assert!(text.contains("core_agent_backend_up{core_agent_server=\"demo\"} 1\n"));
        assert!(text.contains("core_agent_backend_up{core_agent_server=\"down\"} 0\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        sample(&mut out, "m", &[("a", "x\"y\\z\nw")], 1);
        assert_eq!(out, "m{a=\"x\\\"y\\\\z\\nw\"} 1\n");
    }
}
