//! The rollout/attempt lifecycle through the real server (`docs/semantics.md`, operations to
//! watchdog).

use lightning_store::proto as pb;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

#[tokio::test]
async fn full_lifecycle_enqueue_dequeue_span_complete() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;

    let queued = enqueue(&mut c, r#"{"question": "2+2?"}"#).await;
    assert!(queued.rollout_id.starts_with("ro-") && queued.rollout_id.len() == 15);
    assert_eq!(status(&queued), R::Queuing);
    assert!(queued.attempt.is_none());
    assert_eq!(queued.input_json, r#"{"question":"2+2?"}"#);
    assert_eq!(queued.metadata_json, "{}");
    assert_eq!(queued.config.as_ref().unwrap().max_attempts, Some(1));

    let claimed = dequeue(&mut c, Some("Worker-0")).await.unwrap();
    assert_eq!(claimed.rollout_id, queued.rollout_id);
    assert_eq!(status(&claimed), R::Preparing);
    let attempt = attempt_of(&claimed).clone();
    assert!(attempt.attempt_id.starts_with("at-") && attempt.attempt_id.len() == 11);
    assert_eq!(attempt.sequence_id, 1);
    assert_eq!(attempt_status(&attempt), A::Preparing);
    assert_eq!(attempt.worker_id.as_deref(), Some("Worker-0"));
    assert_eq!(
        worker(&mut c, "Worker-0").await.status,
        pb::WorkerStatus::Busy as i32
    );

    let stored = add_span(
        &mut c,
        span(&queued.rollout_id, &attempt.attempt_id, "llm", None),
    )
    .await
    .unwrap();
    assert_eq!(stored.sequence_id, Some(1));
    let running = get(&mut c, &queued.rollout_id).await;
    assert_eq!(status(&running), R::Running);
    assert_eq!(attempt_status(attempt_of(&running)), A::Running);
    assert!(attempt_of(&running).last_heartbeat_time.is_some());

    let done = set_attempt_status(&mut c, &queued.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();
    assert_eq!(attempt_status(&done), A::Succeeded);
    assert!(done.end_time.is_some());
    let finished = get(&mut c, &queued.rollout_id).await;
    assert_eq!(status(&finished), R::Succeeded);
    assert!(finished.end_time.is_some());
    let w = worker(&mut c, "Worker-0").await;
    assert_eq!(w.status, pb::WorkerStatus::Idle as i32);
    assert_eq!(w.current_rollout_id, None);
    server.stop().await;
}

#[tokio::test]
async fn queue_is_fifo_and_empty_dequeue_marks_worker_idle() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(enqueue(&mut c, &i.to_string()).await.rollout_id);
    }
    for expected in &ids {
        assert_eq!(&dequeue(&mut c, None).await.unwrap().rollout_id, expected);
    }
    assert!(dequeue(&mut c, Some("Worker-9")).await.is_none());
    let w = worker(&mut c, "Worker-9").await;
    assert_eq!(w.status, pb::WorkerStatus::Idle as i32);
    assert!(w.last_dequeue_time.is_some() && w.last_idle_time.is_some());
}

#[tokio::test]
async fn batch_enqueue_and_dequeue_keep_order_and_sync_the_last_attempt() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let created = c
        .enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: (0..4).map(|i| spec(&i.to_string())).collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    assert_eq!(created.len(), 4);
    let inputs: Vec<_> = created.iter().map(|r| r.input_json.as_str()).collect();
    assert_eq!(inputs, ["0", "1", "2", "3"]);
    let claimed = c
        .dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: 3,
            worker_id: Some("Worker-1".into()),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    let claimed_ids: Vec<_> = claimed.iter().map(|r| r.rollout_id.clone()).collect();
    let first_three: Vec<_> = created[..3].iter().map(|r| r.rollout_id.clone()).collect();
    assert_eq!(claimed_ids, first_three);
    assert!(
        claimed
            .iter()
            .all(|r| attempt_of(r).worker_id.as_deref() == Some("Worker-1"))
    );
    let w = worker(&mut c, "Worker-1").await;
    assert_eq!(
        w.current_rollout_id.as_deref(),
        Some(created[2].rollout_id.as_str())
    );
    assert_eq!(stats(&mut c).await.queued_rollouts, 1);
}

