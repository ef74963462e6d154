//! The read model's aggregates (the console's Overview and a waiting
//! rollout's page), through their RPCs and the engine: rollouts created and
//! finished per minute, the queue's head and a rollout's place in it, the
//! latest failures with why they failed, rollouts per status. Time is a
//! manual clock, so every minute is the test's.

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::agl1::{Agl1State, NewAgl1Rollout, StatusPatch};
use lightning_store::core::clock::{Clock, ManualClock};
use lightning_store::core::ids::RolloutId;
use lightning_store::core::model::{RolloutStatus, Timestamp};
use lightning_store::proto as pb;
use serde_json::json;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::TestOptions;
use crate::conformance::support::*;

const MINUTE: Duration = Duration::from_secs(60);
const MINUTE_NANOS: i64 = 60_000_000_000;

/// Starts a server on a manual clock standing `offset` into a wall-clock
/// minute.
async fn start_at(offset: Duration) -> (TestServer, Arc<ManualClock>) {
    let now = ManualClock::at_system_time().now().0;
    let minute = now - now.rem_euclid(MINUTE_NANOS);
    let clock = Arc::new(ManualClock::new(Timestamp(
        minute + offset.as_nanos() as i64,
    )));
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            clock: clock.clone(),
            ..Default::default()
        },
    )
    .await;
    (server, clock)
}

fn seconds(t: &prost_types::Timestamp) -> i64 {
    t.seconds
}

async fn activity(c: &mut Client) -> Vec<pb::RolloutMinute> {
    c.get_rollout_activity(pb::GetRolloutActivityRequest {})
        .await
        .unwrap()
        .into_inner()
        .minutes
}

async fn failures(c: &mut Client, limit: i64) -> Vec<pb::RolloutFailure> {
    c.list_recent_failures(pb::ListRecentFailuresRequest { limit })
        .await
        .unwrap()
        .into_inner()
        .failures
}

async fn position(c: &mut Client, rollout_id: &str) -> pb::GetQueuePositionResponse {
    c.get_queue_position(pb::GetQueuePositionRequest {
        rollout_id: rollout_id.to_owned(),
    })
    .await
    .unwrap()
    .into_inner()
}

fn status_span(
    rollout_id: &str,
    attempt_id: &str,
    name: &str,
    seq: i64,
    code: pb::SpanStatusCode,
    description: &str,
) -> pb::Span {
    pb::Span {
        status: Some(pb::SpanStatus {
            code: code as i32,
            description: Some(description.to_owned()),
            ..Default::default()
        }),
        ..span(rollout_id, attempt_id, name, Some(seq))
    }
}

