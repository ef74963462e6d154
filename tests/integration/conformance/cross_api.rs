//! The same hostile values through every API: gRPC, agent-lightning 0.x's
//! routes and agent-lightning 1.x's routes get equivalent answers (each
//! refuses in its own dialect: INVALID_ARGUMENT, a 422 or a 400; a runner
//! acting for another worker: PERMISSION_DENIED or a 403) and leave the
//! store exactly as it was. Non-finite and negative durations, ids that
//! break the id rule, unknown statuses, lists over the limits, and a
//! worker-bound token used for another worker (1.x names no workers).

use lightning_store::auth::Tokens;
use lightning_store::auth::policy::Role;
use lightning_store::auth::tokens::{LineScope, file_line};
use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use serde_json::{Value, json};
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::BACKEND;
use super::TestServer;
use crate::common::TestOptions;
use crate::common::http::{HttpClient, HttpResponse, Version};
use crate::conformance::support::mask;

/// How an API refused a request, whatever its dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// INVALID_ARGUMENT; 400 or 422.
    Invalid,
    /// PERMISSION_DENIED; 403.
    Denied,
}

fn grpc_refusal<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> Refused {
    let status = result.expect_err("the call must be refused");
    match status.code() {
        Code::InvalidArgument => Refused::Invalid,
        Code::PermissionDenied => Refused::Denied,
        other => panic!("unexpected code {other:?}: {status:?}"),
    }
}

fn http_refusal(response: &HttpResponse) -> Refused {
    match response.status {
        400 | 422 => Refused::Invalid,
        403 => Refused::Denied,
        other => panic!("unexpected status {other}: {}", response.text()),
    }
}

