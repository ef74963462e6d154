//! The Prometheus endpoint: scraped over HTTP while a real server handles calls.

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::metrics::Metrics;
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, MetricsListener, ServerConfig};
use lightning_store::store::memory::MemoryStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::http::{HttpClient, Version};

const STORE: &str = "lightningstore.v1.LightningStoreService";

/// Returns the body of `GET /metrics` in the Prometheus text format (what a
/// scraper gets without an `Accept` header), checking the status line.
async fn scrape(addr: SocketAddr) -> String {
    let (content_type, body) = scrape_accepting(addr, None).await;
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    body
}

/// Returns the `Content-Type` and body of `GET /metrics` sent with `accept`.
async fn scrape_accepting(addr: SocketAddr, accept: Option<&str>) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: test\r\n{accept}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .expect("a content-type header");
    (content_type, body.to_owned())
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

fn span(rollout_id: &str, attempt_id: &str, span_id: &str) -> pb::Span {
    pb::Span {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        trace_id: "0af7651916cd43dd8448eb211c80319c".to_owned(),
        span_id: span_id.to_owned(),
        name: "llm".to_owned(),
        ..Default::default()
    }
}

/// A server with metrics wired to both the gRPC layer and the engine.
struct Served {
    grpc: SocketAddr,
    metrics: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), server::ServeError>>,
}

async fn serve_with_metrics() -> Served {
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let metrics_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = metrics_listener.local_addr().unwrap();
    let metrics = Metrics::new();
    let engine = Arc::new(Engine::new(
        Arc::new(MemoryStore::with_event_retention(1000)),
        EngineConfig {
            watchdog_interval: Duration::from_millis(10),
            observer: Arc::new(metrics.clone()),
            ..EngineConfig::default()
        },
    ));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(
        grpc,
        engine,
        ServerConfig {
            metrics_listener: Some(MetricsListener::new(metrics_listener)),
            metrics,
            ..ServerConfig::default()
        },
        async move {
            let _ = stopped.await;
        },
    ));
    Served {
        grpc: grpc_addr,
        metrics: metrics_addr,
        stop,
        task,
    }
}

