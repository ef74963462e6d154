//! Prometheus metrics, served at `GET /metrics` on their own listener, as
//! OpenMetrics or the Prometheus text format by the scraper's `Accept`
//! header ([`exposition`]). Three sources feed them: the gRPC call layer
//! ([`crate::call_log`]) records every call, the engine reports its work
//! through [`Observer`], and the store's statistics are read on each scrape.
//!
//! Metric names (all prefixed `lightning_store_`):
//! * `grpc_requests_total{service,method,code}` and
//!   `grpc_request_duration_seconds{service,method,code}`: finished calls by
//!   gRPC status code, and their duration (for a stream, its lifetime);
//! * `grpc_in_flight{service,method}`: calls in progress (back to zero when
//!   clients abandon calls); for the streaming
//!   methods, the open streams;
//! * `http_requests_total{method,route,status}` and
//!   `http_request_duration_seconds{method,route,status}`: finished HTTP
//!   requests by route template (`unmatched` for unknown paths) and status;
//! * `worker_sessions`: open `WorkerSession` streams;
//! * `spans_ingested_total{result}`: spans received by `AddSpans`,
//!   `AddSpan` and OTLP, by `stored`, `duplicate` or `rejected`;
//! * `watchdog_verdicts_total{status}`: attempts expired as `timeout` or
//!   `unresponsive` (by the watchdog or a lost worker session);
//! * `backend_duration_seconds{phase,result}`: backend transaction `begin`
//!   and `commit` latency, `ok` or `error`;
//! * read from the store on each scrape: `rollouts{status}`,
//!   `attempts{status}`, `queue_depth`, `queue_oldest_age_seconds`, `spans`,
//!   `span_bytes`, `resources`, `workers`, the `retention_evicted_*_total`
//!   counters, `store_up` (1 when the store answered the scrape's query),
//!   `store_statistics_duration_seconds` and `uptime_seconds`;
//! * `auth_failures_total{reason}`: calls refused for a `missing` or
//!   `invalid` token, one `forbidden` by its roles, or a `worker` id the
//!   token is not bound to ([`crate::auth`]);
//! * `tls_handshake_failures_total` and `reloads_total{file,result}`: failed
//!   TLS handshakes, and reloads of the `tokens` and `tls` files;
//! * agent-lightning 1.x's gateway and API ([`agl1`]).

mod agl1;
mod exposition;
mod histogram;

pub use exposition::Exposition;

use std::future::Future;

use futures::future::BoxFuture;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use lightning_store_core::engine::Engine;
use lightning_store_core::model::{AttemptStatus, Counts, RolloutStatus, Statistics, Timestamp};
use lightning_store_core::namespace::DEFAULT_NAMESPACE;
use lightning_store_core::telemetry::{BackendPhase, Observer};
use lightning_store_proto::code_name;

pub use self::agl1::Agl1Metrics;
use self::histogram::latency_histogram;

/// Labels of the per-RPC metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// Fully qualified gRPC service, e.g. `lightningstore.v1.LightningStoreService`.
    pub service: String,
    /// Method name, e.g. `EnqueueRollout`.
    pub method: String,
    /// Name of the gRPC status code, e.g. `OK` or `NOT_FOUND`.
    pub code: String,
}

/// Labels of the in-flight gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// Fully qualified gRPC service.
    pub service: String,
    /// Method name.
    pub method: String,
}

/// One gRPC method's call metrics (see [`Metrics::method`]); a series
/// appears on its first use, as with label lookups.
#[derive(Debug)]
pub struct MethodMetrics {
    metrics: Metrics,
    labels: MethodLabels,
    in_flight: OnceLock<Gauge>,
    /// The count and durations of calls that ended `OK`.
    ok: OnceLock<(Counter, Histogram)>,
}

impl MethodMetrics {
    /// Returns the method's labels.
    pub fn labels(&self) -> &MethodLabels {
        &self.labels
    }

    fn in_flight(&self) -> &Gauge {
        self.in_flight
            .get_or_init(|| self.metrics.in_flight.get_or_create(&self.labels).clone())
    }

    /// Counts a call as in progress until [`MethodMetrics::call_finished`].
    pub fn call_started(&self) {
        self.in_flight().inc();
    }

