//! Worker sessions in the store (the rules are in [`super::super::ownership`]):
//! opening one (with adoption), claims for it, its releases and heartbeats,
//! lease renewal, the end of its stream, the expiry of leases and grace
//! periods, and the recovery of sessions left by an earlier run. Each is
//! one transaction that locks the worker's session record before anything
//! else (then rollouts, then the worker), so that every server sees one
//! history of each session and exactly one acts on an expiry.

use std::time::Duration;

use super::super::error::StoreResult;
use super::super::lifecycle;
use super::super::model::{
    AttemptRef, Json, RolloutView, SessionState, Timestamp, WorkerSession, WorkerStatus,
};
use super::super::ownership;
use super::super::storage::Access;
use super::rollouts;
use super::runner::{Engine, Scan};
use super::tx::{self, Tx};

/// How this server holds worker sessions.
#[derive(Debug, Clone)]
pub struct SessionPolicy {
    /// This server's name in the session records.
    pub server_id: String,
    /// How long a session record stays valid without being renewed: when
    /// its server dies, another takes over the session this long after the
    /// last renewal.
    pub lease: Duration,
    /// How long the attempts of a dropped session wait for their worker.
    pub grace: Duration,
}

impl SessionPolicy {
    fn lease_end(&self, now: Timestamp) -> Timestamp {
        now.plus_seconds(self.lease.as_secs_f64())
    }

    fn grace_end(&self, now: Timestamp) -> Timestamp {
        now.plus_seconds(self.grace.as_secs_f64())
    }
}

/// A session opened in the store.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedSession {
    /// The session's epoch: the owner epoch its runner presents.
    pub epoch: u64,
    /// The live attempts of the worker's previous session, now this one's.
    pub adopted: Vec<AttemptRef>,
}

/// How a session's stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The runner closed its side.
    Closed,
    /// The stream broke, or this server ended it (shutdown).
    Broken,
}

/// Session records one expiry transaction handles at most.
const EXPIRY_PASS: usize = 64;

