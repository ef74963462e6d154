//! Namespaces through the server: each holds its own queue, rollouts,
//! resources and statistics, chosen by gRPC metadata or the HTTP path
//! prefix; unknown and malformed names are refused; a deleted namespace is
//! gone at once and the others keep their data; on every backend.

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse, trace_service_client::TraceServiceClient,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use serde_json::json;
use tonic::Code;

use crate::common::http::{HttpClient, Version};
use crate::common::{Backend, NamespacedClient, TestOptions, TestServer};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::ServerConfig;

async fn enqueue(client: &mut NamespacedClient, input: &str) -> String {
    client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: input.to_owned(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap()
        .rollout_id
}

async fn rollout_ids(client: &mut NamespacedClient) -> Vec<String> {
    let page = client
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner();
    page.rollouts.into_iter().map(|r| r.rollout_id).collect()
}

async fn stats(client: &mut NamespacedClient) -> pb::GetStatisticsResponse {
    client
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner()
}

async fn two_namespaces_see_nothing_of_each_other(backend: Backend) {
    let server = TestServer::start(backend).await;
    server.create_namespace("run-a", None).await;
    server.create_namespace("run-b", None).await;
    let mut a = server.client_in("run-a").await;
    let mut b = server.client_in("run-b").await;
    let mut default = server.client_in("default").await;

    // B's event feed, from its start: it must see B's rollout first.
    let mut b_events = b
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let in_a = enqueue(&mut a, r#"{"task": "a"}"#).await;
    // Through agent-lightning 0.x's HTTP API, by the path prefix alone.
    let http = HttpClient::new(server.addr, Version::Http1);
    let enqueued = http
        .post_json(
            "/ns/run-b/v1/agl/queues/rollouts/enqueue",
            &json!({"rollouts": [{"input": {"task": "b"}}]}),
        )
        .await;
    assert_eq!(enqueued.status, 201, "{}", enqueued.text());
    let in_b = enqueued.json()[0]["rollout_id"]
        .as_str()
        .unwrap()
        .to_owned();

    assert_eq!(rollout_ids(&mut a).await, std::slice::from_ref(&in_a));
    assert_eq!(rollout_ids(&mut b).await, std::slice::from_ref(&in_b));
    let first = loop {
        let message = b_events.message().await.unwrap().unwrap();
        if let Some(pb::watch_events_response::Message::Event(event)) = message.message {
            break event;
        }
    };
    assert_eq!((first.seq, first.rollout_id.as_str()), (1, in_b.as_str()));
    // agent-lightning 1.x's API, by the path prefix too.
    let created = http
        .post_json(
            "/ns/run-a/api/rollouts",
            &json!([{"input": {"task": "a1x"}}]),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let inputs = |namespace: &'static str| {
        let http = &http;
        async move {
            let listed = http
                .get(&format!("/ns/{namespace}/api/rollouts?state_in=queuing"))
                .await
                .json();
            let inputs: Vec<serde_json::Value> = listed
                .as_array()
                .unwrap_or_else(|| panic!("{listed}"))
                .iter()
                .map(|r| r["input"].clone())
                .collect();
            inputs
        }
    };
    assert_eq!(inputs("run-a").await, [json!({"task": "a1x"})]);
    assert!(inputs("run-b").await.is_empty());
    assert!(rollout_ids(&mut default).await.is_empty());
    let listed = http.get("/ns/run-a/v1/agl/rollouts").await.json();
    assert_eq!(listed["items"][0]["rollout_id"], json!(in_a), "{listed}");
    assert_eq!(listed["total"], json!(2));
    // Another namespace's rollout is unknown here.
    let status = b
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: in_a.clone(),
        })
        .await
        .map(|r| r.into_inner().rollout.is_some());
    assert!(
        matches!(&status, Ok(false)) || matches!(&status, Err(s) if s.code() == Code::NotFound),
        "{status:?}"
    );

    // A runner of B takes B's work only.
    let dequeued = b
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: Some("runner".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(dequeued.rollout_id, in_b);
    let nothing = b
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(nothing.rollout.is_none());

    // Resources and their `latest` are per namespace.
    a.add_resources(pb::AddResourcesRequest {
        resources_json: r#"{"prompt": {"resource_type": "prompt_template", "template": "a", "engine": "f-string"}}"#.into(),
    })
    .await
    .unwrap();
    let latest_b = b
        .get_latest_resources(pb::GetLatestResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(latest_b.resources.is_none());

    assert_eq!(stats(&mut a).await.total_rollouts, 2);
    assert_eq!(stats(&mut a).await.total_resources, 1);
    assert_eq!(stats(&mut b).await.total_rollouts, 1);
    assert_eq!(stats(&mut b).await.total_resources, 0);
    assert_eq!(stats(&mut default).await.total_rollouts, 0);

    let listed = server
        .client()
        .await
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = listed
        .namespaces
        .iter()
        .map(|n| {
            let stats = n.statistics.clone().unwrap();
            (n.namespace.clone().unwrap().name, stats.total_rollouts)
        })
        .collect();
    assert_eq!(
        names,
        [
            ("default".into(), 0),
            ("run-a".into(), 2),
            ("run-b".into(), 1)
        ]
    );
    server.stop().await;
}

async fn unknown_and_malformed_namespaces_are_refused(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut unknown = server.client_in("run-x").await;
    let status = unknown
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("run-x"), "{}", status.message());
    let mut malformed = server.client_in("Run_X").await;
    let status = malformed
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    let http = HttpClient::new(server.addr, Version::Http1);
    let answer = http.get("/ns/run-x/v1/agl/statistics").await;
    assert_eq!(answer.status, 404);
    assert!(answer.text().contains("run-x"), "{}", answer.text());
    assert_eq!(http.get("/ns/Run_X/v1/agl/statistics").await.status, 400);
    // Nothing was created by the calls.
    let listed = server
        .client()
        .await
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.namespaces.len(), 1);

    let taken = server
        .client()
        .await
        .create_namespace(pb::CreateNamespaceRequest {
            name: "default".into(),
            quotas: None,
            span_retention: None,
        })
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Code::AlreadyExists);
    server.stop().await;
}

