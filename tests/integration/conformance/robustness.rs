//! Hostile or careless inputs, one test each: each gets a clear
//! answer, never a panic or INTERNAL, and leaves the store usable.

use std::time::{Duration, Instant};

use lightning_store::core::limits::{LARGEST_SEQUENCE_ID, RequestLimits};
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::http::{HttpClient, Version};
use crate::conformance::support::*;

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
async fn huge_durations_are_clamped_not_panicked_on() {
    skip_without!(super::BACKEND);
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
    let done = watch
        .message()
        .await
        .expect("a completion, not a cancelled stream");
    assert_eq!(done.unwrap().rollout.unwrap().rollout_id, first.rollout_id);

    // The server is still whole.
    assert_eq!(
        get(&mut c, &second.rollout_id).await.rollout_id,
        second.rollout_id
    );
}

/// Case 8: an explicit sequence id the counter could never count past is
/// refused before anything is written; the rollout keeps taking spans.
#[tokio::test]
async fn sequence_ids_past_the_largest_are_refused() {
    skip_without!(super::BACKEND);
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
    assert_eq!(
        unnumbered.sequence_id,
        Some(1),
        "the refused spans raised no counter"
    );

    let largest = add_span(
        &mut c,
        span(
            &rollout.rollout_id,
            &attempt_id,
            "b",
            Some(LARGEST_SEQUENCE_ID),
        ),
    )
    .await
    .unwrap();
    assert_eq!(largest.sequence_id, Some(LARGEST_SEQUENCE_ID));
    let next = add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "c", None))
        .await
        .unwrap();
    assert_eq!(
        next.sequence_id,
        Some(LARGEST_SEQUENCE_ID + 1),
        "the counter counts on"
    );
}

/// Case 16 (durations): nanos outside protobuf's ±999,999,999 are refused
/// instead of being folded into the seconds.
#[tokio::test]
async fn duration_nanos_out_of_range_are_refused() {
    skip_without!(super::BACKEND);
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
async fn undecodable_requests_are_invalid_arguments() {
    skip_without!(super::BACKEND);
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
        assert!(
            status.message().contains("failed to decode"),
            "{path}: {status:?}"
        );
    }
    // The server still answers well-formed calls.
    let mut c = server.client().await;
    enqueue(&mut c, "\"after\"").await;
}