    /// Records a call that ended with `code` after `elapsed`.
    pub fn call_finished(&self, code: tonic::Code, elapsed: Duration) {
        self.in_flight().dec();
        let rpc_labels = || RpcLabels {
            service: self.labels.service.clone(),
            method: self.labels.method.clone(),
            code: code_name(code).to_owned(),
        };
        if code == tonic::Code::Ok {
            let (requests, durations) = self.ok.get_or_init(|| {
                let labels = rpc_labels();
                (
                    self.metrics.requests.get_or_create(&labels).clone(),
                    self.metrics.durations.get_or_create(&labels).clone(),
                )
            });
            requests.inc();
            durations.observe(elapsed.as_secs_f64());
            return;
        }
        let labels = rpc_labels();
        self.metrics.requests.get_or_create(&labels).inc();
        self.metrics
            .durations
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}

/// Labels of the HTTP request metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// HTTP method (`other` for non-standard ones).
    pub method: String,
    /// Route template, e.g. `/v1/agl/rollouts/{rollout_id}`, or `unmatched`.
    pub route: String,
    /// Response status code, e.g. `200`.
    pub status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NamespaceLabels {
    namespace: Arc<str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    namespace: Arc<str>,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    namespace: Arc<str>,
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    file: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabels {
    phase: &'static str,
    result: &'static str,
}

/// The server's metrics: a registry and the handles that update it. Clones
/// share the same metrics; the engine's reports ([`Observer`]) are counted
/// under the namespace of the clone they reach ([`Metrics::in_namespace`]).
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The namespace whose engine reports to this clone.
    namespace: Arc<str>,
    registry: Arc<Registry>,
    requests: Family<RpcLabels, Counter>,
    durations: Family<RpcLabels, Histogram>,
    in_flight: Family<MethodLabels, Gauge>,
    http_requests: Family<HttpLabels, Counter>,
    http_durations: Family<HttpLabels, Histogram>,
    worker_sessions: Family<NamespaceLabels, Gauge>,
    spans: Family<ResultLabels, Counter>,
    verdicts: Family<StatusLabels, Counter>,
    backend: Family<BackendLabels, Histogram>,
    auth_failures: Family<ReasonLabels, Counter>,
    tls_handshake_failures: Counter,
    reloads: Family<ReloadLabels, Counter>,
    console_live_pages: Gauge,
    console_dropped: Counter,
    agl1: Agl1Metrics,
    store: Arc<StoreCollector>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates the metrics with every family registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("lightning_store");
        let requests = Family::<RpcLabels, Counter>::default();
        registry.register(
            "grpc_requests",
            "Finished gRPC calls by service, method and status code",
            requests.clone(),
        );
        let durations = Family::<RpcLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "grpc_request_duration_seconds",
            "Seconds from a gRPC request to its status (for a stream, its lifetime)",
            durations.clone(),
        );
        let in_flight = Family::<MethodLabels, Gauge>::default();
        registry.register(
            "grpc_in_flight",
            "gRPC calls in progress (for streaming methods, the open streams)",
            in_flight.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "http_requests",
            "Finished HTTP requests by method, route template and status",
            http_requests.clone(),
        );
        let http_durations = Family::<HttpLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Seconds from an HTTP request to the start of its response",
            http_durations.clone(),
        );
        let worker_sessions = Family::<NamespaceLabels, Gauge>::default();
        registry.register(
            "worker_sessions",
            "Open WorkerSession streams",
            worker_sessions.clone(),
        );
        let spans = Family::<ResultLabels, Counter>::default();
        registry.register(
            "spans_ingested",
            "Spans received (AddSpan, AddSpans, OTLP) by result: stored, duplicate or rejected",
            spans.clone(),
        );
        let verdicts = Family::<StatusLabels, Counter>::default();
        registry.register(
            "watchdog_verdicts",
            "Attempts expired as timeout or unresponsive (watchdog or lost worker session)",
            verdicts.clone(),
        );
        let backend = Family::<BackendLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "backend_duration_seconds",
            "Seconds the storage backend took to begin or commit a transaction",
            backend.clone(),
        );
        let auth_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "auth_failures",
            "Calls refused by reason: missing or invalid token, forbidden by its roles, another worker's id",
            auth_failures.clone(),
        );
        let tls_handshake_failures = Counter::default();
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed or timed out (mTLS: also clients without a valid certificate)",
            tls_handshake_failures.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "reloads",
            "Reloads of the tokens file and the TLS files after they changed, by result",
            reloads.clone(),
        );
        let console_live_pages = Gauge::default();
        registry.register(
            "console_live_pages",
            "Console pages open with live updates on this server",
            console_live_pages.clone(),
        );
        let console_dropped = Counter::default();
        registry.register(
            "console_live_pages_dropped",
            "Live console pages cut off because the browser read nothing for --subscriber-timeout",
            console_dropped.clone(),
        );
        let agl1 = Agl1Metrics::register(&mut registry);
        let store = Arc::new(StoreCollector::default());
        registry.register_collector(Box::new(store.clone()));
        Self {
            namespace: Arc::from(DEFAULT_NAMESPACE),
            registry: Arc::new(registry),
            requests,
            durations,
            in_flight,
            http_requests,
            http_durations,
            worker_sessions,
            spans,
            verdicts,
            backend,
            auth_failures,
            tls_handshake_failures,
            reloads,
            console_live_pages,
            console_dropped,
            agl1,
            store,
        }
    }

    /// Returns these metrics with the engine's reports counted under
    /// `namespace` (a label bounded by the namespaces a server holds).
    pub fn in_namespace(&self, namespace: &str) -> Self {
        Self {
            namespace: Arc::from(namespace),
            ..self.clone()
        }
    }

    /// Counts a live console page opened (`1`) or closed (`-1`).
    pub fn console_live_pages(&self, delta: i64) {
        self.console_live_pages.inc_by(delta);
    }

    /// Returns the live console pages open now.
    pub fn console_live_pages_open(&self) -> i64 {
        self.console_live_pages.get()
    }

    /// Counts a live console page cut off as too slow.
    pub fn console_live_page_dropped(&self) {
        self.console_dropped.inc();
    }

    /// Returns the metrics of agent-lightning 1.x's gateway and API.
    pub fn agl1(&self) -> &Agl1Metrics {
        &self.agl1
    }

    /// Returns the counter of calls refused for `reason` (created at zero,
    /// so that every reason is exported).
    pub fn auth_failures(&self, reason: &'static str) -> Counter {
        self.auth_failures
            .get_or_create(&ReasonLabels { reason })
            .clone()
    }

    /// Counts a failed TLS handshake.
    pub fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.inc();
    }

    /// Counts a reload of `file` (`tokens` or `tls`) that succeeded or not.
    pub fn reloaded(&self, file: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads
            .get_or_create(&ReloadLabels { file, result })
            .inc();
    }

    /// Returns the call metrics of the gRPC method `labels`, whose handles
    /// are looked up once: a call then records without hashing labels or
    /// allocating them.
    pub fn method(&self, labels: MethodLabels) -> MethodMetrics {
        MethodMetrics {
            metrics: self.clone(),
            labels,
            in_flight: OnceLock::new(),
            ok: OnceLock::new(),
        }
    }

    /// Records an HTTP request whose response started after `elapsed`.
    pub fn http_request_finished(&self, labels: &HttpLabels, elapsed: Duration) {
        self.http_requests.get_or_create(labels).inc();
        self.http_durations
            .get_or_create(labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Reads the statistics of each namespace's store in `stores` (its
    /// name, its engine), then renders every metric in `format`.
    pub async fn render(&self, stores: &[(String, Arc<Engine>)], format: Exposition) -> String {
        let mut snapshots = Vec::with_capacity(stores.len());
        for (namespace, engine) in stores {
            let started = Instant::now();
            let statistics = engine.statistics().await;
            if let Err(error) = &statistics {
                tracing::warn!(%error, %namespace, "metrics: store statistics failed");
            }
            snapshots.push(StoreSnapshot {
                namespace: namespace.clone(),
                statistics: statistics.ok(),
                duration: started.elapsed(),
                taken: engine.now(),
            });
        }
        *self.store.latest.lock() = snapshots;
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "metrics: encoding failed");
        }
        format.from_openmetrics(text)
    }
}

