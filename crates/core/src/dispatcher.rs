//! Worker sessions on this server: a runner holds a stream with a number of
//! slots, and the dispatcher pushes claimed rollouts into free slots the
//! moment they are queued (no polling); attempts whose rollout is cancelled,
//! or that the watchdog times out or finds unresponsive, are revoked at once.
//!
//! Ownership lives in the store (the rules in [`super::ownership`], the
//! transactions in [`super::engine`]), so that any server can take a
//! session over and a restart strands nothing. This registry keeps what a
//! stream needs here (its slots, the attempts it holds, its push channel);
//! its background task renews the leases of this server's sessions, ends
//! the streams of sessions another server took over, and applies the
//! leases and grace periods that passed, whichever server held them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast::error::RecvError, mpsc};
use tokio::task::JoinSet;

use super::access::Caller;
use super::engine::{Engine, SessionPolicy, StreamEnd};
use super::error::{StoreError, StoreResult};
use super::events::Change;
use super::ids::{self, ResourcesId, WorkerId};
use super::model::{AttemptRef, AttemptStatus, Json, ResourcesUpdate, RolloutStatus, RolloutView};

/// Largest number of slots one session may ask for.
pub const MAX_SLOTS: usize = 1024;

/// Most rollouts claimed for one session per dispatch turn, so that a burst
/// is spread over the idle sessions.
const CLAIMS_PER_TURN: usize = 8;

/// Why a held attempt must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevocationReason {
    Cancelled,
    Timeout,
    Unresponsive,
}

/// A message the server pushes to a session.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionPush {
    /// A claimed rollout with its new attempt and the resources it names.
    Assignment {
        rollout: Box<RolloutView>,
        resources: Option<ResourcesUpdate>,
    },
    /// A held attempt must stop.
    Revoked {
        rollout_id: String,
        attempt_id: String,
        reason: RevocationReason,
    },
}

struct Session {
    worker_id: String,
    /// The session's epoch in the store.
    epoch: u64,
    slots: usize,
    held: HashSet<AttemptRef>,
    /// Held attempts already revoked: an event seen twice (several servers
    /// on one database republish events) revokes once.
    revoked: HashSet<AttemptRef>,
    push: mpsc::UnboundedSender<SessionPush>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    sessions: IndexMap<u64, Session>,
    /// Where the next dispatch round starts, for round-robin fairness.
    cursor: usize,
}

/// What one of this server's open sessions holds, as the console shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSlots {
    pub worker_id: String,
    pub epoch: u64,
    /// The slots the runner asked for.
    pub slots: usize,
    /// The attempts it holds (each takes a slot), in no particular order.
    pub held: Vec<AttemptRef>,
}

/// This server's open sessions and their dispatcher.
pub struct Dispatcher {
    engine: Arc<Engine>,
    policy: SessionPolicy,
    registry: Mutex<Registry>,
    slot_freed: Notify,
    /// Ends of streams being recorded in the store; shutdown waits for them.
    endings: Mutex<JoinSet<()>>,
}

/// An open session; dropping it ends the session (see [`SessionHandle::set_end`]).
pub struct SessionHandle {
    dispatcher: Arc<Dispatcher>,
    id: u64,
    /// The session's worker id.
    pub worker_id: String,
    /// The session's epoch: the owner epoch its runner presents.
    pub epoch: u64,
    /// The live attempts adopted from the worker's previous session.
    pub adopted: Vec<AttemptRef>,
    /// Pushes for this session; closes when the session is no longer this
    /// server's (a newer session of the worker replaced it, or its lease
    /// expired).
    pub pushes: mpsc::UnboundedReceiver<SessionPush>,
    end: StreamEnd,
}

impl SessionHandle {
    /// Notes how the stream ended (broken unless told otherwise), for when
    /// the handle is dropped.
    pub fn set_end(&mut self, end: StreamEnd) {
        self.end = end;
    }

    /// Returns what handles the runner's messages of this session, detached
    /// from the handle (a write may be in flight while pushes go on).
    pub fn writer(&self) -> SessionWriter {
        SessionWriter {
            dispatcher: self.dispatcher.clone(),
            id: self.id,
            worker_id: self.worker_id.clone(),
            epoch: self.epoch,
        }
    }
}