async fn a_deleted_namespace_is_gone_and_the_others_keep_their_data(backend: Backend) {
    let server = TestServer::start(backend).await;
    server.create_namespace("run-a", None).await;
    server.create_namespace("run-b", None).await;
    let mut a = server.client_in("run-a").await;
    let mut b = server.client_in("run-b").await;
    enqueue(&mut a, "1").await;
    let kept = enqueue(&mut b, "2").await;

    let deleted = server
        .client()
        .await
        .delete_namespace(pb::DeleteNamespaceRequest {
            name: "run-a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.namespace.unwrap().name, "run-a");
    let status = a
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(rollout_ids(&mut b).await, [kept]);
    let refused = server
        .client()
        .await
        .delete_namespace(pb::DeleteNamespaceRequest {
            name: "default".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);

    // The name starts afresh.
    server.create_namespace("run-a", None).await;
    assert!(rollout_ids(&mut a).await.is_empty());
    server.stop().await;
}

async fn namespaces_can_be_created_on_first_use(backend: Backend) {
    let mut options = TestOptions {
        config: ServerConfig::default(),
        ..TestOptions::default()
    };
    options.config.namespaces.create_on_first_use = true;
    let server = TestServer::start_opts(backend, options).await;
    let mut fresh = server.client_in("run-new").await;
    let id = enqueue(&mut fresh, "1").await;
    assert_eq!(rollout_ids(&mut fresh).await, [id]);
    let mut default = server.client_in("default").await;
    assert!(rollout_ids(&mut default).await.is_empty());
    server.stop().await;
}

/// Adds a span named `name` to `rollout_id`'s attempt `attempt_id` in
/// `client`'s namespace.
async fn add_span(
    client: &mut NamespacedClient,
    rollout_id: &str,
    attempt_id: &str,
    name: &str,
) -> Result<(), tonic::Status> {
    client
        .add_span(pb::AddSpanRequest {
            span: Some(pb::Span {
                rollout_id: rollout_id.into(),
                attempt_id: attempt_id.into(),
                trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
                span_id: format!("{:0>16}", name),
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .map(drop)
}

/// A namespace's quotas refuse (RESOURCE_EXHAUSTED over gRPC, 429 over
/// HTTP, naming the quota) the enqueue or the spans that would exceed
/// them, writing nothing; the namespace takes more again once it holds
/// less, and the other namespaces are not limited.
async fn quotas_refuse_what_would_exceed_them(backend: Backend) {
    let server = TestServer::start(backend).await;
    let created = server
        .client()
        .await
        .create_namespace(pb::CreateNamespaceRequest {
            name: "run-q".into(),
            quotas: Some(pb::NamespaceQuotas {
                max_queued_rollouts: 2,
                max_spans: 2,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let quotas = created.namespace.unwrap().quotas.unwrap();
    assert_eq!((quotas.max_queued_rollouts, quotas.max_spans), (2, 2));
    let mut q = server.client_in("run-q").await;
    enqueue(&mut q, "1").await;
    enqueue(&mut q, "2").await;
    let refused = q
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: "3".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("max_queued_rollouts"),
        "{refused:?}"
    );
    let http = HttpClient::new(server.addr, Version::Http1);
    let refused = http
        .post_json(
            "/ns/run-q/v1/agl/queues/rollouts/enqueue",
            &json!({"rollouts": [{"input": 3}]}),
        )
        .await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(refused.text().contains("max_queued_rollouts"));
    assert_eq!(stats(&mut q).await.total_rollouts, 2);
    // Other namespaces are not limited.
    let mut default = server.client_in("default").await;
    for input in ["1", "2", "3"] {
        enqueue(&mut default, input).await;
    }

    // A dequeue makes room.
    let claimed = q
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    let attempt_id = claimed.attempt.unwrap().attempt_id;
    enqueue(&mut q, "3").await;

    add_span(&mut q, &claimed.rollout_id, &attempt_id, "one")
        .await
        .unwrap();
    add_span(&mut q, &claimed.rollout_id, &attempt_id, "two")
        .await
        .unwrap();
    let refused = add_span(&mut q, &claimed.rollout_id, &attempt_id, "three")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_spans"), "{refused:?}");
    let spans = http
        .post_json(
            "/ns/run-q/v1/agl/spans",
            &json!({
                "rollout_id": claimed.rollout_id, "attempt_id": attempt_id, "sequence_id": 9,
                "trace_id": "t", "span_id": "s9", "parent_id": null, "name": "nine",
                "status": {"status_code": "OK"}, "attributes": {}, "events": [], "links": [],
                "start_time": null, "end_time": null, "context": null, "parent": null,
                "resource": {"attributes": {}, "schema_url": ""}
            }),
        )
        .await;
    assert_eq!(spans.status, 429, "{}", spans.text());
    assert_eq!(stats(&mut q).await.total_spans, 2);
    server.stop().await;
}

/// An OTLP export routed to `rollout_id`'s attempt `attempt_id`: one span.
fn otlp_export(rollout_id: &str, attempt_id: &str) -> ExportTraceServiceRequest {
    let text = |key: &str, value: &str| KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    };
    let id = uuid::Uuid::new_v4();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    text("agentlightning.rollout_id", rollout_id),
                    text("agentlightning.attempt_id", attempt_id),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: id.as_bytes().to_vec(),
                    span_id: id.as_bytes()[..8].to_vec(),
                    name: "exported".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Claims the next rollout of `client`'s namespace: its id and attempt's.
async fn claim(client: &mut NamespacedClient) -> (String, String) {
    let rollout = client
        .dequeue_rollout(pb::DequeueRolloutRequest::default())
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    (rollout.rollout_id, rollout.attempt.unwrap().attempt_id)
}

/// OTLP exports, over gRPC (the metadata) and HTTP (the path prefix), land
/// in the namespace they name: routed to another namespace's attempt,
/// their spans are rejected as unknown there, and nothing reaches the
/// attempt.
async fn otlp_exports_land_in_the_namespace_they_name(backend: Backend) {
    let server = TestServer::start(backend).await;
    server.create_namespace("run-a", None).await;
    server.create_namespace("run-b", None).await;
    let mut a = server.client_in("run-a").await;
    let mut b = server.client_in("run-b").await;
    enqueue(&mut a, "1").await;
    enqueue(&mut b, "2").await;
    let (a_rollout, a_attempt) = claim(&mut a).await;
    let (b_rollout, b_attempt) = claim(&mut b).await;

    let mut otlp = TraceServiceClient::new(server.channel().await);
    let in_namespace = |namespace: &str, export: ExportTraceServiceRequest| {
        let mut request = tonic::Request::new(export);
        request
            .metadata_mut()
            .insert("lightning-store-namespace", namespace.parse().unwrap());
        request
    };
    let stored = otlp
        .export(in_namespace("run-a", otlp_export(&a_rollout, &a_attempt)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stored.partial_success, None);
    // B's namespace does not know A's attempt.
    let crossed = otlp
        .export(in_namespace("run-b", otlp_export(&a_rollout, &a_attempt)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(crossed.partial_success.unwrap().rejected_spans, 1);

    let http = HttpClient::new(server.addr, Version::Http1);
    let headers = [("content-type", "application/x-protobuf")];
    let body = otlp_export(&b_rollout, &b_attempt).encode_to_vec();
    let exported = http
        .request("POST", "/ns/run-b/v1/traces", &headers, body.clone())
        .await;
    assert_eq!(exported.status, 200, "{}", exported.text());
    // Through A's prefix, B's attempt is unknown.
    let crossed = http
        .request("POST", "/ns/run-a/v1/traces", &headers, body)
        .await;
    assert_eq!(crossed.status, 200, "{}", crossed.text());
    let crossed = ExportTraceServiceResponse::decode(crossed.body).unwrap();
    assert_eq!(crossed.partial_success.unwrap().rejected_spans, 1);

    assert_eq!(stats(&mut a).await.total_spans, 1);
    assert_eq!(stats(&mut b).await.total_spans, 1);
    server.stop().await;
}

mod each_backend {
    on_every_backend!(
        two_namespaces_see_nothing_of_each_other,
        unknown_and_malformed_namespaces_are_refused,
        a_deleted_namespace_is_gone_and_the_others_keep_their_data,
        namespaces_can_be_created_on_first_use,
        quotas_refuse_what_would_exceed_them,
        otlp_exports_land_in_the_namespace_they_name,
    );
}

/// A token limited to `run-a`: refused on `run-b` and `default` through
/// gRPC and HTTP (writing nothing), working in `run-a` when a call names
/// none; limited, even an admin token cannot manage namespaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limited_to_a_namespace_is_refused_on_the_others() {
    use lightning_store::auth::Tokens;
    use lightning_store::auth::policy::Role;
    use lightning_store::auth::tokens::{LineScope, file_line};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let lines = [
        file_line("operator", &[Role::Admin], &LineScope::default()),
        file_line(
            "trainer-a",
            &[Role::Algorithm],
            &LineScope {
                namespaces: &["run-a".into()],
                ..LineScope::default()
            },
        ),
        file_line(
            "admin-a",
            &[Role::Admin],
            &LineScope {
                namespaces: &["run-a".into()],
                ..LineScope::default()
            },
        ),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let server = TestServer::start_with(
        Backend::Memory,
        ServerConfig {
            tokens: Tokens::load(Some(&path), None).unwrap(),
            ..ServerConfig::default()
        },
    )
    .await;
    let channel = server.channel().await;
    let call = |token: &'static str, namespace: Option<&'static str>| {
        let mut client = LightningStoreServiceClient::new(channel.clone());
        async move {
            let mut request = tonic::Request::new(pb::EnqueueRolloutRequest {
                request_id: None,
                rollout: Some(pb::RolloutSpec {
                    input_json: "1".into(),
                    ..Default::default()
                }),
            });
            let metadata = request.metadata_mut();
            metadata.insert("authorization", format!("Bearer {token}").parse().unwrap());
            if let Some(namespace) = namespace {
                metadata.insert("lightning-store-namespace", namespace.parse().unwrap());
            }
            client.enqueue_rollout(request).await.map(drop)
        }
    };
    for name in ["run-a", "run-b"] {
        let mut request = tonic::Request::new(pb::CreateNamespaceRequest {
            name: name.into(),
            quotas: None,
            span_retention: None,
        });
        request
            .metadata_mut()
            .insert("authorization", "Bearer operator".parse().unwrap());
        LightningStoreServiceClient::new(channel.clone())
            .create_namespace(request)
            .await
            .unwrap();
    }

    // Its own namespace, named or not.
    call("trainer-a", Some("run-a")).await.unwrap();
    call("trainer-a", None).await.unwrap();
    // Any other.
    for namespace in [Some("run-b"), Some("default")] {
        let status = call("trainer-a", namespace).await.unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{namespace:?}");
        assert!(
            status.message().contains("namespace"),
            "{}",
            status.message()
        );
    }
    let http = HttpClient::new(server.addr, Version::Http1);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer trainer-a"),
    ];
    let body = r#"{"rollouts": [{"input": 1}]}"#;
    for (path, status) in [
        ("/ns/run-b/v1/agl/queues/rollouts/enqueue", 403),
        ("/v1/agl/queues/rollouts/enqueue", 201),
        ("/ns/run-a/v1/agl/queues/rollouts/enqueue", 201),
    ] {
        let answer = http.request("POST", path, &headers, body).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.text());
    }
    // Managing namespaces takes a token that reaches every one.
    let mut request = tonic::Request::new(pb::ListNamespacesRequest {});
    request
        .metadata_mut()
        .insert("authorization", "Bearer admin-a".parse().unwrap());
    let status = LightningStoreServiceClient::new(channel.clone())
        .list_namespaces(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // The refused calls wrote nothing: run-a holds the four allowed.
    let mut request = tonic::Request::new(pb::ListNamespacesRequest {});
    request
        .metadata_mut()
        .insert("authorization", "Bearer operator".parse().unwrap());
    let listed = LightningStoreServiceClient::new(channel.clone())
        .list_namespaces(request)
        .await
        .unwrap()
        .into_inner();
    let totals: Vec<(String, i64)> = listed
        .namespaces
        .into_iter()
        .map(|n| {
            (
                n.namespace.unwrap().name,
                n.statistics.unwrap().total_rollouts,
            )
        })
        .collect();
    assert_eq!(
        totals,
        [
            ("default".into(), 0),
            ("run-a".into(), 4),
            ("run-b".into(), 0)
        ]
    );
    server.stop().await;
}
