//! Assembles everything served on one listener: the gRPC services (the
//! store, OTLP TraceService, grpc.health.v1, server reflection v1 and
//! v1alpha for grpcurl 1.8), the HTTP routes ([`lightning_store_adapters::http`]) and the web
//! console ([`lightning_store_console`]), over HTTP/2 (gRPC, h2c) and HTTP/1.1
//! alike.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;

use tonic_health::pb::health_server::HealthServer;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::tls::TlsAcceptor;
use lightning_store_adapters::api::otlp::OtlpTraceService;
use lightning_store_adapters::api::service::StoreService;
use lightning_store_adapters::api::size_groups::BySizeGroup;
use lightning_store_adapters::auth::{AuthLayer, Tokens};
use lightning_store_adapters::call_log::{CallLayer, KnownMethods};
use lightning_store_adapters::gateway::GatewayConfig;
use lightning_store_adapters::metrics::Metrics;
use lightning_store_adapters::namespace_layer::name_namespace;
use lightning_store_adapters::namespaces::{
    NamespacePolicy, Namespaces, ServicesConfig, stop_tasks,
};
use lightning_store_adapters::transport::{ActivityLayer, TransportLimits};
use lightning_store_console::{ConsoleConfig, ConsoleContext};
use lightning_store_core::engine::{Engine, SessionPolicy};
use lightning_store_core::storage::Catalogue;
use lightning_store_proto::lightning_store_service_server::LightningStoreServiceServer;

const STORE_SERVICE: &str = "lightningstore.v1.LightningStoreService";
const TRACE_SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
const HEALTH_SERVICE: &str = "grpc.health.v1.Health";
/// Health service name that is SERVING for as long as the process answers,
/// whatever the backend: for liveness probes, which must not restart the
/// server because its database is down.
pub const LIVENESS_SERVICE: &str = "liveness";

/// The gRPC methods served on the port, from the services' descriptors:
/// the call layer labels any other path `unknown`, and the authorization
/// table must cover exactly these ([`lightning_store_adapters::auth::policy::RPCS`]).
pub fn served_methods() -> KnownMethods {
    KnownMethods::from_descriptor_sets(
        &[
            lightning_store_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            opentelemetry_proto::DESCRIPTORS,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ],
        &[
            STORE_SERVICE,
            TRACE_SERVICE,
            HEALTH_SERVICE,
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ],
    )
}

/// Settings of the gRPC server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How long in-flight calls may run after shutdown starts.
    pub drain_timeout: Duration,
    /// OTLP exports (gRPC and HTTP together) processed at once; more are
    /// refused with a retry delay (gRPC UNAVAILABLE, HTTP 503).
    pub otlp_max_in_flight: usize,
    /// How long the attempts of a dropped worker session wait for the worker
    /// to reconnect before they become `unresponsive`.
    pub session_grace: Duration,
    /// How long a worker session's record stays valid without being renewed
    /// (three times per lease): when this server dies, another takes its
    /// sessions over this long after the last renewal.
    pub session_lease: Duration,
    /// This server's name in the worker session records. A server restarted
    /// with the same name drops the sessions it held at once (their grace
    /// period starts); under another name, they wait for their leases.
    pub server_id: String,
    /// Connections, idle timeout, streams per connection, subscribers and
    /// their buffers.
    pub transport: TransportLimits,
    /// How long a subscriber's full buffer may stay full before the
    /// subscriber is cut off as too slow.
    pub subscriber_timeout: Duration,
    /// Where Prometheus metrics are served (`GET /metrics`); `None` serves none.
    pub metrics_listener: Option<MetricsListener>,
    /// The metrics the server records calls in and serves; give the same
    /// [`Metrics`] to the engine (`EngineConfig::observer`) to see its work too.
    pub metrics: Metrics,
    /// How often the backend is probed; the health status is NOT_SERVING
    /// while the probe fails (and while the server drains).
    pub health_check_interval: Duration,
    /// Browser origins allowed to call the HTTP routes (`*`: any); empty
    /// sends no CORS headers.
    pub cors_origins: Vec<String>,
    /// The tokens calls must carry (all but health checks and reflection);
    /// `None` leaves the port open ([`lightning_store_adapters::auth`]).
    pub tokens: Option<Tokens>,
    /// TLS on the listener; `None` serves plaintext ([`crate::tls`]).
    pub tls: Option<TlsAcceptor>,
    /// How often the tokens file and the TLS files are checked for changes.
    pub reload_interval: Duration,
    /// Whether gRPC server reflection is served.
    pub reflection: bool,
    /// agent-lightning 1.x's LLM gateway.
    pub gateway: GatewayConfig,
    /// Whether the web console is served (at `/` and under `/console`).
    pub console: bool,
    /// The backend's namespaces; `None` serves the default namespace alone
    /// (a store without a catalogue).
    pub catalogue: Option<ServedCatalogue>,
    /// How namespaces are created and how many may exist.
    pub namespaces: NamespacePolicy,
}

