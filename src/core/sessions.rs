//! Worker sessions: a runner holds a stream with a number of slots, and the
//! dispatcher pushes claimed rollouts into free slots the moment they are
//! queued (no polling). Held attempts whose rollout is cancelled, or that the
//! watchdog times out or finds unresponsive, are revoked at once. When a
//! session drops, its worker is marked `lost`; unless the worker opens a new
//! session within the grace period (which adopts the held attempts), those
//! attempts become `unresponsive` and are retried per their configuration.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast::error::RecvError, mpsc};
use tokio::task::AbortHandle;

use super::engine::Engine;
use super::error::{StoreError, StoreResult};
use super::events::Change;
use super::model::{AttemptStatus, ResourcesUpdate, RolloutStatus, RolloutView};

/// Largest number of slots one session may ask for.
pub const MAX_SLOTS: usize = 1024;

/// Most rollouts claimed for one session per dispatch turn, so that a burst
/// is spread over the idle sessions.
const CLAIMS_PER_TURN: usize = 8;

/// A (rollout id, attempt id) pair held by a session.
pub type AttemptRef = (String, String);

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
    slots: usize,
    held: HashSet<AttemptRef>,
    /// Held attempts already revoked: an event seen twice (several servers
    /// on one database republish events) revokes once.
    revoked: HashSet<AttemptRef>,
    push: mpsc::UnboundedSender<SessionPush>,
}

/// Attempts of a worker whose session dropped, expiring after the grace period.
struct LostWorker {
    held: HashSet<AttemptRef>,
    expiry: AbortHandle,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    sessions: IndexMap<u64, Session>,
    /// Where the next dispatch round starts, for round-robin fairness.
    cursor: usize,
    lost: HashMap<String, LostWorker>,
}

/// The open sessions and their dispatcher.
pub struct Sessions {
    engine: Arc<Engine>,
    grace: Duration,
    registry: Mutex<Registry>,
    slot_freed: Notify,
}

/// An open session; dropping it closes the session.
pub struct SessionHandle {
    sessions: Arc<Sessions>,
    id: u64,
    /// The session's worker id.
    pub worker_id: String,
    /// Attempts adopted from the worker's previous session.
    pub adopted: Vec<AttemptRef>,
    /// Pushes for this session; closes when a newer session of the same worker replaces it.
    pub pushes: mpsc::UnboundedReceiver<SessionPush>,
}

impl SessionHandle {
    /// Frees the slot held by an attempt; releasing an attempt the session
    /// does not hold does nothing.
    pub fn release(&self, attempt: &AttemptRef) {
        let mut registry = self.sessions.registry.lock();
        if let Some(session) = registry.sessions.get_mut(&self.id)
            && session.held.remove(attempt)
        {
            session.revoked.remove(attempt);
            self.sessions.slot_freed.notify_one();
        }
    }
}

impl Drop for SessionHandle {
    fn drop(&mut self) {
        self.sessions.close(self.id);
    }
}