/// Scrapes until `done` holds for the text, for at most 5 s (for changes the
/// server makes after a client is gone, which no call can wait for).
async fn scrape_until(addr: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = scrape(addr).await;
        if done(&text) || tokio::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn scrape_reflects_calls_and_store_totals() {
    let served = serve_with_metrics().await;
    let metrics_addr = served.metrics;

    let before = scrape(metrics_addr).await;
    assert_eq!(sample(&before, "lightning_store_store_up", &[]), Some(1.0));
    assert_eq!(
        sample(&before, "lightning_store_queue_depth", &[]),
        Some(0.0)
    );
    assert_eq!(
        sample(&before, "lightning_store_queue_oldest_age_seconds", &[]),
        Some(0.0)
    );
    assert_eq!(calls(&before, "EnqueueRollout", "OK"), 0.0);

    let mut client = LightningStoreServiceClient::connect(format!("http://{}", served.grpc))
        .await
        .unwrap();
    for _ in 0..3 {
        client
            .enqueue_rollout(pb::EnqueueRolloutRequest {
                request_id: None,
                rollout: Some(spec()),
            })
            .await
            .unwrap();
    }
    let missing = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let after = scrape(metrics_addr).await;
    assert_eq!(calls(&after, "EnqueueRollout", "OK"), 3.0);
    assert_eq!(calls(&after, "GetRollout", "NOT_FOUND"), 1.0);
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
    assert_eq!(
        sample(&after, "lightning_store_rollouts", &["status=\"queuing\""]),
        Some(3.0)
    );
    assert_eq!(
        sample(&after, "lightning_store_rollouts", &["status=\"running\""]),
        Some(0.0)
    );
    assert!(sample(&after, "lightning_store_queue_oldest_age_seconds", &[]).unwrap() > 0.0);
    assert!(sample(&after, "lightning_store_uptime_seconds", &[]).unwrap() >= 0.0);
    assert!(after.contains("# TYPE lightning_store_grpc_request_duration_seconds histogram"));
    let commits = sample(
        &after,
        "lightning_store_backend_duration_seconds_count",
        &["phase=\"commit\"", "result=\"ok\""],
    )
    .unwrap();
    assert!(commits >= 4.0, "{commits} commits");

    // A dequeue moves the queue down and creates a preparing attempt; spans
    // count as stored or duplicate.
    let rollout = client
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let attempt_id = rollout.attempt.unwrap().attempt_id;
    let rollout_id = rollout.rollout_id;
    let spans = vec![
        span(&rollout_id, &attempt_id, "00f067aa0ba902b7"),
        span(&rollout_id, &attempt_id, "00f067aa0ba902b8"),
    ];
    client
        .add_spans(pb::AddSpansRequest {
            spans: spans.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    client
        .add_spans(pb::AddSpansRequest {
            spans: spans[..1].to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let dequeued = scrape(metrics_addr).await;
    assert_eq!(
        sample(&dequeued, "lightning_store_queue_depth", &[]),
        Some(2.0)
    );
    assert_eq!(calls(&dequeued, "DequeueRollout", "OK"), 1.0);
    assert_eq!(
        sample(
            &dequeued,
            "lightning_store_rollouts",
            &["status=\"running\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &dequeued,
            "lightning_store_attempts",
            &["status=\"running\""]
        ),
        Some(1.0)
    );
    for (result, count) in [("stored", 2.0), ("duplicate", 1.0)] {
        let label = format!("result=\"{result}\"");
        assert_eq!(
            sample(&dequeued, "lightning_store_spans_ingested_total", &[&label]),
            Some(count),
            "{result}"
        );
    }
    assert_eq!(sample(&dequeued, "lightning_store_spans", &[]), Some(2.0));

    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
    // The metrics endpoint stops with the server.
    assert!(TcpStream::connect(metrics_addr).await.is_err());
}

#[tokio::test]
async fn streams_sessions_and_verdicts_are_counted() {
    let served = serve_with_metrics().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", served.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = LightningStoreServiceClient::new(channel);

    // An open WatchEvents stream and an open worker session.
    let mut events = client
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    events.message().await.unwrap().expect("progress message");
    let (session_tx, session_rx) = tokio::sync::mpsc::channel(4);
    session_tx
        .send(pb::WorkerSessionRequest {
            message: Some(pb::worker_session_request::Message::Open(pb::OpenSession {
                worker_id: "worker-1".to_owned(),
                slots: 1,
            })),
        })
        .await
        .unwrap();
    let mut session = client
        .worker_session(tokio_stream::wrappers::ReceiverStream::new(session_rx))
        .await
        .unwrap()
        .into_inner();
    let opened = session.message().await.unwrap().unwrap();
    assert!(matches!(
        opened.message,
        Some(pb::worker_session_response::Message::Opened(_))
    ));
    let open = scrape(served.metrics).await;
    let in_flight = |text: &str, method: &str| {
        let method = format!("method=\"{method}\"");
        sample(text, "lightning_store_grpc_in_flight", &[&method])
    };
    assert_eq!(in_flight(&open, "WatchEvents"), Some(1.0));
    assert_eq!(in_flight(&open, "WorkerSession"), Some(1.0));
    assert_eq!(
        sample(&open, "lightning_store_worker_sessions", &[]),
        Some(1.0)
    );

    // The session gets a rollout with a short timeout; the watchdog expires it.
    let rollout = client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                config: Some(pb::RolloutConfig {
                    timeout_seconds: Some(0.05),
                    ..Default::default()
                }),
                ..spec()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let assigned = session.message().await.unwrap().unwrap();
    assert!(matches!(
        assigned.message,
        Some(pb::worker_session_response::Message::Assignment(_))
    ));
    let mut completions = client
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec![rollout.rollout_id.clone()],
            timeout: None,
        })
        .await
        .unwrap()
        .into_inner();
    let finished = completions.message().await.unwrap().unwrap();
    assert_eq!(finished.rollout.unwrap().rollout_id, rollout.rollout_id);
    let expired = scrape(served.metrics).await;
    assert_eq!(
        sample(
            &expired,
            "lightning_store_watchdog_verdicts_total",
            &["status=\"timeout\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &expired,
            "lightning_store_attempts",
            &["status=\"timeout\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&expired, "lightning_store_rollouts", &["status=\"failed\""]),
        Some(1.0)
    );

    // Closing the streams brings the gauges back down and records how each ended.
    drop(events);
    drop(session_tx);
    drop(session);
    let closed = scrape_until(served.metrics, |text| {
        in_flight(text, "WatchEvents") == Some(0.0)
            && in_flight(text, "WorkerSession") == Some(0.0)
            && sample(text, "lightning_store_worker_sessions", &[]) == Some(0.0)
    })
    .await;
    assert_eq!(in_flight(&closed, "WatchEvents"), Some(0.0), "{closed}");
    assert_eq!(in_flight(&closed, "WorkerSession"), Some(0.0), "{closed}");
    assert_eq!(
        sample(&closed, "lightning_store_worker_sessions", &[]),
        Some(0.0)
    );
    assert_eq!(calls(&closed, "WatchRolloutCompletions", "OK"), 1.0);

    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn responses_echo_or_assign_request_ids() {
    let served = serve_with_metrics().await;
    let mut client = LightningStoreServiceClient::connect(format!("http://{}", served.grpc))
        .await
        .unwrap();
    let mut request = tonic::Request::new(pb::GetStatisticsRequest::default());
    request
        .metadata_mut()
        .insert("x-request-id", "trace-me-42".parse().unwrap());
    let response = client.get_statistics(request).await.unwrap();
    assert_eq!(
        response.metadata().get("x-request-id").unwrap(),
        "trace-me-42"
    );
    // Errors carry it too, and a call without one gets a fresh id.
    let first = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        })
        .await
        .unwrap_err();
    let second = client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: "ro-missing".to_owned(),
        })
        .await
        .unwrap_err();
    let id = |status: &tonic::Status| {
        status
            .metadata()
            .get("x-request-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(id(&first).len(), 32);
    assert_ne!(id(&first), id(&second));
    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
}

/// Runs Prometheus' own `promtool check metrics` (parser and linter of the
/// text format) over `text`, returning its exit status and output.
async fn promtool_check(text: &str) -> (std::process::ExitStatus, String) {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = tokio::process::Command::new(repository.join("tools/promtool.sh"))
        .output()
        .await
        .expect("tools/promtool.sh runs");
    assert!(found.status.success(), "tools/promtool.sh failed");
    let promtool = String::from_utf8(found.stdout).unwrap();
    let mut check = tokio::process::Command::new(promtool.trim())
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = check.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = check.wait_with_output().await.unwrap();
    let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status, said)
}

#[tokio::test]
async fn the_format_follows_the_accept_header_and_the_text_format_passes_promtool() {
    let served = serve_with_metrics().await;
    let mut client = LightningStoreServiceClient::connect(format!("http://{}", served.grpc))
        .await
        .unwrap();
    client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(spec()),
        })
        .await
        .unwrap();

    let text = scrape(served.metrics).await;
    assert!(!text.contains("# EOF"), "{text}");
    assert!(
        text.contains("# TYPE lightning_store_grpc_requests_total counter"),
        "{text}"
    );
    if crate::common::available(crate::common::Tool::Promtool) {
        let (status, said) = promtool_check(&text).await;
        assert!(status.success(), "promtool check metrics: {said}\n{text}");
    }

    // What Prometheus sends when it scrapes.
    let prometheus_accept = "application/openmetrics-text;version=1.0.0,\
        application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (content_type, openmetrics) =
        scrape_accepting(served.metrics, Some(prometheus_accept)).await;
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert!(
        openmetrics.contains("# TYPE lightning_store_grpc_requests counter"),
        "{openmetrics}"
    );
    // The same samples either way.
    let samples = |body: &str| -> Vec<String> {
        body.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series.to_owned()))
            .collect()
    };
    assert_eq!(samples(&text), samples(&openmetrics));

    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
}