/// A backend's catalogue of namespaces, as [`ServerConfig`] holds it.
#[derive(Clone)]
pub struct ServedCatalogue(pub Arc<dyn Catalogue>);

impl std::fmt::Debug for ServedCatalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServedCatalogue")
    }
}

/// An already-bound listener for the metrics endpoint, shareable so that
/// [`ServerConfig`] stays `Clone`; the first [`serve`] takes it.
#[derive(Debug, Clone)]
pub struct MetricsListener(Arc<parking_lot::Mutex<Option<TcpListener>>>);

impl MetricsListener {
    /// Wraps a bound listener.
    pub fn new(listener: TcpListener) -> Self {
        Self(Arc::new(parking_lot::Mutex::new(Some(listener))))
    }

    fn take(&self) -> Option<TcpListener> {
        self.0.lock().take()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            drain_timeout: Duration::from_secs(10),
            otlp_max_in_flight: 64,
            session_grace: Duration::from_secs(30),
            session_lease: Duration::from_secs(10),
            server_id: random_server_id(),
            transport: TransportLimits::default(),
            subscriber_timeout: Duration::from_secs(10),
            metrics_listener: None,
            metrics: Metrics::new(),
            health_check_interval: Duration::from_secs(5),
            cors_origins: Vec::new(),
            tokens: None,
            tls: None,
            reload_interval: Duration::from_secs(5),
            reflection: true,
            gateway: GatewayConfig::default(),
            console: true,
            catalogue: None,
            namespaces: NamespacePolicy::default(),
        }
    }
}