/// Handles a session's runner messages: releases free their slot here at
/// once; releases and heartbeats are recorded in the store by
/// [`SessionWriter::record`], one write at a time (see [`PendingWrites`]).
#[derive(Clone)]
pub struct SessionWriter {
    dispatcher: Arc<Dispatcher>,
    id: u64,
    worker_id: String,
    epoch: u64,
}

impl SessionWriter {
    /// Frees the slot of `released`, if the session holds it: the next
    /// rollout may be pushed before the release is recorded.
    pub fn free_slot(&self, released: &AttemptRef) {
        let mut registry = self.dispatcher.registry.lock();
        if let Some(local) = registry.sessions.get_mut(&self.id)
            && local.held.remove(released)
        {
            local.revoked.remove(released);
            self.dispatcher.slot_freed.notify_one();
        }
    }

    /// Records a release (`released`) and a heartbeat with `stats` in the
    /// store. Returns false when the session is no longer this server's;
    /// its stream then ends.
    pub async fn record(
        &self,
        released: Option<AttemptRef>,
        stats: Option<Json>,
    ) -> StoreResult<bool> {
        let (worker_id, epoch) = (&self.worker_id, self.epoch);
        let dispatcher = &self.dispatcher;
        let ours = dispatcher
            .engine
            .session_heartbeat(
                worker_id,
                epoch,
                released.as_ref(),
                stats,
                &dispatcher.policy,
            )
            .await?;
        if !ours {
            dispatcher.forget(&[(worker_id.clone(), epoch)]);
        }
        Ok(ours)
    }
}

/// A session's runner messages not recorded yet. While one write of a
/// session is in flight, later messages wait here instead of each becoming
/// a transaction: a session costs at most one store transaction at a time,
/// however fast its runner sends (10,000 back-to-back heartbeats used to
/// queue 10,000 transactions). Heartbeats coalesce, the latest statistics
/// winning; releases are recorded one per write, in order, each with the
/// latest statistics and the time of its write.
#[derive(Debug, Default)]
pub struct PendingWrites {
    releases: std::collections::VecDeque<AttemptRef>,
    stats: Option<Json>,
    /// Whether a heartbeat (or a release, which counts as one) waits.
    due: bool,
}

impl PendingWrites {
    /// Notes a heartbeat; `stats`, when given, replace any waiting.
    pub fn heartbeat(&mut self, stats: Option<Json>) {
        self.due = true;
        if stats.is_some() {
            self.stats = stats;
        }
    }

    /// Notes a release.
    pub fn release(&mut self, attempt: AttemptRef) {
        self.due = true;
        self.releases.push_back(attempt);
    }

    /// Takes the next write: the first waiting release, if any, with the
    /// latest statistics; `None` when nothing waits.
    pub fn next_write(&mut self) -> Option<(Option<AttemptRef>, Option<Json>)> {
        if !self.due {
            return None;
        }
        let released = self.releases.pop_front();
        self.due = !self.releases.is_empty();
        Some((released, self.stats.take()))
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.dispatcher.close(self.id, self.end);
    }
}

impl Dispatcher {
    /// Returns an empty registry holding sessions under `policy`.
    pub fn new(engine: Arc<Engine>, policy: SessionPolicy) -> Arc<Self> {
        Arc::new(Self {
            engine,
            policy,
            registry: Mutex::new(Registry::default()),
            slot_freed: Notify::new(),
            endings: Mutex::new(JoinSet::new()),
        })
    }

