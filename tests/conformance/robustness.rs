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