/// Returns a server name no other server uses: `server-` and 8 hex digits.
pub fn random_server_id() -> String {
    format!("server-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// How long calls get to answer once the drain deadline has cut their
/// transactions short (at most the drain timeout).
const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// Error returned when the server cannot start or fails while serving.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// Serves every service on an already-bound listener until `shutdown`
/// resolves, then drains: open waits end at once, in-flight calls get
/// `drain_timeout` to finish. In phases: the parts that must be ready
/// before the first call (health, recovered sessions, the event follower,
/// the gateway's pause), the background tasks, the routes, then serving
/// until drained, and the shutdown of what remains.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (health, health_service) = Health::start(&engine).await;
    // The default namespace's services are ready before the first call
    // (recovered sessions, the event follower, the gateway's pause); the
    // others start on their first call.
    let namespaces = Arc::new(
        Namespaces::start(
            config.catalogue.as_ref().map(|c| c.0.clone()),
            engine.clone(),
            ServicesConfig {
                sessions: SessionPolicy {
                    server_id: config.server_id.clone(),
                    lease: config.session_lease,
                    grace: config.session_grace,
                },
                otlp_max_in_flight: config.otlp_max_in_flight,
                gateway: config.gateway.clone(),
                metrics: config.metrics.clone(),
            },
            config.namespaces,
        )
        .await?,
    );
    let console = config.console.then(|| console(&namespaces, &config));
    let background = spawn_background(&engine, &health, console.as_ref(), &config);
    let metrics_server = MetricsServer::start(&config, &namespaces)?;
    let routes = routes(&namespaces, &config, health_service, console)?;

    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    let draining = namespaces.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight calls");
        health.drain().await;
        for services in draining.open_now().await {
            services.engine.close();
        }
        let _ = drain_tx.send(());
    };
    let local_addr = listener.local_addr()?;
    let tls = config.tls.is_some();
    let incoming = crate::tls::incoming(
        lightning_store_adapters::transport::incoming(
            listener,
            config.transport,
            config.tls.as_ref().map(TlsAcceptor::refusal_handshake),
        ),
        config.tls.clone(),
        config.metrics.clone(),
    );
    let server = tonic::transport::Server::builder()
        // HTTP/1.1 beside HTTP/2: agent-lightning's clients speak HTTP/1.1.
        .accept_http1(true)
        .max_concurrent_streams(config.transport.max_concurrent_streams)
        // First, so that the call's log knows its namespace; the
        // `/ns/{namespace}` prefix is stripped before routing.
        .layer(tower::util::MapRequestLayer::new(name_namespace))
        // Outside the rest, so that it records the codes the client sees.
        .layer(CallLayer::new(config.metrics.clone(), &served_methods()))
        .layer(ActivityLayer)
        .layer(tower::util::MapResponseLayer::new(
            oversized_is_resource_exhausted,
        ))
        .add_routes(tonic::service::Routes::from(routes).prepare())
        .serve_with_incoming_shutdown(incoming, signal);
    tracing::info!(
        %local_addr,
        tls,
        tokens = config.tokens.as_ref().map_or(0, Tokens::count),
        "serving gRPC and HTTP"
    );
    let result = serve_until_drained(server, drain_rx, &namespaces, config.drain_timeout).await;
    shut_down(&namespaces, background, config.drain_timeout).await;
    // Metrics stay up through the drain and stop with the server.
    if let Some(metrics_server) = metrics_server {
        metrics_server.stop().await;
    }
    result
}

/// Returns the web console over the server's namespaces (each request's
/// pages show the namespace it names).
fn console(namespaces: &Arc<Namespaces>, config: &ServerConfig) -> ConsoleContext {
    ConsoleContext::new(
        namespaces.clone(),
        ConsoleConfig {
            tokens: config.tokens.clone(),
            tls: config.tls.is_some(),
            max_streams: config.transport.max_subscribers,
            stream_timeout: config.subscriber_timeout,
            metrics: config.metrics.clone(),
        },
    )
}

/// Spawns the tasks of the server as a whole that run beside the calls
/// until the engine closes (each namespace's own run with its services,
/// see [`NamespaceServices::start`](lightning_store_adapters::namespaces::NamespaceServices::start)): the reload of tokens and TLS files,
/// the backend probe, and the console's sampling of each namespace's queue
/// depth.
fn spawn_background(
    engine: &Arc<Engine>,
    health: &Arc<Health>,
    console: Option<&ConsoleContext>,
    config: &ServerConfig,
) -> Vec<tokio::task::JoinHandle<()>> {
    let queue_sampler = console.map(ConsoleContext::sample_queue);
    vec![
        tokio::spawn(async move {
            if let Some(sampler) = queue_sampler {
                sampler.await;
            }
        }),
        tokio::spawn(crate::reload::run(
            config.tokens.clone(),
            config.tls.clone(),
            config.reload_interval,
            config.metrics.clone(),
            engine.closing(),
        )),
        tokio::spawn(
            health
                .clone()
                .probe_backend(engine.clone(), config.health_check_interval),
        ),
    ]
}

