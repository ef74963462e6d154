//! Worker sessions across server deaths, with the real binary: a server
//! holding sessions is killed (SIGKILL) or stopped (SIGTERM) and restarted
//! on the same SQLite file, with the runner gone for good or back at once;
//! and two servers on one PostgreSQL database serving runners under load
//! while a session moves and the server holding sessions is killed. Bounded
//! in count and time; loopback only.

use crate::common;
use crate::conformance::support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::ServerProcess;
use lightning_store::proto as pb;
use pb::worker_session_response::Message as FromServer;
use support::*;
use tonic::Code;

const LIMIT: Duration = Duration::from_secs(60);
const GRACE: &str = "1s";

/// Starts the binary on `database` with a short grace period and a fast
/// watchdog.
fn start_sqlite(database: &Path) -> ServerProcess {
    let database = database.to_str().expect("a UTF-8 path");
    ServerProcess::start(&[
        "--database",
        database,
        "--session-grace",
        GRACE,
        "--watchdog-interval",
        "50ms",
    ])
}

fn retried_spec(i: usize) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: i.to_string(),
        ..retry_spec(3, &[A::Unresponsive])
    }
}

async fn attempts(c: &mut Client, rollout_id: &str) -> Vec<pb::Attempt> {
    c.query_attempts(pb::QueryAttemptsRequest {
        rollout_id: rollout_id.to_owned(),
        page: None,
    })
    .await
    .unwrap()
    .into_inner()
    .attempts
}

/// Updates an attempt's status presenting `owner_epoch`.
async fn fenced_status(
    c: &mut Client,
    rollout_id: &str,
    attempt_id: &str,
    status: A,
    owner_epoch: u64,
) -> Result<pb::Attempt, tonic::Status> {
    c.update_attempt(pb::UpdateAttemptRequest {
        rollout_id: rollout_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        update_mask: mask(&["status"]),
        status: status as i32,
        owner_epoch: Some(owner_epoch),
        ..Default::default()
    })
    .await
    .map(|r| r.into_inner().attempt.unwrap())
}

#[tokio::test]
async fn a_killed_or_stopped_server_strands_no_attempt_of_a_worker_that_never_returns() {
    for kill in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("store.db");
        let server = start_sqlite(&database);
        let mut c = server.client().await;
        let mut gone = Runner::open(&mut server.client().await, "Worker-gone", 3).await;
        let mut held = Vec::new();
        for i in 0..3 {
            enqueue_spec(&mut c, retried_spec(i)).await;
            held.push(gone.assignment().await);
        }
        // The grace period starts no earlier than the signal: at the
        // shutdown on SIGTERM, when the restarted server recovers on SIGKILL.
        let started = Instant::now();
        if kill {
            server.kill();
        } else {
            let (status, _) = server.terminate();
            assert!(status.success(), "SIGTERM: a clean exit");
        }
        drop(gone);

        let restarted = start_sqlite(&database);
        let mut c = restarted.client().await;
        let mut survivor = Runner::open(&mut restarted.client().await, "Worker-ok", 3).await;
        assert!(survivor.opened.adopted.is_empty());
        let mut retried = Vec::new();
        for _ in 0..3 {
            let retry = tokio::time::timeout(LIMIT, survivor.assignment())
                .await
                .expect("retried");
            assert_eq!(attempt_of(&retry).sequence_id, 2, "kill {kill}");
            retried.push(retry.rollout_id);
        }
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "not before the grace period: {:?}",
            started.elapsed()
        );
        retried.sort();
        let mut expected: Vec<String> = held.iter().map(|r| r.rollout_id.clone()).collect();
        expected.sort();
        assert_eq!(retried, expected, "kill {kill}");
        for rollout in &held {
            let first = &attempts(&mut c, &rollout.rollout_id).await[0];
            assert_eq!(attempt_status(first), A::Unresponsive, "kill {kill}");
        }
        let status = worker(&mut c, "Worker-gone").await.status;
        assert_ne!(status, pb::WorkerStatus::Busy as i32, "kill {kill}");
        restarted.kill();
    }
}

