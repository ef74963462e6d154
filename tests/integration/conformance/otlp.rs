//! OTLP/gRPC trace ingest (`docs/semantics.md#otlp-ingest`) through the real server.

use std::time::Duration;

use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse, trace_service_client::TraceServiceClient,
};
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span};
use tonic::Code;
use tonic::codec::CompressionEncoding;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Value::StringValue(value.into()))
}

fn otlp_span(name: &str, attributes: Vec<KeyValue>) -> Span {
    let id = uuid::Uuid::new_v4();
    Span {
        trace_id: id.as_bytes().to_vec(),
        span_id: id.as_bytes()[..8].to_vec(),
        name: name.into(),
        start_time_unix_nano: 1_700_000_000_000_000_001,
        end_time_unix_nano: 1_700_000_001_000_000_000,
        attributes,
        ..Default::default()
    }
}

fn request(resource: Vec<KeyValue>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "agentlightning".into(),
                    version: "0.3.0".into(),
                    ..Default::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: "https://opentelemetry.io/schemas/1.21.0".into(),
        }],
    }
}

fn routed(rollout_id: &str, attempt_id: &str) -> Vec<KeyValue> {
    vec![
        text("service.name", "runner"),
        text("agentlightning.rollout_id", rollout_id),
        text("agentlightning.attempt_id", attempt_id),
    ]
}

async fn otlp_client(server: &TestServer) -> TraceServiceClient<tonic::transport::Channel> {
    TraceServiceClient::new(server.channel().await)
}

async fn export(
    client: &mut TraceServiceClient<tonic::transport::Channel>,
    request: ExportTraceServiceRequest,
) -> ExportTraceServiceResponse {
    client.export(request).await.unwrap().into_inner()
}

async fn running(c: &mut Client) -> (String, String) {
    let rollout = enqueue(c, "{}").await;
    let claimed = dequeue(c, None).await.unwrap();
    (rollout.rollout_id, attempt_of(&claimed).attempt_id.clone())
}

async fn spans_of(c: &mut Client, rollout_id: &str) -> Vec<pb::Span> {
    rollout_spans(c, rollout_id).await.spans
}

#[tokio::test]
async fn exported_spans_are_routed_by_resource_and_span_attributes() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut otlp = otlp_client(&server).await;
    let (r, first) = running(&mut c).await;
    let second = start_attempt(&mut c, &r).await;

    let mut overridden = otlp_span("override", vec![text("agentlightning.attempt_id", &second)]);
    overridden.kind = span::SpanKind::Client as i32;
    overridden.status = Some(Status {
        code: 2,
        message: "bad".into(),
    });
    overridden.parent_span_id = vec![1, 2, 3, 4, 5, 6, 7, 8];
    overridden.events = vec![span::Event {
        time_unix_nano: 1_700_000_000_500_000_000,
        name: "ev".into(),
        attributes: vec![kv("n", Value::IntValue(i64::MAX))],
        ..Default::default()
    }];
    let response = export(
        &mut otlp,
        request(
            routed(&r, &first),
            vec![otlp_span("plain", vec![]), overridden],
        ),
    )
    .await;
    assert_eq!(response.partial_success, None);

    let stored = spans_of(&mut c, &r).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(
        (stored[0].name.as_str(), stored[0].attempt_id.as_str()),
        ("plain", first.as_str())
    );
    assert_eq!(
        (stored[1].name.as_str(), stored[1].attempt_id.as_str()),
        ("override", second.as_str())
    );
    assert_eq!(
        stored.iter().map(|s| s.sequence_id).collect::<Vec<_>>(),
        [Some(1), Some(2)]
    );
    let s = &stored[1];
    assert_eq!(s.kind, pb::SpanKind::Client as i32);
    assert_eq!(
        s.status,
        Some(pb::SpanStatus {
            code: pb::SpanStatusCode::Error as i32,
            description: Some("bad".into()),
            extra_json: String::new(),
        })
    );
    assert_eq!(s.parent_id.as_deref(), Some("0102030405060708"));
    assert_eq!(s.trace_id.len(), 32);
    assert_eq!(
        s.start_time,
        Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 1
        })
    );
    assert_eq!(
        s.events[0].attributes[0].value,
        Some(pb::AttributeValue {
            value: Some(pb::attribute_value::Value::IntValue(i64::MAX))
        })
    );
    assert_eq!(s.scope.as_ref().unwrap().name, "agentlightning");
    let resource = s.resource.as_ref().unwrap();
    assert_eq!(
        resource.schema_url,
        "https://opentelemetry.io/schemas/1.21.0"
    );
    assert_eq!(resource.attributes[0].key, "service.name");
    assert_eq!(
        s.attributes[0].key, "agentlightning.attempt_id",
        "routing attributes are kept"
    );

    // Spans are heartbeats: the second (latest) attempt is running now.
    assert_eq!(status(&get(&mut c, &r).await), R::Running);
}