/// Returns every route of the port: the gRPC services (the store's by
/// message size group, OTLP's TraceService, health, reflection when
/// enabled), the HTTP routes and the console's when it is served, each
/// call checked by the access layer against the RPC table and what the
/// routes declared (inside CORS: a browser's preflight carries no token;
/// the console takes no CORS), unknown paths answered by
/// [`lightning_store_adapters::http::not_found`].
fn routes(
    namespaces: &Arc<Namespaces>,
    config: &ServerConfig,
    health_service: HealthServer<DrainingHealth>,
    console: Option<ConsoleContext>,
) -> Result<axum::Router, ServeError> {
    // gRPC messages and HTTP bodies (also after decompression): payload
    // calls up to the message limit, control calls up to theirs, decided by
    // method in one table (api::size_groups).
    let limits = namespaces.default_namespace().engine.limits();
    let max_message_bytes = limits.max_message_bytes;
    let store = Arc::new(StoreService::new(
        namespaces.clone(),
        config.transport,
        config.subscriber_timeout,
        lightning_store_adapters::export::record_lines,
    ));
    let store_server = |max_decoding: usize| {
        LightningStoreServiceServer::from_arc(store.clone())
            .max_decoding_message_size(max_decoding)
            .max_encoding_message_size(usize::MAX)
            .accept_compressed(CompressionEncoding::Gzip)
            .send_compressed(CompressionEncoding::Gzip)
    };
    let store_service = BySizeGroup::new(
        store_server(limits.max_control_message_bytes),
        store_server(max_message_bytes),
        limits.max_control_message_bytes,
    );
    let trace_service = TraceServiceServer::new(OtlpTraceService::new(namespaces.clone()))
        .max_decoding_message_size(max_message_bytes)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    let mut grpc = tonic::service::Routes::new(health_service)
        .add_service(store_service)
        .add_service(trace_service);
    if config.reflection {
        grpc = grpc
            .add_service(reflection().build_v1()?)
            .add_service(reflection().build_v1alpha()?);
    }
    let http_routes = lightning_store_adapters::http::routes();
    let console = console.map(|context| (lightning_store_console::routes(), context));
    let mut needs = http_routes.needs().clone();
    if let Some((console_routes, _)) = &console {
        needs.extend(console_routes.needs().clone());
    }
    let auth = AuthLayer::new(config.tokens.clone(), needs, &config.metrics);
    let grpc = grpc
        .into_axum_router()
        .reset_fallback()
        .route_layer(auth.clone());
    let state = lightning_store_adapters::http::HttpState {
        namespaces: namespaces.clone(),
        max_body_bytes: max_message_bytes,
        metrics: config.metrics.clone(),
    };
    let mut http = lightning_store_adapters::http::router(http_routes, state, auth.clone());
    if let Some(cors) = lightning_store_adapters::http::cors(&config.cors_origins)? {
        http = http.layer(cors);
    }
    let mut routes = grpc.merge(http);
    if let Some((console_routes, context)) = console {
        routes = routes.merge(lightning_store_console::router(
            console_routes,
            context,
            auth,
        ));
    }
    Ok(routes.fallback(lightning_store_adapters::http::not_found))
}

/// The reflection service of what the port serves (v1 and v1alpha).
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(lightning_store_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(opentelemetry_proto::DESCRIPTORS)
        // The OTLP bundle also declares services we do not serve.
        .with_service_name(STORE_SERVICE)
        .with_service_name(TRACE_SERVICE)
        .with_service_name(HEALTH_SERVICE)
}

