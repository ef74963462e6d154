//! Streams instead of polling: completion watches, resumable event
//! subscriptions, worker sessions and their shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lightning_store::core::clock::ManualClock;
use lightning_store::core::engine::SessionPolicy;
use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;
use pb::watch_events_response::Message as WatchMessage;
use pb::worker_session_request::Message as ToServer;
use pb::worker_session_response::Message as FromServer;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Code, Streaming};

use super::BACKEND;
use super::TestServer;
use crate::common::TestOptions;
use crate::conformance::support::*;

const LIMIT: Duration = Duration::from_secs(120);

async fn enqueue_many(c: &mut Client, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(500) {
        let created = c
            .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                rollouts: chunk.iter().map(|i| spec(&i.to_string())).collect(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .rollouts;
        ids.extend(created.into_iter().map(|r| r.rollout_id));
    }
    ids
}

/// A deterministic permutation of 0..n (n must not be a multiple of 7).
fn shuffled(n: usize) -> Vec<usize> {
    (0..n).map(|i| (i * 7 + 3) % n).collect()
}

#[tokio::test]
async fn completion_watch_streams_each_rollout_once_in_completion_order() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let ids = enqueue_many(&mut c, 1000).await;
    let claimed = c
        .dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    assert_eq!(claimed.len(), 1000);
    let order = shuffled(1000);
    let (early, late) = order.split_at(10);
    for &i in early {
        set_attempt_status(&mut c, &ids[i], "latest", A::Succeeded)
            .await
            .unwrap();
    }

    let mut watch = c
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: ids
                .iter()
                .cloned()
                .chain(["ro-unknown".to_owned()])
                .collect(),
            timeout: None,
        })
        .await
        .unwrap()
        .into_inner();
    // Already-finished rollouts come first, before anything else happens.
    let mut received = Vec::new();
    for _ in 0..early.len() {
        received.push(
            watch
                .message()
                .await
                .unwrap()
                .unwrap()
                .rollout
                .unwrap()
                .rollout_id,
        );
    }
    let mut expected_early: Vec<_> = early.iter().map(|&i| ids[i].clone()).collect();
    expected_early.sort_by_key(|id| ids.iter().position(|x| x == id));
    assert_eq!(
        received, expected_early,
        "already terminal ones first, in request order"
    );

    let mut completer = server.client().await;
    let late_ids: Vec<String> = late.iter().map(|&i| ids[i].clone()).collect();
    let completing = {
        let late_ids = late_ids.clone();
        tokio::spawn(async move {
            for (n, id) in late_ids.iter().enumerate() {
                let status = if n % 3 == 0 { A::Failed } else { A::Succeeded };
                set_attempt_status(&mut completer, id, "latest", status)
                    .await
                    .unwrap();
            }
        })
    };
    let rest = tokio::time::timeout(LIMIT, async {
        let mut rest = Vec::new();
        while let Some(message) = watch.message().await.unwrap() {
            let rollout = message.rollout.unwrap();
            assert!(matches!(status(&rollout), R::Succeeded | R::Failed));
            rest.push(rollout.rollout_id);
        }
        rest
    })
    .await
    .expect("the stream ends right after the last completion");
    completing.await.unwrap();
    assert_eq!(rest, late_ids, "each completion once, in completion order");
}

