//! The Prometheus endpoint: scraped over HTTP while a real server handles calls.

use std::net::SocketAddr;
use std::sync::Arc;

use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, MetricsListener, ServerConfig};
use lightning_store::store::memory::MemoryStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const STORE: &str = "lightningstore.v1.LightningStoreService";

/// Returns the body of `GET /metrics`, checking the status line.
async fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    body.to_owned()
}

/// Returns the value of the sample `name` whose labels include every pair of
/// `labels` (`key="value"`), or None when there is no such sample.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        (metric == name && labels.iter().all(|label| rest.contains(label)))
            .then(|| value.parse().unwrap())
    })
}

fn calls(text: &str, method: &str, code: &str) -> f64 {
    let method = format!("method=\"{method}\"");
    let code = format!("code=\"{code}\"");
    let service = format!("service=\"{STORE}\"");
    sample(
        text,
        "lightning_store_grpc_requests_total",
        &[&service, &method, &code],
    )
    .unwrap_or(0.0)
}

fn spec() -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: "{\"task\":1}".to_owned(),
        ..Default::default()
    }
}

#[tokio::test]
async fn scrape_reflects_calls_and_store_totals() {
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = metrics.local_addr().unwrap();
    let engine = Arc::new(Engine::new(
        Arc::new(MemoryStore::with_event_retention(1000)),
        EngineConfig::default(),
    ));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        grpc,
        engine,
        ServerConfig {
            metrics_listener: Some(MetricsListener::new(metrics)),
            ..ServerConfig::default()
        },
        async move {
            let _ = stopped.await;
        },
    ));

    let before = scrape(metrics_addr).await;
    assert_eq!(sample(&before, "lightning_store_store_up", &[]), Some(1.0));
    assert_eq!(
        sample(&before, "lightning_store_queue_depth", &[]),
        Some(0.0)
    );
    assert_eq!(calls(&before, "EnqueueRollout", "OK"), 0.0);

    let mut client = LightningStoreServiceClient::connect(format!("http://{grpc_addr}"))
        .await
        .unwrap();
    for _ in 0..3 {
        client
            .enqueue_rollout(pb::EnqueueRolloutRequest {
                rollout: Some(spec()),
            })
            .await
            .unwrap();
    }
    let missing = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        })
        .await;
    let missing_code = missing
        .map(|_| tonic::Code::Ok)
        .unwrap_or_else(|s| s.code());
    assert_ne!(missing_code, tonic::Code::Ok);

    let after = scrape(metrics_addr).await;
    assert_eq!(calls(&after, "EnqueueRollout", "OK"), 3.0);
    let code_name = match missing_code {
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        other => panic!("unexpected code {other:?} for a missing rollout"),
    };
    assert_eq!(calls(&after, "GetRollout", code_name), 1.0);
    assert_eq!(calls(&after, "GetRollout", "OK"), 0.0);
    assert_eq!(
        sample(
            &after,
            "lightning_store_grpc_request_duration_seconds_count",
            &["method=\"EnqueueRollout\"", "code=\"OK\""],
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&after, "lightning_store_queue_depth", &[]),
        Some(3.0)
    );
    assert_eq!(sample(&after, "lightning_store_rollouts", &[]), Some(3.0));
    assert!(sample(&after, "lightning_store_uptime_seconds", &[]).unwrap() >= 0.0);
    assert!(after.contains("# TYPE lightning_store_grpc_request_duration_seconds histogram"));

    // A dequeue moves the queue depth down on the next scrape.
    client
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap();
    let dequeued = scrape(metrics_addr).await;
    assert_eq!(
        sample(&dequeued, "lightning_store_queue_depth", &[]),
        Some(2.0)
    );
    assert_eq!(calls(&dequeued, "DequeueRollout", "OK"), 1.0);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
    // The metrics endpoint stops with the server.
    assert!(TcpStream::connect(metrics_addr).await.is_err());
}