#[tokio::test]
async fn rollouts_are_counted_per_minute_of_the_last_hour() {
    let (server, clock) = start_at(Duration::from_secs(10)).await;
    let mut c = server.client().await;
    // Two hours ago: outside the window.
    let old = enqueue(&mut c, "{}").await.rollout_id;
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &old, "latest", A::Succeeded)
        .await
        .unwrap();
    clock.advance(120 * MINUTE);
    let start = clock.now().0 - 10_000_000_000;

    // Minute 0: three created, two of them claimed.
    let a = enqueue(&mut c, "{}").await.rollout_id;
    let b = enqueue(&mut c, "{}").await.rollout_id;
    let cancelled = enqueue(&mut c, "{}").await.rollout_id;
    dequeue(&mut c, Some("w-1")).await.unwrap();
    dequeue(&mut c, Some("w-2")).await.unwrap();
    // Minute 1: one succeeds, one fails.
    clock.advance(MINUTE);
    set_attempt_status(&mut c, &a, "latest", A::Succeeded)
        .await
        .unwrap();
    set_attempt_status(&mut c, &b, "latest", A::Failed)
        .await
        .unwrap();
    // Minute 2: one created, one cancelled (ended while queued).
    clock.advance(MINUTE);
    enqueue(&mut c, "{}").await;
    set_rollout_status(&mut c, &cancelled, R::Cancelled).await;
    // Minute 3, the current one: nothing yet.
    clock.advance(MINUTE);

    let minutes = activity(&mut c).await;
    assert_eq!(minutes.len(), 60);
    let current = start + 3 * MINUTE_NANOS;
    assert_eq!(
        seconds(minutes[59].start.as_ref().unwrap()),
        current / 1_000_000_000
    );
    assert_eq!(
        seconds(minutes[0].start.as_ref().unwrap()),
        (current - 59 * MINUTE_NANOS) / 1_000_000_000
    );
    let counts = |m: &pb::RolloutMinute| (m.created, m.succeeded, m.failed, m.cancelled);
    assert_eq!(counts(&minutes[56]), (3, 0, 0, 0));
    assert_eq!(counts(&minutes[57]), (0, 1, 1, 0));
    assert_eq!(counts(&minutes[58]), (1, 0, 0, 1));
    assert_eq!(counts(&minutes[59]), (0, 0, 0, 0));
    let total: i64 = minutes
        .iter()
        .map(|m| m.created + m.succeeded + m.failed + m.cancelled)
        .sum();
    assert_eq!(total, 7, "the rollout of two hours ago is not counted");

    // Counted from the rollouts as they are: a failed rollout put back in
    // the queue no longer counts as failed.
    set_rollout_status(&mut c, &b, R::Queuing).await;
    assert_eq!(counts(&activity(&mut c).await[57]), (0, 1, 0, 0));
    // The window follows the clock: a minute later, minute 0 is index 55.
    clock.advance(MINUTE);
    assert_eq!(counts(&activity(&mut c).await[55]), (3, 0, 0, 0));

    // The engine's answer is the RPC's.
    let engine = server.engine.finished_per_minute().await.unwrap();
    assert_eq!(engine.len(), 60);
    assert_eq!((engine[55].created, engine[56].succeeded), (3, 1));

    // A deleted rollout (agent-lightning 1.x deletes) is no longer counted.
    let agl1 = server
        .engine
        .create_agl1_rollouts(vec![NewAgl1Rollout {
            rollout_id: Some("agl1-gone".into()),
            input: json!({}),
            is_train: true,
            config: json!({}),
            metadata: json!({}),
        }])
        .await
        .unwrap();
    assert_eq!(counts(&activity(&mut c).await[59]), (1, 0, 0, 0));
    server
        .engine
        .delete_agl1_rollout(
            &RolloutId::parse("rollout_id", agl1[0].rollout.rollout_id.clone()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(counts(&activity(&mut c).await[59]), (0, 0, 0, 0));

    // Housekeeping forgets only minutes older than the window.
    server.engine.forget_old_activity().await.unwrap();
    let kept = activity(&mut c).await;
    assert_eq!(
        (counts(&kept[55]), counts(&kept[56])),
        ((3, 0, 0, 0), (0, 1, 0, 0))
    );
    server.stop().await;
}

#[tokio::test]
async fn a_queued_rollout_knows_its_place() {
    let (server, clock) = start_at(Duration::ZERO).await;
    let mut c = server.client().await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(
            enqueue_spec(&mut c, retry_spec(2, &[A::Failed]))
                .await
                .rollout_id,
        );
        clock.advance(Duration::from_secs(1));
    }
    let third = position(&mut c, &ids[2]).await;
    assert!(third.queued);
    assert_eq!((third.ahead, third.queue_length), (2, 4));
    let created = get(&mut c, &ids[2]).await.start_time.unwrap();
    assert_eq!(third.since, Some(created));

    // The head is claimed: one less ahead.
    dequeue(&mut c, Some("w-1")).await.unwrap();
    let third = position(&mut c, &ids[2]).await;
    assert_eq!((third.ahead, third.queue_length), (1, 3));
    // A rollout ahead is cancelled: it leaves the queue.
    set_rollout_status(&mut c, &ids[1], R::Cancelled).await;
    let third = position(&mut c, &ids[2]).await;
    assert_eq!((third.ahead, third.queue_length), (0, 2));

    // The claimed rollout is not queued; an unknown one is not found.
    let running = position(&mut c, &ids[0]).await;
    assert_eq!(running, pb::GetQueuePositionResponse::default());
    assert_code(
        c.get_queue_position(pb::GetQueuePositionRequest {
            rollout_id: "ro-unknown".into(),
        })
        .await,
        Code::NotFound,
        "Rollout ro-unknown not found",
    );

    // A retry goes to the tail, since the time it was requeued.
    clock.advance(Duration::from_secs(5));
    set_attempt_status(&mut c, &ids[0], "latest", A::Failed)
        .await
        .unwrap();
    let requeued = position(&mut c, &ids[0]).await;
    assert_eq!((requeued.ahead, requeued.queue_length), (2, 3));
    let now = clock.now();
    assert_eq!(
        requeued
            .since
            .as_ref()
            .map(|t| t.seconds * 1_000_000_000 + i64::from(t.nanos)),
        Some(now.0)
    );

    // The oldest queued rollout: the head, and how long it has waited.
    let statistics = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(statistics.oldest_queued_rollout_id, ids[2]);
    let oldest = server.engine.oldest_queued().await.unwrap().unwrap();
    assert_eq!(oldest.rollout_id, ids[2]);
    assert_eq!(
        oldest.age,
        Duration::from_secs(7),
        "enqueued at 2 s, now 9 s"
    );
    let queued = RolloutId::parse("rollout_id", ids[3].clone()).unwrap();
    let place = server.engine.queue_place(&queued).await.unwrap().unwrap();
    assert_eq!((place.ahead, place.queued), (1, 3));

    // Once the queue is empty, there is no oldest.
    c.dequeue_rollouts(pb::DequeueRolloutsRequest {
        limit: 10,
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(server.engine.oldest_queued().await.unwrap(), None);
    let statistics = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(statistics.oldest_queued_rollout_id, "");
    server.stop().await;
}

#[tokio::test]
async fn the_latest_failures_come_with_their_reasons() {
    let (server, clock) = start_at(Duration::ZERO).await;
    let mut c = server.client().await;
    // An earlier failure with spans: the last ERROR span of its latest
    // attempt is the reason (not a later OK one, not an earlier error).
    let spans_failed = enqueue(&mut c, "{}").await.rollout_id;
    let attempt = attempt_of(&dequeue(&mut c, Some("w-1")).await.unwrap())
        .attempt_id
        .clone();
    use pb::SpanStatusCode as S;
    for (seq, name, code, description) in [
        (1, "llm", S::Error, "rate limited"),
        (2, "tool", S::Error, "boom"),
        (3, "cleanup", S::Ok, "done"),
        (4, "reward", S::Unspecified, ""),
    ] {
        let span = status_span(&spans_failed, &attempt, name, seq, code, description);
        add_span(&mut c, span).await.unwrap();
    }
    clock.advance(Duration::from_secs(1));
    set_attempt_status(&mut c, &spans_failed, "latest", A::Failed)
        .await
        .unwrap();
    // A later failure without spans, and a success (not a failure).
    clock.advance(Duration::from_secs(1));
    let bare = enqueue(&mut c, "{}").await.rollout_id;
    let done = enqueue(&mut c, "{}").await.rollout_id;
    dequeue(&mut c, Some("w-2")).await.unwrap();
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &bare, "latest", A::Failed)
        .await
        .unwrap();
    set_attempt_status(&mut c, &done, "latest", A::Succeeded)
        .await
        .unwrap();
    // The latest: an agent-lightning 1.x rollout failed by its controller.
    clock.advance(Duration::from_secs(1));
    let agl1 = server
        .engine
        .create_agl1_rollouts(vec![NewAgl1Rollout {
            rollout_id: Some("agl1-spawn".into()),
            input: json!({}),
            is_train: true,
            config: json!({}),
            metadata: json!({}),
        }])
        .await
        .unwrap();
    let agl1_id = RolloutId::parse("rollout_id", agl1[0].rollout.rollout_id.clone()).unwrap();
    server
        .engine
        .patch_agl1_rollout(
            &agl1_id,
            StatusPatch {
                state: Some(Some(Agl1State::Failed)),
                error_message: Some(Some("spawn failed".into())),
                ..StatusPatch::default()
            },
        )
        .await
        .unwrap();

    let latest = failures(&mut c, 0).await;
    let ids: Vec<&str> = latest
        .iter()
        .map(|f| f.rollout.as_ref().unwrap().rollout_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [agl1_id.as_str(), bare.as_str(), spans_failed.as_str()]
    );
    assert_eq!(latest[0].agl1_error.as_deref(), Some("spawn failed"));
    assert!(latest[0].error_span.is_none());
    let bare_failure = &latest[1];
    let rollout = bare_failure.rollout.as_ref().unwrap();
    assert_eq!(status(rollout), R::Failed);
    assert!(rollout.end_time.is_some());
    let failing = attempt_of(rollout);
    assert_eq!(
        (attempt_status(failing), failing.worker_id.as_deref()),
        (A::Failed, Some("w-2"))
    );
    assert!(bare_failure.error_span.is_none() && bare_failure.agl1_error.is_none());
    let reason = latest[2].error_span.as_ref().expect("an error span");
    assert_eq!(
        (reason.name.as_str(), reason.sequence_id),
        ("tool", Some(2))
    );
    assert_eq!(
        reason.status.as_ref().unwrap().description.as_deref(),
        Some("boom")
    );

    // A limit keeps the latest; out of range is refused.
    assert_eq!(failures(&mut c, 1).await.len(), 1);
    assert_code(
        c.list_recent_failures(pb::ListRecentFailuresRequest { limit: 101 })
            .await,
        Code::InvalidArgument,
        "limit must be 0 to 100",
    );
    // A retried rollout is no longer a failure.
    set_rollout_status(&mut c, &bare, R::Queuing).await;
    let engine = server.engine.latest_failures(10).await.unwrap();
    let ids: Vec<&str> = engine
        .iter()
        .map(|f| f.rollout.rollout.rollout_id.as_str())
        .collect();
    assert_eq!(ids, [agl1_id.as_str(), spans_failed.as_str()]);
    assert_eq!(engine[1].error_span.as_ref().unwrap().name, "tool");

    // Rollouts per status: every status, zeros included.
    let by_status = server.engine.rollouts_by_status().await.unwrap();
    assert_eq!(by_status.len(), RolloutStatus::ALL.len());
    assert_eq!(by_status[&RolloutStatus::Failed], 2);
    assert_eq!(by_status[&RolloutStatus::Succeeded], 1);
    assert_eq!(by_status[&RolloutStatus::Queuing], 1);
    assert_eq!(by_status[&RolloutStatus::Running], 0);
    server.stop().await;
}

#[tokio::test]
async fn an_id_finds_what_it_names() {
    use lightning_store::core::overview::Found;
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "{}").await.rollout_id;
    let claimed = dequeue(&mut c, Some("w-find")).await.unwrap();
    let attempt = attempt_of(&claimed).attempt_id.clone();
    let resources = c
        .add_resources(pb::AddResourcesRequest {
            resources_json: "{}".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap()
        .resources_id;
    let engine = &server.engine;
    assert_eq!(
        engine.find_id(&format!(" {rollout} ")).await.unwrap(),
        [Found::Rollout(rollout.clone())],
        "blanks around the id are ignored"
    );
    assert_eq!(
        engine.find_id(&attempt).await.unwrap(),
        [Found::Attempt {
            rollout_id: rollout.clone(),
            attempt_id: attempt.clone(),
        }]
    );
    assert_eq!(
        engine.find_id("w-find").await.unwrap(),
        [Found::Worker("w-find".into())]
    );
    assert_eq!(
        engine.find_id(&resources).await.unwrap(),
        [Found::Resources(resources.clone())]
    );
    // A trace id names the attempts with its spans, one entry per attempt.
    let mut traced = span(&rollout, &attempt, "traced", None);
    traced.trace_id = "0af7651916cd43dd8448eb211c80319c".into();
    let mut again = span(&rollout, &attempt, "traced again", None);
    again.trace_id = traced.trace_id.clone();
    add_span(&mut c, traced.clone()).await;
    add_span(&mut c, again).await;
    assert_eq!(
        engine.find_id(&traced.trace_id).await.unwrap(),
        [Found::Trace {
            rollout_id: rollout.clone(),
            attempt_id: attempt.clone(),
        }]
    );
    assert!(engine.find_id("ro-nothing").await.unwrap().is_empty());
    assert!(
        engine.find_id(&rollout[..8]).await.unwrap().is_empty(),
        "exact ids only"
    );
    assert!(engine.find_id("  ").await.is_err());
    server.stop().await;
}
