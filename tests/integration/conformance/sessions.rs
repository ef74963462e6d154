//! Worker-session ownership recorded in the store: adoption on reconnect
//! (live attempts only, counted against slots, revocations resumed), the
//! lease of a server that died, fencing of a former owner's writes, and the
//! worker's status after a clean close.

use std::time::{Duration, Instant};

use lightning_store::core::engine::SessionPolicy;
use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;
use pb::worker_session_request::Message as ToServer;
use pb::worker_session_response::Message as FromServer;
use tonic::Code;

use super::BACKEND;
use super::TestServer;
use crate::common::{Backend, TestOptions};
use crate::conformance::support::*;

const LIMIT: Duration = Duration::from_secs(60);

/// A server whose session grace period is `grace`.
async fn server_with_grace(grace: Duration) -> TestServer {
    TestServer::start_with(
        BACKEND,
        ServerConfig {
            session_grace: grace,
            ..ServerConfig::default()
        },
    )
    .await
}

fn is_worker(worker_id: &str, status: pb::WorkerStatus) -> impl Fn(&pb::Event) -> bool + '_ {
    move |event| {
        event.kind == pb::EventKind::WorkerChanged as i32
            && event.worker_id == worker_id
            && event.worker_status == status as i32
    }
}

fn is_attempt(attempt_id: &str, status: A) -> impl Fn(&pb::Event) -> bool + '_ {
    move |event| {
        event.kind == pb::EventKind::AttemptChanged as i32
            && event.attempt_id == attempt_id
            && event.attempt_status == status as i32
    }
}

fn attempt_ref(rollout: &pb::Rollout) -> pb::RolloutAttemptRef {
    pb::RolloutAttemptRef {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: attempt_of(rollout).attempt_id.clone(),
    }
}