/// Case 16 (sessions): an undecodable message inside an open worker session
/// ends it with INVALID_ARGUMENT, not OK.
#[tokio::test]
async fn an_undecodable_session_message_is_an_invalid_argument() {
    skip_without!(super::BACKEND);
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
async fn negative_slots_are_quoted_as_sent() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    for slots in [-1, i64::MIN, 1025, 1 << 32] {
        let open = pb::WorkerSessionRequest {
            message: Some(pb::worker_session_request::Message::Open(pb::OpenSession {
                worker_id: "Worker-0".to_owned(),
                slots,
            })),
        };
        let result = c
            .worker_session(tokio_stream::iter([open]))
            .await
            .map(|_| ());
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
async fn errors_quote_a_bounded_prefix_of_huge_inputs() {
    skip_without!(super::BACKEND);
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
    assert!(
        status.message().starts_with("Invalid sort_by: yyyy"),
        "{}",
        &status.message()[..100]
    );
    assert!(
        status
            .message()
            .contains(&format!("({} bytes)", huge.len()))
    );
    assert!(
        status.message().len() < 400,
        "{} bytes",
        status.message().len()
    );

    let http = HttpClient::new(server.addr, Version::Http1);
    let refused = http
        .post_json(
            "/v1/agl/rollouts/search",
            &serde_json::json!({ "sort_by": huge }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", &refused.text()[..100]);
    let detail = refused.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.starts_with("Invalid sort_by: yyyy"),
        "{}",
        &detail[..100]
    );
    assert!(
        refused.body.len() < LONGEST_MESSAGE,
        "{} bytes",
        refused.body.len()
    );

    let invalid = http
        .post_json(
            "/v1/agl/queues/rollouts/enqueue",
            &serde_json::json!({ "mode": huge }),
        )
        .await;
    assert_eq!(invalid.status, 422, "{}", &invalid.text()[..100]);
    let issue = &invalid.json()["detail"][0];
    // pydantic quotes the whole body of a missing field: a prefix of it here.
    assert_eq!(
        issue["loc"],
        serde_json::json!(["body", "rollouts"]),
        "{issue}"
    );
    assert!(
        issue["input"]
            .as_str()
            .unwrap()
            .starts_with(r#"{"mode":"yyyy"#),
        "{issue}"
    );
    assert!(
        invalid.body.len() < 2 * LONGEST_MESSAGE,
        "{} bytes",
        invalid.body.len()
    );
}

/// Case 16 (retry conditions): a status that can never requeue a rollout
/// is refused in a retry condition; the ones that can are accepted.
#[tokio::test]
async fn retry_conditions_hold_retryable_statuses_only() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    for never in [A::Succeeded, A::Running, A::Preparing] {
        assert_code(
            c.enqueue_rollout(pb::EnqueueRolloutRequest {
                request_id: None,
                rollout: Some(retry_spec(3, &[A::Failed, never])),
            })
            .await,
            Code::InvalidArgument,
            "config.retry_condition may only hold failed, timeout and unresponsive",
        );
    }
    let rollout = enqueue_spec(
        &mut c,
        retry_spec(3, &[A::Failed, A::Timeout, A::Unresponsive]),
    )
    .await;
    assert_eq!(rollout.config.unwrap().retry_condition.len(), 3);
}

/// Case 16 (exact-match filters): ids in exact-match query filters are
/// checked as ids are everywhere else (empty, too long, control characters).
#[tokio::test]
async fn exact_match_filters_validate_ids() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    for bad in [String::new(), "r".repeat(1 << 20), "ro-\n1".to_owned()] {
        assert_code(
            c.query_rollouts(pb::QueryRolloutsRequest {
                rollout_id_in_list: Some(pb::StringList {
                    values: vec![rollout.rollout_id.clone(), bad.clone()],
                }),
                ..Default::default()
            })
            .await,
            Code::InvalidArgument,
            "rollout_id_in",
        );
        assert_code(
            c.query_resources(pb::QueryResourcesRequest {
                resources_id: Some(bad.clone()),
                ..Default::default()
            })
            .await,
            Code::InvalidArgument,
            "resources_id",
        );
    }
    let found = c
        .query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_in_list: Some(pb::StringList {
                values: vec![rollout.rollout_id.clone()],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.rollouts.len(), 1);
}

/// Case 2: a request whose statement fails (here a query with more ids than
/// SQLite binds) never fails the writes of other requests that shared its
/// commit: every acknowledged enqueue succeeds and is there afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_request_never_fails_the_others_writes() {
    skip_without!(super::BACKEND);
    // Lists this long are refused before any backend sees them (case 9):
    // the limit is raised so that the statement still fails in SQLite.
    let server = TestServer::start_with_limits(
        BACKEND,
        RequestLimits {
            max_ids_per_list: 100_000,
            ..RequestLimits::default()
        },
    )
    .await;
    let too_many_ids: Vec<String> = (0..32_765).map(|n| format!("r-{n}")).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let mut c = server.client().await;
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for n in 0..25 {
                ids.push(
                    enqueue(&mut c, &format!("{}", writer * 100 + n))
                        .await
                        .rollout_id,
                );
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

/// `count` rollout ids, `known` first then unknown ones.
fn ids_with(known: &str, count: usize) -> Vec<String> {
    std::iter::once(known.to_owned())
        .chain((1..count).map(|n| format!("ro-unknown-{n}")))
        .collect()
}

/// Case 9: id lists at the limit reach no backend limit (SQLite binds
/// 32,766 values, PostgreSQL 65,535) and a watch of them costs one lookup;
/// one id more is INVALID_ARGUMENT naming the field and the limit, never
/// INTERNAL.
#[tokio::test]
async fn id_lists_are_capped_below_every_backend_limit() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let limit = RequestLimits::default().max_ids_per_list;
    let done = enqueue(&mut c, "1").await;
    set_rollout_status(&mut c, &done.rollout_id, R::Succeeded).await;

    let at_limit = ids_with(&done.rollout_id, limit);
    let found = c
        .query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_in_list: Some(pb::StringList {
                values: at_limit.clone(),
            }),
            ..Default::default()
        })
        .await
        .expect("a query with as many ids as the limit")
        .into_inner();
    assert_eq!(found.rollouts.len(), 1);
    let waited = c
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: at_limit.clone(),
            timeout: Some(prost_types::Duration::default()),
        })
        .await
        .expect("a wait for as many ids as the limit")
        .into_inner();
    assert_eq!(waited.rollouts.len(), 1);
    // The watch reads its rollouts in one transaction (it used to read them
    // one by one: 45 s for 100,000 ids on PostgreSQL); generous bound for a
    // loaded machine, far below one read per id.
    let started = Instant::now();
    let mut watch = c
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: at_limit.clone(),
            timeout: None,
        })
        .await
        .expect("a watch of as many ids as the limit")
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.rollout.unwrap().rollout_id, done.rollout_id);
    assert!(
        watch.message().await.unwrap().is_none(),
        "the only known rollout was sent"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let over = ids_with(&done.rollout_id, limit + 1);
    let expected = format!("holds {} ids, more than the limit of {limit}", limit + 1);
    assert_code(
        c.query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_in: over.clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        &format!("rollout_id_in {expected}"),
    );
    assert_code(
        c.wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: over.clone(),
            timeout: None,
        })
        .await,
        Code::InvalidArgument,
        &format!("rollout_ids {expected}"),
    );
    assert_code(
        c.watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: over.clone(),
            timeout: None,
        })
        .await
        .map(|_| ()),
        Code::InvalidArgument,
        &format!("rollout_ids {expected}"),
    );
    assert_code(
        c.watch_events(pb::WatchEventsRequest {
            rollout_ids: over.clone(),
            ..Default::default()
        })
        .await
        .map(|_| ()),
        Code::InvalidArgument,
        &format!("rollout_ids {expected}"),
    );
    // The same limit on agent-lightning's HTTP API, with its error shape.
    let http = HttpClient::new(server.addr, Version::Http1);
    let refused = http
        .post_json(
            "/v1/agl/waits/rollouts",
            &serde_json::json!({ "rollout_ids": over, "timeout": 0 }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.json()["detail"]
            .as_str()
            .unwrap()
            .contains(&expected),
        "{}",
        refused.text()
    );
}

