//! HTTP on the gRPC port: HTTP/1.1 and h2c requests beside gRPC calls on
//! one listener (also under concurrent load of both), JSON 404/405 answers,
//! body limits, OTLP/HTTP saturation, and HTTP requests in the call layer's
//! logs and metrics.

use crate::common;

use common::http::{HttpClient, Version};
use common::{Backend, TestServer};
use lightning_store::core::limits::RequestLimits;
use lightning_store::metrics::Metrics;
use lightning_store::proto;
use lightning_store::server::ServerConfig;

#[tokio::test]
async fn http1_h2c_and_grpc_share_one_port() {
    let server = TestServer::start(Backend::Memory).await;
    for version in [Version::Http1, Version::H2c] {
        let http = HttpClient::new(server.addr, version);
        let health = http.get("/v1/agl/health").await;
        assert_eq!(health.status, 200, "{version:?}");
        assert_eq!(health.text(), r#"{"status":"ok"}"#);
        assert_eq!(health.headers["content-type"], "application/json");
    }
    let stats = server
        .client()
        .await
        .get_statistics(proto::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.name, "memory");
    server.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_answers() {
    let server = TestServer::start(Backend::Memory).await;
    let http = HttpClient::new(server.addr, Version::Http1);

    let missing = http.get("/v1/agl/no-such-route").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json(), serde_json::json!({"detail": "Not Found"}));

    let wrong_method = http.request("DELETE", "/v1/agl/health", &[], "").await;
    assert_eq!(wrong_method.status, 405);
    assert_eq!(
        wrong_method.json(),
        serde_json::json!({"detail": "Method Not Allowed"})
    );

    // A gRPC call to an unknown method still gets gRPC's UNIMPLEMENTED.
    let h2 = HttpClient::new(server.addr, Version::H2c);
    let grpc = h2
        .request(
            "POST",
            "/no.such.Service/Method",
            &[("content-type", "application/grpc"), ("te", "trailers")],
            vec![0u8, 0, 0, 0, 0],
        )
        .await;
    assert_eq!(grpc.status, 200);
    assert_eq!(grpc.headers["grpc-status"], "12");
    server.stop().await;
}

#[tokio::test]
async fn http_requests_carry_request_ids_and_are_counted_by_route() {
    let metrics = Metrics::new();
    let config = ServerConfig {
        metrics: metrics.clone(),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Backend::Memory, config).await;
    let http = HttpClient::new(server.addr, Version::Http1);

    let echoed = http
        .request(
            "GET",
            "/v1/agl/health",
            &[("x-request-id", "http-test-7")],
            "",
        )
        .await;
    assert_eq!(echoed.headers["x-request-id"], "http-test-7");
    let timing = echoed.headers["server-timing"].to_str().unwrap();
    let millis: f64 = timing.strip_prefix("app;dur=").unwrap().parse().unwrap();
    assert!((0.0..10_000.0).contains(&millis), "{timing}");
    let generated = http.get("/v1/agl/health").await;
    assert_eq!(generated.headers["x-request-id"].len(), 32);
    http.get("/v1/agl/unknown/ro-123").await;

    let text = metrics
        .render(
            &[("default".into(), server.engine.clone())],
            lightning_store::metrics::Exposition::PrometheusText,
        )
        .await;
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(
        has(
            r#"lightning_store_http_requests_total{method="GET",route="/v1/agl/health",status="200"} 2"#
        ),
        "{text}"
    );
    // Unknown paths share one label: raw paths never become label values.
    assert!(
        has(
            r#"lightning_store_http_requests_total{method="GET",route="unmatched",status="404"} 1"#
        ),
        "{text}"
    );
    assert!(!text.contains("ro-123"));
    server.stop().await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_and_nothing_is_written() {
    let server = TestServer::start_with_limits(
        Backend::Memory,
        RequestLimits {
            max_control_message_bytes: 4096,
            max_message_bytes: 4096,
            ..RequestLimits::default()
        },
    )
    .await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let big = serde_json::json!({"rollouts": [{"input": "x".repeat(5000)}]});
    let refused = http
        .post_json("/v1/agl/queues/rollouts/enqueue", &big)
        .await;
    assert_eq!(refused.status, 413);
    assert_eq!(
        refused.json(),
        serde_json::json!({"detail": "request body is larger than 4096 bytes"})
    );
    // A gzipped OTLP body is limited after decompression too.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut encoder, &vec![0u8; 10_000]).unwrap();
    let bomb = encoder.finish().unwrap();
    assert!(bomb.len() < 4096);
    let otlp = http
        .request(
            "POST",
            "/v1/traces",
            &[
                ("content-type", "application/x-protobuf"),
                ("content-encoding", "gzip"),
            ],
            bomb,
        )
        .await;
    assert_eq!(otlp.status, 413);
    let stats = server.engine.statistics().await.unwrap();
    assert_eq!((stats.counts.rollouts, stats.counts.spans), (0, 0));
    server.stop().await;
}

#[tokio::test]
async fn a_saturated_otlp_receiver_answers_503_with_retry_after() {
    let config = ServerConfig {
        otlp_max_in_flight: 0,
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Backend::Memory, config).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let answer = http
        .request(
            "POST",
            "/v1/traces",
            &[("content-type", "application/x-protobuf")],
            Vec::new(),
        )
        .await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.headers["retry-after"], "1");
    assert_eq!(answer.headers["content-type"], "application/x-protobuf");
    let status = <tonic_types::Status as prost::Message>::decode(answer.body).unwrap();
    assert_eq!(status.code, tonic::Code::Unavailable as i32);
    server.stop().await;
}

/// One client's lifecycles, each checked to carry only its own data.
async fn http_lifecycles(http: HttpClient, client: String, rounds: usize) {
    for round in 0..rounds {
        let marker = format!("{client}-{round}");
        let worker = format!("worker-{client}");
        let started = http
            .post_json(
                "/v1/agl/rollouts",
                &serde_json::json!({"input": {"marker": marker}, "worker_id": worker}),
            )
            .await;
        assert_eq!(started.status, 201, "{}", started.text());
        let started = started.json();
        assert_eq!(started["input"]["marker"], marker.as_str());
        let rollout_id = started["rollout_id"].as_str().unwrap().to_owned();
        let attempt_id = started["attempt"]["attempt_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let span = serde_json::json!({
            "rollout_id": rollout_id, "attempt_id": attempt_id, "sequence_id": 1,
            "trace_id": marker, "span_id": "s", "parent_id": null, "name": marker,
            "status": {"status_code": "OK"}, "attributes": {}, "events": [], "links": [],
            "start_time": null, "end_time": null, "context": null, "parent": null,
            "resource": {"attributes": {}, "schema_url": ""}
        });
        let added = http.post_json("/v1/agl/spans", &span).await;
        assert_eq!(added.json()["name"], marker.as_str());
        let done = http
            .post_json(
                &format!("/v1/agl/rollouts/{rollout_id}/attempts/latest"),
                &serde_json::json!({"status": "succeeded"}),
            )
            .await;
        assert_eq!(done.json()["status"], "succeeded");
        let read = http
            .get(&format!("/v1/agl/rollouts/{rollout_id}"))
            .await
            .json();
        assert_eq!(
            (read["status"].as_str(), read["input"]["marker"].as_str()),
            (Some("succeeded"), Some(marker.as_str()))
        );
        let spans = http
            .post_json(
                "/v1/agl/spans/search",
                &serde_json::json!({"rollout_id": rollout_id}),
            )
            .await
            .json();
        assert_eq!(spans["total"], 1);
        assert_eq!(spans["items"][0]["name"], marker.as_str());
    }
}

