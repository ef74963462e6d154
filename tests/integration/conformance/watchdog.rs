//! Timeouts and unresponsiveness (`docs/semantics.md#watchdog`): the real timer acts
//! without traffic, and the on-demand scan makes reads see verdicts at once.
//! Each server runs on a manual clock: a test lets time pass by advancing it
//! and awaits the verdict, so no deadline depends on how fast the machine is.

use std::time::Duration;

use lightning_store::proto as pb;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

/// The watchdog timer of the tests in which it acts.
const TIMER: Duration = Duration::from_millis(20);

/// A timer that never ticks during a test: only the scan before reads acts.
const TIMER_OFF: Duration = Duration::from_secs(3600);

fn watched(
    timeout: Option<f64>,
    unresponsive: Option<f64>,
    max: i64,
    retry_on: &[A],
) -> pb::RolloutSpec {
    let mut spec = retry_spec(max, retry_on);
    let config = spec.config.as_mut().unwrap();
    config.timeout_seconds = timeout;
    config.unresponsive_seconds = unresponsive;
    spec
}

#[tokio::test]
async fn timer_times_out_an_attempt_and_requeues_it_without_traffic() {
    skip_without!(super::BACKEND);
    let (server, clock) = TestServer::start_on_manual_clock(BACKEND, TIMER).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, watched(Some(30.0), None, 2, &[A::Timeout])).await;
    let first = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    clock.advance(Duration::from_secs(31));
    // Nothing else happens: the watchdog's timer requeues the rollout, which
    // wakes this waiting dequeue with the second attempt.
    let second = dequeue_wait(&mut c, 20)
        .await
        .expect("requeued by the watchdog");
    assert_eq!(second.rollout_id, rollout.rollout_id);
    assert_eq!(attempt_of(&second).sequence_id, 2);
    let attempts = c
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: rollout.rollout_id.clone(),
            page: None,
        })
        .await
        .unwrap()
        .into_inner()
        .attempts;
    assert_eq!(attempts[0].attempt_id, attempt_of(&first).attempt_id);
    assert_eq!(attempt_status(&attempts[0]), A::Timeout);
    assert!(
        attempts[0].end_time.is_none(),
        "timeout does not stamp end_time"
    );
    assert_eq!(
        worker(&mut c, "Worker-0").await.status,
        pb::WorkerStatus::Unknown as i32
    );
}

#[tokio::test]
async fn timer_marks_a_silent_attempt_unresponsive_and_fails_the_rollout() {
    skip_without!(super::BACKEND);
    let (server, clock) = TestServer::start_on_manual_clock(BACKEND, TIMER).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, watched(None, Some(30.0), 1, &[])).await;
    dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_secs(31));
    let finished = wait_for(&mut c, &[&rollout.rollout_id], 20.0).await;
    assert_eq!(finished.len(), 1, "failed by the watchdog without traffic");
    assert_eq!(status(&finished[0]), R::Failed);
    let now = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(attempt_status(attempt_of(&now)), A::Unresponsive);

    // A span revives the attempt; the failed rollout stays failed until the
    // runner reports success, which flips it (upstream behaviour).
    let attempt_id = attempt_of(&now).attempt_id.clone();
    add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "late", None))
        .await
        .unwrap();
    let revived = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(attempt_status(attempt_of(&revived)), A::Running);
    assert_eq!(status(&revived), R::Failed);
    set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();
    assert_eq!(
        status(&get(&mut c, &rollout.rollout_id).await),
        R::Succeeded
    );
}

#[tokio::test]
async fn read_right_after_the_deadline_sees_the_verdict() {
    skip_without!(super::BACKEND);
    // The timer is effectively off: only the scan before reads can act.
    let (server, clock) = TestServer::start_on_manual_clock(BACKEND, TIMER_OFF).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, watched(None, Some(1.0), 3, &[A::Unresponsive])).await;
    dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_millis(1001));
    let requeued = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(status(&requeued), R::Requeuing);
    assert_eq!(attempt_status(attempt_of(&requeued)), A::Unresponsive);

    // A span revives the attempt before the retry starts: the rollout runs
    // again and its stale queue entry is skipped.
    let attempt_id = attempt_of(&requeued).attempt_id.clone();
    add_span(
        &mut c,
        span(&rollout.rollout_id, &attempt_id, "alive", None),
    )
    .await
    .unwrap();
    let revived = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(status(&revived), R::Running);
    assert_eq!(attempt_status(attempt_of(&revived)), A::Running);
    assert!(dequeue(&mut c, None).await.is_none());
}

#[tokio::test]
async fn heartbeats_keep_an_attempt_alive_and_spans_do_not_reset_a_timeout() {
    skip_without!(super::BACKEND);
    let (server, clock) = TestServer::start_on_manual_clock(BACKEND, TIMER_OFF).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, watched(Some(1.0), Some(0.5), 1, &[])).await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    // Beats at 0.4 s and 0.8 s: never 0.5 s of silence.
    for _ in 0..2 {
        clock.advance(Duration::from_millis(400));
        add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "beat", None))
            .await
            .unwrap();
    }
    assert_eq!(
        status(&get(&mut c, &rollout.rollout_id).await),
        R::Running,
        "heartbeats in time"
    );
    // At 1.4 s both rules are due (1.0 s timeout, 0.6 s of silence).
    clock.advance(Duration::from_millis(600));
    let timed_out = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(
        attempt_status(attempt_of(&timed_out)),
        A::Timeout,
        "timeout rule wins"
    );
    assert_eq!(status(&timed_out), R::Failed);
    add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "late", None))
        .await
        .unwrap();
    assert_eq!(
        attempt_status(attempt_of(&get(&mut c, &rollout.rollout_id).await)),
        A::Timeout
    );
}

#[tokio::test]
async fn span_on_an_old_attempt_leaves_the_retry_alone() {
    skip_without!(super::BACKEND);
    let (server, clock) = TestServer::start_on_manual_clock(BACKEND, TIMER_OFF).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, watched(None, Some(1.0), 2, &[A::Unresponsive])).await;
    let first = dequeue(&mut c, None).await.unwrap();
    clock.advance(Duration::from_millis(1001));
    let second = dequeue(&mut c, None)
        .await
        .expect("retry after unresponsive");
    assert_eq!(attempt_of(&second).sequence_id, 2);
    let old = attempt_of(&first).attempt_id.clone();
    add_span(&mut c, span(&rollout.rollout_id, &old, "old", None))
        .await
        .unwrap();
    let now = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(status(&now), R::Preparing, "the retry is untouched");
    let attempts = c
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: rollout.rollout_id.clone(),
            page: None,
        })
        .await
        .unwrap()
        .into_inner()
        .attempts;
    assert_eq!(
        attempt_status(&attempts[0]),
        A::Running,
        "the old attempt revived"
    );
}