/// Updates an attempt's status presenting `owner_epoch`.
async fn fenced_status(
    c: &mut Client,
    rollout: &pb::Rollout,
    status: A,
    owner_epoch: u64,
) -> Result<pb::Attempt, tonic::Status> {
    c.update_attempt(pb::UpdateAttemptRequest {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: attempt_of(rollout).attempt_id.clone(),
        update_mask: mask(&["status"]),
        status: status as i32,
        owner_epoch: Some(owner_epoch),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().attempt.unwrap())
}

/// Adds one span to an attempt presenting `owner_epoch`.
async fn fenced_span(
    c: &mut Client,
    rollout: &pb::Rollout,
    owner_epoch: u64,
) -> Result<usize, tonic::Status> {
    c.add_spans(pb::AddSpansRequest {
        spans: vec![span(
            &rollout.rollout_id,
            &attempt_of(rollout).attempt_id,
            "step",
            None,
        )],
        owner_epoch: Some(owner_epoch),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().spans.len())
}

#[tokio::test]
async fn a_clean_close_leaves_the_worker_idle_or_busy_and_a_broken_stream_lost() {
    skip_without!(super::BACKEND);
    let server = server_with_grace(Duration::from_secs(60)).await;
    let mut c = server.client().await;
    let mut events = watch(&mut c).await;
    let idle = Runner::open(&mut Client::new(server.channel().await), "Worker-idle", 1).await;
    idle.close().await;
    next_event(
        &mut events,
        is_worker("Worker-idle", pb::WorkerStatus::Idle),
    )
    .await;
    assert_eq!(
        worker(&mut c, "Worker-idle").await.status,
        pb::WorkerStatus::Idle as i32
    );
    // A broken stream is what makes a worker lost.
    let proxy = Proxy::to(server.addr).await;
    let _broken = Runner::open(&mut proxy.client().await, "Worker-broken", 1).await;
    proxy.cut();
    next_event(
        &mut events,
        is_worker("Worker-broken", pb::WorkerStatus::Lost),
    )
    .await;

    // A runner that closes while it holds work stays busy: its attempt waits
    // for it (the grace period), and the next session adopts it.
    let mut busy = Runner::open(&mut Client::new(server.channel().await), "Worker-busy", 1).await;
    let rollout = enqueue(&mut c, "1").await;
    let held = busy.assignment().await;
    assert_eq!(held.rollout_id, rollout.rollout_id);
    let mut events = watch(&mut c).await;
    busy.close().await;
    next_event(&mut events, |e| {
        e.kind == pb::EventKind::WorkerChanged as i32 && e.worker_id == "Worker-busy"
    })
    .await;
    assert_eq!(
        worker(&mut c, "Worker-busy").await.status,
        pb::WorkerStatus::Busy as i32
    );
    let again = Runner::open(&mut Client::new(server.channel().await), "Worker-busy", 1).await;
    assert_eq!(again.opened.adopted, vec![attempt_ref(&held)]);
}

#[tokio::test]
async fn reconnecting_adopts_only_live_attempts_which_fill_slots_and_are_still_revoked() {
    skip_without!(super::BACKEND);
    let server = server_with_grace(Duration::from_secs(60)).await;
    let mut c = server.client().await;
    let mut first = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 3).await;
    let live = enqueue(&mut c, "1").await;
    let done = enqueue(&mut c, "2").await;
    let mut timing_out = spec("3");
    timing_out.config = Some(pb::RolloutConfig {
        timeout_seconds: Some(0.1),
        ..Default::default()
    });
    let slow = enqueue_spec(&mut c, timing_out).await;
    // The watchdog times the slow one out (and says so to the session),
    // maybe before every assignment is read.
    let (mut held, mut revoked) = (Vec::new(), None);
    while held.len() < 3 || revoked.is_none() {
        match tokio::time::timeout(LIMIT, first.next()).await.unwrap() {
            FromServer::Assignment(assignment) => held.push(assignment.rollout.unwrap()),
            FromServer::Revoked(revocation) => revoked = Some(revocation),
            other => panic!("unexpected {other:?}"),
        }
    }
    let by_id = |rollout: &pb::Rollout| {
        held.iter()
            .find(|h| h.rollout_id == rollout.rollout_id)
            .unwrap()
            .clone()
    };
    let (live, done, slow) = (by_id(&live), by_id(&done), by_id(&slow));
    let revoked = revoked.unwrap();
    assert_eq!(
        (revoked.rollout_id.as_str(), revoked.reason),
        (
            slow.rollout_id.as_str(),
            pb::RevocationReason::Timeout as i32
        )
    );
    set_attempt_status(
        &mut c,
        &done.rollout_id,
        &attempt_of(&done).attempt_id,
        A::Succeeded,
    )
    .await
    .unwrap();
    let first_epoch = first.epoch();
    first.close().await;

    // Two slots: the adopted attempt takes one, so one new rollout is pushed
    // and the next waits for a release.
    let mut again = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 2).await;
    assert_eq!(again.opened.adopted, vec![attempt_ref(&live)]);
    assert!(again.epoch() > first_epoch, "a new epoch");
    let next = enqueue(&mut c, "4").await;
    let waiting = enqueue(&mut c, "5").await;
    assert_eq!(again.assignment().await.rollout_id, next.rollout_id);
    assert_eq!(
        status(&get(&mut c, &waiting.rollout_id).await),
        R::Queuing,
        "no slot is free"
    );
    assert_eq!(stats(&mut c).await.queued_rollouts, 1);

    // The adopted attempt is tracked again: its cancellation is pushed.
    set_rollout_status(&mut c, &live.rollout_id, R::Cancelled).await;
    let FromServer::Revoked(revoked) = tokio::time::timeout(LIMIT, again.next()).await.unwrap()
    else {
        panic!("expected a revocation")
    };
    assert_eq!(revoked.attempt_id, attempt_of(&live).attempt_id);
    assert_eq!(revoked.reason, pb::RevocationReason::Cancelled as i32);
    again.release(&live);
    assert_eq!(again.assignment().await.rollout_id, waiting.rollout_id);
}