/// Runs `server` until it ends, bounding the drain: once the drain starts
/// (`drain_rx`), calls get `drain_timeout`; then the store's transactions
/// are cut short and calls get a last grace to answer.
async fn serve_until_drained(
    server: impl Future<Output = Result<(), tonic::transport::Error>>,
    drain_rx: tokio::sync::oneshot::Receiver<()>,
    namespaces: &Namespaces,
    drain_timeout: Duration,
) -> Result<(), ServeError> {
    // Bound the drain: a call that ignores shutdown must not hold the process.
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => result.map_err(ServeError::from),
        () = async {
            let _ = drain_rx.await;
            tokio::time::sleep(drain_timeout).await;
        } => {
            tracing::warn!(timeout = ?drain_timeout, "drain deadline passed, closing remaining calls");
            // The transactions still running fail (nothing of them
            // commits) and their calls answer UNAVAILABLE; a call whose
            // write committed meanwhile still gets its answer, within
            // the grace, instead of a cut connection.
            for services in namespaces.open_now().await {
                services.engine.interrupt_store();
            }
            let grace = drain_timeout.min(ANSWER_GRACE);
            match tokio::time::timeout(grace, &mut server).await {
                Ok(result) => result.map_err(ServeError::from),
                Err(_) => Ok(()),
            }
        }
    }
}

/// Stops what runs beside the calls once the server stopped serving: the
/// server's background tasks, then each namespace's services (their
/// tasks, the ends of their open worker sessions, recorded before the
/// store closes so that their attempts get the grace period at once, then
/// their stores), each step bounded by `drain_timeout`: a task may be
/// stuck in a hung database.
async fn shut_down(
    namespaces: &Namespaces,
    background: Vec<tokio::task::JoinHandle<()>>,
    drain_timeout: Duration,
) {
    let open = namespaces.open_now().await;
    for services in &open {
        services.engine.close();
    }
    stop_tasks(background, drain_timeout).await;
    for services in open {
        services.shut_down(drain_timeout).await;
    }
}

/// The metrics endpoint, served on its own listener until the server stops.
struct MetricsServer {
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl MetricsServer {
    /// Starts serving the metrics on the configured listener, if any.
    fn start(
        config: &ServerConfig,
        namespaces: &Arc<Namespaces>,
    ) -> Result<Option<Self>, ServeError> {
        let Some(listener) = config
            .metrics_listener
            .as_ref()
            .and_then(MetricsListener::take)
        else {
            return Ok(None);
        };
        let metrics_addr = listener.local_addr()?;
        tracing::info!(%metrics_addr, "serving metrics");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(lightning_store_adapters::metrics::serve(
            listener,
            config.metrics.clone(),
            namespaces.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Some(Self { task, stop }))
    }

    /// Stops serving and waits for the endpoint to end.
    async fn stop(self) {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Err(error)) => tracing::warn!(%error, "metrics server failed"),
            Err(error) => tracing::warn!(%error, "metrics server panicked"),
            Ok(Ok(())) => {}
        }
    }
}

/// Reports a request over the size limit as RESOURCE_EXHAUSTED, the code
/// gRPC specifies (and OTLP exporters expect) for it; tonic says OUT_OF_RANGE.
fn oversized_is_resource_exhausted<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let out_of_range = headers.get("grpc-status").is_some_and(|code| code == "11");
    let oversized = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .is_some_and(|m| m.contains("length%20too%20large") || m.contains("length too large"));
    if out_of_range && oversized {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}

/// The health status of every served service: SERVING while the backend
/// answers its probe and the server is not draining, NOT_SERVING otherwise.
struct Health {
    reporter: tonic_health::server::HealthReporter,
    /// (backend reachable, draining); the lock also orders the updates.
    state: tokio::sync::Mutex<(bool, bool)>,
}

impl Health {
    /// Returns the health of a server about to serve, published (the
    /// liveness service SERVING from now on), with the health service.
    async fn start(engine: &Engine) -> (Arc<Self>, HealthServer<DrainingHealth>) {
        let reporter = tonic_health::server::HealthReporter::new();
        let service = HealthServer::new(DrainingHealth {
            inner: tonic_health::server::HealthService::from_health_reporter(reporter.clone()),
            closing: engine.closing(),
        });
        reporter
            .set_service_status(LIVENESS_SERVICE, tonic_health::ServingStatus::Serving)
            .await;
        let health = Arc::new(Self {
            reporter,
            state: tokio::sync::Mutex::new((true, false)),
        });
        health.publish().await;
        (health, service)
    }