impl Engine {
    /// Opens a session of `worker_id` held by this server, with a new epoch.
    /// The live attempts of the worker's previous session (open on any
    /// server, or dropped and still within its grace period) are adopted;
    /// when the grace period is over, they are expired first.
    pub async fn open_session(
        &self,
        worker_id: &str,
        policy: &SessionPolicy,
    ) -> StoreResult<OpenedSession> {
        // The due watchdog verdicts go first: a timed-out attempt is not adopted.
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let now = tx.now;
                let previous = tx.session(worker_id, Access::Update).await?;
                let mut adopted = Vec::new();
                if let Some(previous) = &previous {
                    let live = live_attempts(tx, previous).await?;
                    let grace_over = previous.state == SessionState::Dropped
                        && previous.deadline.is_some_and(|end| end < now);
                    if grace_over {
                        expire_all(tx, live).await?;
                    } else {
                        adopted = live;
                    }
                    if previous.state == SessionState::Open {
                        tracing::info!(
                            worker_id,
                            from = previous.server_id,
                            epoch = previous.epoch,
                            "worker session taken over"
                        );
                    }
                }
                let epoch = tx.store.next_session_epoch().await?;
                tx.save_session(&WorkerSession {
                    worker_id: worker_id.to_owned(),
                    epoch,
                    server_id: policy.server_id.clone(),
                    state: SessionState::Open,
                    deadline: Some(policy.lease_end(now)),
                    attempts: adopted.iter().map(attempt_ref).collect(),
                });
                let mut worker = tx.worker(worker_id).await?;
                worker.last_heartbeat_time = Some(now);
                match adopted.last().and_then(|view| view.attempt.as_ref()) {
                    Some(attempt) => lifecycle::sync_worker(&mut worker, attempt, now),
                    None if worker.status == WorkerStatus::Lost => {
                        worker.status = WorkerStatus::Idle;
                        worker.last_idle_time = Some(now);
                    }
                    None => {}
                }
                tx.save_worker(&worker);
                Ok(OpenedSession {
                    epoch,
                    adopted: adopted.iter().map(attempt_ref).collect(),
                })
            })
        })
        .await
    }

    /// Claims up to `limit` rollouts for this server's session of
    /// `worker_id` with `epoch`, which then owns their attempts (and whose
    /// lease is renewed); `None` when the session is no longer this
    /// server's (another took it over, or its lease expired).
    pub async fn claim_for_session(
        &self,
        worker_id: &str,
        epoch: u64,
        limit: usize,
        policy: &SessionPolicy,
    ) -> StoreResult<Option<Vec<RolloutView>>> {
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let Some(mut session) = held_session(tx, worker_id, epoch, policy).await? else {
                    return Ok(None);
                };
                let claimed = rollouts::claim(tx, limit, Some(worker_id), false).await?;
                if !claimed.is_empty() {
                    session.attempts.extend(claimed.iter().map(attempt_ref));
                    session.deadline = Some(policy.lease_end(tx.now));
                    tx.save_session(&session);
                }
                Ok(Some(claimed))
            })
        })
        .await
    }

    /// Handles a message of this server's session of `worker_id` with
    /// `epoch`: frees `released` from what the session owns and records a
    /// worker heartbeat (with `stats`, when given). Returns false, writing
    /// nothing, when the session is no longer this server's.
    pub async fn session_heartbeat(
        &self,
        worker_id: &str,
        epoch: u64,
        released: Option<&AttemptRef>,
        stats: Option<Json>,
        policy: &SessionPolicy,
    ) -> StoreResult<bool> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let Some(mut session) = held_session(tx, worker_id, epoch, policy).await? else {
                    return Ok(false);
                };
                if let Some(released) = released
                    && let Some(at) = session.attempts.iter().position(|held| held == released)
                {
                    session.attempts.remove(at);
                    tx.save_session(&session);
                }
                let mut worker = tx.worker(worker_id).await?;
                worker.last_heartbeat_time = Some(tx.now);
                if let Some(stats) = stats {
                    worker.heartbeat_stats = stats;
                }
                tx.save_worker(&worker);
                Ok(true)
            })
        })
        .await
    }

    /// Renews the leases of this server's sessions (worker id, epoch);
    /// returns those that are no longer this server's, whose streams must
    /// end.
    pub async fn renew_sessions(
        &self,
        held: &[(String, u64)],
        policy: &SessionPolicy,
    ) -> StoreResult<Vec<(String, u64)>> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
                let records = tx.store.sessions(&ids, Access::Update).await?;
                let lease_end = policy.lease_end(tx.now);
                let mut lost = Vec::new();
                for (worker_id, epoch) in held {
                    match records.iter().find(|s| &s.worker_id == worker_id) {
                        Some(session) if ownership::holds(session, *epoch, &policy.server_id) => {
                            let mut session = session.clone();
                            session.deadline = Some(lease_end);
                            tx.save_session(&session);
                        }
                        _ => lost.push((worker_id.clone(), *epoch)),
                    }
                }
                Ok(lost)
            })
        })
        .await
    }

    /// Records the end of this server's session of `worker_id` with
    /// `epoch`: the attempts it still owns wait for the worker for the
    /// grace period. A broken stream leaves the worker `lost`; a clean close
    /// leaves it `idle` (or `busy` while it holds unfinished attempts). Does
    /// nothing when the session is no longer this server's.
    pub async fn end_session(
        &self,
        worker_id: &str,
        epoch: u64,
        end: StreamEnd,
        policy: &SessionPolicy,
    ) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let Some(mut session) = held_session(tx, worker_id, epoch, policy).await? else {
                    return Ok(());
                };
                let live = live_attempts(tx, &session).await?;
                let holds_attempts = !live.is_empty();
                let grace_end = policy.grace_end(tx.now);
                ownership::drop_session(
                    &mut session,
                    live.iter().map(attempt_ref).collect(),
                    grace_end,
                );
                tx.save_session(&session);
                let mut worker = tx.worker(worker_id).await?;
                ownership::end_worker_session(
                    &mut worker,
                    end == StreamEnd::Broken,
                    holds_attempts,
                    tx.now,
                );
                tx.save_worker(&worker);
                Ok(())
            })
        })
        .await
    }

    /// Applies every session deadline that passed: an `open` session whose
    /// lease expired lost its server, so it is dropped (its worker `lost`)
    /// and its attempts get the grace period from now; a `dropped` session
    /// whose grace period is over has its live attempts marked
    /// `unresponsive` (retried per their configuration) and closes. Any
    /// server may run this; a record is handled by exactly one.
    pub async fn expire_sessions(&self, policy: &SessionPolicy) -> StoreResult<()> {
        let now = self.now();
        loop {
            let handled = self
                .run_tx(now, |tx| {
                    Box::pin(async move {
                        let due = tx.store.due_sessions(now, EXPIRY_PASS).await?;
                        let handled = due.len();
                        for mut session in due {
                            let live = live_attempts(tx, &session).await?;
                            if session.state == SessionState::Open {
                                tracing::warn!(
                                    worker_id = session.worker_id,
                                    server_id = session.server_id,
                                    "worker session lease expired: its server is gone"
                                );
                                let refs = live.iter().map(attempt_ref).collect();
                                ownership::drop_session(&mut session, refs, policy.grace_end(now));
                                mark_lost(tx, &session.worker_id).await?;
                            } else {
                                expire_all(tx, live).await?;
                                ownership::close_session(&mut session);
                            }
                            tx.save_session(&session);
                        }
                        Ok(handled)
                    })
                })
                .await?;
            if handled < EXPIRY_PASS {
                return Ok(());
            }
        }
    }

    /// Drops the sessions an earlier run of this server left open: those
    /// recorded under its server id, or every open one when the backend is
    /// this server's alone. Their attempts get the grace period from now, as
    /// a dropped stream's do. Returns how many there were.
    pub async fn recover_sessions(&self, policy: &SessionPolicy) -> StoreResult<usize> {
        let server_id = (!self.store.exclusive()).then_some(policy.server_id.as_str());
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let open = tx.store.open_sessions(server_id).await?;
                let count = open.len();
                for mut session in open {
                    let live = live_attempts(tx, &session).await?;
                    tracing::info!(
                        worker_id = session.worker_id,
                        attempts = live.len(),
                        "worker session of an earlier run dropped"
                    );
                    let refs = live.iter().map(attempt_ref).collect();
                    ownership::drop_session(&mut session, refs, policy.grace_end(tx.now));
                    tx.save_session(&session);
                    mark_lost(tx, &session.worker_id).await?;
                }
                Ok(count)
            })
        })
        .await
    }
}

