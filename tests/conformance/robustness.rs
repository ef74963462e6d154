//! Issue 17's cases, one test each: hostile or careless inputs get a clear
//! answer, never a panic or INTERNAL, and leave the store usable.

use lightning_store::core::limits::LARGEST_SEQUENCE_ID;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use crate::common::TestServer;
use crate::common::http::{HttpClient, Version};
use crate::support::*;

/// The longest duration protobuf can carry.
fn longest_duration() -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 999_999_999,
    })
}

/// Case 1: a huge wait or timeout is clamped to the longest wait instead of
/// overflowing the clock (the handler used to panic: CANCELLED).
#[tokio::test]
async fn case_01_huge_durations_are_clamped_not_panicked_on() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let first = enqueue(&mut c, "1").await;
    let second = enqueue(&mut c, "2").await;

    let claimed = c
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: longest_duration(),
        })
        .await
        .expect("DequeueRollout with the longest wait")
        .into_inner();
    assert_eq!(claimed.rollout.unwrap().rollout_id, first.rollout_id);
    let claimed = c
        .dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: 1,
            worker_id: None,
            wait: longest_duration(),
        })
        .await
        .expect("DequeueRollouts with the longest wait")
        .into_inner();
    assert_eq!(claimed.rollouts[0].rollout_id, second.rollout_id);

    set_rollout_status(&mut c, &first.rollout_id, R::Succeeded).await;
    let waited = c
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: vec![first.rollout_id.clone()],
            timeout: longest_duration(),
        })
        .await
        .expect("WaitForRollouts with the longest timeout")
        .into_inner();
    assert_eq!(waited.rollouts[0].rollout_id, first.rollout_id);
    let mut watch = c
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec![first.rollout_id.clone()],
            timeout: longest_duration(),
        })
        .await
        .expect("WatchRolloutCompletions with the longest timeout")
        .into_inner();
    let done = watch.message().await.expect("a completion, not a cancelled stream");
    assert_eq!(done.unwrap().rollout.unwrap().rollout_id, first.rollout_id);

    // The server is still whole.
    assert_eq!(get(&mut c, &second.rollout_id).await.rollout_id, second.rollout_id);
}

/// Case 8: an explicit sequence id the counter could never count past is
/// refused before anything is written; the rollout keeps taking spans.
#[tokio::test]
async fn case_08_sequence_ids_past_the_largest_are_refused() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();

    for too_large in [i64::MAX, LARGEST_SEQUENCE_ID + 1] {
        assert_code(
            c.add_span(pb::AddSpanRequest {
                span: Some(span(&rollout.rollout_id, &attempt_id, "x", Some(too_large))),
                owner_epoch: None,
            })
            .await,
            Code::InvalidArgument,
            "sequence_id must be at most",
        );
    }
    let unnumbered = add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "a", None))
        .await
        .unwrap();
    assert_eq!(unnumbered.sequence_id, Some(1), "the refused spans raised no counter");

    let largest = add_span(
        &mut c,
        span(&rollout.rollout_id, &attempt_id, "b", Some(LARGEST_SEQUENCE_ID)),
    )
    .await
    .unwrap();
    assert_eq!(largest.sequence_id, Some(LARGEST_SEQUENCE_ID));
    let next = add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "c", None))
        .await
        .unwrap();
    assert_eq!(next.sequence_id, Some(LARGEST_SEQUENCE_ID + 1), "the counter counts on");
}

/// Case 16 (durations): nanos outside protobuf's ±999,999,999 are refused
/// instead of being folded into the seconds.
#[tokio::test]
async fn case_16_duration_nanos_out_of_range_are_refused() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    assert_code(
        c.dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: Some(prost_types::Duration {
                seconds: 0,
                nanos: 2_000_000_000,
            }),
        })
        .await,
        Code::InvalidArgument,
        "wait has invalid nanos",
    );
}

/// Frames `message` as one gRPC message (uncompressed).
fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// A message no protobuf decoder accepts: field 1, length-delimited, claims
/// 127 bytes and carries one.
const UNDECODABLE: &[u8] = &[0x0a, 0x7f, 0x00];