impl Observer for Metrics {
    fn spans_written(&self, stored: usize, duplicates: usize, rejected: usize) {
        for (result, count) in [
            ("stored", stored),
            ("duplicate", duplicates),
            ("rejected", rejected),
        ] {
            let labels = ResultLabels {
                namespace: self.namespace.clone(),
                result,
            };
            self.spans.get_or_create(&labels).inc_by(count as u64);
        }
    }

    fn attempt_expired(&self, status: AttemptStatus) {
        self.verdicts
            .get_or_create(&StatusLabels {
                namespace: self.namespace.clone(),
                status: status.as_str(),
            })
            .inc();
    }

    fn backend_call(&self, phase: BackendPhase, elapsed: Duration, ok: bool) {
        let labels = BackendLabels {
            phase: phase.as_str(),
            result: if ok { "ok" } else { "error" },
        };
        self.backend
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    fn worker_sessions(&self, open: usize) {
        let labels = NamespaceLabels {
            namespace: self.namespace.clone(),
        };
        self.worker_sessions
            .get_or_create(&labels)
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    fn agl1_event(&self, event_type: &str) {
        self.agl1.event(event_type);
    }

    fn agl1_transition(&self, state: &'static str) {
        self.agl1.transition(state);
    }

    fn agl1_rollout_read(&self, cached: bool) {
        self.agl1.rollout_read(cached);
    }
}

/// What the last scrape read from one namespace's store.
#[derive(Debug)]
struct StoreSnapshot {
    namespace: String,
    statistics: Option<Statistics>,
    duration: Duration,
    taken: Timestamp,
}

/// Encodes the store totals of the latest scrape, a sample per namespace
/// (labelled `namespace`).
#[derive(Debug, Default)]
struct StoreCollector {
    latest: parking_lot::Mutex<Vec<StoreSnapshot>>,
}

/// Encodes one gauge family with a sample per namespace of `snapshots`
/// that `value_of` has a value for.
fn encode_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    snapshots: &[StoreSnapshot],
    value_of: impl Fn(&StoreSnapshot) -> Option<f64>,
) -> Result<(), std::fmt::Error> {
    let probe = ConstGauge::new(0.0);
    let mut family = encoder.encode_descriptor(name, help, None, probe.metric_type())?;
    for snapshot in snapshots {
        if let Some(value) = value_of(snapshot) {
            let labels = [("namespace", snapshot.namespace.as_str())];
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// Encodes one counter family with a sample per namespace of `snapshots`
/// whose statistics were read.
fn encode_counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    snapshots: &[StoreSnapshot],
    value_of: impl Fn(&Counts) -> u64,
) -> Result<(), std::fmt::Error> {
    let probe = ConstCounter::new(0u64);
    let mut family = encoder.encode_descriptor(name, help, None, probe.metric_type())?;
    for snapshot in snapshots {
        if let Some(statistics) = &snapshot.statistics {
            let labels = [("namespace", snapshot.namespace.as_str())];
            ConstCounter::new(value_of(&statistics.counts))
                .encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// Encodes one gauge family with a sample per namespace and status (zero
/// included).
fn encode_by_status<S: Copy + Ord + std::fmt::Display>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    all: &[S],
    snapshots: &[StoreSnapshot],
    counts_of: impl Fn(&Counts) -> &std::collections::BTreeMap<S, u64>,
) -> Result<(), std::fmt::Error> {
    let probe = ConstGauge::new(0.0);
    let mut family = encoder.encode_descriptor(name, help, None, probe.metric_type())?;
    for snapshot in snapshots {
        let Some(statistics) = &snapshot.statistics else {
            continue;
        };
        let counts = counts_of(&statistics.counts);
        for status in all {
            let value = counts.get(status).copied().unwrap_or(0) as f64;
            let labels = [
                ("namespace", snapshot.namespace.clone()),
                ("status", status.to_string()),
            ];
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshots = self.latest.lock();
        let snapshots = snapshots.as_slice();
        if snapshots.is_empty() {
            return Ok(());
        }
        encode_gauge(
            &mut encoder,
            "store_up",
            "1 when the namespace's store answered the statistics query of this scrape, else 0",
            snapshots,
            |s| Some(if s.statistics.is_some() { 1.0 } else { 0.0 }),
        )?;
        encode_gauge(
            &mut encoder,
            "store_statistics_duration_seconds",
            "Seconds the statistics query of this scrape took",
            snapshots,
            |s| Some(s.duration.as_secs_f64()),
        )?;
        encode_by_status(
            &mut encoder,
            "rollouts",
            "Stored rollouts by status",
            RolloutStatus::ALL,
            snapshots,
            |counts| &counts.rollouts_by_status,
        )?;
        encode_by_status(
            &mut encoder,
            "attempts",
            "Stored attempts by status",
            AttemptStatus::ALL,
            snapshots,
            |counts| &counts.attempts_by_status,
        )?;
        let counted = |value_of: fn(&Counts) -> u64| {
            move |s: &StoreSnapshot| s.statistics.as_ref().map(|st| value_of(&st.counts) as f64)
        };
        let oldest_age = |s: &StoreSnapshot| {
            let counts = &s.statistics.as_ref()?.counts;
            Some(counts.oldest_queued_time.map_or(0.0, |since| {
                (s.taken.0.saturating_sub(since.0)).max(0) as f64 / 1e9
            }))
        };
        encode_gauge(
            &mut encoder,
            "spans",
            "Stored spans",
            snapshots,
            counted(|c| c.spans),
        )?;
        encode_gauge(
            &mut encoder,
            "resources",
            "Stored resources snapshots",
            snapshots,
            counted(|c| c.resources),
        )?;
        encode_gauge(
            &mut encoder,
            "workers",
            "Known workers",
            snapshots,
            counted(|c| c.workers),
        )?;
        encode_gauge(
            &mut encoder,
            "queue_depth",
            "Rollouts waiting in the queue",
            snapshots,
            counted(|c| c.queued),
        )?;
        encode_gauge(
            &mut encoder,
            "queue_oldest_age_seconds",
            "Seconds the rollout at the queue's head has waited (0 when the queue is empty)",
            snapshots,
            oldest_age,
        )?;
        encode_gauge(
            &mut encoder,
            "span_bytes",
            "Estimated bytes of the stored spans",
            snapshots,
            counted(|c| c.span_bytes),
        )?;
        encode_gauge(
            &mut encoder,
            "uptime_seconds",
            "Seconds since the namespace's store was opened",
            snapshots,
            |s| s.statistics.as_ref().map(|st| st.uptime_seconds),
        )?;
        encode_counter(
            &mut encoder,
            "retention_evicted_rollouts",
            "Rollouts whose spans span retention deleted",
            snapshots,
            |c| c.evicted_rollouts,
        )?;
        encode_counter(
            &mut encoder,
            "retention_evicted_spans",
            "Spans deleted by span retention",
            snapshots,
            |c| c.evicted_spans,
        )?;
        encode_counter(
            &mut encoder,
            "retention_evicted_span_bytes",
            "Estimated bytes of the spans deleted by span retention",
            snapshots,
            |c| c.evicted_span_bytes,
        )?;
        Ok(())
    }
}

/// The namespaces a scrape reads: each open now, by name, with its
/// engine.
pub trait ScrapedStores: Send + Sync + 'static {
    /// Returns the namespaces open now.
    fn open_stores(&self) -> BoxFuture<'_, Vec<(String, Arc<Engine>)>>;
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    stores: Arc<dyn ScrapedStores>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: http::HeaderMap| async move {
            let accept = headers
                .get(http::header::ACCEPT)
                .and_then(|value| value.to_str().ok());
            let format = Exposition::negotiate(accept);
            let open = stores.open_stores().await;
            (
                [(http::header::CONTENT_TYPE, format.content_type())],
                metrics.render(&open, format).await,
            )
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observer_reports_move_the_counters() {
        let metrics = Metrics::new();
        metrics.spans_written(3, 1, 2);
        metrics.attempt_expired(AttemptStatus::Timeout);
        metrics.worker_sessions(4);
        metrics.in_namespace("run-a").worker_sessions(1);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &metrics.registry).unwrap();
        for line in [
            "lightning_store_spans_ingested_total{namespace=\"default\",result=\"stored\"} 3",
            "lightning_store_spans_ingested_total{namespace=\"default\",result=\"duplicate\"} 1",
            "lightning_store_spans_ingested_total{namespace=\"default\",result=\"rejected\"} 2",
            "lightning_store_watchdog_verdicts_total{namespace=\"default\",status=\"timeout\"} 1",
            "lightning_store_worker_sessions{namespace=\"default\"} 4",
            "lightning_store_worker_sessions{namespace=\"run-a\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