#[tokio::test]
async fn a_runner_reconnecting_after_a_restart_adopts_its_attempts_without_duplicate_pushes() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("store.db");
    let server = start_sqlite(&database);
    let mut c = server.client().await;
    let mut runner = Runner::open(&mut server.client().await, "Worker-back", 2).await;
    let mut held = Vec::new();
    for i in 0..2 {
        enqueue_spec(&mut c, retried_spec(i)).await;
        held.push(runner.assignment().await);
    }
    let old_epoch = runner.epoch();
    let first = (
        held[0].rollout_id.clone(),
        attempt_of(&held[0]).attempt_id.clone(),
    );
    fenced_status(&mut c, &first.0, &first.1, A::Running, old_epoch)
        .await
        .unwrap();
    server.kill();
    drop(runner);

    let restarted = start_sqlite(&database);
    let mut c = restarted.client().await;
    let queued = enqueue_spec(&mut c, retried_spec(2)).await;
    let mut back = Runner::open(&mut restarted.client().await, "Worker-back", 2).await;
    let mut adopted: Vec<String> = back
        .opened
        .adopted
        .iter()
        .map(|a| a.attempt_id.clone())
        .collect();
    adopted.sort();
    let mut expected: Vec<String> = held
        .iter()
        .map(|r| attempt_of(r).attempt_id.clone())
        .collect();
    expected.sort();
    assert_eq!(adopted, expected);
    assert_code(
        fenced_status(&mut c, &first.0, &first.1, A::Succeeded, old_epoch).await,
        Code::FailedPrecondition,
        "is not owned by the session",
    );
    fenced_status(&mut c, &first.0, &first.1, A::Succeeded, back.epoch())
        .await
        .unwrap();
    back.release(&held[0]);
    // The freed slot gets the queued rollout: the first push after the
    // restart, so nothing adopted was pushed again.
    let next = tokio::time::timeout(LIMIT, back.assignment())
        .await
        .unwrap();
    assert_eq!(next.rollout_id, queued.rollout_id);
    assert_eq!(attempt_of(&next).sequence_id, 1);
    // The adopted attempt outlives the grace period: it is owned again.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let second = get(&mut c, &held[1].rollout_id).await;
    assert_eq!(attempt_status(attempt_of(&second)), A::Preparing);
    assert_eq!(attempts(&mut c, &held[1].rollout_id).await.len(), 1);
    restarted.kill();
}

/// The runner's last write (succeeded) commits, but its server dies before
/// the answer arrives: on reconnect the finished attempt is neither adopted
/// nor counted against the slots, the rollout succeeded once and is not
/// run again, and the write repeated under the old epoch is refused. (The
/// load test below once counted such a rollout as never finished: its
/// runner took the lost answer for a failed write.)
#[tokio::test]
async fn a_finished_attempt_whose_answer_died_with_the_server_is_not_adopted_or_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("store.db");
    let server = start_sqlite(&database);
    let mut c = server.client().await;
    let mut runner = Runner::open(&mut server.client().await, "Worker-unanswered", 1).await;
    let done = enqueue_spec(&mut c, retried_spec(0)).await;
    let held = runner.assignment().await;
    assert_eq!(held.rollout_id, done.rollout_id);
    let attempt_id = attempt_of(&held).attempt_id.clone();
    let old_epoch = runner.epoch();
    for status in [A::Running, A::Succeeded] {
        fenced_status(&mut c, &done.rollout_id, &attempt_id, status, old_epoch)
            .await
            .unwrap();
    }
    // Killed before the runner saw the answer or released the slot.
    server.kill();
    drop(runner);

    let restarted = start_sqlite(&database);
    let mut c = restarted.client().await;
    let queued = enqueue_spec(&mut c, retried_spec(1)).await;
    let mut back = Runner::open(&mut restarted.client().await, "Worker-unanswered", 1).await;
    assert!(back.opened.adopted.is_empty(), "{:?}", back.opened.adopted);
    // The one slot is free: the next push is the queued rollout.
    let next = tokio::time::timeout(LIMIT, back.assignment())
        .await
        .unwrap();
    assert_eq!(next.rollout_id, queued.rollout_id);
    let finished = get(&mut c, &done.rollout_id).await;
    assert_eq!(status(&finished), R::Succeeded);
    let all = attempts(&mut c, &done.rollout_id).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(attempt_status(&all[0]), A::Succeeded);
    assert_code(
        fenced_status(&mut c, &done.rollout_id, &attempt_id, A::Failed, old_epoch).await,
        Code::FailedPrecondition,
        "now has owner_epoch",
    );
    assert_eq!(status(&get(&mut c, &done.rollout_id).await), R::Succeeded);
    restarted.kill();
}

