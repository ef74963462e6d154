//! The write set: everything a transaction changes besides its immediate
//! writes ([`super::ImmediateWrites`]), computed by the engine in memory
//! (it reads its own writes from here) and applied by the backend at
//! [`StoreTx::commit`](super::StoreTx::commit) in as few statements as it
//! can.

use indexmap::{IndexMap, IndexSet};

use super::agl1::Agl1Writes;
use crate::events::Event;
use crate::idempotency::RememberedRequest;
use crate::model::{Attempt, ResourcesUpdate, Rollout, Timestamp, Worker, WorkerSession};
use crate::training::usage::RolloutUsage;
use crate::training::{RolloutReward, RowsVerdict, TrainingDeltas};

/// A rollout to insert or replace, with when the watchdog must next look at
/// it (`None`: never).
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutWrite {
    pub rollout: Rollout,
    pub deadline: Option<Timestamp>,
    /// The transaction set the rollout's mode or resources version, which
    /// otherwise never change once it exists: a backend that rewrites an
    /// index for every column it assigns (SQLite) assigns them only then.
    pub relabelled: bool,
}

/// Everything a transaction changes, keyed by id: the last write of an
/// entity wins, and the engine reads its own writes from here. Applied by
/// [`StoreTx::commit`](super::StoreTx::commit) in this order: the 1.x records
/// ([`Agl1Writes`]), request ids (forgotten, then remembered),
/// activity counts forgotten, resources, rollouts (with their activity
/// counts), attempts, workers, sessions, queue (removals, then appends),
/// rewards, training summary deltas, events. The engine never forgets activity counts in a write set that
/// writes rollouts (on a shared database both would be clauses of one
/// statement, which cannot change a row twice).
#[derive(Debug, Default)]
pub struct WriteSet {
    /// Rollouts inserted or replaced, in first-write order.
    pub rollouts: IndexMap<String, RolloutWrite>,
    /// Attempts inserted or replaced, keyed by (rollout id, attempt id).
    pub attempts: IndexMap<(String, String), Attempt>,
    /// Workers inserted or replaced.
    pub workers: IndexMap<String, Worker>,
    /// Session records inserted or replaced, keyed by worker id.
    pub sessions: IndexMap<String, WorkerSession>,
    /// Rollouts taken out of the queue: they left the queuing statuses
    /// without being claimed.
    pub unqueue: IndexSet<String>,
    /// Rollouts appended to the queue's tail (unless already queued), in
    /// order, with the time each entered the queue.
    pub enqueue: IndexMap<String, Timestamp>,
    /// Resources snapshots inserted or replaced; the last one becomes the latest.
    pub resources: IndexMap<String, ResourcesUpdate>,
    /// agent-lightning 1.x's records.
    pub agl1: Agl1Writes,
    /// Request ids that expired at or before this time are forgotten.
    pub forget_requests: Option<Timestamp>,
    /// The activity counts of minutes before this time are forgotten.
    pub forget_activity: Option<Timestamp>,
    /// Request ids remembered (inserted or replaced), keyed by id.
    pub requests: IndexMap<String, RememberedRequest>,
    /// Rollouts' final rewards written, keyed by rollout id (see
    /// [`super::training`] for when one replaces the stored one).
    pub rewards: IndexMap<String, RolloutReward>,
    /// The model version that served a rollout's first model call, keyed
    /// by rollout id: stored unless the rollout has one already (see
    /// [`super::training`]).
    pub model_versions: IndexMap<String, i64>,
    /// What 1.x rollouts gave their trainer when they ended, keyed by
    /// rollout id; `None` drops a rollout's verdict, as it stopped counting
    /// (see [`super::training`]).
    pub rows_verdicts: IndexMap<String, Option<RowsVerdict>>,
    /// What rollouts' new model calls used, keyed by rollout id: added to
    /// what the rollout's stored calls used (see [`super::training`]).
    pub usage: IndexMap<String, RolloutUsage>,
    /// Changes of the training summary's rows, added to them.
    pub training: TrainingDeltas,
    /// A backend that keeps the summary's rows in shards (a shared
    /// database, one shard per connection) folds them into one row per key,
    /// so that reading them costs the keys, not the keys times the shards;
    /// the sums do not change.
    pub fold_training_shards: bool,
    /// Events to record; the backend assigns their sequence numbers.
    pub events: Vec<Event>,
}