#[tokio::test]
async fn the_queue_depth_counts_only_rollouts_that_can_be_dequeued() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let kept = enqueue(&mut c, "1").await;
    let cancelled = enqueue(&mut c, "2").await;
    assert_eq!(stats(&mut c).await.queued_rollouts, 2);
    set_rollout_status(&mut c, &cancelled.rollout_id, R::Cancelled).await;
    let after = stats(&mut c).await;
    assert_eq!(after.queued_rollouts, 1);
    assert_eq!(
        dequeue(&mut c, None).await.unwrap().rollout_id,
        kept.rollout_id
    );
    assert!(dequeue(&mut c, None).await.is_none());
    assert_eq!(stats(&mut c).await.queued_rollouts, 0);
}

#[tokio::test]
async fn a_former_owners_writes_are_fenced_off() {
    skip_without!(super::BACKEND);
    let server = server_with_grace(Duration::from_secs(2)).await;
    let mut c = server.client().await;
    let mut first = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 1).await;
    let rollout = enqueue_spec(&mut c, retry_spec(2, &[A::Unresponsive])).await;
    let held = first.assignment().await;
    let old_epoch = first.epoch();
    fenced_status(&mut c, &held, A::Running, old_epoch)
        .await
        .unwrap();
    assert_eq!(fenced_span(&mut c, &held, old_epoch).await.unwrap(), 1);

    // The worker reconnects: the new session owns the attempt.
    first.close().await;
    let again = Runner::open(&mut Client::new(server.channel().await), "Worker-0", 1).await;
    assert_eq!(again.opened.adopted, vec![attempt_ref(&held)]);
    assert!(again.epoch() > old_epoch);
    assert_code(
        fenced_status(&mut c, &held, A::Succeeded, old_epoch).await,
        Code::FailedPrecondition,
        &format!(
            "is not owned by the session with owner_epoch {old_epoch}: worker Worker-0's session now has owner_epoch {}",
            again.epoch()
        ),
    );
    assert_code(
        fenced_span(&mut c, &held, old_epoch).await,
        Code::FailedPrecondition,
        "is not owned by the session",
    );
    let spans = rollout_spans(&mut c, rollout.rollout_id.clone()).await;
    assert_eq!(spans.spans.len(), 1, "the fenced span was not stored");
    assert_eq!(
        attempt_status(attempt_of(&get(&mut c, &rollout.rollout_id).await)),
        A::Running
    );

    // It never comes back: the attempt becomes unresponsive and is retried
    // elsewhere; the zombie's writes for the old attempt are refused.
    let mut events = watch(&mut c).await;
    drop(again);
    next_event(
        &mut events,
        is_attempt(&attempt_of(&held).attempt_id, A::Unresponsive),
    )
    .await;
    let mut survivor = Runner::open(&mut Client::new(server.channel().await), "Worker-1", 1).await;
    let retry = tokio::time::timeout(LIMIT, survivor.assignment())
        .await
        .unwrap();
    assert_eq!(
        (retry.rollout_id.as_str(), attempt_of(&retry).sequence_id),
        (rollout.rollout_id.as_str(), 2)
    );
    let zombie = fenced_status(&mut c, &held, A::Succeeded, old_epoch).await;
    assert_code(
        zombie,
        Code::FailedPrecondition,
        &format!("superseded by attempt {}", attempt_of(&retry).attempt_id),
    );
    fenced_status(&mut c, &retry, A::Succeeded, survivor.epoch())
        .await
        .unwrap();
    let finished = get(&mut c, &rollout.rollout_id).await;
    assert_eq!(
        (status(&finished), attempt_of(&finished).attempt_id.as_str()),
        (R::Succeeded, attempt_of(&retry).attempt_id.as_str())
    );
}