#[tokio::test]
async fn completion_watch_ends_with_deadline_exceeded() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let rollout = enqueue(&mut c, "1").await;
    let mut watch = c
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec![rollout.rollout_id],
            timeout: Some(prost_types::Duration {
                seconds: 0,
                nanos: 100_000_000,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_code(watch.message().await, Code::DeadlineExceeded, "timed out");
}

async fn subscribe(
    c: &mut Client,
    after_seq: Option<u64>,
) -> (u64, Streaming<pb::WatchEventsResponse>) {
    let mut stream = c
        .watch_events(pb::WatchEventsRequest {
            after_seq,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let Some(WatchMessage::Progress(progress)) = stream.message().await.unwrap().unwrap().message
    else {
        panic!("the first message is the progress");
    };
    (progress.latest_seq, stream)
}

#[tokio::test]
async fn subscribe_then_snapshot_has_no_race() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    enqueue_many(&mut c, 3).await;
    let (latest, mut stream) = subscribe(&mut c, None).await;
    assert!(latest >= 3);
    let rollout = enqueue(&mut c, "4").await;
    let event = event_of(stream.message().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        event.seq,
        latest + 1,
        "the first live event follows the progress"
    );
    assert_eq!(event.kind, pb::EventKind::RolloutCreated as i32);
    assert_eq!(event.rollout_id, rollout.rollout_id);
    assert_eq!(event.rollout_status, R::Queuing as i32);
}

#[tokio::test]
async fn subscribers_resume_after_dropped_connections_without_gaps_or_duplicates() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (start, first) = subscribe(&mut c, None).await;
    drop(first);

    // A burst of 10,000 changes (20 batches of 500 new rollouts).
    let mut producer = server.client().await;
    let burst = tokio::spawn(async move {
        enqueue_many(&mut producer, 10_000).await;
    });

    let mut seen: Vec<u64> = Vec::new();
    let mut position = start;
    let mut cut = 1;
    tokio::time::timeout(LIMIT, async {
        while position < start + 10_000 {
            // A fresh connection each time: dropping it kills the stream mid-flight.
            let mut client = Client::new(server.channel().await);
            let (_, mut stream) = subscribe(&mut client, Some(position)).await;
            cut = (cut * 37 + 11) % 1500 + 1;
            for _ in 0..cut {
                let Some(message) = stream.message().await.unwrap() else {
                    break;
                };
                let event = event_of(message).unwrap();
                seen.push(event.seq);
                position = event.seq;
                if position == start + 10_000 {
                    break;
                }
            }
        }
    })
    .await
    .expect("resumed to the end in time");
    burst.await.unwrap();
    let expected: Vec<u64> = (start + 1..=start + 10_000).collect();
    assert_eq!(seen, expected, "the union has no gap and no duplicate");
}

#[tokio::test]
async fn resuming_from_forgotten_history_is_out_of_range() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            event_retention: 50,
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    enqueue_many(&mut c, 200).await;
    let status = c
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(3),
            ..Default::default()
        })
        .await
        .map(|_| ());
    assert_code(
        status,
        Code::OutOfRange,
        "after_seq 3 is older than the retained history",
    );
    let ahead = c
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(1_000_000),
            ..Default::default()
        })
        .await
        .map(|_| ());
    assert_code(ahead, Code::OutOfRange, "newer than the latest event");
    // Within the retained history a resume works.
    let (latest, mut stream) = subscribe(&mut c, Some(190)).await;
    assert_eq!(latest, 200);
    assert_eq!(
        event_of(stream.message().await.unwrap().unwrap())
            .unwrap()
            .seq,
        191
    );
}