    /// Opens a session for `worker_id` (which `caller` must be allowed to
    /// act for) with the `slots` the runner asked for (checked here, as
    /// sent, so that the error quotes the client's value), taking the worker's session over from wherever it was (see
    /// [`Engine::open_session`]); a stream of the worker on this server ends.
    pub async fn open(
        self: &Arc<Self>,
        worker_id: &WorkerId,
        slots: i64,
        caller: &Caller,
    ) -> StoreResult<SessionHandle> {
        // A session is a named worker's: the empty id names none.
        ids::validate_id("worker_id", worker_id)?;
        caller.check_worker(Some(worker_id))?;
        let worker_id = worker_id.as_str();
        let slots = usize::try_from(slots)
            .ok()
            .filter(|slots| (1..=MAX_SLOTS).contains(slots))
            .ok_or_else(|| {
                StoreError::invalid(format!(
                    "slots must be between 1 and {MAX_SLOTS}, got {slots}"
                ))
            })?;
        let opened = self.engine.open_session(worker_id, &self.policy).await?;
        let (push, pushes) = mpsc::unbounded_channel();
        let mut registry = self.registry.lock();
        // A previous stream of the worker here was replaced: it ends (its
        // push channel closes) without a word to the store.
        registry.sessions.retain(|_, s| s.worker_id != worker_id);
        registry.next_id += 1;
        let id = registry.next_id;
        registry.sessions.insert(
            id,
            Session {
                worker_id: worker_id.to_owned(),
                epoch: opened.epoch,
                slots,
                held: opened.adopted.iter().cloned().collect(),
                revoked: HashSet::new(),
                push,
            },
        );
        self.engine
            .observer()
            .worker_sessions(registry.sessions.len());
        drop(registry);
        self.slot_freed.notify_one();
        tracing::info!(
            worker_id,
            slots,
            epoch = opened.epoch,
            adopted = opened.adopted.len(),
            "worker session opened"
        );
        Ok(SessionHandle {
            dispatcher: self.clone(),
            id,
            worker_id: worker_id.to_owned(),
            epoch: opened.epoch,
            adopted: opened.adopted,
            pushes,
            end: StreamEnd::Broken,
        })
    }

    /// Returns this server's open sessions with their slots, in the order
    /// they opened (other servers' sessions are in the store's records).
    pub fn snapshot(&self) -> Vec<SessionSlots> {
        let registry = self.registry.lock();
        registry
            .sessions
            .values()
            .map(|session| SessionSlots {
                worker_id: session.worker_id.clone(),
                epoch: session.epoch,
                slots: session.slots,
                held: session.held.iter().cloned().collect(),
            })
            .collect()
    }

    /// Ends a session here and records how its stream ended; does nothing
    /// when it was replaced or taken over (the store already moved on).
    fn close(self: &Arc<Self>, id: u64, end: StreamEnd) {
        let mut registry = self.registry.lock();
        let Some(session) = registry.sessions.shift_remove(&id) else {
            return;
        };
        self.engine
            .observer()
            .worker_sessions(registry.sessions.len());
        drop(registry);
        let Session {
            worker_id,
            epoch,
            held,
            ..
        } = session;
        tracing::info!(worker_id, held = held.len(), ?end, "worker session closed");
        let dispatcher = self.clone();
        let mut endings = self.endings.lock();
        // Finished ends are collected as new ones start: the set stays small.
        while endings.try_join_next().is_some() {}
        endings.spawn(async move {
            let engine = &dispatcher.engine;
            if let Err(error) = engine
                .end_session(&worker_id, epoch, end, &dispatcher.policy)
                .await
            {
                tracing::warn!(%error, worker_id, "cannot record the end of a worker session");
            }
        });
    }

    /// Ends the streams of the given sessions (worker id, epoch) without a
    /// word to the store: another server took them over, or their lease
    /// expired.
    fn forget(&self, sessions: &[(String, u64)]) {
        let mut registry = self.registry.lock();
        registry.sessions.retain(|_, session| {
            let moved = sessions.iter().any(|(worker_id, epoch)| {
                *worker_id == session.worker_id && *epoch == session.epoch
            });
            if moved {
                tracing::info!(
                    worker_id = session.worker_id,
                    epoch = session.epoch,
                    "worker session is no longer this server's: ending its stream"
                );
            }
            !moved
        });
        self.engine
            .observer()
            .worker_sessions(registry.sessions.len());
    }

