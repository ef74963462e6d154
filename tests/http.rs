//! HTTP on the gRPC port: HTTP/1.1 and h2c requests beside gRPC calls on
//! one listener, JSON 404/405 answers, and HTTP requests in the call
//! layer's logs and metrics.

mod common;

use common::http::{HttpClient, Version};
use common::{Backend, TestServer};
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
    let generated = http.get("/v1/agl/health").await;
    assert_eq!(generated.headers["x-request-id"].len(), 32);
    http.get("/v1/agl/unknown/ro-123").await;

    let text = metrics.render(&server.engine).await;
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