#[tokio::test]
async fn event_filters_select_kinds_rollouts_and_statuses() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let watched = enqueue(&mut c, "1").await;
    let other = enqueue(&mut c, "2").await;
    let mut stream = c
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(0),
            kinds: vec![
                pb::EventKind::RolloutChanged as i32,
                pb::EventKind::AttemptChanged as i32,
            ],
            rollout_ids: vec![watched.rollout_id.clone()],
            rollout_status_in: vec![R::Succeeded as i32],
            attempt_status_in: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap(); // progress
    for _ in 0..2 {
        dequeue(&mut c, None).await.unwrap();
    }
    set_attempt_status(&mut c, &other.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();
    set_attempt_status(&mut c, &watched.rollout_id, "latest", A::Succeeded)
        .await
        .unwrap();
    let first = event_of(stream.message().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        (first.kind, first.attempt_status),
        (pb::EventKind::AttemptChanged as i32, A::Succeeded as i32)
    );
    assert_eq!(first.rollout_id, watched.rollout_id);
    let second = event_of(stream.message().await.unwrap().unwrap()).unwrap();
    assert_eq!(
        (second.kind, second.rollout_status),
        (pb::EventKind::RolloutChanged as i32, R::Succeeded as i32)
    );
    assert_eq!(second.rollout_id, watched.rollout_id);
    assert_code(
        c.watch_events(pb::WatchEventsRequest {
            kinds: vec![0],
            ..Default::default()
        })
        .await
        .map(|_| ()),
        Code::InvalidArgument,
        "invalid event kind",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_share_rollouts_exactly_once_within_their_slots() {
    skip_without!(super::BACKEND);
    const SESSIONS: usize = 50;
    // Enough for every session to take many turns; small enough that
    // PostgreSQL on a loaded 2-core CI machine finishes well inside LIMIT.
    const ROLLOUTS: usize = 2_000;
    let server = TestServer::start(BACKEND).await;
    let completed = Arc::new(AtomicUsize::new(0));
    let mut runners = Vec::new();
    for i in 0..SESSIONS {
        let slots = (i % 4 + 1) as i64;
        let channel = server.channel().await;
        let mut runner = Runner::open(
            &mut Client::new(channel.clone()),
            &format!("Worker-{i}"),
            slots,
        )
        .await;
        let completed = completed.clone();
        runners.push(tokio::spawn(async move {
            let mut client = Client::new(channel);
            let (mut held, mut max_held) = (0usize, 0usize);
            let mut assigned = Vec::new();
            while completed.load(Ordering::SeqCst) < ROLLOUTS {
                let message = tokio::select! {
                    message = runner.next() => message,
                    // Others may finish the last rollouts: look again now and then.
                    _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                };
                let FromServer::Assignment(assignment) = message else {
                    continue;
                };
                let rollout = assignment.rollout.unwrap();
                held += 1;
                max_held = max_held.max(held);
                set_attempt_status(
                    &mut client,
                    &rollout.rollout_id,
                    &attempt_of(&rollout).attempt_id,
                    A::Succeeded,
                )
                .await
                .unwrap();
                assigned.push(rollout.rollout_id.clone());
                held -= 1;
                runner.release(&rollout);
                completed.fetch_add(1, Ordering::SeqCst);
            }
            (slots as usize, max_held, assigned)
        }));
    }
    let mut c = server.client().await;
    let ids: HashSet<String> = enqueue_many(&mut c, ROLLOUTS).await.into_iter().collect();
    let results = tokio::time::timeout(LIMIT, futures::future::join_all(runners))
        .await
        .expect("all complete in time");
    let mut assigned = Vec::new();
    for result in results {
        let (slots, max_held, ids) = result.unwrap();
        assert!(
            max_held <= slots,
            "a session held {max_held} > {slots} slots"
        );
        assigned.extend(ids);
    }
    assert_eq!(
        assigned.len(),
        ROLLOUTS,
        "every rollout assigned exactly once"
    );
    assert_eq!(assigned.iter().cloned().collect::<HashSet<_>>(), ids);
    let succeeded = c
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: vec![R::Succeeded as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .total;
    assert_eq!(succeeded, ROLLOUTS as i64);
}

#[tokio::test]
async fn dropped_session_attempts_become_unresponsive_and_are_retried_elsewhere() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_with(
        BACKEND,
        ServerConfig {
            session_grace: Duration::from_millis(100),
            ..ServerConfig::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let mut lost = Runner::open(&mut Client::new(server.channel().await), "Worker-lost", 1).await;
    let rollout = enqueue_spec(&mut c, retry_spec(2, &[A::Unresponsive])).await;
    let first = lost.assignment().await;
    assert_eq!(first.rollout_id, rollout.rollout_id);
    let mut survivor = Runner::open(&mut Client::new(server.channel().await), "Worker-ok", 1).await;
    drop(lost);

    let retry = tokio::time::timeout(LIMIT, survivor.assignment())
        .await
        .expect("retried after the grace");
    assert_eq!(retry.rollout_id, rollout.rollout_id);
    assert_eq!(attempt_of(&retry).sequence_id, 2);
    let attempts = c
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: rollout.rollout_id.clone(),
            page: None,
        })
        .await
        .unwrap()
        .into_inner()
        .attempts;
    assert_eq!(attempt_status(&attempts[0]), A::Unresponsive);
    let status = worker(&mut c, "Worker-lost").await.status;
    assert_eq!(
        status,
        pb::WorkerStatus::Unknown as i32,
        "lost, then released by the unresponsive verdict"
    );
}

/// Waits until the server has recorded each of `workers` as lost.
async fn until_lost(c: &mut Client, workers: &[&str]) {
    let mut events = c
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(0),
            kinds: vec![pb::EventKind::WorkerChanged as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut lost = HashSet::new();
    while lost.len() < workers.len() {
        let message = tokio::time::timeout(LIMIT, events.message()).await;
        if let Some(event) = event_of(message.unwrap().unwrap().unwrap())
            && event.worker_status == pb::WorkerStatus::Lost as i32
            && workers.contains(&event.worker_id.as_str())
        {
            lost.insert(event.worker_id);
        }
    }
}

// On a manual clock with the periodic expiry pass off: the grace runs out
// when the test advances the clock, and one explicit pass applies it.
#[tokio::test]
async fn a_worker_reconnecting_within_the_grace_adopts_its_attempts() {
    skip_without!(super::BACKEND);
    let clock = Arc::new(ManualClock::at_system_time());
    let policy = SessionPolicy {
        server_id: lightning_store::server::random_server_id(),
        lease: Duration::from_secs(3600),
        grace: Duration::from_secs(30),
    };
    let server = TestServer::start_opts(
        BACKEND,
        TestOptions {
            config: ServerConfig {
                server_id: policy.server_id.clone(),
                session_lease: policy.lease,
                session_grace: policy.grace,
                ..ServerConfig::default()
            },
            // The expiry pass runs with the watchdog's timer: never here.
            watchdog_interval: Duration::from_secs(3600),
            clock: clock.clone(),
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let (returning, leaving) = (Proxy::to(server.addr).await, Proxy::to(server.addr).await);
    let mut first = Runner::open(&mut returning.client().await, "Worker-0", 1).await;
    let adopted = enqueue(&mut c, "1").await;
    let held = first.assignment().await;
    let mut other = Runner::open(&mut leaving.client().await, "Worker-1", 1).await;
    let abandoned = enqueue(&mut c, "2").await;
    assert_eq!(other.assignment().await.rollout_id, abandoned.rollout_id);
    // Both runners' connections break; one comes back within the grace.
    returning.cut();
    leaving.cut();
    until_lost(&mut c, &["Worker-0", "Worker-1"]).await;
    let again = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 1).await;
    assert_eq!(
        again.opened.adopted,
        vec![pb::RolloutAttemptRef {
            rollout_id: adopted.rollout_id.clone(),
            attempt_id: attempt_of(&held).attempt_id.clone()
        }]
    );

    clock.advance(policy.grace + Duration::from_secs(1));
    server.engine.expire_sessions(&policy).await.unwrap();
    let now = get(&mut c, &adopted.rollout_id).await;
    assert_eq!(
        attempt_status(attempt_of(&now)),
        A::Preparing,
        "the adopted attempt did not expire"
    );
    let gone = get(&mut c, &abandoned.rollout_id).await;
    assert_eq!(
        attempt_status(attempt_of(&gone)),
        A::Unresponsive,
        "the same pass expired the attempt whose worker did not come back"
    );
}

#[tokio::test]
async fn cancellation_and_watchdog_verdicts_are_pushed_to_the_holding_session() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut runner = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 2).await;
    let cancelled = enqueue(&mut c, "1").await;
    let held = runner.assignment().await;
    assert_eq!(held.rollout_id, cancelled.rollout_id);
    set_rollout_status(&mut c, &cancelled.rollout_id, R::Cancelled).await;
    let FromServer::Revoked(revoked) = runner.next().await else {
        panic!("expected a revocation")
    };
    assert_eq!(revoked.rollout_id, cancelled.rollout_id);
    assert_eq!(revoked.attempt_id, attempt_of(&held).attempt_id);
    assert_eq!(revoked.reason, pb::RevocationReason::Cancelled as i32);

    let mut timing_out = retry_spec(1, &[]);
    timing_out.config.as_mut().unwrap().timeout_seconds = Some(0.1);
    let slow = enqueue_spec(&mut c, timing_out).await;
    let held = runner.assignment().await;
    assert_eq!(held.rollout_id, slow.rollout_id);
    let FromServer::Revoked(revoked) = tokio::time::timeout(LIMIT, runner.next()).await.unwrap()
    else {
        panic!("expected a revocation")
    };
    assert_eq!(revoked.reason, pb::RevocationReason::Timeout as i32);
    assert_eq!(revoked.attempt_id, attempt_of(&held).attempt_id);
}

#[tokio::test]
async fn session_protocol_errors_are_reported() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let (to_server, requests) = mpsc::unbounded_channel();
    to_server
        .send(pb::WorkerSessionRequest {
            message: Some(ToServer::Release(pb::ReleaseAssignment::default())),
        })
        .unwrap();
    let result = c
        .worker_session(UnboundedReceiverStream::new(requests))
        .await
        .map(|_| ());
    assert_code(
        result,
        Code::InvalidArgument,
        "the first session message must be open",
    );

    let (to_server, requests) = mpsc::unbounded_channel();
    to_server
        .send(pb::WorkerSessionRequest {
            message: Some(ToServer::Open(pb::OpenSession {
                worker_id: "W".into(),
                slots: 0,
            })),
        })
        .unwrap();
    let result = c
        .worker_session(UnboundedReceiverStream::new(requests))
        .await
        .map(|_| ());
    assert_code(
        result,
        Code::InvalidArgument,
        "slots must be between 1 and 1024",
    );
}

/// Reads a stream until it ends; returns how it ended.
async fn read_to_end<T>(mut stream: Streaming<T>) -> Result<(), tonic::Status> {
    while stream.message().await?.is_some() {}
    Ok(())
}

#[tokio::test]
async fn shutdown_ends_100_open_streams_with_unavailable_within_the_drain_deadline() {
    skip_without!(super::BACKEND);
    let server = TestServer::start_with(
        BACKEND,
        ServerConfig {
            drain_timeout: Duration::from_secs(30),
            ..ServerConfig::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let pending = enqueue(&mut c, "1").await;
    let mut ends = Vec::new();
    let opened = Arc::new(tokio::sync::Barrier::new(101));
    for i in 0..100 {
        let opened = opened.clone();
        let mut client = Client::new(server.channel().await);
        let id = pending.rollout_id.clone();
        ends.push(tokio::spawn(async move {
            // Each stream is read to its end; only how it ends matters.
            match i % 3 {
                0 => {
                    let (_, stream) = subscribe(&mut client, None).await;
                    opened.wait().await;
                    read_to_end(stream).await
                }
                1 => {
                    let stream = client
                        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
                            rollout_ids: vec![id],
                            timeout: None,
                        })
                        .await
                        .unwrap()
                        .into_inner();
                    opened.wait().await;
                    read_to_end(stream).await
                }
                _ => {
                    let runner = Runner::open(&mut client, &format!("Worker-{i}"), 1).await;
                    opened.wait().await;
                    let ended = read_to_end(runner.from_server).await;
                    drop(runner.to_server);
                    ended
                }
            }
        }));
    }
    opened.wait().await;
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("stopped within the drain deadline");
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut codes: HashMap<Code, usize> = HashMap::new();
    for end in ends {
        let code = end.await.unwrap().err().map_or(Code::Ok, |s| s.code());
        *codes.entry(code).or_default() += 1;
    }
    assert_eq!(codes.get(&Code::Unavailable), Some(&100), "{codes:?}");
}