    /// Drops the sessions an earlier run of this server left open (see
    /// [`Engine::recover_sessions`]); called before the server serves.
    pub async fn recover(&self) {
        match self.engine.recover_sessions(&self.policy).await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "worker sessions of an earlier run dropped"),
            Err(error) => {
                tracing::error!(%error, "cannot recover worker sessions; their leases will expire")
            }
        }
    }

    /// Records the end of every session still open here (their streams are
    /// ending with the server) and waits until every end is recorded.
    /// Called when the server has drained, before the store closes.
    pub async fn shutdown(self: &Arc<Self>) {
        let ids: Vec<u64> = self.registry.lock().sessions.keys().copied().collect();
        for id in ids {
            self.close(id, StreamEnd::Broken);
        }
        let mut endings = std::mem::take(&mut *self.endings.lock());
        while endings.join_next().await.is_some() {}
    }

    /// Runs until the engine closes: renews this server's leases (ending
    /// the streams of sessions that are no longer its own) three times per
    /// lease, and applies the session deadlines that passed, as often as the
    /// watchdog scans.
    pub async fn run_leases(self: Arc<Self>) {
        let mut closing = self.engine.closing();
        let mut renewal =
            tokio::time::interval((self.policy.lease / 3).max(Duration::from_millis(1)));
        renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut expiry = tokio::time::interval(self.engine.watchdog_interval());
        expiry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let renewal_due = tokio::select! {
                _ = renewal.tick() => true,
                _ = expiry.tick() => false,
                _ = closing.wait_for(|closed| *closed) => return,
            };
            if renewal_due {
                self.renew().await;
            } else if let Err(error) = self.engine.expire_sessions(&self.policy).await {
                tracing::warn!(%error, "worker session expiry failed");
            }
        }
    }

    async fn renew(&self) {
        let held: Vec<(String, u64)> = self
            .registry
            .lock()
            .sessions
            .values()
            .map(|s| (s.worker_id.clone(), s.epoch))
            .collect();
        if held.is_empty() {
            return;
        }
        match self.engine.renew_sessions(&held, &self.policy).await {
            Ok(lost) if lost.is_empty() => {}
            Ok(lost) => self.forget(&lost),
            Err(error) => tracing::warn!(%error, "worker session leases not renewed"),
        }
    }

    /// Runs the dispatcher until the engine closes: whenever rollouts are
    /// queued or a slot frees up, claims rollouts for sessions with free
    /// slots, round robin, and pushes the assignments.
    pub async fn run_dispatcher(self: Arc<Self>) {
        let mut closing = self.engine.closing();
        loop {
            let queued = self.engine.events().queue_signal().notified();
            let freed = self.slot_freed.notified();
            tokio::pin!(queued, freed);
            queued.as_mut().enable();
            freed.as_mut().enable();
            if *closing.borrow() {
                return;
            }
            if let Err(error) = self.dispatch_round().await {
                tracing::warn!(%error, "dispatch failed");
            }
            tokio::select! {
                _ = queued => {}
                _ = freed => {}
                _ = closing.changed() => return,
                // A periodic sweep catches rollouts requeued while a round ran.
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Returns (session id, worker id, epoch, free slots) of the sessions
    /// with free slots, starting at the round-robin cursor.
    fn candidates(&self) -> Vec<(u64, String, u64, usize)> {
        let mut registry = self.registry.lock();
        let count = registry.sessions.len();
        if count == 0 {
            return Vec::new();
        }
        let start = registry.cursor % count;
        registry.cursor = start + 1;
        (0..count)
            .filter_map(|i| registry.sessions.get_index((start + i) % count))
            .filter(|(_, s)| s.held.len() < s.slots)
            .map(|(&id, s)| (id, s.worker_id.clone(), s.epoch, s.slots - s.held.len()))
            .collect()
    }

    async fn dispatch_round(&self) -> StoreResult<()> {
        loop {
            let candidates = self.candidates();
            if candidates.is_empty() {
                return Ok(());
            }
            for (id, worker_id, epoch, free) in candidates {
                let limit = free.min(CLAIMS_PER_TURN);
                let claim = self
                    .engine
                    .claim_for_session(&worker_id, epoch, limit, &self.policy);
                let Some(claimed) = claim.await? else {
                    self.forget(&[(worker_id, epoch)]);
                    continue;
                };
                if claimed.is_empty() {
                    return Ok(()); // the queue is empty
                }
                for rollout in claimed {
                    self.deliver(id, rollout).await;
                }
            }
        }
    }

    async fn deliver(&self, id: u64, rollout: RolloutView) {
        let resources = match &rollout.rollout.resources_id {
            // A snapshot id stored before ids were checked may name none.
            Some(resources_id) => match ResourcesId::parse("resources_id", resources_id.clone()) {
                Ok(resources_id) => self.engine.get_resources(&resources_id).await.ok(),
                Err(_) => None,
            },
            None => None,
        };
        let attempt_id = rollout
            .attempt
            .as_ref()
            .map(|a| a.attempt_id.clone())
            .unwrap_or_default();
        let held: AttemptRef = (rollout.rollout.rollout_id.clone(), attempt_id);
        let mut registry = self.registry.lock();
        let Some(session) = registry.sessions.get_mut(&id) else {
            // The stream ended after the claim: the store's record of the
            // session owns the attempt, which waits for the worker for the
            // grace period like any attempt of a dropped session.
            tracing::debug!(rollout_id = held.0, "claimed for a session that ended");
            return;
        };
        session.held.insert(held);
        let _ = session.push.send(SessionPush::Assignment {
            rollout: Box::new(rollout),
            resources,
        });
    }

    /// Runs until the engine closes: pushes a revocation to the session
    /// holding an attempt whose rollout was cancelled, or which the watchdog
    /// timed out or found unresponsive.
    pub async fn run_revocations(self: Arc<Self>) {
        let mut events = self.engine.events().subscribe();
        let mut closing = self.engine.closing();
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                // Also when the engine closed before this task first ran.
                _ = closing.wait_for(|closed| *closed) => return,
            };
            let event = match event {
                Ok(event) => event,
                Err(RecvError::Lagged(skipped)) => {
                    tracing::warn!(skipped, "revocation watcher lagged behind the event bus");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let (rollout_id, attempt_id, reason) = match &event.change {
                Change::RolloutChanged {
                    rollout_id,
                    status: RolloutStatus::Cancelled,
                } => (rollout_id, None, RevocationReason::Cancelled),
                Change::AttemptChanged {
                    rollout_id,
                    attempt_id,
                    status: AttemptStatus::Timeout,
                } => (rollout_id, Some(attempt_id), RevocationReason::Timeout),
                Change::AttemptChanged {
                    rollout_id,
                    attempt_id,
                    status: AttemptStatus::Unresponsive,
                } => (rollout_id, Some(attempt_id), RevocationReason::Unresponsive),
                _ => continue,
            };
            let mut registry = self.registry.lock();
            for session in registry.sessions.values_mut() {
                for held in &session.held {
                    let (held_rollout, held_attempt) = held;
                    if held_rollout == rollout_id
                        && attempt_id.is_none_or(|a| a == held_attempt)
                        && session.revoked.insert(held.clone())
                    {
                        let _ = session.push.send(SessionPush::Revoked {
                            rollout_id: held_rollout.clone(),
                            attempt_id: held_attempt.clone(),
                            reason,
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(n: u8) -> AttemptRef {
        (format!("ro-{n}"), format!("at-{n}"))
    }

    #[test]
    fn pending_heartbeats_coalesce_and_releases_keep_their_order() {
        let mut pending = PendingWrites::default();
        assert_eq!(pending.next_write(), None);
        for n in 0..1000 {
            pending.heartbeat(Some(serde_json::json!({ "n": n })));
        }
        pending.heartbeat(None);
        assert_eq!(
            pending.next_write(),
            Some((None, Some(serde_json::json!({"n": 999}))))
        );
        assert_eq!(pending.next_write(), None);
        pending.release(attempt(1));
        pending.heartbeat(Some(serde_json::json!(1)));
        pending.release(attempt(2));
        assert_eq!(
            pending.next_write(),
            Some((Some(attempt(1)), Some(serde_json::json!(1))))
        );
        assert_eq!(pending.next_write(), Some((Some(attempt(2)), None)));
        assert_eq!(pending.next_write(), None);
    }
}