/// Paths the server does not serve share one label (they
/// used to create a label value each, and to drive a gauge negative), and a
/// call the client abandons is counted as CANCELLED and leaves the
/// in-flight gauge at zero.
#[tokio::test]
async fn unknown_paths_share_one_label_and_abandoned_calls_are_counted() {
    let served = serve_with_metrics().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", served.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    for i in 0..5 {
        grpc.ready().await.unwrap();
        let path = format!("/made.up.Service{i}/Method{i}").parse().unwrap();
        let codec =
            tonic_prost::ProstCodec::<pb::GetRolloutRequest, pb::GetRolloutResponse>::default();
        let status = grpc
            .unary(
                tonic::Request::new(pb::GetRolloutRequest::default()),
                path,
                codec,
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unimplemented);
    }

    let mut client = LightningStoreServiceClient::new(channel);
    let waiting = tokio::spawn(async move {
        client
            .dequeue_rollout(pb::DequeueRolloutRequest {
                worker_id: None,
                wait: Some(prost_types::Duration {
                    seconds: 600,
                    nanos: 0,
                }),
            })
            .await
    });
    let dequeue_in_flight = |text: &str| {
        sample(
            text,
            "lightning_store_grpc_in_flight",
            &["method=\"DequeueRollout\""],
        )
    };
    let text = scrape_until(served.metrics, |t| dequeue_in_flight(t) == Some(1.0)).await;
    assert_eq!(dequeue_in_flight(&text), Some(1.0), "{text}");
    waiting.abort();
    let _ = waiting.await;
    let text = scrape_until(served.metrics, |t| dequeue_in_flight(t) == Some(0.0)).await;
    assert_eq!(dequeue_in_flight(&text), Some(0.0), "{text}");
    assert_eq!(calls(&text, "DequeueRollout", "CANCELLED"), 1.0, "{text}");

    assert!(
        !text.contains("made.up") && !text.contains("Method"),
        "{text}"
    );
    let unknown = [
        "service=\"unknown\"",
        "method=\"unknown\"",
        "code=\"UNIMPLEMENTED\"",
    ];
    assert_eq!(
        sample(&text, "lightning_store_grpc_requests_total", &unknown),
        Some(5.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "lightning_store_grpc_in_flight", &unknown[..2]),
        Some(0.0),
        "{text}"
    );
    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn agl1_reads_transitions_and_events_are_counted() {
    let served = serve_with_metrics().await;
    let http = HttpClient::new(served.grpc, Version::Http1);
    let json = [("content-type", "application/json")];
    let created = http
        .request(
            "POST",
            "/api/rollouts",
            &json,
            r#"[{"rollout_id":"m1","input":{}}]"#,
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());

    // The first GET reads the store and fills the cache; one of the next
    // ones (a background commit may keep a read from filling) is a hit.
    let mut gets = 0.0;
    let mut text = String::new();
    for _ in 0..50 {
        assert_eq!(http.get("/api/rollouts/m1").await.status, 200);
        gets += 1.0;
        text = scrape(served.metrics).await;
        let reads = |source: &str| {
            sample(
                &text,
                "lightning_store_agl1_rollout_reads_total",
                &[&format!("source=\"{source}\"")],
            )
        };
        if reads("cache").is_some() {
            assert!(reads("store").unwrap() >= 1.0);
            assert_eq!(reads("cache").unwrap() + reads("store").unwrap(), gets);
            break;
        }
    }
    assert!(
        text.contains("lightning_store_agl1_rollout_reads_total{source=\"cache\"}"),
        "a repeated GET of an unchanged rollout is answered from the cache"
    );

    let patched = http
        .request(
            "PATCH",
            "/api/rollouts/m1",
            &json,
            r#"{"status":{"state":"running"}}"#,
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    let posted = http
        .request(
            "POST",
            "/api/rollouts/m1/attempt/0/events",
            &json,
            r#"{"event_type":"reward","data":{"reward":1.0}}"#,
        )
        .await;
    assert!(posted.status < 300, "{}", posted.text());
    let text = scrape(served.metrics).await;
    assert_eq!(
        sample(
            &text,
            "lightning_store_agl1_transitions_total",
            &["state=\"running\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "lightning_store_agl1_events_total",
            &["type=\"reward\""]
        ),
        Some(1.0)
    );
}
