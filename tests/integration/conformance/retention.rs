//! Span retention: the spans of finished rollouts go, those that finished
//! first going first; querying them afterwards fails as upstream's eviction
//! does, and statistics stay exact.

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::{Clock, ManualClock, SystemClock};
use lightning_store::core::retention::RetentionPolicy;
use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::TestOptions;
use crate::conformance::support::*;

const SPANS_PER_ROLLOUT: usize = 5;

/// Starts a server whose retention runs only when the test calls it.
async fn server_with(policy: RetentionPolicy) -> TestServer {
    server_on_clock(policy, Arc::new(SystemClock)).await
}

/// Starts a server on `clock` whose retention runs only when the test calls it.
async fn server_on_clock(policy: RetentionPolicy, clock: Arc<dyn Clock>) -> TestServer {
    TestServer::start_opts(
        BACKEND,
        TestOptions {
            span_retention: policy,
            retention_interval: Duration::from_secs(3600),
            clock,
            ..TestOptions::default()
        },
    )
    .await
}

/// Starts a rollout and stores its spans (all spans have the same size).
async fn rollout_with_spans(c: &mut Client) -> (String, String) {
    let rollout = enqueue(c, "{}").await;
    let claimed = dequeue(c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let spans = (0..SPANS_PER_ROLLOUT)
        .map(|_| span(&rollout.rollout_id, &attempt_id, "step", None))
        .collect();
    c.add_spans(pb::AddSpansRequest {
        spans,
        ..Default::default()
    })
    .await
    .unwrap();
    (rollout.rollout_id, attempt_id)
}

async fn finish(c: &mut Client, rollout_id: &str, attempt_id: &str) {
    set_attempt_status(c, rollout_id, attempt_id, A::Succeeded)
        .await
        .unwrap();
}

async fn spans_of(c: &mut Client, rollout_id: &str) -> Result<usize, tonic::Status> {
    c.query_spans(pb::QuerySpansRequest {
        rollout_id: rollout_id.to_owned(),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().spans.len())
}

/// Returns the accounted bytes of one rollout's spans.
async fn rollout_bytes() -> i64 {
    let server = server_with(RetentionPolicy::default()).await;
    let mut c = server.client().await;
    rollout_with_spans(&mut c).await;
    stats(&mut c).await.total_span_bytes
}

#[tokio::test]
async fn a_size_limit_evicts_finished_rollouts_in_the_order_they_finished() {
    skip_without!(super::BACKEND);
    let bytes = rollout_bytes().await;
    assert!(bytes > 0);
    // Four rollouts hold spans; the limit leaves room for two and a half.
    let server = server_with(RetentionPolicy {
        max_age: None,
        max_bytes: Some((bytes * 5 / 2) as u64),
    })
    .await;
    let mut c = server.client().await;
    let mut rollouts = Vec::new();
    for _ in 0..4 {
        rollouts.push(rollout_with_spans(&mut c).await);
    }
    // Finish the third first, then the first, then the second; the fourth runs.
    for &i in &[2, 0, 1] {
        let (rollout_id, attempt_id) = &rollouts[i];
        finish(&mut c, rollout_id, attempt_id).await;
    }
    let before = stats(&mut c).await;
    assert_eq!(before.total_span_bytes, 4 * bytes);

    let evicted = server.engine.apply_retention().await.unwrap();
    assert_eq!(
        (evicted.rollouts, evicted.spans),
        (2, 2 * SPANS_PER_ROLLOUT as u64)
    );
    assert_eq!(evicted.bytes, 2 * bytes as u64);

    for &i in &[2, 0] {
        let result = spans_of(&mut c, &rollouts[i].0).await;
        assert_code(
            result,
            Code::FailedPrecondition,
            &format!("Spans for rollout {} have been evicted", rollouts[i].0),
        );
    }
    for &i in &[1, 3] {
        assert_eq!(
            spans_of(&mut c, &rollouts[i].0).await.unwrap(),
            SPANS_PER_ROLLOUT
        );
    }
    let after = stats(&mut c).await;
    assert_eq!(
        after.total_spans,
        before.total_spans - 2 * SPANS_PER_ROLLOUT as i64
    );
    assert_eq!(after.total_span_bytes, 2 * bytes);
    assert_eq!(after.evicted_rollouts, 2);
    assert_eq!(after.evicted_spans, 2 * SPANS_PER_ROLLOUT as i64);
    assert_eq!(after.evicted_span_bytes, 2 * bytes);

    // Under the limit now: a second run deletes nothing.
    let again = server.engine.apply_retention().await.unwrap();
    assert_eq!(again.rollouts, 0);
    assert_eq!(stats(&mut c).await.evicted_rollouts, 2);
}

#[tokio::test]
async fn an_age_limit_evicts_only_rollouts_finished_long_enough_ago() {
    skip_without!(super::BACKEND);
    let max_age = Duration::from_secs(60);
    let clock = Arc::new(ManualClock::at_system_time());
    let policy = RetentionPolicy {
        max_age: Some(max_age),
        max_bytes: None,
    };
    let server = server_on_clock(policy, clock.clone()).await;
    let mut c = server.client().await;
    let old = rollout_with_spans(&mut c).await;
    finish(&mut c, &old.0, &old.1).await;
    clock.advance(max_age + Duration::from_secs(1));
    let recent = rollout_with_spans(&mut c).await;
    finish(&mut c, &recent.0, &recent.1).await;
    let running = rollout_with_spans(&mut c).await;

    let evicted = server.engine.apply_retention().await.unwrap();
    assert_eq!(evicted.rollouts, 1);
    assert_code(
        spans_of(&mut c, &old.0).await,
        Code::FailedPrecondition,
        "have been evicted",
    );
    assert_eq!(
        spans_of(&mut c, &recent.0).await.unwrap(),
        SPANS_PER_ROLLOUT
    );
    assert_eq!(
        spans_of(&mut c, &running.0).await.unwrap(),
        SPANS_PER_ROLLOUT
    );

    // Sequence ids keep growing after an eviction: none is handed out twice.
    let next = c
        .get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
            rollout_id: old.0.clone(),
            attempt_id: old.1.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sequence_id;
    assert_eq!(next, SPANS_PER_ROLLOUT as i64 + 1);
    let stats = stats(&mut c).await;
    assert_eq!(stats.total_spans, 2 * SPANS_PER_ROLLOUT as i64);
    assert_eq!(stats.evicted_spans, SPANS_PER_ROLLOUT as i64);
}

#[tokio::test]
async fn the_retention_timer_evicts_without_traffic() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            span_retention: RetentionPolicy {
                max_age: Some(Duration::ZERO),
                max_bytes: None,
            },
            retention_interval: Duration::from_millis(50),
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let (rollout_id, attempt_id) = rollout_with_spans(&mut c).await;
    finish(&mut c, &rollout_id, &attempt_id).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stats(&mut c).await.evicted_rollouts == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing evicted in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_code(
        spans_of(&mut c, &rollout_id).await,
        Code::FailedPrecondition,
        "have been evicted",
    );
}
