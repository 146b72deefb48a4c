//! The probes an orchestrator asks: live (the process answers) and ready
//! (the configuration is loaded and every server marked `required` is up).

use serde::Serialize;

use crate::Gateway;

/// Whether the gateway is ready to serve, as `GET /health/ready` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Readiness {
    /// Every required server is up.
    pub ready: bool,
    /// The servers marked `required`.
    pub required: Vec<String>,
    /// The required servers that are not up now (starting, failed,
    /// restarting or down), with their state.
    pub down: Vec<DownServer>,
}

/// A required server that is not up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DownServer {
    /// Its name.
    pub name: String,
    /// Its state: `starting`, `error`, `restarting`, `down`, `closed`, or
    /// `unknown` for a name no server of the host has.
    pub status: &'static str,
}

impl Gateway {
    /// Whether every server
    /// [`GatewayOptions::with_required_servers`](crate::GatewayOptions::with_required_servers)
    /// names is up.
    pub fn readiness(&self) -> Readiness {
        let host = &self.inner.host;
        let starting = host.starting();
        let required = self.inner.options.required.clone();
        let down: Vec<DownServer> = required
            .iter()
            .filter_map(|name| {
                let status = if starting.contains(&name.as_str()) {
                    "starting"
                } else {
                    match host.servers().find(|s| s.name() == name) {
                        Some(s) if s.status() == core_agent_mcp_transport::Status::Connected => {
                            return None;
                        }
                        Some(s) => s.status().as_str(),
                        None => "unknown",
                    }
                };
                Some(DownServer {
                    name: name.clone(),
                    status,
                })
            })
            .collect();
        Readiness {
            ready: down.is_empty(),
            required,
            down,
        }
    }

    /// The metrics in the Prometheus text format, when the gateway has
    /// metrics ([`GatewayOptions::with_metrics`](crate::GatewayOptions::with_metrics)).
    pub fn metrics_text(&self) -> Option<String> {
        let metrics = self.inner.options.metrics.as_ref()?;
        Some(metrics.render(&self.gauges()))
    }

    /// The gauges the metrics read: sessions open, calls in flight, and
    /// whether each configured server is up.
    pub(crate) fn gauges(&self) -> crate::telemetry::Gauges {
        let host = &self.inner.host;
        let starting = host.starting();
        crate::telemetry::Gauges {
            sessions_open: self.inner.registry.list().iter().filter(|s| s.live).count(),
            calls_in_flight: self.inner.registry.in_flight(),
            // Those still starting are not among the servers yet: down.
            backends: starting
                .iter()
                .map(|name| ((*name).to_owned(), false))
                .chain(
                    host.servers()
                        .filter(|s| !starting.contains(&s.name()))
                        .map(|s| {
                            let up = s.status() == core_agent_mcp_transport::Status::Connected;
                            (s.name().to_owned(), up)
                        }),
                )
                .collect(),
        }
    }
}