#[tokio::test]
async fn sequence_ids_are_allocated_in_order_and_explicit_ones_raise_the_counter() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut otlp = otlp_client(&server).await;
    let (r, at) = running(&mut c).await;
    let spans = vec![
        otlp_span("a", vec![]),
        otlp_span(
            "b",
            vec![kv("agentlightning.span_sequence_id", Value::IntValue(20))],
        ),
        otlp_span("c", vec![]),
        otlp_span("d", vec![text("agentlightning.span_sequence_id", "7")]),
        otlp_span(
            "e",
            vec![kv("agentlightning.span_sequence_id", Value::IntValue(-4))],
        ),
    ];
    export(&mut otlp, request(routed(&r, &at), spans)).await;
    let stored = spans_of(&mut c, &r).await;
    let by_name: Vec<_> = stored
        .iter()
        .map(|s| (s.name.as_str(), s.sequence_id.unwrap()))
        .collect();
    assert_eq!(by_name, [("a", 1), ("c", 2), ("e", 3), ("d", 7), ("b", 20)]);
    let next = c
        .get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
            rollout_id: r.clone(),
            attempt_id: at.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sequence_id;
    assert_eq!(next, 21);

    // A resource-level sequence id is shared by every span of the resource.
    let mut resource = routed(&r, &at);
    resource.push(kv("agentlightning.span_sequence_id", Value::IntValue(30)));
    export(
        &mut otlp,
        request(
            resource,
            vec![otlp_span("x", vec![]), otlp_span("y", vec![])],
        ),
    )
    .await;
    let shared: Vec<_> = spans_of(&mut c, &r)
        .await
        .into_iter()
        .filter(|s| s.sequence_id == Some(30))
        .collect();
    assert_eq!(shared.len(), 2);
}

#[tokio::test]
async fn unroutable_spans_are_rejected_individually_and_duplicates_are_idempotent() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut otlp = otlp_client(&server).await;
    let (r, at) = running(&mut c).await;
    let good = otlp_span("good", vec![]);
    let batch = vec![
        good.clone(),
        otlp_span(
            "unknown",
            vec![text("agentlightning.rollout_id", "ro-000000000000")],
        ),
        otlp_span("no-attempt", vec![text("agentlightning.attempt_id", "")]),
    ];
    let mut resource = routed(&r, &at);
    // The third span clears its attempt id; a blank id cannot be stored.
    let response = export(&mut otlp, request(resource.clone(), batch)).await;
    let partial = response.partial_success.expect("partial success");
    assert_eq!(partial.rejected_spans, 2);
    assert!(
        partial
            .error_message
            .contains("Rollout ro-000000000000 not found"),
        "{}",
        partial.error_message
    );
    assert!(
        partial
            .error_message
            .contains("attempt id must not be empty"),
        "{}",
        partial.error_message
    );
    assert_eq!(spans_of(&mut c, &r).await.len(), 1);

    // An exporter retry of the same span is accepted and stores nothing new.
    let again = export(&mut otlp, request(resource.clone(), vec![good])).await;
    assert_eq!(again.partial_success, None);
    assert_eq!(spans_of(&mut c, &r).await.len(), 1);

    resource.retain(|kv| kv.key != "agentlightning.rollout_id");
    let missing = export(
        &mut otlp,
        request(resource, vec![otlp_span("lost", vec![])]),
    )
    .await;
    let partial = missing.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 1);
    assert!(
        partial
            .error_message
            .contains("has no agentlightning.rollout_id"),
        "{}",
        partial.error_message
    );
}

#[tokio::test]
async fn gzip_and_large_requests_are_accepted_and_oversized_ones_refused() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (r, at) = running(&mut c).await;
    let mut otlp = otlp_client(&server)
        .await
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Gzip)
        .max_encoding_message_size(usize::MAX);
    let payload = "x".repeat(20 * 1024);
    let spans: Vec<_> = (0..1024)
        .map(|i| otlp_span(&format!("big-{i}"), vec![text("payload", &payload)]))
        .collect();
    let big = request(routed(&r, &at), spans);
    assert!(prost::Message::encoded_len(&big) > 20 * 1024 * 1024);
    assert_eq!(export(&mut otlp, big).await.partial_success, None);
    assert_eq!(stats(&mut c).await.total_spans, 1024);

    let limited = TestServer::start_with_limits(
        BACKEND,
        RequestLimits {
            max_control_message_bytes: 1024 * 1024,
            max_message_bytes: 1024 * 1024,
            ..RequestLimits::default()
        },
    )
    .await;
    let mut client =
        TraceServiceClient::new(limited.channel().await).max_encoding_message_size(usize::MAX);
    let spans: Vec<_> = (0..64)
        .map(|i| otlp_span(&format!("s{i}"), vec![text("payload", &payload)]))
        .collect();
    assert_code(
        client.export(request(routed(&r, &at), spans)).await,
        Code::ResourceExhausted,
        "message length too large",
    );
}

#[tokio::test]
async fn an_exported_span_revives_an_unresponsive_attempt() {
    skip_without!(super::BACKEND);
    // The timer is effectively off: the scan before reads gives the verdict.
    let (server, clock) =
        TestServer::start_on_manual_clock(BACKEND, Duration::from_secs(3600)).await;
    let mut c = server.client().await;
    let mut otlp = otlp_client(&server).await;
    let mut spec = retry_spec(2, &[A::Unresponsive]);
    spec.config.as_mut().unwrap().unresponsive_seconds = Some(1.0);
    let rollout = enqueue_spec(&mut c, spec).await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_millis(1001));
    let silent = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(attempt_status(attempt_of(&silent)), A::Unresponsive);
    export(
        &mut otlp,
        request(
            routed(&rollout.rollout_id, &attempt_of(&claimed).attempt_id),
            vec![otlp_span("alive", vec![])],
        ),
    )
    .await;
    let revived = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(attempt_status(attempt_of(&revived)), A::Running);
    assert_eq!(status(&revived), R::Running);
}