/// Case 9 (batches, message sizes, configuration): every batch over the
/// configured item limit is INVALID_ARGUMENT and writes nothing, on gRPC and
/// both HTTP APIs; a control call over its message limit is
/// RESOURCE_EXHAUSTED while a write of the same size passes; GetCapabilities
/// reports the configured values.
#[tokio::test]
async fn batches_and_control_messages_are_capped_as_configured() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_ids_per_list: 3,
        max_batch_items: 4,
        max_control_message_bytes: 64 * 1024,
        max_message_bytes: 1024 * 1024,
        longest_wait: Duration::from_secs(60),
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;

    let reported = c
        .get_capabilities(pb::GetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .limits
        .unwrap();
    assert_eq!(reported.max_ids_per_list, 3);
    assert_eq!(reported.max_batch_items, 4);
    assert_eq!(reported.max_control_message_bytes, 64 * 1024);
    assert_eq!(reported.max_message_bytes, 1024 * 1024);
    assert_eq!(
        reported.longest_wait,
        Some(prost_types::Duration {
            seconds: 60,
            nanos: 0
        })
    );
    assert_eq!(reported.max_id_bytes, 256);

    let specs = |n: usize| (0..n).map(|i| spec(&i.to_string())).collect::<Vec<_>>();
    let batch = c
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: specs(4),
            ..Default::default()
        })
        .await
        .expect("a batch at the limit")
        .into_inner();
    assert_eq!(batch.rollouts.len(), 4);
    assert_code(
        c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: specs(5),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "rollouts holds 5 items, more than the limit of 4",
    );
    assert_code(
        c.dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: 5,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "limit must be between 1 and 4, got 5",
    );
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let spans = |n: usize| {
        (0..n)
            .map(|i| span(&claimed.rollout_id, &attempt_id, &format!("s{i}"), None))
            .collect::<Vec<_>>()
    };
    assert_code(
        c.add_spans(pb::AddSpansRequest {
            spans: spans(5),
            owner_epoch: None,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "spans holds 5 items, more than the limit of 4",
    );
    let pair = pb::RolloutAttemptRef {
        rollout_id: claimed.rollout_id.clone(),
        attempt_id: attempt_id.clone(),
    };
    assert_code(
        c.get_span_sequence_ids(pb::GetSpanSequenceIdsRequest {
            attempts: vec![pair; 5],
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "attempts holds 5 items, more than the limit of 4",
    );
    assert_eq!(
        c.add_spans(pb::AddSpansRequest {
            spans: spans(4),
            owner_epoch: None,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .spans
        .len(),
        4
    );

    // A control call over its limit; a write of the same size passes.
    let big = "x".repeat(100 * 1024);
    assert_code(
        c.query_rollouts(pb::QueryRolloutsRequest {
            rollout_id_contains: Some(big.clone()),
            ..Default::default()
        })
        .await,
        Code::ResourceExhausted,
        "more than the control message limit of 65536 bytes",
    );
    let large_input = serde_json::to_string(&big).unwrap();
    let written = c
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: large_input,
                ..spec("big")
            }),
        })
        .await
        .expect("a write under the message limit");
    assert!(written.into_inner().rollout.is_some());

    // agent-lightning 0.x and 1.x over HTTP: the same limit, their error
    // shapes, nothing written.
    let http = HttpClient::new(server.addr, Version::Http1);
    let inputs: Vec<_> = (0..5).map(|i| serde_json::json!({ "input": i })).collect();
    let refused = http
        .post_json(
            "/v1/agl/queues/rollouts/enqueue",
            &serde_json::json!({ "rollouts": inputs }),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.json()["detail"]
            .as_str()
            .unwrap()
            .contains("more than the limit of 4"),
        "{}",
        refused.text()
    );
    let creations: Vec<_> = (0..5)
        .map(|i| serde_json::json!({ "input": { "n": i } }))
        .collect();
    let refused = http
        .post_json("/api/rollouts", &serde_json::json!(creations))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.text().contains("more than the limit of 4"),
        "{}",
        refused.text()
    );
    assert_eq!(stats(&mut c).await.total_rollouts, 5);
}