/// What a runner did with one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    /// A write was refused: another session owns the attempt now.
    Fenced,
    /// The runner stopped on its own: revoked, or not adopted on reconnect.
    Abandoned,
}

/// One execution of an attempt by a runner.
#[derive(Debug, Clone)]
struct Execution {
    rollout_id: String,
    runner: usize,
    start: Instant,
    end: Instant,
    outcome: Outcome,
}

type Ledger = Arc<Mutex<Vec<Execution>>>;

/// A runner with one slot that executes its attempts one at a time,
/// presenting its session's epoch, and reconnects to the next live server
/// whenever its stream ends, carrying on with an attempt only if the new
/// session adopted it.
struct LoadRunner {
    index: usize,
    servers: Arc<Mutex<Vec<String>>>,
    ledger: Ledger,
    completed: Arc<AtomicUsize>,
    target: usize,
}

impl LoadRunner {
    fn worker_id(&self) -> String {
        format!("Runner-{}", self.index)
    }

    async fn connect(&self, skip: usize) -> (Client, Runner) {
        let deadline = Instant::now() + LIMIT;
        let mut turn = skip;
        loop {
            assert!(Instant::now() < deadline, "no server to reconnect to");
            let url = {
                let servers = self.servers.lock().unwrap();
                servers[turn % servers.len()].clone()
            };
            turn += 1;
            if let Ok(client) = Client::connect(url).await {
                let mut session_client = client.clone();
                if let Ok(Ok(runner)) = tokio::time::timeout(
                    Duration::from_secs(5),
                    Runner::try_open(&mut session_client, &self.worker_id(), 1),
                )
                .await
                {
                    return (client, runner);
                }
            }
        }
    }

