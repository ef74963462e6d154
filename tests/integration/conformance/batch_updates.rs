//! UpdateAttempts: several attempt updates in one transaction, in order,
//! all or none (`docs/semantics.md#update-attempts`), with the events,
//! completions and fencing of the single calls.

use std::collections::HashMap;
use std::time::Duration;

use lightning_store::core::limits::RequestLimits;
use lightning_store::proto as pb;
use pb::watch_events_response::Message as WatchMessage;
use tonic::{Code, Streaming};

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

/// An update of an attempt's status.
fn to_status(rollout_id: &str, attempt_id: &str, status: A) -> pb::UpdateAttemptRequest {
    pb::UpdateAttemptRequest {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        update_mask: mask(&["status"]),
        status: status as i32,
        ..Default::default()
    }
}

/// An update of a claimed rollout's attempt's status.
fn finish(rollout: &pb::Rollout, status: A) -> pb::UpdateAttemptRequest {
    to_status(&rollout.rollout_id, &attempt_of(rollout).attempt_id, status)
}

async fn update_all(
    c: &mut Client,
    updates: Vec<pb::UpdateAttemptRequest>,
) -> Result<Vec<pb::Attempt>, tonic::Status> {
    c.update_attempts(pb::UpdateAttemptsRequest { updates })
        .await
        .map(|r| r.into_inner().attempts)
}

/// Enqueues `n` rollouts and claims them for `worker_id` with one dequeue.
async fn claim(c: &mut Client, n: usize, worker_id: &str) -> Vec<pb::Rollout> {
    c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
        rollouts: (0..n).map(|i| spec(&i.to_string())).collect(),
        ..Default::default()
    })
    .await
    .unwrap();
    let claimed = c
        .dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: n as i64,
            worker_id: Some(worker_id.to_owned()),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    assert_eq!(claimed.len(), n);
    claimed
}

/// Subscribes to the events after now; returns the latest sequence number.
async fn subscribe(c: &mut Client) -> (u64, Streaming<pb::WatchEventsResponse>) {
    let mut stream = watch(c).await;
    let Some(WatchMessage::Progress(progress)) = stream.message().await.unwrap().unwrap().message
    else {
        panic!("the first message is the progress");
    };
    (progress.latest_seq, stream)
}

/// Reads the events of `stream` up to and including sequence number `last`.
async fn events_until(
    stream: &mut Streaming<pb::WatchEventsResponse>,
    last: u64,
) -> Vec<pb::Event> {
    let mut events = Vec::new();
    while events
        .last()
        .is_none_or(|event: &pb::Event| event.seq < last)
    {
        let message = stream.message().await.unwrap().expect("the stream is open");
        events.extend(event_of(message));
    }
    events
}

/// The events with their ids replaced by their position among `rollouts`
/// (and the worker's by `W`), so that two groups' events compare.
fn shapes(events: &[pb::Event], rollouts: &[pb::Rollout]) -> Vec<String> {
    let position: HashMap<&str, usize> = rollouts
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            [
                (r.rollout_id.as_str(), i),
                (attempt_of(r).attempt_id.as_str(), i),
            ]
        })
        .collect();
    events
        .iter()
        .map(|e| {
            format!(
                "kind {} rollout {:?} attempt {:?} worker {} statuses {}/{}/{}",
                e.kind,
                position.get(e.rollout_id.as_str()),
                position.get(e.attempt_id.as_str()),
                !e.worker_id.is_empty(),
                e.rollout_status,
                e.attempt_status,
                e.worker_status
            )
        })
        .collect()
}