impl Sessions {
    /// Returns an empty registry; held attempts of dropped sessions expire
    /// after `grace`.
    pub fn new(engine: Arc<Engine>, grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            engine,
            grace,
            registry: Mutex::new(Registry::default()),
            slot_freed: Notify::new(),
        })
    }

    /// Opens a session for `worker_id` with the `slots` the runner asked
    /// for (checked here, as sent, so that the error quotes the client's
    /// value). A session the worker already has is replaced, and attempts of
    /// its previous session (open or dropped within the grace period) are
    /// adopted.
    pub async fn open(self: &Arc<Self>, worker_id: &str, slots: i64) -> StoreResult<SessionHandle> {
        let slots = usize::try_from(slots)
            .ok()
            .filter(|slots| (1..=MAX_SLOTS).contains(slots))
            .ok_or_else(|| {
                StoreError::invalid(format!(
                    "slots must be between 1 and {MAX_SLOTS}, got {slots}"
                ))
            })?;
        self.engine.update_worker(worker_id, None).await?;
        let (push, pushes) = mpsc::unbounded_channel();
        let mut registry = self.registry.lock();
        let mut held = HashSet::new();
        let replaced: Vec<u64> = registry
            .sessions
            .iter()
            .filter(|(_, s)| s.worker_id == worker_id)
            .map(|(&id, _)| id)
            .collect();
        for id in replaced {
            if let Some(old) = registry.sessions.shift_remove(&id) {
                held.extend(old.held);
            }
        }
        if let Some(lost) = registry.lost.remove(worker_id) {
            lost.expiry.abort();
            held.extend(lost.held);
        }
        registry.next_id += 1;
        let id = registry.next_id;
        let adopted = held.iter().cloned().collect();
        registry.sessions.insert(
            id,
            Session {
                worker_id: worker_id.to_owned(),
                slots,
                held,
                revoked: HashSet::new(),
                push,
            },
        );
        self.engine
            .observer()
            .worker_sessions(registry.sessions.len());
        drop(registry);
        self.slot_freed.notify_one();
        tracing::info!(worker_id, slots, "worker session opened");
        Ok(SessionHandle {
            sessions: self.clone(),
            id,
            worker_id: worker_id.to_owned(),
            adopted,
            pushes,
        })
    }

    /// Closes a session: its worker becomes `lost` and its held attempts
    /// expire after the grace period unless the worker comes back.
    fn close(self: &Arc<Self>, id: u64) {
        let mut registry = self.registry.lock();
        let Some(session) = registry.sessions.shift_remove(&id) else {
            return; // replaced by a newer session, which took its attempts
        };
        self.engine
            .observer()
            .worker_sessions(registry.sessions.len());
        let worker_id = session.worker_id;
        tracing::info!(
            worker_id,
            held = session.held.len(),
            "worker session closed"
        );
        let sessions = self.clone();
        let lost_worker = worker_id.clone();
        let expiry = tokio::spawn(async move {
            if let Err(error) = sessions.engine.mark_worker_lost(&lost_worker).await {
                tracing::warn!(%error, worker_id = lost_worker, "cannot mark worker lost");
            }
            tokio::time::sleep(sessions.grace).await;
            sessions.expire_lost(&lost_worker).await;
        })
        .abort_handle();
        registry.lost.insert(
            worker_id,
            LostWorker {
                held: session.held,
                expiry,
            },
        );
    }

    async fn expire_lost(&self, worker_id: &str) {
        let Some(lost) = self.registry.lock().lost.remove(worker_id) else {
            return;
        };
        for (rollout_id, attempt_id) in lost.held {
            match self.engine.expire_attempt(&rollout_id, &attempt_id).await {
                Ok(true) => tracing::info!(
                    worker_id,
                    rollout_id,
                    attempt_id,
                    "attempt of a lost worker is unresponsive"
                ),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, rollout_id, attempt_id, "cannot expire attempt")
                }
            }
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

    /// Returns (session id, worker id, free slots) of the sessions with free
    /// slots, starting at the round-robin cursor.
    fn candidates(&self) -> Vec<(u64, String, usize)> {
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
            .map(|(&id, s)| (id, s.worker_id.clone(), s.slots - s.held.len()))
            .collect()
    }

    async fn dispatch_round(&self) -> StoreResult<()> {
        loop {
            let candidates = self.candidates();
            if candidates.is_empty() {
                return Ok(());
            }
            for (id, worker_id, free) in candidates {
                let claimed = self
                    .engine
                    .claim(free.min(CLAIMS_PER_TURN), &worker_id)
                    .await?;
                if claimed.is_empty() {
                    return Ok(()); // the queue is empty
                }
                for rollout in claimed {
                    self.deliver(id, &worker_id, rollout).await;
                }
            }
        }
    }

    async fn deliver(&self, id: u64, worker_id: &str, rollout: RolloutView) {
        let resources = match &rollout.rollout.resources_id {
            Some(resources_id) => self.engine.get_resources(resources_id).await.ok(),
            None => None,
        };
        let attempt_id = rollout
            .attempt
            .as_ref()
            .map(|a| a.attempt_id.clone())
            .unwrap_or_default();
        let held: AttemptRef = (rollout.rollout.rollout_id.clone(), attempt_id);
        let mut registry = self.registry.lock();
        if let Some(session) = registry.sessions.get_mut(&id) {
            session.held.insert(held.clone());
            if session
                .push
                .send(SessionPush::Assignment {
                    rollout: Box::new(rollout),
                    resources,
                })
                .is_ok()
            {
                return;
            }
        }
        // The session went away after the claim: the attempt waits for the
        // worker like any attempt of a dropped session.
        match registry.lost.get_mut(worker_id) {
            Some(lost) => {
                lost.held.insert(held);
            }
            None => {
                tracing::warn!(
                    worker_id,
                    rollout_id = held.0,
                    "claimed for a session that is gone; expiring after the grace period"
                );
                drop(registry);
                let engine = self.engine.clone();
                let grace = self.grace;
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    let _ = engine.expire_attempt(&held.0, &held.1).await;
                });
            }
        }
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
                _ = closing.changed() => return,
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
