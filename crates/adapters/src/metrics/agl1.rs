//! Metrics of agent-lightning 1.x's gateway and API (all prefixed
//! `lightning_store_`):
//! * `gateway_requests_total{mode,status}`: proxied calls by mode and the
//!   HTTP status the agent got (429 while paused);
//! * `gateway_upstream_duration_seconds{result}` and
//!   `gateway_upstream_calls_total{result}`: each call to a model server
//!   (`ok`, `error` for a 4xx/5xx answer, `timeout`, `transport`);
//! * `gateway_upstream_retries_total{reason}`: retried calls by `status`,
//!   `timeout` or `transport`;
//! * `gateway_in_flight` and `gateway_paused`: this server's calls in
//!   flight, and 1 while its view of the gateway is paused;
//! * `agl1_events_total{type}`: 1.x events recorded (`model_request`,
//!   `reward`, `other`);
//! * `agl1_transitions_total{state}`: 1.x rollouts moved to a state by PATCH;
//! * `agl1_rollout_reads_total{source}`: 1.x rollout GETs answered from the
//!   detail cache (`cache`, memory and SQLite) or by a read of the store
//!   (`store`).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::histogram::latency_histogram;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    mode: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    r#type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

/// The 1.x metric families.
#[derive(Debug, Clone)]
pub struct Agl1Metrics {
    requests: Family<RequestLabels, Counter>,
    upstream_calls: Family<ResultLabels, Counter>,
    upstream_durations: Family<ResultLabels, Histogram>,
    retries: Family<ReasonLabels, Counter>,
    in_flight: Gauge,
    paused: Gauge,
    events: Family<TypeLabels, Counter>,
    transitions: Family<StateLabels, Counter>,
    rollout_reads: Family<SourceLabels, Counter>,
}

impl Agl1Metrics {
    /// Creates the families and registers them.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            upstream_calls: Family::default(),
            upstream_durations: Family::new_with_constructor(latency_histogram),
            retries: Family::default(),
            in_flight: Gauge::default(),
            paused: Gauge::default(),
            events: Family::default(),
            transitions: Family::default(),
            rollout_reads: Family::default(),
        };
        registry.register(
            "gateway_requests",
            "Proxied model calls by mode and the HTTP status returned to the agent",
            metrics.requests.clone(),
        );
        registry.register(
            "gateway_upstream_calls",
            "Calls to model servers by result: ok, error, timeout or transport",
            metrics.upstream_calls.clone(),
        );
        registry.register(
            "gateway_upstream_duration_seconds",
            "Seconds each call to a model server took, by result",
            metrics.upstream_durations.clone(),
        );
        registry.register(
            "gateway_upstream_retries",
            "Retried model server calls by reason: status, timeout or transport",
            metrics.retries.clone(),
        );
        registry.register(
            "gateway_in_flight",
            "Proxied model calls in flight on this server",
            metrics.in_flight.clone(),
        );
        registry.register(
            "gateway_paused",
            "1 while this server applies a gateway pause, else 0",
            metrics.paused.clone(),
        );
        registry.register(
            "agl1_events",
            "agent-lightning 1.x events recorded, by type: model_request, reward or other",
            metrics.events.clone(),
        );
        registry.register(
            "agl1_transitions",
            "agent-lightning 1.x rollouts moved to a state by a PATCH",
            metrics.transitions.clone(),
        );
        registry.register(
            "agl1_rollout_reads",
            "agent-lightning 1.x rollout GETs by source: cache or store",
            metrics.rollout_reads.clone(),
        );
        metrics
    }

    /// Records a proxied call answered with `status`.
    pub fn gateway_request(&self, mode: &'static str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels { mode, status })
            .inc();
    }

    /// Records one call to a model server.
    pub fn upstream_call(&self, result: &'static str, elapsed: Duration) {
        let labels = ResultLabels { result };
        self.upstream_calls.get_or_create(&labels).inc();
        self.upstream_durations
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Records a retried model server call.
    pub fn upstream_retry(&self, reason: &'static str) {
        self.retries.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Moves the in-flight gauge.
    pub fn gateway_in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
    }

    /// Sets whether this server applies a pause.
    pub fn gateway_paused(&self, paused: bool) {
        self.paused.set(i64::from(paused));
    }

    /// Records a 1.x event of `event_type`.
    pub fn event(&self, event_type: &str) {
        let r#type = match event_type {
            "model_request" => "model_request",
            "reward" => "reward",
            _ => "other",
        };
        self.events.get_or_create(&TypeLabels { r#type }).inc();
    }

    /// Records a PATCH that moved a 1.x rollout to `state`.
    pub fn transition(&self, state: &'static str) {
        self.transitions.get_or_create(&StateLabels { state }).inc();
    }

    /// Records a 1.x rollout GET answered from the cache or the store.
    pub fn rollout_read(&self, cached: bool) {
        let source = if cached { "cache" } else { "store" };
        self.rollout_reads
            .get_or_create(&SourceLabels { source })
            .inc();
    }
}