    /// Publishes the current status for the server as a whole ("") and for
    /// each service.
    async fn publish(&self) {
        let state = self.state.lock().await;
        self.set_all(*state).await;
    }

    async fn set_all(&self, (reachable, draining): (bool, bool)) {
        let status = if reachable && !draining {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        for service in ["", STORE_SERVICE, TRACE_SERVICE] {
            self.reporter.set_service_status(service, status).await;
        }
    }

    /// Marks the server draining: NOT_SERVING from now on.
    async fn drain(&self) {
        let mut state = self.state.lock().await;
        state.1 = true;
        self.set_all(*state).await;
    }

    /// Records the outcome of a backend probe, publishing any change.
    async fn set_reachable(&self, reachable: bool) {
        let mut state = self.state.lock().await;
        if state.0 == reachable {
            return;
        }
        state.0 = reachable;
        if reachable {
            tracing::info!("backend reachable again: serving");
        } else {
            tracing::warn!("backend unreachable: health is NOT_SERVING");
        }
        self.set_all(*state).await;
    }

    /// Probes the backend every `interval` (each probe bounded by the
    /// interval, at least one second) until the engine closes.
    async fn probe_backend(self: Arc<Self>, engine: Arc<Engine>, interval: Duration) {
        let mut closing = engine.closing();
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let deadline = interval.max(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = closing.wait_for(|closed| *closed) => return,
            }
            let probe = tokio::time::timeout(deadline, engine.statistics()).await;
            let reachable = match probe {
                Ok(Ok(_)) => true,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "backend probe failed");
                    false
                }
                Err(_) => {
                    tracing::debug!(?deadline, "backend probe timed out");
                    false
                }
            };
            self.set_reachable(reachable).await;
        }
    }
}

/// grpc.health.v1 whose `Watch` streams end, after a last NOT_SERVING, when
/// the server drains: tonic-health's never end, and an open one would hold
/// the drain until its deadline.
struct DrainingHealth {
    inner: tonic_health::server::HealthService,
    closing: tokio::sync::watch::Receiver<bool>,
}

#[tonic::async_trait]
impl tonic_health::pb::health_server::Health for DrainingHealth {
    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        self.inner.check(request).await
    }

    type WatchStream =
        futures::stream::BoxStream<'static, Result<HealthCheckResponse, tonic::Status>>;

    async fn watch(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let updates = self.inner.watch(request).await?.into_inner();
        let mut closing = self.closing.clone();
        let drained = async move {
            let _ = closing.wait_for(|closed| *closed).await;
        };
        let last = futures::stream::once(async {
            Ok(HealthCheckResponse {
                status: tonic_health::ServingStatus::NotServing as i32,
            })
        });
        let stream = futures::StreamExt::take_until(updates, drained);
        Ok(tonic::Response::new(Box::pin(futures::StreamExt::chain(
            stream, last,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use lightning_store_adapters::auth::policy::{RPCS, grpc_need};

    use super::served_methods;

    #[test]
    fn every_served_rpc_has_one_entry_and_every_entry_is_served() {
        let served: std::collections::HashSet<String> = served_methods().paths().collect();
        let listed: std::collections::HashSet<&str> = RPCS.iter().map(|(path, _)| *path).collect();
        assert_eq!(listed.len(), RPCS.len(), "an RPC is listed twice");
        for path in &served {
            assert!(
                listed.contains(path.as_str()),
                "{path} has no entry in RPCS"
            );
        }
        for path in &listed {
            assert!(
                served.contains(*path),
                "RPCS lists {path}, which no service serves"
            );
        }
        assert!(served.len() > 30, "{served:?}");
        assert_eq!(
            grpc_need("/lightningstore.v1.LightningStoreService/Nope"),
            None
        );
    }
}
