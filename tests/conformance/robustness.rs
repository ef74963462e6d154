//! Issue 17's cases, one test each: hostile or careless inputs get a clear
//! answer, never a panic or INTERNAL, and leave the store usable.

use lightning_store::core::limits::LARGEST_SEQUENCE_ID;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use crate::common::TestServer;
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