#[tokio::test]
async fn failed_attempt_is_retried_until_max_attempts() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, retry_spec(2, &[A::Failed])).await;

    let first = dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Failed)
        .await
        .unwrap();
    assert_eq!(
        status(&get(&mut c, &rollout.rollout_id).await),
        R::Requeuing
    );

    let second = dequeue(&mut c, None).await.unwrap();
    assert_eq!(second.rollout_id, rollout.rollout_id);
    assert_eq!(attempt_of(&second).sequence_id, 2);
    assert_ne!(
        attempt_of(&second).attempt_id,
        attempt_of(&first).attempt_id
    );
    set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Failed)
        .await
        .unwrap();
    let failed = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(status(&failed), R::Failed, "max_attempts=2 is exhausted");
    assert!(failed.end_time.is_some());
    assert!(dequeue(&mut c, None).await.is_none());
}

#[tokio::test]
async fn retry_condition_limits_which_statuses_retry() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(&mut c, retry_spec(3, &[A::Timeout])).await;
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Failed)
        .await
        .unwrap();
    assert_eq!(status(&get(&mut c, &rollout.rollout_id).await), R::Failed);
}

#[tokio::test]
async fn non_latest_attempt_updates_leave_the_rollout_alone() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let first = dequeue(&mut c, None).await.unwrap();
    let second = c
        .start_attempt(pb::StartAttemptRequest {
            rollout_id: rollout.rollout_id.clone(),
            worker_id: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(attempt_of(&second).sequence_id, 2);
    set_attempt_status(
        &mut c,
        &rollout.rollout_id,
        &attempt_of(&first).attempt_id,
        A::Succeeded,
    )
    .await
    .unwrap();
    let now = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(status(&now), R::Preparing);
    assert_eq!(attempt_of(&now).attempt_id, attempt_of(&second).attempt_id);
}

#[tokio::test]
async fn cancellation_is_final_for_attempt_updates_and_spans() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let claimed = dequeue(&mut c, None).await.unwrap();
    let attempt_id = attempt_of(&claimed).attempt_id.clone();
    let cancelled = set_rollout_status(&mut c, &rollout.rollout_id, R::Cancelled).await;
    assert_eq!(status(&cancelled), R::Cancelled);
    assert!(cancelled.end_time.is_some());

    add_span(&mut c, span(&rollout.rollout_id, &attempt_id, "late", None))
        .await
        .unwrap();
    let updated = set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();
    assert_eq!(
        attempt_status(&updated),
        A::Succeeded,
        "the attempt records the update"
    );
    assert_eq!(
        status(&get(&mut c, &rollout.rollout_id).await),
        R::Cancelled
    );
    let waited = wait_for(&mut c, &[&rollout.rollout_id], 0.0).await;
    assert_eq!(waited.len(), 1);
}

#[tokio::test]
async fn requeue_by_update_is_deduplicated() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    dequeue(&mut c, None).await.unwrap();
    set_rollout_status(&mut c, &rollout.rollout_id, R::Requeuing).await;
    set_rollout_status(&mut c, &rollout.rollout_id, R::Queuing).await;
    assert_eq!(stats(&mut c).await.queued_rollouts, 1);
    let again = dequeue(&mut c, None).await.unwrap();
    assert_eq!(attempt_of(&again).sequence_id, 2);
    assert!(dequeue(&mut c, None).await.is_none(), "queued once");
}

#[tokio::test]
async fn stale_queue_entries_are_skipped() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let a = enqueue(&mut c, "\"a\"").await;
    let b = enqueue(&mut c, "\"b\"").await;
    // Starting an attempt directly leaves `a`'s queue entry behind.
    start_attempt(&mut c, &a.rollout_id).await;
    assert_eq!(
        dequeue(&mut c, None).await.unwrap().rollout_id,
        b.rollout_id
    );
    assert!(dequeue(&mut c, None).await.is_none());
}

