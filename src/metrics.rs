//! Prometheus metrics: per-RPC request counts and latencies recorded by a
//! tower layer on the gRPC server, and store totals read on each scrape,
//! served as text at `GET /metrics` on their own listener.
//!
//! Metric names (all prefixed `lightning_store_`):
//! * `grpc_requests_total{service,method,code}`: calls by gRPC status code;
//! * `grpc_request_duration_seconds{service,method,code}`: time until the
//!   response starts (for a streaming response, until its headers);
//! * `rollouts`, `attempts`, `spans`, `resources`, `workers`, `queue_depth`,
//!   `span_bytes`: stored totals, read from the store on scrape;
//! * `retention_evicted_rollouts_total`, `retention_evicted_spans_total`,
//!   `retention_evicted_span_bytes_total`: what span retention deleted;
//! * `store_up` (1 when the store answered the scrape's statistics query),
//!   `store_statistics_duration_seconds` (how long that query took) and
//!   `uptime_seconds`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::core::engine::Engine;
use crate::core::model::Statistics;

/// Latency buckets in seconds: 100 µs to 10 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// gRPC status code of UNIMPLEMENTED: the method label of such calls is not
/// trusted (any path a client sends ends there).
const UNIMPLEMENTED: &str = "12";

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

/// The server's metrics: a registry and the handles the gRPC layer updates.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RpcLabels, Counter>,
    durations: Family<RpcLabels, Histogram>,
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
        let mut registry = Registry::default();
        let requests = Family::<RpcLabels, Counter>::default();
        registry.register(
            "lightning_store_grpc_requests",
            "gRPC calls by service, method and status code (a streaming call counts when its response starts)",
            requests.clone(),
        );
        let durations = Family::<RpcLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "lightning_store_grpc_request_duration_seconds",
            "Seconds from a gRPC request to the start of its response",
            durations.clone(),
        );
        let store = Arc::new(StoreCollector::default());
        registry.register_collector(Box::new(store.clone()));
        Self {
            registry: Arc::new(registry),
            requests,
            durations,
            store,
        }
    }

    /// Records one call.
    pub fn record_call(&self, path: &str, code: &str, elapsed: Duration) {
        let (service, method) = split_path(path);
        let labels = RpcLabels {
            service: service.to_owned(),
            method: if code == UNIMPLEMENTED {
                "unknown".to_owned()
            } else {
                method.to_owned()
            },
            code: code_name(code).to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Reads the store's statistics, then renders every metric in the
    /// Prometheus text format.
    pub async fn render(&self, engine: &Engine) -> String {
        let started = Instant::now();
        let statistics = engine.statistics().await;
        if let Err(error) = &statistics {
            tracing::warn!(%error, "metrics: store statistics failed");
        }
        *self.store.latest.lock() = Some(StoreSnapshot {
            statistics: statistics.ok(),
            duration: started.elapsed(),
        });
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "metrics: encoding failed");
        }
        text
    }
}

/// What the last scrape read from the store.
#[derive(Debug)]
struct StoreSnapshot {
    statistics: Option<Statistics>,
    duration: Duration,
}