/// Posts `body` to a gRPC method over h2c and returns the call's status.
async fn raw_grpc(server: &TestServer, path: &str, body: Vec<u8>) -> tonic::Status {
    let h2 = HttpClient::new(server.addr, Version::H2c);
    let response = h2
        .request(
            "POST",
            path,
            &[("content-type", "application/grpc"), ("te", "trailers")],
            body,
        )
        .await;
    assert_eq!(response.status, 200, "{response:?}");
    response.grpc_status()
}

/// Case 11: a request that does not decode is the client's fault on every
/// service: INVALID_ARGUMENT, not INTERNAL.
#[tokio::test]
async fn case_11_undecodable_requests_are_invalid_arguments() {
    let server = TestServer::start(BACKEND).await;
    for path in [
        "/lightningstore.v1.LightningStoreService/EnqueueRollout",
        "/lightningstore.v1.LightningStoreService/GetRollout",
        "/lightningstore.v1.LightningStoreService/QuerySpans",
        "/lightningstore.v1.LightningStoreService/WatchEvents",
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        "/grpc.health.v1.Health/Check",
    ] {
        let status = raw_grpc(&server, path, grpc_frame(UNDECODABLE)).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{path}: {status:?}");
        assert!(status.message().contains("failed to decode"), "{path}: {status:?}");
    }
    // The server still answers well-formed calls.
    let mut c = server.client().await;
    enqueue(&mut c, "\"after\"").await;
}

/// Case 16 (sessions): an undecodable message inside an open worker session
/// ends it with INVALID_ARGUMENT, not OK.
#[tokio::test]
async fn case_16_an_undecodable_session_message_is_an_invalid_argument() {
    use prost::Message as _;
    let server = TestServer::start(BACKEND).await;
    let open = pb::WorkerSessionRequest {
        message: Some(pb::worker_session_request::Message::Open(pb::OpenSession {
            worker_id: "Worker-0".to_owned(),
            slots: 1,
        })),
    };
    let mut body = grpc_frame(&open.encode_to_vec());
    body.extend(grpc_frame(UNDECODABLE));
    let status = raw_grpc(
        &server,
        "/lightningstore.v1.LightningStoreService/WorkerSession",
        body,
    )
    .await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("failed to decode"), "{status:?}");
}

/// Case 16 (slots): a negative slot count is quoted as sent, not as 0.
#[tokio::test]
async fn case_16_negative_slots_are_quoted_as_sent() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    for slots in [-1, i32::MIN, 1025] {
        let open = pb::WorkerSessionRequest {
            message: Some(pb::worker_session_request::Message::Open(pb::OpenSession {
                worker_id: "Worker-0".to_owned(),
                slots,
            })),
        };
        let result = c.worker_session(tokio_stream::iter([open])).await.map(|_| ());
        assert_code(result, Code::InvalidArgument, &format!("got {slots}"));
    }
}

/// Longest error message the server sends (`core::error::MESSAGE_LIMIT`,
/// plus the suffix that states the whole length).
const LONGEST_MESSAGE: usize = 1100;

