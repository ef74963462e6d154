//! Assembles the gRPC services on one listener: the store, grpc.health.v1
//! and server reflection (v1 and v1alpha, for grpcurl 1.8).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::codec::CompressionEncoding;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;

use crate::api::otlp::OtlpTraceService;
use crate::api::service::StoreService;
use crate::core::engine::Engine;
use crate::proto::lightning_store_service_server::LightningStoreServiceServer;

const STORE_SERVICE: &str = "lightningstore.v1.LightningStoreService";
const TRACE_SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
const HEALTH_SERVICE: &str = "grpc.health.v1.Health";

/// Settings of the gRPC server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted request, in bytes (OTLP exporters expect 64 MiB).
    pub max_message_bytes: usize,
    /// How long in-flight calls may run after shutdown starts.
    pub drain_timeout: Duration,
    /// OTLP exports processed at once; more are refused with UNAVAILABLE and a retry delay.
    pub otlp_max_in_flight: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 64 * 1024 * 1024,
            drain_timeout: Duration::from_secs(10),
            otlp_max_in_flight: 64,
        }
    }
}

/// Error returned when the server cannot start or fails while serving.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// Serves every service on an already-bound listener until `shutdown`
/// resolves, then drains: open waits end at once, in-flight calls get
/// `drain_timeout` to finish.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<LightningStoreServiceServer<StoreService>>()
        .await;
    health_reporter
        .set_service_status(TRACE_SERVICE, tonic_health::ServingStatus::Serving)
        .await;

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(opentelemetry_proto::DESCRIPTORS)
            // The OTLP bundle also declares services we do not serve.
            .with_service_name(STORE_SERVICE)
            .with_service_name(TRACE_SERVICE)
            .with_service_name(HEALTH_SERVICE)
    };
    let store_service = LightningStoreServiceServer::new(StoreService::new(engine.clone()))
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(usize::MAX)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    let trace_service = TraceServiceServer::new(OtlpTraceService::new(
        engine.clone(),
        config.otlp_max_in_flight,
    ))
    .max_decoding_message_size(config.max_message_bytes)
    .accept_compressed(CompressionEncoding::Gzip)
    .send_compressed(CompressionEncoding::Gzip);

    let watchdog = tokio::spawn(engine.clone().run_watchdog());
    let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
    let drain_engine = engine.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight calls");
        health_reporter
            .set_not_serving::<LightningStoreServiceServer<StoreService>>()
            .await;
        health_reporter
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        drain_engine.close();
        let _ = drain_tx.send(());
    };

    let local_addr = listener.local_addr()?;
    let server = tonic::transport::Server::builder()
        .layer(tower::util::MapResponseLayer::new(
            oversized_is_resource_exhausted,
        ))
        .add_service(health_service)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(store_service)
        .add_service(trace_service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), signal);
    tracing::info!(%local_addr, "serving gRPC");

    // Bound the drain: a call that ignores shutdown must not hold the process.
    tokio::pin!(server);
    let result = tokio::select! {
        result = &mut server => result.map_err(ServeError::from),
        () = async {
            let _ = drain_rx.await;
            tokio::time::sleep(config.drain_timeout).await;
        } => {
            tracing::warn!(timeout = ?config.drain_timeout, "drain deadline passed, closing remaining calls");
            Ok(())
        }
    };
    engine.close();
    let _ = watchdog.await;
    result
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