    async fn run(self, mut moves: tokio::sync::mpsc::UnboundedReceiver<usize>) {
        let (mut client, mut session) = self.connect(self.index).await;
        let mut current: Option<(pb::Rollout, Instant, usize)> = None;
        let finish = |current: &mut Option<(pb::Rollout, Instant, usize)>, outcome| {
            if let Some((rollout, start, _)) = current.take() {
                self.ledger.lock().unwrap().push(Execution {
                    rollout_id: rollout.rollout_id,
                    runner: self.index,
                    start,
                    end: Instant::now(),
                    outcome,
                });
            }
        };
        while self.completed.load(Ordering::SeqCst) < self.target {
            if let Some((rollout, _, step)) = &mut current {
                // One step of work: running, a span, succeeded.
                let (rollout_id, attempt_id) = (
                    rollout.rollout_id.clone(),
                    attempt_of(rollout).attempt_id.clone(),
                );
                let epoch = session.epoch();
                let result = match *step {
                    0 => fenced_status(&mut client, &rollout_id, &attempt_id, A::Running, epoch)
                        .await
                        .map(|_| ()),
                    1 => client
                        .add_spans(pb::AddSpansRequest {
                            spans: vec![span(&rollout_id, &attempt_id, "step", None)],
                            owner_epoch: Some(epoch),
                            ..Default::default()
                        })
                        .await
                        .map(|_| ()),
                    _ => fenced_status(&mut client, &rollout_id, &attempt_id, A::Succeeded, epoch)
                        .await
                        .map(|_| ()),
                };
                match result {
                    Ok(()) if *step == 2 => {
                        session.release(rollout);
                        finish(&mut current, Outcome::Succeeded);
                        self.completed.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(()) => {
                        *step += 1;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(status) if status.code() == Code::FailedPrecondition => {
                        session.release(rollout);
                        finish(&mut current, Outcome::Fenced);
                    }
                    // The server is gone: the stream's end will say so.
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            let message = tokio::select! {
                message = session.try_next() => Some(message),
                to = moves.recv() => {
                    // Move the session to another server while it lives.
                    if let Some(to) = to {
                        let (mut new_client, new_session) = self.connect(to).await;
                        self.adopt(&mut new_client, &mut current, &new_session, &finish).await;
                        (client, session) = (new_client, new_session);
                    }
                    None
                }
                _ = tokio::time::sleep(Duration::from_millis(if current.is_some() { 0 } else { 50 })) => None,
            };
            match message {
                None => {}
                Some(Ok(Some(FromServer::Assignment(assignment)))) => {
                    assert!(current.is_none(), "a push into a full slot");
                    current = Some((assignment.rollout.unwrap(), Instant::now(), 0));
                }
                Some(Ok(Some(FromServer::Revoked(revoked))))
                    if current.as_ref().is_some_and(|(r, _, _)| {
                        attempt_of(r).attempt_id == revoked.attempt_id
                    }) =>
                {
                    let rollout = current.as_ref().unwrap().0.clone();
                    session.release(&rollout);
                    finish(&mut current, Outcome::Abandoned);
                }
                Some(Ok(Some(_))) => {}
                // The stream ended: the server died or another took over.
                Some(Ok(None) | Err(_)) => {
                    let (mut new_client, new_session) = self.connect(self.index + 1).await;
                    self.adopt(&mut new_client, &mut current, &new_session, &finish)
                        .await;
                    (client, session) = (new_client, new_session);
                }
            }
        }
    }

    /// Keeps the current attempt only if the new session adopted it, and
    /// takes up an adopted attempt it never received (pushed just before
    /// its server died).
    ///
    /// An attempt that is not adopted may have finished: the runner's last
    /// write committed on the old server, which died before answering. The
    /// store's record settles it: succeeded is this runner's own success
    /// (no one else writes this attempt), anything else is abandoned.
    async fn adopt(
        &self,
        client: &mut Client,
        current: &mut Option<(pb::Rollout, Instant, usize)>,
        session: &Runner,
        finish: &impl Fn(&mut Option<(pb::Rollout, Instant, usize)>, Outcome),
    ) {
        let adopted = current.as_ref().is_some_and(|(rollout, _, _)| {
            session
                .opened
                .adopted
                .iter()
                .any(|a| a.attempt_id == attempt_of(rollout).attempt_id)
        });
        if !adopted {
            let mut outcome = Outcome::Abandoned;
            if let Some((rollout, _, _)) = current.as_ref() {
                let attempt_id = &attempt_of(rollout).attempt_id;
                let stored = attempts(client, &rollout.rollout_id).await;
                let mine = stored.iter().find(|a| &a.attempt_id == attempt_id);
                if mine.is_some_and(|a| attempt_status(a) == A::Succeeded) {
                    eprintln!(
                        "{}: the answer to {}'s last write was lost, the store has it succeeded",
                        self.worker_id(),
                        rollout.rollout_id
                    );
                    outcome = Outcome::Succeeded;
                    self.completed.fetch_add(1, Ordering::SeqCst);
                }
            }
            finish(current, outcome);
            if let Some(unknown) = session.opened.adopted.first() {
                let rollout = get(client, &unknown.rollout_id).await;
                assert_eq!(attempt_of(&rollout).attempt_id, unknown.attempt_id);
                *current = Some((rollout, Instant::now(), 0));
            }
        }
    }
}

/// Tells what happened to the rollouts that did not succeed: their status,
/// their attempts, the runners' executions and the servers' log lines that
/// name them.
async fn unfinished_story(
    c: &mut Client,
    ids: &[String],
    ledger: &Ledger,
    logs: &[Arc<Mutex<String>>],
) -> String {
    let mut story = String::new();
    let mut succeeded = 0;
    for rollout_id in ids {
        let rollout = get(c, rollout_id).await;
        if status(&rollout) == R::Succeeded {
            succeeded += 1;
            continue;
        }
        story += &format!("{rollout_id}: {:?}\n", status(&rollout));
        let mut names = vec![rollout_id.clone()];
        for attempt in attempts(c, rollout_id).await {
            if let Some(worker_id) = &attempt.worker_id {
                names.push(format!("\"worker_id\":\"{worker_id}\""));
            }
            story += &format!(
                "  attempt {} #{} {:?} worker {:?}\n",
                attempt.attempt_id,
                attempt.sequence_id,
                attempt_status(&attempt),
                attempt.worker_id
            );
        }
        for execution in ledger.lock().unwrap().iter() {
            if &execution.rollout_id == rollout_id {
                story += &format!("  {execution:?}\n");
            }
        }
        for (server, log) in logs.iter().enumerate() {
            for line in log.lock().unwrap().lines() {
                if names.iter().any(|name| line.contains(name.as_str())) {
                    story += &format!("  server {server}: {line}\n");
                }
            }
        }
    }
    format!("{succeeded} succeeded in the store\n{story}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_postgres_complete_every_rollout_exactly_once_through_a_move_and_a_kill() {
    skip_without!(crate::common::Backend::Postgres);
    const ROLLOUTS: usize = 150;
    const RUNNERS: usize = 6;
    let url = common::postgres_database().await;
    let start = || {
        ServerProcess::start(&[
            "--store",
            "postgres",
            "--database-url",
            &url,
            "--session-grace",
            "3s",
            "--session-lease",
            "1s",
            "--watchdog-interval",
            "50ms",
            "--log",
            "info,lightning_store::core=debug",
        ])
    };
    let (a, b) = (start(), start());
    let urls = vec![format!("http://{}", a.addr), format!("http://{}", b.addr)];
    let servers = Arc::new(Mutex::new(urls.clone()));
    let ledger: Ledger = Arc::default();
    let completed = Arc::new(AtomicUsize::new(0));
    let mut movers = Vec::new();
    let mut runners = Vec::new();
    for index in 0..RUNNERS {
        let (mover, moves) = tokio::sync::mpsc::unbounded_channel();
        movers.push(mover);
        let runner = LoadRunner {
            index,
            servers: servers.clone(),
            ledger: ledger.clone(),
            completed: completed.clone(),
            target: ROLLOUTS,
        };
        runners.push(tokio::spawn(runner.run(moves)));
    }
    let mut c = b.client().await;
    let mut ids = Vec::new();
    for i in 0..ROLLOUTS {
        ids.push(enqueue_spec(&mut c, retried_spec(i)).await.rollout_id);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let wait_for = |count: usize| {
        let completed = completed.clone();
        async move {
            while completed.load(Ordering::SeqCst) < count {
                if Instant::now() >= deadline {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            true
        }
    };
    let logs = [a.log.clone(), b.log.clone()];
    // Under load: runner 0 moves its session from server A to B.
    let mut on_time = wait_for(ROLLOUTS / 4).await;
    movers[0].send(1).unwrap();
    // Then server A, holding sessions, is killed; its runners reconnect to B.
    on_time = on_time && wait_for(ROLLOUTS / 2).await;
    servers.lock().unwrap().remove(0);
    a.kill();
    on_time = on_time && wait_for(ROLLOUTS).await;
    if !on_time {
        let story = unfinished_story(&mut c, &ids, &ledger, &logs).await;
        panic!(
            "only {} of {ROLLOUTS} completed\n{story}",
            completed.load(Ordering::SeqCst)
        );
    }
    for runner in runners {
        tokio::time::timeout(LIMIT, runner).await.unwrap().unwrap();
    }

    let done = c
        .wait_for_rollouts(pb::WaitForRolloutsRequest {
            rollout_ids: ids.clone(),
            timeout: Some(prost_types::Duration {
                seconds: 10,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .rollouts;
    assert_eq!(done.len(), ROLLOUTS);
    for rollout in &done {
        assert_eq!(status(rollout), R::Succeeded, "{}", rollout.rollout_id);
        let succeeded = attempts(&mut c, &rollout.rollout_id)
            .await
            .iter()
            .filter(|a| attempt_status(a) == A::Succeeded)
            .count();
        assert_eq!(succeeded, 1, "{} succeeded once", rollout.rollout_id);
    }
    let ledger = ledger.lock().unwrap().clone();
    let mut by_rollout: HashMap<&str, Vec<&Execution>> = HashMap::new();
    for execution in &ledger {
        by_rollout
            .entry(&execution.rollout_id)
            .or_default()
            .push(execution);
    }
    for (rollout_id, executions) in &by_rollout {
        let succeeded = executions
            .iter()
            .filter(|e| e.outcome == Outcome::Succeeded)
            .count();
        assert_eq!(succeeded, 1, "{rollout_id}: {executions:?}");
        for first in executions {
            for second in executions {
                let overlap = first.runner != second.runner
                    && first.start <= second.start
                    && second.start < first.end;
                assert!(
                    !overlap || first.outcome == Outcome::Fenced,
                    "{rollout_id} ran on two runners at once: {first:?} {second:?}"
                );
            }
        }
    }
    b.kill();
}