/// Case 12: an error quotes no more than a bounded prefix of a huge input,
/// over gRPC and over agent-lightning's HTTP routes (both the 400 of an
/// explicit check and the 422 of a model that does not validate).
#[tokio::test]
async fn case_12_errors_quote_a_bounded_prefix_of_huge_inputs() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let huge = "y".repeat(1 << 20);

    let status = c
        .query_workers(pb::QueryWorkersRequest {
            page: page(&huge, false, None, 0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("Invalid sort_by: yyyy"), "{}", &status.message()[..100]);
    assert!(status.message().contains(&format!("({} bytes)", huge.len())));
    assert!(status.message().len() < 400, "{} bytes", status.message().len());

    let http = HttpClient::new(server.addr, Version::Http1);
    let refused = http
        .post_json("/v1/agl/rollouts/search", &serde_json::json!({ "sort_by": huge }))
        .await;
    assert_eq!(refused.status, 400, "{}", &refused.text()[..100]);
    let detail = refused.json()["detail"].as_str().unwrap().to_owned();
    assert!(detail.starts_with("Invalid sort_by: yyyy"), "{}", &detail[..100]);
    assert!(refused.body.len() < LONGEST_MESSAGE, "{} bytes", refused.body.len());

    let invalid = http
        .post_json("/v1/agl/queues/rollouts/enqueue", &serde_json::json!({ "mode": huge }))
        .await;
    assert_eq!(invalid.status, 422, "{}", &invalid.text()[..100]);
    let issue = &invalid.json()["detail"][0];
    // pydantic quotes the whole body of a missing field: a prefix of it here.
    assert_eq!(issue["loc"], serde_json::json!(["body", "rollouts"]), "{issue}");
    assert!(issue["input"].as_str().unwrap().starts_with(r#"{"mode":"yyyy"#), "{issue}");
    assert!(invalid.body.len() < 2 * LONGEST_MESSAGE, "{} bytes", invalid.body.len());
}

/// Case 16 (retry conditions): a status that can never requeue a rollout
/// is refused in a retry condition; the ones that can are accepted.
#[tokio::test]
async fn case_16_retry_conditions_hold_retryable_statuses_only() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    for never in [A::Succeeded, A::Running, A::Preparing] {
        assert_code(
            c.enqueue_rollout(pb::EnqueueRolloutRequest {
                rollout: Some(retry_spec(3, &[A::Failed, never])),
            })
            .await,
            Code::InvalidArgument,
            "config.retry_condition may only hold failed, timeout and unresponsive",
        );
    }
    let rollout = enqueue_spec(&mut c, retry_spec(3, &[A::Failed, A::Timeout, A::Unresponsive])).await;
    assert_eq!(rollout.config.unwrap().retry_condition.len(), 3);
}

/// Case 16 (exact-match filters): ids in exact-match query filters are
/// checked as ids are everywhere else (empty, too long, control characters).
#[tokio::test]
async fn case_16_exact_match_filters_validate_ids() {
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    for bad in [String::new(), "r".repeat(1 << 20), "ro-\n1".to_owned()] {
        assert_code(
            c.query_rollouts(pb::QueryRolloutsRequest {
                rollout_id_in_list: Some(pb::StringList { values: vec![rollout.rollout_id.clone(), bad.clone()] }),
                ..Default::default()
            })
            .await,
            Code::InvalidArgument,
            "rollout_id_in",
        );
        assert_code(
            c.query_resources(pb::QueryResourcesRequest { resources_id: Some(bad.clone()), ..Default::default() })
                .await,
            Code::InvalidArgument,
            "resources_id",
        );
    }
    let found = c
        .query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_in_list: Some(pb::StringList { values: vec![rollout.rollout_id.clone()] }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.items.len(), 1);
}

/// Case 2: a request whose statement fails (here a query with more ids than
/// SQLite binds) never fails the writes of other requests that shared its
/// commit: every acknowledged enqueue succeeds and is there afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_02_a_failing_request_never_fails_the_others_writes() {
    let server = TestServer::start(BACKEND).await;
    let too_many_ids: Vec<String> = (0..32_765).map(|n| format!("r-{n}")).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let mut c = server.client().await;
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for n in 0..25 {
                ids.push(enqueue(&mut c, &format!("{}", writer * 100 + n)).await.rollout_id);
            }
            ids
        });
    }
    let mut failing = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let mut c = server.client().await;
        let ids = too_many_ids.clone();
        failing.spawn(async move {
            for _ in 0..5 {
                // Its own answer is case 9's; only the others' writes matter here.
                let _ = c
                    .query_rollouts(pb::QueryRolloutsRequest {
                        rollout_id_in: ids.clone(),
                        ..Default::default()
                    })
                    .await;
            }
        });
    }
    let written: Vec<String> = tasks.join_all().await.into_iter().flatten().collect();
    failing.join_all().await;
    assert_eq!(written.len(), 200);
    let mut c = server.client().await;
    for rollout_id in &written {
        assert_eq!(&get(&mut c, rollout_id).await.rollout_id, rollout_id);
    }
}