impl WriteSet {
    /// Returns the rollouts whose rows the set writes (their own, their
    /// attempts', their 1.x records), taken before the backend's commit
    /// (which may consume the set): the 1.x details it changes.
    pub fn touched_rollouts(&self) -> Vec<String> {
        let agl1 = &self.agl1;
        self.rollouts
            .keys()
            .chain(self.attempts.keys().map(|(rollout_id, _)| rollout_id))
            .chain(agl1.deleted.iter())
            .chain(agl1.fields.keys())
            .chain(agl1.events.iter().map(|write| &write.event.rollout_id))
            .cloned()
            .collect()
    }

    /// Returns whether the set changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rollouts.is_empty()
            && self.attempts.is_empty()
            && self.workers.is_empty()
            && self.sessions.is_empty()
            && self.unqueue.is_empty()
            && self.enqueue.is_empty()
            && self.resources.is_empty()
            && self.agl1.is_empty()
            && self.forget_requests.is_none()
            && self.forget_activity.is_none()
            && self.requests.is_empty()
            && self.rewards.is_empty()
            && self.model_versions.is_empty()
            && self.rows_verdicts.is_empty()
            && self.usage.is_empty()
            && self.training.is_empty()
            && !self.fold_training_shards
            && self.events.is_empty()
    }

    /// Buffers a rollout with its watchdog deadline.
    pub fn put_rollout(&mut self, rollout: &Rollout, deadline: Option<Timestamp>) {
        let relabelled = self
            .rollouts
            .get(&rollout.rollout_id)
            .is_some_and(|write| write.relabelled);
        let write = RolloutWrite {
            rollout: rollout.clone(),
            deadline,
            relabelled,
        };
        self.rollouts.insert(rollout.rollout_id.clone(), write);
    }

    /// Marks a buffered rollout as relabelled (see [`RolloutWrite::relabelled`]).
    pub fn relabel_rollout(&mut self, rollout_id: &str) {
        if let Some(write) = self.rollouts.get_mut(rollout_id) {
            write.relabelled = true;
        }
    }

    /// Buffers an attempt.
    pub fn put_attempt(&mut self, attempt: &Attempt) {
        let key = (attempt.rollout_id.clone(), attempt.attempt_id.clone());
        self.attempts.insert(key, attempt.clone());
    }

    /// Buffers a worker.
    pub fn put_worker(&mut self, worker: &Worker) {
        self.workers
            .insert(worker.worker_id.clone(), worker.clone());
    }

    /// Buffers a resources snapshot (the latest once committed).
    pub fn put_resources(&mut self, update: &ResourcesUpdate) {
        // Re-inserting moves the snapshot last: the last write is the latest.
        self.resources.shift_remove(&update.resources_id);
        self.resources
            .insert(update.resources_id.clone(), update.clone());
    }

    /// Buffers a remembered request id.
    pub fn remember_request(&mut self, request: RememberedRequest) {
        self.requests.insert(request.request_id.clone(), request);
    }

    /// Buffers a session record.
    pub fn put_session(&mut self, session: &WorkerSession) {
        self.sessions
            .insert(session.worker_id.clone(), session.clone());
    }

    /// Buffers a rollout's entry at the queue's tail (kept where it is when
    /// already queued).
    pub fn enqueue(&mut self, rollout_id: &str, now: Timestamp) {
        self.unqueue.shift_remove(rollout_id);
        self.enqueue.entry(rollout_id.to_owned()).or_insert(now);
    }

    /// Buffers the removal of a rollout's queue entry, if it has one.
    pub fn unqueue(&mut self, rollout_id: &str) {
        self.enqueue.shift_remove(rollout_id);
        self.unqueue.insert(rollout_id.to_owned());
    }

    /// Returns the worker as this transaction last wrote it.
    pub fn worker(&self, worker_id: &str) -> Option<&Worker> {
        self.workers.get(worker_id)
    }

    /// Returns the session record as this transaction last wrote it.
    pub fn session(&self, worker_id: &str) -> Option<&WorkerSession> {
        self.sessions.get(worker_id)
    }

    /// Returns the latest resources snapshot this transaction wrote.
    pub fn latest_resources(&self) -> Option<&ResourcesUpdate> {
        self.resources.last().map(|(_, update)| update)
    }
}