/// Returns the (rollout id, attempt id) of a view's attempt.
fn attempt_ref(view: &RolloutView) -> AttemptRef {
    let attempt_id = view
        .attempt
        .as_ref()
        .map(|attempt| attempt.attempt_id.clone())
        .unwrap_or_default();
    (view.rollout.rollout_id.clone(), attempt_id)
}

/// Returns the worker's session record, locked, if it is this server's
/// session with `epoch`.
async fn held_session(
    tx: &mut Tx<'_>,
    worker_id: &str,
    epoch: u64,
    policy: &SessionPolicy,
) -> StoreResult<Option<WorkerSession>> {
    let session = tx.session(worker_id, Access::Update).await?;
    Ok(session.filter(|session| ownership::holds(session, epoch, &policy.server_id)))
}

/// Returns, locked and in the session's order, the rollouts of the attempts
/// the session owns that are still live (see [`ownership::is_live`]).
async fn live_attempts(tx: &mut Tx<'_>, session: &WorkerSession) -> StoreResult<Vec<RolloutView>> {
    if session.attempts.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = session.attempts.iter().map(|(id, _)| id.as_str()).collect();
    let views = tx.rollouts(&ids, Access::Update).await?;
    Ok(session
        .attempts
        .iter()
        .filter_map(|(rollout_id, attempt_id)| {
            views
                .get(rollout_id)
                .filter(|view| ownership::is_live(view, attempt_id, &session.worker_id))
                .cloned()
        })
        .collect())
}

/// Marks live attempts `unresponsive`: their worker did not come back.
async fn expire_all(tx: &mut Tx<'_>, live: Vec<RolloutView>) -> StoreResult<()> {
    for view in live {
        tx::expire_attempt(tx, view).await?;
    }
    Ok(())
}

/// Marks a worker `lost`: its session's stream is gone.
async fn mark_lost(tx: &mut Tx<'_>, worker_id: &str) -> StoreResult<()> {
    let mut worker = tx.worker(worker_id).await?;
    ownership::end_worker_session(&mut worker, true, false, tx.now);
    tx.save_worker(&worker);
    Ok(())
}