/// Adds a bearer token to every call.
#[derive(Clone)]
struct Bearer(&'static str);

impl tonic::service::Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let value = format!("Bearer {}", self.0).parse().unwrap();
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

type Grpc = LightningStoreServiceClient<InterceptedService<Channel, Bearer>>;

/// The tokens: an admin's, and a runner's bound to worker `w-1`.
const ADMIN: &str = "admin-token";
const RUNNER: &str = "runner-token";

/// The APIs of one server, as an admin and as the bound runner.
struct Apis {
    grpc: Grpc,
    runner_grpc: Grpc,
    http: HttpClient,
}

impl Apis {
    async fn of(server: &TestServer) -> Self {
        Self {
            grpc: LightningStoreServiceClient::with_interceptor(
                server.channel().await,
                Bearer(ADMIN),
            ),
            runner_grpc: LightningStoreServiceClient::with_interceptor(
                server.channel().await,
                Bearer(RUNNER),
            ),
            http: HttpClient::new(server.addr, Version::Http1),
        }
    }

    async fn send(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> HttpResponse {
        let bearer = format!("Bearer {token}");
        let headers = [
            ("content-type", "application/json"),
            ("authorization", bearer.as_str()),
        ];
        let body = body
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default();
        self.http.request(method, path, &headers, body).await
    }

    /// Sends an admin's request.
    async fn http(&self, method: &str, path: &str, body: Option<&Value>) -> HttpResponse {
        self.send(ADMIN, method, path, body).await
    }

    /// Everything a client can observe of the store, to compare before and after.
    async fn snapshot(&mut self) -> (pb::GetStatisticsResponse, Vec<pb::Rollout>, Value) {
        let mut stats = stats_of(&mut self.grpc).await;
        stats.uptime_seconds = 0.0;
        let rollouts = self
            .grpc
            .query_rollouts(pb::QueryRolloutsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .rollouts;
        let workers = self.http("GET", "/v1/agl/workers", None).await.json();
        (stats, rollouts, workers)
    }
}

async fn stats_of(client: &mut Grpc) -> pb::GetStatisticsResponse {
    client
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner()
}

/// Starts a server of the suite's backend with tokens and small limits
/// (lists over them are cheap to send), and a rollout claimed by `w-1`.
async fn start() -> (TestServer, tempfile::TempDir, pb::Rollout) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let lines = [
        file_line(
            ADMIN,
            &[Role::Admin],
            &LineScope {
                name: Some("admin"),
                ..LineScope::default()
            },
        ),
        file_line(
            RUNNER,
            &[Role::Runner],
            &LineScope {
                workers: &["w-1".to_owned()],
                name: Some("runner-1"),
                ..LineScope::default()
            },
        ),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let mut options = TestOptions {
        limits: RequestLimits {
            max_ids_per_list: 4,
            max_batch_items: 4,
            ..RequestLimits::default()
        },
        ..TestOptions::default()
    };
    options.config.tokens = Tokens::load(Some(&path), None).unwrap();
    let server = TestServer::start_opts(BACKEND, options).await;
    let mut apis = Apis::of(&server).await;
    apis.grpc
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: "1".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let claimed = apis
        .runner_grpc
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: Some("w-1".into()),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .expect("w-1 claims the rollout");
    (server, dir, claimed)
}

fn grpc_spec(config: pb::RolloutConfig) -> pb::EnqueueRolloutRequest {
    pb::EnqueueRolloutRequest {
        request_id: None,
        rollout: Some(pb::RolloutSpec {
            input_json: "1".into(),
            config: Some(config),
            ..Default::default()
        }),
    }
}

/// The issue's example, first: a `NaN` timeout through the 0.x route.
/// Memory read it as 0 s (the rollout failed as soon as it was claimed),
/// SQLite stored no timeout (the rollout stayed `preparing`); now every
/// backend refuses it as pydantic refuses a constrained float, and no
/// rollout is created.
#[tokio::test]
async fn a_nan_timeout_through_the_0x_route_is_refused_on_every_backend() {
    skip_without!(super::BACKEND);
    let (server, _tokens, _) = start().await;
    let mut apis = Apis::of(&server).await;
    let before = apis.snapshot().await;
    let body = json!({"rollouts": [{"input": {"x": 1}, "config": {"timeout_seconds": "nan"}}]});
    let refused = apis
        .http("POST", "/v1/agl/queues/rollouts/enqueue", Some(&body))
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert_eq!(
        refused.json()["detail"],
        json!([{"type": "finite_number",
                "loc": ["body", "rollouts", 0, "config", "timeout_seconds"],
                "msg": "Input should be a finite number", "input": "nan"}])
    );
    let dequeued = apis
        .http("POST", "/v1/agl/queues/rollouts/dequeue", Some(&json!({})))
        .await;
    assert_eq!(dequeued.json(), json!([]), "nothing was enqueued");
    assert_eq!(apis.snapshot().await, before);
    server.stop().await;
}

#[tokio::test]
async fn non_finite_and_negative_durations_are_refused_by_every_api() {
    skip_without!(super::BACKEND);
    let (server, _tokens, _) = start().await;
    let mut apis = Apis::of(&server).await;
    let before = apis.snapshot().await;
    let enqueue = "/v1/agl/queues/rollouts/enqueue";
    for (value, text) in [(f64::NAN, "nan"), (f64::INFINITY, "inf"), (-1.0, "-1")] {
        for field in ["timeout_seconds", "unresponsive_seconds"] {
            let mut config = pb::RolloutConfig::default();
            match field {
                "timeout_seconds" => config.timeout_seconds = Some(value),
                _ => config.unresponsive_seconds = Some(value),
            }
            let grpc = grpc_refusal(apis.grpc.enqueue_rollout(grpc_spec(config)).await);
            let body = json!({"rollouts": [{"input": 1, "config": {field: text}}]});
            let agl0 = http_refusal(&apis.http("POST", enqueue, Some(&body)).await);
            assert_eq!(
                (grpc, agl0),
                (Refused::Invalid, Refused::Invalid),
                "{field}={text}"
            );
        }
        // agent-lightning 1.x's config carries one duration, whole seconds.
        let body = json!([{"input": 1, "config": {"timeout_seconds": text}}]);
        let agl1 = http_refusal(&apis.http("POST", "/api/rollouts", Some(&body)).await);
        assert_eq!(agl1, Refused::Invalid, "1.x timeout_seconds={text}");
    }
    // A duration in a number too: -1 as JSON's number, not text.
    let body = json!({"rollouts": [{"input": 1, "config": {"timeout_seconds": -0.5}}]});
    let negative = apis.http("POST", enqueue, Some(&body)).await;
    assert_eq!(negative.json()["detail"][0]["type"], "greater_than_equal");
    let body = json!([{"input": 1, "config": {"timeout_seconds": -1}}]);
    let negative = apis.http("POST", "/api/rollouts", Some(&body)).await;
    assert_eq!(negative.json()["detail"][0]["type"], "greater_than_equal");
    // Waits that no clock reaches: refused, never a panic.
    let wait = apis
        .http(
            "POST",
            "/v1/agl/waits/rollouts",
            Some(&json!({"rollout_ids": ["ro-1"], "timeout": "nan"})),
        )
        .await;
    assert_eq!(http_refusal(&wait), Refused::Invalid);
    let terminal = apis
        .http("GET", "/api/rollouts/terminal?wait=nan", None)
        .await;
    assert_eq!(http_refusal(&terminal), Refused::Invalid);
    let negative_wait = apis
        .grpc
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: vec!["ro-1".into()],
            timeout: Some(prost_types::Duration {
                seconds: -1,
                nanos: 0,
            }),
        })
        .await;
    assert_eq!(grpc_refusal(negative_wait), Refused::Invalid);
    assert_eq!(apis.snapshot().await, before);
    server.stop().await;
}

#[tokio::test]
async fn bad_ids_are_refused_by_every_api() {
    skip_without!(super::BACKEND);
    let (server, _tokens, claimed) = start().await;
    let mut apis = Apis::of(&server).await;
    let before = apis.snapshot().await;
    let long = "r".repeat(300);
    // As text, and as a path segment (the control character percent-encoded).
    for (bad, segment) in [
        (long.as_str(), long.clone()),
        ("ro\n1", "ro%0A1".to_owned()),
    ] {
        let grpc = grpc_refusal(
            apis.grpc
                .get_rollout(pb::GetRolloutRequest {
                    rollout_id: bad.into(),
                })
                .await,
        );
        let agl0 = http_refusal(
            &apis
                .http("GET", &format!("/v1/agl/rollouts/{segment}"), None)
                .await,
        );
        let agl1 = http_refusal(
            &apis
                .http("GET", &format!("/api/rollouts/{segment}"), None)
                .await,
        );
        assert_eq!([grpc, agl0, agl1], [Refused::Invalid; 3], "read of {bad:?}");

        let grpc = grpc_refusal(
            apis.grpc
                .update_rollout(pb::UpdateRolloutRequest {
                    rollout_id: bad.into(),
                    update_mask: mask(&["status"]),
                    status: pb::RolloutStatus::Cancelled as i32,
                    ..Default::default()
                })
                .await,
        );
        let agl0 = http_refusal(
            &apis
                .http(
                    "POST",
                    &format!("/v1/agl/rollouts/{segment}"),
                    Some(&json!({"status": "cancelled"})),
                )
                .await,
        );
        let agl1 = http_refusal(
            &apis
                .http(
                    "PATCH",
                    &format!("/api/rollouts/{segment}"),
                    Some(&json!({"status": {"state": "failed"}})),
                )
                .await,
        );
        assert_eq!(
            [grpc, agl0, agl1],
            [Refused::Invalid; 3],
            "write of {bad:?}"
        );

        // Ids a request creates things under.
        let grpc = grpc_refusal(
            apis.grpc
                .enqueue_rollout(pb::EnqueueRolloutRequest {
                    request_id: None,
                    rollout: Some(pb::RolloutSpec {
                        input_json: "1".into(),
                        resources_id: Some(bad.into()),
                        ..Default::default()
                    }),
                })
                .await,
        );
        let body = json!({"rollouts": [{"input": 1, "resources_id": bad}]});
        let agl0 = http_refusal(
            &apis
                .http("POST", "/v1/agl/queues/rollouts/enqueue", Some(&body))
                .await,
        );
        let body = json!([{"input": 1, "rollout_id": bad}]);
        let agl1 = http_refusal(&apis.http("POST", "/api/rollouts", Some(&body)).await);
        assert_eq!(
            [grpc, agl0, agl1],
            [Refused::Invalid; 3],
            "creation under {bad:?}"
        );

        // Spans and events of an attempt named by a bad id.
        let grpc = grpc_refusal(
            apis.grpc
                .add_span(pb::AddSpanRequest {
                    span: Some(pb::Span {
                        rollout_id: claimed.rollout_id.clone(),
                        attempt_id: bad.into(),
                        trace_id: "t".into(),
                        span_id: "s".into(),
                        name: "n".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await,
        );
        let span = json!({"rollout_id": claimed.rollout_id, "attempt_id": bad,
            "sequence_id": 1, "trace_id": "t", "span_id": "s", "parent_id": null, "name": "n",
            "status": {"status_code": "UNSET", "description": null}, "attributes": {},
            "events": [], "links": [], "start_time": null, "end_time": null, "context": null,
            "parent": null, "resource": {"attributes": {}, "schema_url": ""}});
        let agl0 = http_refusal(
            &apis
                .send(RUNNER, "POST", "/v1/agl/spans", Some(&span))
                .await,
        );
        let agl1 = http_refusal(
            &apis
                .http(
                    "POST",
                    &format!(
                        "/api/rollouts/{}/attempt/{segment}/events",
                        claimed.rollout_id
                    ),
                    Some(&json!({"event_type": "reward"})),
                )
                .await,
        );
        assert_eq!(
            [grpc, agl0, agl1],
            [Refused::Invalid; 3],
            "spans of {bad:?}"
        );
    }
    // A worker id with a control character (workers are named by runners).
    let grpc = grpc_refusal(
        apis.grpc
            .dequeue_rollout(pb::DequeueRolloutRequest {
                worker_id: Some("w\n1".into()),
                wait: None,
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .http(
                "POST",
                "/v1/agl/queues/rollouts/dequeue",
                Some(&json!({"worker_id": "w\n1"})),
            )
            .await,
    );
    assert_eq!([grpc, agl0], [Refused::Invalid; 2]);
    assert_eq!(apis.snapshot().await, before);
    server.stop().await;
}

#[tokio::test]
async fn unknown_statuses_are_refused_by_every_api() {
    skip_without!(super::BACKEND);
    let (server, _tokens, claimed) = start().await;
    let mut apis = Apis::of(&server).await;
    let before = apis.snapshot().await;
    let rollout_id = claimed.rollout_id.clone();
    let grpc = grpc_refusal(
        apis.grpc
            .update_rollout(pb::UpdateRolloutRequest {
                rollout_id: rollout_id.clone(),
                update_mask: mask(&["status"]),
                status: 99,
                ..Default::default()
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .http(
                "POST",
                &format!("/v1/agl/rollouts/{rollout_id}"),
                Some(&json!({"status": "done"})),
            )
            .await,
    );
    let agl1 = http_refusal(
        &apis
            .http(
                "PATCH",
                &format!("/api/rollouts/{rollout_id}"),
                Some(&json!({"status": {"state": "done"}})),
            )
            .await,
    );
    assert_eq!(
        [grpc, agl0, agl1],
        [Refused::Invalid; 3],
        "rollout statuses"
    );
    let attempt_id = claimed.attempt.as_ref().unwrap().attempt_id.clone();
    let grpc = grpc_refusal(
        apis.runner_grpc
            .update_attempt(pb::UpdateAttemptRequest {
                rollout_id: rollout_id.clone(),
                attempt_id: attempt_id.clone(),
                update_mask: mask(&["status"]),
                status: 42,
                ..Default::default()
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .send(
                RUNNER,
                "POST",
                &format!("/v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}"),
                Some(&json!({"status": "finished"})),
            )
            .await,
    );
    let agl1 = http_refusal(&apis.http("GET", "/api/rollouts?state_in=done", None).await);
    assert_eq!(
        [grpc, agl0, agl1],
        [Refused::Invalid; 3],
        "attempt statuses"
    );
    // A retry condition may only hold the statuses that can retry.
    let config = pb::RolloutConfig {
        retry_condition: vec![pb::AttemptStatus::Succeeded as i32],
        ..Default::default()
    };
    let grpc = grpc_refusal(apis.grpc.enqueue_rollout(grpc_spec(config)).await);
    let body = json!({"rollouts": [{"input": 1, "config": {"retry_condition": ["succeeded"]}}]});
    let refused = apis
        .http("POST", "/v1/agl/queues/rollouts/enqueue", Some(&body))
        .await;
    assert_eq!([grpc, http_refusal(&refused)], [Refused::Invalid; 2]);
    assert_eq!(
        refused.json()["detail"][0]["msg"],
        "Input should be 'failed', 'timeout' or 'unresponsive'"
    );
    assert_eq!(apis.snapshot().await, before);
    server.stop().await;
}

#[tokio::test]
async fn lists_over_the_limits_are_refused_by_every_api() {
    skip_without!(super::BACKEND);
    let (server, _tokens, _) = start().await;
    let mut apis = Apis::of(&server).await;
    let before = apis.snapshot().await;
    let specs = vec![
        pb::RolloutSpec {
            input_json: "1".into(),
            ..Default::default()
        };
        5
    ];
    let grpc = grpc_refusal(
        apis.grpc
            .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                rollouts: specs,
                ..Default::default()
            })
            .await,
    );
    let five: Vec<Value> = (0..5).map(|_| json!({"input": 1})).collect();
    let agl0 = http_refusal(
        &apis
            .http(
                "POST",
                "/v1/agl/queues/rollouts/enqueue",
                Some(&json!({"rollouts": five})),
            )
            .await,
    );
    let agl1 = http_refusal(&apis.http("POST", "/api/rollouts", Some(&json!(five))).await);
    assert_eq!([grpc, agl0, agl1], [Refused::Invalid; 3], "batches");
    let ids: Vec<String> = (0..5).map(|i| format!("ro-{i}")).collect();
    let grpc = grpc_refusal(
        apis.grpc
            .wait_for_rollouts(pb::WaitForRolloutsRequest {
                rollout_ids: ids.clone(),
                timeout: None,
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .http(
                "POST",
                "/v1/agl/waits/rollouts",
                Some(&json!({"rollout_ids": ids, "timeout": 0})),
            )
            .await,
    );
    let search = apis
        .http(
            "POST",
            "/v1/agl/rollouts/search",
            Some(&json!({"rollout_id_in": ids})),
        )
        .await;
    assert_eq!(
        [grpc, agl0, http_refusal(&search)],
        [Refused::Invalid; 3],
        "id lists"
    );
    assert_eq!(apis.snapshot().await, before);
    server.stop().await;
}

#[tokio::test]
async fn a_runner_acting_for_another_worker_is_refused_by_every_api() {
    skip_without!(super::BACKEND);
    let (server, _tokens, claimed) = start().await;
    let mut apis = Apis::of(&server).await;
    apis.grpc
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: "2".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let before = apis.snapshot().await;
    let grpc = grpc_refusal(
        apis.runner_grpc
            .dequeue_rollout(pb::DequeueRolloutRequest {
                worker_id: Some("w-2".into()),
                wait: None,
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .send(
                RUNNER,
                "POST",
                "/v1/agl/queues/rollouts/dequeue",
                Some(&json!({"worker_id": "w-2"})),
            )
            .await,
    );
    assert_eq!([grpc, agl0], [Refused::Denied; 2], "dequeue");
    let rollout_id = claimed.rollout_id.clone();
    let attempt_id = claimed.attempt.as_ref().unwrap().attempt_id.clone();
    let grpc = grpc_refusal(
        apis.runner_grpc
            .update_attempt(pb::UpdateAttemptRequest {
                rollout_id: rollout_id.clone(),
                attempt_id: attempt_id.clone(),
                update_mask: mask(&["worker_id"]),
                worker_id: "w-2".into(),
                ..Default::default()
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .send(
                RUNNER,
                "POST",
                &format!("/v1/agl/rollouts/{rollout_id}/attempts/{attempt_id}"),
                Some(&json!({"worker_id": "w-2"})),
            )
            .await,
    );
    assert_eq!([grpc, agl0], [Refused::Denied; 2], "attempt's worker");
    let grpc = grpc_refusal(
        apis.runner_grpc
            .start_attempt(pb::StartAttemptRequest {
                rollout_id: rollout_id.clone(),
                worker_id: Some("w-2".into()),
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .send(
                RUNNER,
                "POST",
                &format!("/v1/agl/rollouts/{rollout_id}/attempts"),
                Some(&json!({"worker_id": "w-2"})),
            )
            .await,
    );
    assert_eq!([grpc, agl0], [Refused::Denied; 2], "new attempt");
    let grpc = grpc_refusal(
        apis.runner_grpc
            .update_worker(pb::UpdateWorkerRequest {
                worker_id: "w-2".into(),
                ..Default::default()
            })
            .await,
    );
    let agl0 = http_refusal(
        &apis
            .send(RUNNER, "POST", "/v1/agl/workers/w-2", Some(&json!({})))
            .await,
    );
    assert_eq!([grpc, agl0], [Refused::Denied; 2], "heartbeat");
    // agent-lightning 1.x's API names no workers: its event routes act for
    // the attempt the path names, which is the runner's permission alone.
    assert_eq!(apis.snapshot().await, before);
    let stats = stats_of(&mut apis.grpc).await;
    assert_eq!(stats.queued_rollouts, 1, "nothing was taken");
    server.stop().await;
}