/// A session record held by a server that is gone: opened and given work
/// through the engine under another server's name, last renewed with a
/// lease of `lease`.
async fn session_of_a_dead_server(
    server: &TestServer,
    worker_id: &str,
    lease: Duration,
) -> (u64, pb::Rollout) {
    let mut dead = SessionPolicy {
        server_id: "dead-server".into(),
        lease: LIMIT,
        grace: Duration::from_secs(3600),
    };
    let mut c = server.client().await;
    let opened = server.engine.open_session(worker_id, &dead).await.unwrap();
    let rollout = enqueue_spec(&mut c, retry_spec(2, &[A::Unresponsive])).await;
    let claimed = server
        .engine
        .claim_for_session(worker_id, opened.epoch, 1, &dead)
        .await
        .unwrap()
        .expect("held");
    assert_eq!(claimed.len(), 1);
    dead.lease = lease;
    let held = [(worker_id.to_owned(), opened.epoch)];
    assert!(
        server
            .engine
            .renew_sessions(&held, &dead)
            .await
            .unwrap()
            .is_empty(),
        "still held"
    );
    (opened.epoch, get(&mut c, &rollout.rollout_id).await)
}

#[tokio::test]
async fn an_expired_lease_gets_the_grace_period_then_the_unresponsive_verdict() {
    skip_without!(super::BACKEND);
    let server = server_with_grace(Duration::from_secs(2)).await;
    let mut c = server.client().await;
    let mut events = watch(&mut c).await;
    let started = Instant::now();
    let (_, rollout) =
        session_of_a_dead_server(&server, "Worker-dead", Duration::from_millis(100)).await;
    next_event(
        &mut events,
        is_worker("Worker-dead", pb::WorkerStatus::Lost),
    )
    .await;
    assert_eq!(
        attempt_status(attempt_of(&get(&mut c, &rollout.rollout_id).await)),
        A::Preparing,
        "within the grace period"
    );
    next_event(
        &mut events,
        is_attempt(&attempt_of(&rollout).attempt_id, A::Unresponsive),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(2_100),
        "lease, then grace: {:?}",
        started.elapsed()
    );
    assert_eq!(
        status(&get(&mut c, &rollout.rollout_id).await),
        R::Requeuing
    );
}

#[tokio::test]
async fn a_worker_whose_server_died_is_adopted_on_another_server() {
    skip_without!(super::BACKEND);
    let server = server_with_grace(Duration::from_secs(60)).await;
    let mut c = server.client().await;
    let mut events = watch(&mut c).await;
    let (old_epoch, rollout) =
        session_of_a_dead_server(&server, "Worker-moved", Duration::from_secs(3600)).await;
    // The worker reconnects here before the dead server's lease expired.
    let moved = Runner::open(&mut Client::new(server.channel().await), "Worker-moved", 1).await;
    assert_eq!(moved.opened.adopted, vec![attempt_ref(&rollout)]);
    assert_code(
        fenced_status(&mut c, &rollout, A::Running, old_epoch).await,
        Code::FailedPrecondition,
        "now has owner_epoch",
    );
    fenced_status(&mut c, &rollout, A::Succeeded, moved.epoch())
        .await
        .unwrap();
    next_event(
        &mut events,
        is_attempt(&attempt_of(&rollout).attempt_id, A::Succeeded),
    )
    .await;
}