async fn grpc_lifecycles(server: &TestServer, client: &str, rounds: usize) {
    let mut c = server.client().await;
    for round in 0..rounds {
        let marker = format!("{client}-{round}");
        let started = c
            .start_rollout(proto::StartRolloutRequest {
                rollout: Some(proto::RolloutSpec {
                    input_json: serde_json::json!({"marker": marker}).to_string(),
                    ..Default::default()
                }),
                worker_id: Some(format!("worker-{client}")),
            })
            .await
            .unwrap()
            .into_inner()
            .rollout
            .unwrap();
        let rollout_id = started.rollout_id.clone();
        let attempt_id = started.attempt.unwrap().attempt_id;
        c.add_span(proto::AddSpanRequest {
            span: Some(proto::Span {
                rollout_id: rollout_id.clone(),
                attempt_id,
                trace_id: marker.clone(),
                span_id: "s".into(),
                name: marker.clone(),
                ..Default::default()
            }),
            owner_epoch: None,
        })
        .await
        .unwrap();
        c.update_attempt(proto::UpdateAttemptRequest {
            rollout_id: rollout_id.clone(),
            attempt_id: "latest".into(),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".into()],
            }),
            status: proto::AttemptStatus::Succeeded as i32,
            ..Default::default()
        })
        .await
        .unwrap();
        let read = c
            .get_rollout(proto::GetRolloutRequest {
                rollout_id: rollout_id.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .rollout
            .unwrap();
        let input: serde_json::Value = serde_json::from_str(&read.input_json).unwrap();
        assert_eq!(input["marker"], marker.as_str());
        assert_eq!(read.status, proto::RolloutStatus::Succeeded as i32);
        let spans = c
            .query_spans(proto::QuerySpansRequest {
                rollout_id,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(spans.spans.len(), 1);
        assert_eq!(spans.spans[0].name, marker);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_and_http_under_concurrent_load_share_the_port_without_cross_talk() {
    const ROUNDS: usize = 25;
    let server = std::sync::Arc::new(TestServer::start(Backend::Memory).await);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..4 {
        for (version, name) in [(Version::Http1, "http1"), (Version::H2c, "h2c")] {
            let http = HttpClient::new(server.addr, version);
            tasks.spawn(http_lifecycles(http, format!("{name}-{i}"), ROUNDS));
        }
        let server = server.clone();
        tasks.spawn(async move { grpc_lifecycles(&server, &format!("grpc-{i}"), ROUNDS).await });
    }
    tokio::time::timeout(std::time::Duration::from_secs(120), async {
        while let Some(result) = tasks.join_next().await {
            result.expect("a client's lifecycles hold");
        }
    })
    .await
    .expect("the load finishes in time");
    let stats = server.engine.statistics().await.unwrap();
    assert_eq!(stats.counts.rollouts, 12 * ROUNDS as u64);
    assert_eq!(stats.counts.spans, 12 * ROUNDS as u64);
    assert_eq!(
        stats
            .counts
            .rollouts_by_status
            .get(&lightning_store::core::model::RolloutStatus::Succeeded),
        Some(&(12 * ROUNDS as u64))
    );
    std::sync::Arc::into_inner(server).unwrap().stop().await;
}

#[tokio::test]
async fn cors_lets_the_dashboard_origin_read_the_api() {
    let config = ServerConfig {
        cors_origins: vec!["http://dashboard.local:5173".into()],
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Backend::Memory, config).await;
    let http = HttpClient::new(server.addr, Version::Http1);
    let preflight = http
        .request(
            "OPTIONS",
            "/v1/agl/rollouts",
            &[
                ("origin", "http://dashboard.local:5173"),
                ("access-control-request-method", "GET"),
            ],
            "",
        )
        .await;
    assert_eq!(
        preflight.headers["access-control-allow-origin"],
        "http://dashboard.local:5173"
    );
    let read = http
        .request(
            "GET",
            "/v1/agl/rollouts?limit=5",
            &[("origin", "http://dashboard.local:5173")],
            "",
        )
        .await;
    assert_eq!(read.status, 200);
    assert_eq!(
        read.headers["access-control-allow-origin"],
        "http://dashboard.local:5173"
    );
    let other = http
        .request(
            "GET",
            "/v1/agl/rollouts",
            &[("origin", "http://elsewhere")],
            "",
        )
        .await;
    assert!(!other.headers.contains_key("access-control-allow-origin"));
    server.stop().await;
}