#[tokio::test]
async fn a_batch_applies_in_order_and_answers_in_request_order() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let claimed = claim(&mut c, 3, "Worker-0").await;
    // The third attempt is updated twice: the second update sees the first
    // (its metadata stays), as two UpdateAttempt calls in a row would.
    let metadata = pb::UpdateAttemptRequest {
        update_mask: mask(&["metadata_json"]),
        metadata_json: r#"{"step": 1}"#.to_owned(),
        ..finish(&claimed[2], A::Running)
    };
    let attempts = update_all(
        &mut c,
        vec![
            finish(&claimed[0], A::Succeeded),
            finish(&claimed[1], A::Failed),
            metadata,
            finish(&claimed[2], A::Succeeded),
        ],
    )
    .await
    .unwrap();
    let answered: Vec<(&str, A, &str)> = attempts
        .iter()
        .map(|a| {
            (
                a.rollout_id.as_str(),
                attempt_status(a),
                a.metadata_json.as_str(),
            )
        })
        .collect();
    let ids: Vec<&str> = claimed.iter().map(|r| r.rollout_id.as_str()).collect();
    assert_eq!(
        answered,
        [
            (ids[0], A::Succeeded, "null"),
            (ids[1], A::Failed, "null"),
            (ids[2], A::Preparing, r#"{"step":1}"#),
            (ids[2], A::Succeeded, r#"{"step":1}"#),
        ]
    );
    assert!(attempts[0].end_time.is_some() && attempts[3].end_time.is_some());
    let mut statuses = Vec::new();
    for id in &ids {
        statuses.push(status(&get(&mut c, id).await));
    }
    assert_eq!(statuses, [R::Succeeded, R::Failed, R::Succeeded]);
    let stored = get(&mut c, ids[2]).await;
    assert_eq!(attempt_of(&stored).metadata_json, r#"{"step":1}"#);
    assert_eq!(
        worker(&mut c, "Worker-0").await.status,
        pb::WorkerStatus::Idle as i32
    );
    server.stop().await;
}

#[tokio::test]
async fn one_bad_update_applies_none_and_names_its_index() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let claimed = claim(&mut c, 2, "Worker-0").await;
    let unclaimed = enqueue(&mut c, "{}").await;
    let (latest, mut events) = subscribe(&mut c).await;
    let before = stats(&mut c).await;
    let good = finish(&claimed[0], A::Succeeded);
    let refusals = [
        (
            to_status("ro-000000000000", "latest", A::Failed),
            Code::NotFound,
            "updates[1]: Rollout ro-000000000000 not found".to_owned(),
        ),
        (
            to_status(&claimed[1].rollout_id, "at-00000000", A::Failed),
            Code::NotFound,
            format!(
                "updates[1]: Attempt at-00000000 not found for rollout {}",
                claimed[1].rollout_id
            ),
        ),
        (
            to_status(&unclaimed.rollout_id, "latest", A::Failed),
            Code::FailedPrecondition,
            format!(
                "updates[1]: No attempts found for rollout {}",
                unclaimed.rollout_id
            ),
        ),
        (
            to_status(&claimed[1].rollout_id, "latest", A::Unspecified),
            Code::InvalidArgument,
            "updates[1]: ".to_owned(),
        ),
        (
            pb::UpdateAttemptRequest {
                update_mask: mask(&["end_time"]),
                ..finish(&claimed[1], A::Failed)
            },
            Code::InvalidArgument,
            "updates[1]: update_mask path \"end_time\"".to_owned(),
        ),
    ];
    for (bad, code, message) in refusals {
        assert_code(
            update_all(&mut c, vec![good.clone(), bad, good.clone()]).await,
            code,
            &message,
        );
    }
    // Nothing was applied: the first update's rollout is still claimed,
    // the counts are unchanged and no event was published.
    let first = get(&mut c, &claimed[0].rollout_id).await;
    assert_eq!(status(&first), R::Preparing);
    assert_eq!(attempt_status(attempt_of(&first)), A::Preparing);
    let after = stats(&mut c).await;
    assert_eq!(
        (
            after.total_rollouts,
            after.queued_rollouts,
            after.total_attempts
        ),
        (
            before.total_rollouts,
            before.queued_rollouts,
            before.total_attempts
        )
    );
    let marker = set_rollout_status(&mut c, &unclaimed.rollout_id, R::Cancelled).await;
    let next = event_of(events.message().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        next.seq,
        latest + 1,
        "the refused batches published nothing"
    );
    assert_eq!(next.rollout_id, marker.rollout_id);
    server.stop().await;
}

#[tokio::test]
async fn an_empty_batch_and_one_over_the_limit_are_invalid() {
    skip_without!(super::BACKEND);
    let limits = RequestLimits {
        max_batch_items: 4,
        ..RequestLimits::default()
    };
    let server = TestServer::start_with_limits(BACKEND, limits).await;
    let mut c = server.client().await;
    assert_code(
        update_all(&mut c, Vec::new()).await,
        Code::InvalidArgument,
        "updates must not be empty",
    );
    let claimed = claim(&mut c, 1, "Worker-0").await;
    let update = finish(&claimed[0], A::Running);
    assert_code(
        update_all(&mut c, vec![update.clone(); 5]).await,
        Code::InvalidArgument,
        "updates holds 5 items, more than the limit of 4",
    );
    // The size is refused before any item is read.
    let unreadable = pb::UpdateAttemptRequest {
        rollout_id: String::new(),
        ..update.clone()
    };
    assert_code(
        update_all(&mut c, vec![unreadable; 5]).await,
        Code::InvalidArgument,
        "updates holds 5 items, more than the limit of 4",
    );
    assert_eq!(
        attempt_status(attempt_of(&get(&mut c, &claimed[0].rollout_id).await)),
        A::Preparing
    );
    assert_eq!(update_all(&mut c, vec![update; 4]).await.unwrap().len(), 4);
    server.stop().await;
}

#[tokio::test]
async fn a_batch_publishes_the_events_and_completions_of_single_calls() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let singles = claim(&mut c, 3, "Worker-single").await;
    let batched = claim(&mut c, 3, "Worker-batch").await;
    let outcomes = [A::Succeeded, A::Failed, A::Succeeded];
    let mut completions = c
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: singles
                .iter()
                .chain(&batched)
                .map(|r| r.rollout_id.clone())
                .collect(),
            timeout: Some(prost_types::Duration {
                seconds: 60,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner();

    let (start, mut events) = subscribe(&mut c).await;
    for (rollout, &outcome) in singles.iter().zip(&outcomes) {
        c.update_attempt(finish(rollout, outcome)).await.unwrap();
    }
    let (middle, _) = subscribe(&mut c).await;
    let single_events = events_until(&mut events, middle).await;
    let updates = batched
        .iter()
        .zip(&outcomes)
        .map(|(rollout, &outcome)| finish(rollout, outcome))
        .collect();
    update_all(&mut c, updates).await.unwrap();
    let (end, _) = subscribe(&mut c).await;
    let batch_events = events_until(&mut events, end).await;

    assert!(middle > start && !single_events.is_empty());
    assert_eq!(
        shapes(&batch_events, &batched),
        shapes(&single_events, &singles),
        "the batch publishes what the single calls published"
    );
    let consecutive = batch_events
        .windows(2)
        .all(|pair| pair[1].seq == pair[0].seq + 1);
    assert!(consecutive && batch_events[0].seq == middle + 1);

    let mut completed = Vec::new();
    while let Some(message) = completions.message().await.unwrap() {
        completed.push(message.rollout.unwrap().rollout_id);
    }
    let expected: Vec<String> = singles
        .iter()
        .chain(&batched)
        .map(|r| r.rollout_id.clone())
        .collect();
    assert_eq!(completed, expected, "each completion once, in commit order");
    server.stop().await;
}

#[tokio::test]
async fn each_update_is_fenced_by_its_own_owner_epoch() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut first = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 1).await;
    let mut second = Runner::open(&mut Client::new(server.channel().await), "Worker-1", 1).await;
    enqueue(&mut c, "0").await;
    enqueue(&mut c, "1").await;
    let (held_first, held_second) = tokio::time::timeout(Duration::from_secs(30), async {
        (first.assignment().await, second.assignment().await)
    })
    .await
    .expect("both runners get a rollout");
    let fenced = |rollout: &pb::Rollout, epoch: u64| pb::UpdateAttemptRequest {
        owner_epoch: Some(epoch),
        ..finish(rollout, A::Succeeded)
    };
    assert_code(
        update_all(
            &mut c,
            vec![
                fenced(&held_first, first.epoch()),
                fenced(&held_second, first.epoch()),
            ],
        )
        .await,
        Code::FailedPrecondition,
        &format!(
            "updates[1]: attempt {} of rollout {} is not owned by the session with owner_epoch {}: worker Worker-1's session now has owner_epoch {}",
            attempt_of(&held_second).attempt_id,
            held_second.rollout_id,
            first.epoch(),
            second.epoch()
        ),
    );
    assert_eq!(
        status(&get(&mut c, &held_first.rollout_id).await),
        R::Preparing,
        "the update that passed its check was not applied either"
    );
    let attempts = update_all(
        &mut c,
        vec![
            fenced(&held_first, first.epoch()),
            fenced(&held_second, second.epoch()),
        ],
    )
    .await
    .unwrap();
    assert!(attempts.iter().all(|a| attempt_status(a) == A::Succeeded));
    first.close().await;
    second.close().await;
    server.stop().await;
}