#[tokio::test]
async fn servers_sharing_the_store_expire_and_adopt_each_others_sessions() {
    skip_without!(super::BACKEND);
    if BACKEND != Backend::Postgres {
        return; // only PostgreSQL is shared by several servers
    }
    let url = crate::common::postgres_database().await;
    let options = || TestOptions {
        postgres_url: Some(url.clone()),
        ..Default::default()
    };
    let servers = [
        TestServer::start_opts(BACKEND, options()).await,
        TestServer::start_opts(BACKEND, options()).await,
    ];
    let mut c = servers[0].client().await;
    let mut events = watch(&mut c).await;
    let mut rollouts = Vec::new();
    for i in 0..4 {
        rollouts.push(
            session_of_a_dead_server(
                &servers[i % 2],
                &format!("Worker-{i}"),
                Duration::from_millis(50),
            )
            .await
            .1,
        );
    }
    // Each expired lease is handled once, by either server.
    let mut lost = std::collections::HashSet::new();
    while lost.len() < rollouts.len() {
        let event = tokio::time::timeout(
            LIMIT,
            next_event(&mut events, |e| {
                e.worker_status == pb::WorkerStatus::Lost as i32
            }),
        )
        .await
        .unwrap();
        assert!(
            lost.insert(event.worker_id.clone()),
            "{} lost twice",
            event.worker_id
        );
    }
    // The workers come back on the other server, within the grace period.
    let mut runners = Vec::new();
    for (i, rollout) in rollouts.iter().enumerate() {
        let runner = Runner::open(
            &mut servers[(i + 1) % 2].client().await,
            &format!("Worker-{i}"),
            1,
        )
        .await;
        assert_eq!(runner.opened.adopted, vec![attempt_ref(rollout)]);
        runners.push(runner);
    }
    // A session opened on one server ends the worker's stream on the other.
    let mut moved = Runner::open(&mut servers[0].client().await, "Worker-1", 1).await;
    assert_eq!(moved.opened.adopted, vec![attempt_ref(&rollouts[1])]);
    let ended = tokio::time::timeout(LIMIT, runners[1].try_next())
        .await
        .unwrap();
    assert_code(
        ended,
        Code::Aborted,
        "a newer session of the worker replaced it",
    );
    for (i, rollout) in rollouts.iter().enumerate() {
        let epoch = if i == 1 {
            moved.epoch()
        } else {
            runners[i].epoch()
        };
        fenced_status(&mut c, rollout, A::Succeeded, epoch)
            .await
            .unwrap();
    }
    let succeeded = stats(&mut c).await;
    assert_eq!(succeeded.queued_rollouts, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(10), moved.try_next())
            .await
            .is_err(),
        "the moved session stays open"
    );
}

/// 10,000 heartbeats sent back to back on one session
/// (each was a store transaction of its own) used to draw an HTTP/2 GOAWAY
/// that ended every stream of the connection. The session, a subscription
/// and unary calls on the same connection stay alive, and the worker keeps
/// the last statistics sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_heartbeats_keep_the_connection_alive() {
    skip_without!(super::BACKEND);
    const HEARTBEATS: usize = 10_000;
    let server = TestServer::start(BACKEND).await;
    // One connection for everything below.
    let mut c = Client::new(server.channel().await);
    let mut runner = Runner::open(&mut c, "Worker-hb", 1).await;
    let mut events = watch(&mut c).await;
    let first = enqueue(&mut c, "1").await;
    let held = runner.assignment().await;
    assert_eq!(held.rollout_id, first.rollout_id);
    let heartbeat = |n: usize| pb::WorkerSessionRequest {
        message: Some(ToServer::Heartbeat(pb::SessionHeartbeat {
            heartbeat_stats_json: format!(r#"{{"n": {n}}}"#),
        })),
    };
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for n in 0..HEARTBEATS {
        runner.to_server.send(heartbeat(n)).unwrap();
    }
    // Messages are read in order: the release after the heartbeats frees
    // the slot as soon as it is read, and the next rollout is assigned.
    runner.release(&held);
    let second = enqueue(&mut c, "2").await;
    let next = tokio::time::timeout(LIMIT, runner.assignment())
        .await
        .expect("the session is alive");
    assert_eq!(next.rollout_id, second.rollout_id);
    // The subscription on the same connection still delivers.
    let wanted = |event: &pb::Event| format!("{event:?}").contains(&second.rollout_id);
    tokio::time::timeout(LIMIT, next_event(&mut events, wanted))
        .await
        .expect("the subscription is alive");
    // A clean close ends the stream once everything sent is recorded.
    runner.close().await;
    let last = worker(&mut c, "Worker-hb").await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&last.heartbeat_stats_json).unwrap(),
        serde_json::json!({"n": HEARTBEATS - 1}),
        "the last statistics sent win"
    );
    let heartbeat_at = last.last_heartbeat_time.unwrap();
    let recorded = heartbeat_at.seconds as f64 + f64::from(heartbeat_at.nanos) / 1e9;
    assert!(recorded >= started, "the time of a heartbeat sent last");
}