/// Case 10 (responses): a committed batch whose answer would exceed the
/// client's receive limit (gRPC's default 4 MiB, or the one it announces)
/// is answered with ids only instead of reaching the client as
/// RESOURCE_EXHAUSTED, which made clients retry a write that had committed.
#[tokio::test]
async fn batch_answers_fit_the_clients_receive_limit() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    // A client with gRPC's default receive limit.
    let mut default_client = pb::lightning_store_service_client::LightningStoreServiceClient::new(
        server.channel().await,
    );
    let input = serde_json::to_string(&"x".repeat(64 * 1024)).unwrap();
    let specs: Vec<_> = (0..100)
        .map(|_| pb::RolloutSpec {
            input_json: input.clone(),
            ..Default::default()
        })
        .collect();
    let answer = default_client
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: specs,
            ..Default::default()
        })
        .await
        .expect("a 6.4 MB batch is answered within the client's 4 MiB")
        .into_inner();
    assert!(answer.ids_only && answer.rollouts.is_empty());
    assert_eq!(answer.rollout_ids.len(), 100);
    assert_eq!(stats(&mut c).await.total_rollouts, 100);
    assert_eq!(get(&mut c, &answer.rollout_ids[99]).await.input_json, input);

    // A small batch comes back whole, with its ids beside it.
    let small = c
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: vec![spec("1"), spec("2")],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!small.ids_only);
    let ids: Vec<_> = small
        .rollouts
        .iter()
        .map(|r| r.rollout_id.clone())
        .collect();
    assert_eq!(small.rollout_ids, ids);

    // Ids only on request, or past the limit the client announces.
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let spans = |names: &[&str]| {
        names
            .iter()
            .map(|n| span(&claimed.rollout_id, &attempt_id, n, None))
            .collect::<Vec<_>>()
    };
    let first = spans(&["a", "b"]);
    let asked = c
        .add_spans(pb::AddSpansRequest {
            spans: first.clone(),
            ids_only: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(asked.ids_only && asked.spans.is_empty());
    assert_eq!(asked.sequence_ids, vec![1, 2]);
    let mut again = spans(&["c"]);
    again.push(first[0].clone());
    let announced = c
        .add_spans(pb::AddSpansRequest {
            spans: again,
            max_response_bytes: Some(16),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(announced.ids_only && announced.spans.is_empty());
    assert_eq!((announced.sequence_ids.len(), announced.duplicates), (1, 1));
    let whole = c
        .add_spans(pb::AddSpansRequest {
            spans: spans(&["d"]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!whole.ids_only);
    assert_eq!(whole.spans.len(), 1);
    assert_eq!(Some(whole.sequence_ids[0]), whole.spans[0].sequence_id);
    assert!(whole.sequence_ids[0] > announced.sequence_ids[0]);

    // A nonsensical limit is refused before anything is written.
    assert_code(
        c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: vec![spec("3")],
            max_response_bytes: Some(0),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "max_response_bytes must be positive, got 0",
    );
    assert_eq!(stats(&mut c).await.total_rollouts, 102);
}