#[tokio::test]
async fn updates_of_one_workers_attempts_are_fenced_by_its_one_session() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut runner = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 2).await;
    enqueue(&mut c, "0").await;
    enqueue(&mut c, "1").await;
    let held = tokio::time::timeout(Duration::from_secs(30), async {
        [runner.assignment().await, runner.assignment().await]
    })
    .await
    .expect("the runner gets both rollouts");
    let fenced = |rollout: &pb::Rollout, status: A, epoch: u64| pb::UpdateAttemptRequest {
        owner_epoch: Some(epoch),
        ..finish(rollout, status)
    };
    let epoch = runner.epoch();
    // The session is read for the first update; the second, of the same
    // worker, is checked against it just the same.
    assert_code(
        update_all(
            &mut c,
            vec![
                fenced(&held[0], A::Running, epoch),
                fenced(&held[1], A::Running, epoch + 1),
            ],
        )
        .await,
        Code::FailedPrecondition,
        &format!(
            "updates[1]: attempt {} of rollout {} is not owned by the session with owner_epoch {}: worker Worker-0's session now has owner_epoch {epoch}",
            attempt_of(&held[1]).attempt_id,
            held[1].rollout_id,
            epoch + 1,
        ),
    );
    let attempts = update_all(
        &mut c,
        vec![
            fenced(&held[0], A::Running, epoch),
            fenced(&held[1], A::Running, epoch),
            fenced(&held[0], A::Succeeded, epoch),
        ],
    )
    .await
    .unwrap();
    let statuses: Vec<A> = attempts.iter().map(attempt_status).collect();
    assert_eq!(statuses, [A::Running, A::Running, A::Succeeded]);
    assert_eq!(
        status(&get(&mut c, &held[0].rollout_id).await),
        R::Succeeded
    );
    assert_eq!(status(&get(&mut c, &held[1].rollout_id).await), R::Running);
    runner.close().await;
    server.stop().await;
}