#[tokio::test]
async fn start_rollout_bypasses_the_queue_and_uses_latest_resources() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let resources = c
        .add_resources(pb::AddResourcesRequest {
            resources_json:
                r#"{"llm": {"resource_type": "llm", "endpoint": "http://x", "model": "m"}}"#.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    let started = c
        .start_rollout(pb::StartRolloutRequest {
            rollout: Some(spec("{}")),
            worker_id: Some("Worker-2".into()),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(status(&started), R::Preparing);
    assert_eq!(
        started.resources_id.as_deref(),
        Some(resources.resources_id.as_str())
    );
    assert_eq!(attempt_of(&started).sequence_id, 1);
    assert!(dequeue(&mut c, None).await.is_none());
    assert_eq!(
        worker(&mut c, "Worker-2").await.status,
        pb::WorkerStatus::Busy as i32
    );
}

#[tokio::test]
async fn waiting_dequeue_returns_as_soon_as_a_rollout_is_enqueued() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut waiter = server.client().await;
    let mut producer = server.client().await;
    let waiting = tokio::spawn(async move { dequeue_wait(&mut waiter, 30).await });
    // The waiter is parked on the queue signal; the enqueue wakes it.
    tokio::task::yield_now().await;
    let rollout = enqueue(&mut producer, "1").await;
    let claimed = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("woken by the enqueue, long before the 30 s wait ends")
        .unwrap()
        .unwrap();
    assert_eq!(claimed.rollout_id, rollout.rollout_id);
}

#[tokio::test]
async fn waiting_dequeue_returns_empty_when_the_wait_ends() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let started = std::time::Instant::now();
    let claimed = c
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: Some(prost_types::Duration {
                seconds: 0,
                nanos: 200_000_000,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout;
    assert!(claimed.is_none());
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
}

#[tokio::test]
async fn wait_for_rollouts_returns_terminal_ones_and_omits_unknown_ids() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let done = enqueue(&mut c, "1").await;
    let pending = enqueue(&mut c, "2").await;
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &done.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();

    let result = wait_for(
        &mut c,
        &[&pending.rollout_id, "ro-unknown", &done.rollout_id],
        0.05,
    )
    .await;
    let ids: Vec<_> = result.iter().map(|r| r.rollout_id.as_str()).collect();
    assert_eq!(ids, [done.rollout_id.as_str()]);
    assert!(result[0].attempt.is_none());

    // A waiter is woken by the completion itself.
    let mut waiter = server.client().await;
    let id = pending.rollout_id.clone();
    let waiting = tokio::spawn(async move { wait_for(&mut waiter, &[&id], 30.0).await });
    dequeue(&mut c, None).await.unwrap();
    set_attempt_status(&mut c, &pending.rollout_id, "latest", A::Failed)
        .await
        .unwrap();
    let finished = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
        .await
        .expect("woken by the completion")
        .unwrap();
    assert_eq!(finished.len(), 1);
    assert_eq!(status(&finished[0]), R::Failed);
}

#[tokio::test]
async fn update_attempt_errors_use_upstream_messages() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    assert_code(
        set_attempt_status(&mut c, &rollout.rollout_id, "latest", A::Failed).await,
        Code::FailedPrecondition,
        &format!("No attempts found for rollout {}", rollout.rollout_id),
    );
    dequeue(&mut c, None).await.unwrap();
    assert_code(
        set_attempt_status(&mut c, &rollout.rollout_id, "at-00000000", A::Failed).await,
        Code::NotFound,
        &format!(
            "Attempt at-00000000 not found for rollout {}",
            rollout.rollout_id
        ),
    );
    assert_code(
        set_attempt_status(&mut c, "ro-000000000000", "latest", A::Failed).await,
        Code::NotFound,
        "Rollout ro-000000000000 not found",
    );
    assert_code(
        c.update_rollout(pb::UpdateRolloutRequest {
            rollout_id: "ro-000000000000".into(),
            update_mask: mask(&["status"]),
            status: R::Failed as i32,
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "Item does not exist with primary key(s): rollout_id='ro-000000000000'",
    );
}

#[tokio::test]
async fn update_rollout_applies_only_masked_fields() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue_spec(
        &mut c,
        pb::RolloutSpec {
            mode: pb::RolloutMode::Train as i32,
            resources_id: Some("rs-fixed".into()),
            metadata_json: r#"{"k": 1}"#.into(),
            ..spec(r#"{"a": 1}"#)
        },
    )
    .await;
    let updated = c
        .update_rollout(pb::UpdateRolloutRequest {
            rollout_id: rollout.rollout_id.clone(),
            update_mask: mask(&["input_json", "resources_id", "config"]),
            input_json: r#"{"b": 2}"#.into(),
            resources_id: None,
            config: Some(pb::RolloutConfig {
                timeout_seconds: Some(30.0),
                ..Default::default()
            }),
            // Not in the mask: ignored.
            metadata_json: "null".into(),
            mode: pb::RolloutMode::Test as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(updated.input_json, r#"{"b":2}"#);
    assert_eq!(updated.resources_id, None, "listed and absent writes null");
    assert_eq!(updated.config.as_ref().unwrap().timeout_seconds, Some(30.0));
    assert_eq!(updated.config.as_ref().unwrap().max_attempts, Some(1));
    assert_eq!(updated.metadata_json, r#"{"k":1}"#);
    assert_eq!(updated.mode, pb::RolloutMode::Train as i32);
    let stored = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(stored.input_json, r#"{"b":2}"#);
    assert_eq!(stored.resources_id, None, "the store holds the new version");
    assert_eq!(stored.mode, pb::RolloutMode::Train as i32);
    // A new mode and version are stored, and kept by later updates that do
    // not name them.
    c.update_rollout(pb::UpdateRolloutRequest {
        rollout_id: rollout.rollout_id.clone(),
        update_mask: mask(&["mode", "resources_id"]),
        mode: pb::RolloutMode::Test as i32,
        resources_id: Some("rs-next".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    c.update_rollout(pb::UpdateRolloutRequest {
        rollout_id: rollout.rollout_id.clone(),
        update_mask: mask(&["metadata_json"]),
        metadata_json: r#"{"k": 2}"#.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let stored = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(stored.mode, pb::RolloutMode::Test as i32);
    assert_eq!(stored.resources_id.as_deref(), Some("rs-next"));
    assert_eq!(stored.metadata_json, r#"{"k":2}"#);
    assert_eq!(
        stored.start_time, rollout.start_time,
        "the start time stays"
    );
}

#[tokio::test]
async fn update_attempt_sets_worker_heartbeat_and_metadata() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    dequeue(&mut c, None).await.unwrap();
    let beat = prost_types::Timestamp {
        seconds: 1_700_000_000,
        nanos: 5,
    };
    let attempt = c
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout.rollout_id.clone(),
            attempt_id: "latest".into(),
            update_mask: mask(&["worker_id", "last_heartbeat_time", "metadata_json"]),
            worker_id: "Worker-5".into(),
            last_heartbeat_time: Some(beat),
            metadata_json: r#"{"note": "x"}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .attempt
        .unwrap();
    assert_eq!(attempt.worker_id.as_deref(), Some("Worker-5"));
    assert_eq!(attempt.last_heartbeat_time, Some(beat));
    assert_eq!(attempt.metadata_json, r#"{"note":"x"}"#);
    assert_eq!(attempt_status(&attempt), A::Preparing);
    let w = worker(&mut c, "Worker-5").await;
    assert_eq!(w.status, pb::WorkerStatus::Busy as i32);
    assert_eq!(
        w.current_attempt_id.as_deref(),
        Some(attempt.attempt_id.as_str())
    );
}