/// Encodes the store totals of the latest scrape.
#[derive(Debug, Default)]
struct StoreCollector {
    latest: parking_lot::Mutex<Option<StoreSnapshot>>,
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let latest = self.latest.lock();
        let Some(snapshot) = latest.as_ref() else {
            return Ok(());
        };
        let gauge = |encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64| {
            let metric = ConstGauge::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
        };
        gauge(
            &mut encoder,
            "lightning_store_store_up",
            "1 when the store answered the statistics query of this scrape, else 0",
            if snapshot.statistics.is_some() {
                1.0
            } else {
                0.0
            },
        )?;
        gauge(
            &mut encoder,
            "lightning_store_store_statistics_duration_seconds",
            "Seconds the statistics query of this scrape took (a probe of backend latency)",
            snapshot.duration.as_secs_f64(),
        )?;
        let Some(statistics) = &snapshot.statistics else {
            return Ok(());
        };
        let counts = &statistics.counts;
        for (name, help, value) in [
            (
                "lightning_store_rollouts",
                "Stored rollouts",
                counts.rollouts,
            ),
            (
                "lightning_store_attempts",
                "Stored attempts",
                counts.attempts,
            ),
            ("lightning_store_spans", "Stored spans", counts.spans),
            (
                "lightning_store_resources",
                "Stored resources snapshots",
                counts.resources,
            ),
            ("lightning_store_workers", "Known workers", counts.workers),
            (
                "lightning_store_queue_depth",
                "Rollouts waiting in the queue",
                counts.queued,
            ),
            (
                "lightning_store_span_bytes",
                "Estimated bytes of the stored spans",
                counts.span_bytes,
            ),
        ] {
            gauge(&mut encoder, name, help, value as f64)?;
        }
        for (name, help, value) in [
            (
                "lightning_store_retention_evicted_rollouts",
                "Rollouts whose spans span retention deleted",
                counts.evicted_rollouts,
            ),
            (
                "lightning_store_retention_evicted_spans",
                "Spans deleted by span retention",
                counts.evicted_spans,
            ),
            (
                "lightning_store_retention_evicted_span_bytes",
                "Estimated bytes of the spans deleted by span retention",
                counts.evicted_span_bytes,
            ),
        ] {
            let metric = ConstCounter::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
        }
        gauge(
            &mut encoder,
            "lightning_store_uptime_seconds",
            "Seconds since the store was opened",
            statistics.uptime_seconds,
        )
    }
}

/// Splits `/package.Service/Method` into its service and method.
fn split_path(path: &str) -> (&str, &str) {
    path.trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("unknown", "unknown"))
}

/// Returns the canonical name of a numeric gRPC status code.
fn code_name(code: &str) -> &'static str {
    match code {
        "0" => "OK",
        "1" => "CANCELLED",
        "2" => "UNKNOWN",
        "3" => "INVALID_ARGUMENT",
        "4" => "DEADLINE_EXCEEDED",
        "5" => "NOT_FOUND",
        "6" => "ALREADY_EXISTS",
        "7" => "PERMISSION_DENIED",
        "8" => "RESOURCE_EXHAUSTED",
        "9" => "FAILED_PRECONDITION",
        "10" => "ABORTED",
        "11" => "OUT_OF_RANGE",
        "12" => "UNIMPLEMENTED",
        "13" => "INTERNAL",
        "14" => "UNAVAILABLE",
        "15" => "DATA_LOSS",
        "16" => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// A tower layer that records every gRPC call in [`Metrics`].
#[derive(Debug, Clone)]
pub struct GrpcMetricsLayer {
    metrics: Metrics,
}

impl GrpcMetricsLayer {
    /// Creates the layer.
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }
}

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetricsService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service of [`GrpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct GrpcMetricsService<S> {
    inner: S,
    metrics: Metrics,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for GrpcMetricsService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let started = Instant::now();
        let path = request.uri().path().to_owned();
        let metrics = self.metrics.clone();
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            if let Ok(response) = &result {
                // An error before any message is a trailers-only response with
                // the status in the headers; otherwise the call started fine
                // (a unary success carries OK in its trailers).
                let code = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|code| code.to_str().ok())
                    .unwrap_or("0");
                metrics.record_call(&path, code, started.elapsed());
            }
            result
        })
    }
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            (
                [(
                    http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                metrics.render(&engine).await,
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
    fn splits_paths_and_names_codes() {
        assert_eq!(
            split_path("/lightningstore.v1.LightningStoreService/EnqueueRollout"),
            ("lightningstore.v1.LightningStoreService", "EnqueueRollout")
        );
        assert_eq!(split_path("/"), ("unknown", "unknown"));
        assert_eq!(code_name("5"), "NOT_FOUND");
        assert_eq!(code_name("99"), "UNKNOWN");
    }
}
