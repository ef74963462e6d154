//! The in-memory state every transaction locks, its transaction with the
//! undo log of the immediate writes ([`ImmediateWrites`]), and the apply
//! step of a committed write set.
//!
//! [`ImmediateWrites`]: lightning_store_core::storage::ImmediateWrites

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::RandomState;

use indexmap::IndexMap;
use tokio::sync::MutexGuard;

use super::records::{
    self, ActivityCounts, Agl1State, EndedIndex, QueueEntry, RolloutSpans, TrainingState,
};
use lightning_store_core::events::Event;
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::{
    Attempt, AttemptStatus, ResourcesUpdate, Rollout, RolloutStatus, RolloutView, Timestamp,
    Worker, WorkerSession,
};
use lightning_store_core::overview::Activity;
use lightning_store_core::query::{Page, Paged};
use lightning_store_core::retention::Eviction;
use lightning_store_core::storage::{RolloutWrite, WriteSet};

/// Everything the store holds, behind the store's one lock.
#[derive(Default)]
pub(super) struct State {
    /// Rollouts in creation order.
    pub(super) rollouts: IndexMap<String, Rollout>,
    /// Attempts per rollout in sequence order.
    pub(super) attempts: HashMap<String, Vec<Attempt>>,
    pub(super) attempt_count: u64,
    /// Queue entries, head first. An entry whose ticket is no longer its
    /// rollout's in `queued` was taken out of the queue (and is skipped):
    /// removing it from the middle would cost a shift of the entries behind.
    pub(super) queue: VecDeque<QueueEntry>,
    /// The ticket of each queued rollout's entry.
    pub(super) queued: HashMap<String, u64>,
    pub(super) next_ticket: u64,
    pub(super) rollouts_by_status: BTreeMap<RolloutStatus, u64>,
    /// Rollouts that have an end time ([`super::overview`]).
    pub(super) ended: EndedIndex,
    /// The same rollouts by id, in id order: an export's keyset pages.
    pub(super) ended_ids: BTreeSet<String>,
    /// Rollouts created and ended per minute ([`super::overview`]).
    pub(super) activity: ActivityCounts,
    pub(super) attempts_by_status: BTreeMap<AttemptStatus, u64>,
    pub(super) deadlines: BTreeSet<(Timestamp, String)>,
    pub(super) deadline_of: HashMap<String, Timestamp>,
    pub(super) sequence_ids: HashMap<String, i64>,
    pub(super) spans: HashMap<String, RolloutSpans>,
    /// Hashes the span keys of every [`RolloutSpans`].
    pub(super) span_hasher: RandomState,
    pub(super) span_count: u64,
    pub(super) span_bytes: u64,
    /// Rollouts whose spans retention deleted.
    pub(super) evicted: HashSet<String>,
    pub(super) evictions: Eviction,
    /// Resources snapshots in creation order.
    pub(super) resources: IndexMap<String, ResourcesUpdate>,
    pub(super) latest_resources: Option<String>,
    /// Workers in first-seen order.
    pub(super) workers: IndexMap<String, Worker>,
    /// Session records by worker id, with an index of their deadlines.
    pub(super) sessions: HashMap<String, WorkerSession>,
    pub(super) session_deadlines: BTreeSet<(Timestamp, String)>,
    pub(super) last_session_epoch: u64,
    /// Remembered request ids, with an index of their expiries.
    pub(super) requests: HashMap<String, RememberedRequest>,
    pub(super) request_expiries: BTreeSet<(Timestamp, String)>,
    /// The most recent events, oldest first.
    pub(super) events: VecDeque<Event>,
    pub(super) event_retention: usize,
    pub(super) latest_event: u64,
    /// agent-lightning 1.x's records.
    pub(super) agl1: Agl1State,
    /// The rollouts' final rewards and the training summary.
    pub(super) training: TrainingState,
}

/// What a transaction did at once, to be undone if it is dropped.
#[derive(Default)]
pub(super) struct Undo {
    /// Queue entries popped, head first, each with whether it was claimed
    /// (the others had been taken out of the queue and were passed over).
    pub(super) claimed: Vec<(QueueEntry, bool)>,
    /// The last session epoch before the transaction took one.
    pub(super) session_epoch: Option<u64>,
    /// Span sequence counters before their first change (`None`: absent).
    pub(super) sequence_ids: HashMap<String, Option<i64>>,
    /// Rollouts whose spans got a span appended, once per span, in order.
    pub(super) spans: Vec<String>,
}

/// A transaction: the state, locked until it ends, and what it did at once.
pub(super) struct MemoryTx<'a> {
    pub(super) state: MutexGuard<'a, State>,
    pub(super) undo: Undo,
    /// Rollouts whose spans retention deletes at commit.
    pub(super) evict: Vec<String>,
}

impl Drop for MemoryTx<'_> {
    fn drop(&mut self) {
        let undo = std::mem::take(&mut self.undo);
        let state = &mut *self.state;
        for (entry, claimed) in undo.claimed.into_iter().rev() {
            if claimed {
                state.queued.insert(entry.rollout_id.clone(), entry.ticket);
            }
            state.queue.push_front(entry);
        }
        if let Some(epoch) = undo.session_epoch {
            state.last_session_epoch = epoch;
        }
        for (rollout_id, before) in undo.sequence_ids {
            match before {
                Some(value) => state.sequence_ids.insert(rollout_id, value),
                None => state.sequence_ids.remove(&rollout_id),
            };
        }
        for rollout_id in undo.spans.into_iter().rev() {
            let hasher = &state.span_hasher;
            if let Some(size) = state
                .spans
                .get_mut(&rollout_id)
                .and_then(|entry| entry.remove_last(hasher))
            {
                state.span_count -= 1;
                state.span_bytes -= size;
            }
        }
    }
}

/// Moves one entity from status `before` (`None`: a new entity) to `after`
/// in per-status counts.
pub(super) fn recount<S: Ord>(counts: &mut BTreeMap<S, u64>, before: Option<S>, after: S) {
    if let Some(before) = before {
        if before == after {
            return;
        }
        if let Some(count) = counts.get_mut(&before) {
            *count = count.saturating_sub(1);
        }
    }
    *counts.entry(after).or_default() += 1;
}

/// Sorts and windows borrowed items, cloning only the returned page.
pub(super) fn page_of<T: lightning_store_core::query::Sortable + Clone>(
    items: Vec<&T>,
    page: &Page,
) -> Paged<T> {
    page.apply(items).map(T::clone)
}

impl State {
    /// Returns a rollout with its latest attempt.
    pub(super) fn view(&self, rollout_id: &str) -> Option<RolloutView> {
        let rollout = self.rollouts.get(rollout_id)?;
        Some(RolloutView {
            rollout: rollout.clone(),
            attempt: self.latest_attempt(rollout_id).cloned(),
        })
    }

    pub(super) fn latest_attempt(&self, rollout_id: &str) -> Option<&Attempt> {
        self.attempts_of(rollout_id).last()
    }

    /// Returns a rollout's attempts in sequence order.
    pub(super) fn attempts_of(&self, rollout_id: &str) -> &[Attempt] {
        self.attempts.get(rollout_id).map_or(&[], Vec::as_slice)
    }

    pub(super) fn put_rollout(&mut self, write: RolloutWrite) {
        let RolloutWrite {
            rollout, deadline, ..
        } = write;
        let rollout_id = rollout.rollout_id.clone();
        let status = rollout.status;
        let ended = records::ended_key(&rollout);
        let activity = Activity::of(&rollout);
        // Replacing keeps the rollout's place in creation order.
        let previous = self.rollouts.insert(rollout_id.clone(), rollout);
        let before = previous.as_ref().map(|p| p.status);
        let ended_before = previous.as_ref().and_then(records::ended_key);
        self.recount_activity(previous.as_ref().map(Activity::of), Some(activity));
        recount(&mut self.rollouts_by_status, before, status);
        self.reindex_ended(ended_before, ended);
        self.set_deadline(rollout_id, deadline);
    }

    pub(super) fn set_deadline(&mut self, rollout_id: String, deadline: Option<Timestamp>) {
        if self.deadline_of.get(&rollout_id) == deadline.as_ref() {
            return;
        }
        if let Some(old) = self.deadline_of.remove(&rollout_id) {
            self.deadlines.remove(&(old, rollout_id.clone()));
        }
        if let Some(deadline) = deadline {
            self.deadline_of.insert(rollout_id.clone(), deadline);
            self.deadlines.insert((deadline, rollout_id));
        }
    }

    pub(super) fn put_attempt(&mut self, attempt: Attempt) {
        let attempts = self.attempts.entry(attempt.rollout_id.clone()).or_default();
        match attempts
            .iter_mut()
            .rev()
            .find(|a| a.attempt_id == attempt.attempt_id)
        {
            Some(existing) => {
                let before = existing.status;
                let after = attempt.status;
                *existing = attempt;
                recount(&mut self.attempts_by_status, Some(before), after);
            }
            None => {
                let status = attempt.status;
                let at = attempts.partition_point(|a| a.sequence_id <= attempt.sequence_id);
                attempts.insert(at, attempt);
                self.attempt_count += 1;
                recount(&mut self.attempts_by_status, None, status);
            }
        }
    }

    /// Returns whether a queue entry still stands for its rollout.
    pub(super) fn is_queued(&self, entry: &QueueEntry) -> bool {
        self.queued.get(&entry.rollout_id) == Some(&entry.ticket)
    }

    pub(super) fn put_session(&mut self, session: WorkerSession) {
        let worker_id = session.worker_id.clone();
        if let Some(old) = self.sessions.get(&worker_id)
            && let Some(deadline) = old.deadline
        {
            self.session_deadlines
                .remove(&(deadline, worker_id.clone()));
        }
        if let Some(deadline) = session.deadline {
            self.session_deadlines.insert((deadline, worker_id.clone()));
        }
        self.sessions.insert(worker_id, session);
    }

    /// Applies a committed write set.
    pub(super) fn apply(&mut self, writes: &mut WriteSet) {
        self.apply_agl1(&mut writes.agl1);
        if let Some(by) = writes.forget_requests.take() {
            self.forget_requests(by);
        }
        if let Some(before) = writes.forget_activity.take() {
            self.forget_activity(before);
        }
        for (_, request) in writes.requests.drain(..) {
            self.remember_request(request);
        }
        for (resources_id, update) in writes.resources.drain(..) {
            self.latest_resources = Some(resources_id.clone());
            self.resources.insert(resources_id, update);
        }
        for (_, write) in writes.rollouts.drain(..) {
            self.put_rollout(write);
        }
        for (_, attempt) in writes.attempts.drain(..) {
            self.put_attempt(attempt);
        }
        for (worker_id, worker) in writes.workers.drain(..) {
            self.workers.insert(worker_id, worker);
        }
        for (_, session) in writes.sessions.drain(..) {
            self.put_session(session);
        }
        for rollout_id in writes.unqueue.drain(..) {
            self.queued.remove(&rollout_id);
        }
        for (rollout_id, since) in writes.enqueue.drain(..) {
            if !self.queued.contains_key(&rollout_id) {
                self.next_ticket += 1;
                let ticket = self.next_ticket;
                self.queued.insert(rollout_id.clone(), ticket);
                self.queue.push_back(QueueEntry {
                    rollout_id,
                    since,
                    ticket,
                });
            }
        }
        // The head is always a queued entry, so that counts read it as is.
        while self
            .queue
            .front()
            .is_some_and(|entry| !self.is_queued(entry))
        {
            self.queue.pop_front();
        }
        self.apply_training(writes);
        for event in &mut writes.events {
            self.latest_event += 1;
            event.seq = self.latest_event;
            if self.events.len() == self.event_retention {
                self.events.pop_front();
            }
            self.events.push_back(event.clone());
        }
    }

    /// Forgets the request ids that expired at or before `by`.
    pub(super) fn forget_requests(&mut self, by: Timestamp) {
        while let Some(first) = self.request_expiries.first()
            && first.0 <= by
        {
            let (_, request_id) = self.request_expiries.pop_first().expect("not empty");
            self.requests.remove(&request_id);
        }
    }

    /// Remembers a request id, replacing what was remembered under it.
    pub(super) fn remember_request(&mut self, request: RememberedRequest) {
        if let Some(old) = self.requests.get(&request.request_id) {
            self.request_expiries
                .remove(&(old.expires_at, request.request_id.clone()));
        }
        self.request_expiries
            .insert((request.expires_at, request.request_id.clone()));
        self.requests.insert(request.request_id.clone(), request);
    }

    /// Deletes the spans of the given rollouts (planned by retention).
    pub(super) fn evict(&mut self, rollout_ids: Vec<String>) {
        let mut evicted = Eviction::default();
        for rollout_id in rollout_ids {
            let Some(entry) = self.spans.remove(&rollout_id) else {
                continue;
            };
            evicted.rollouts += 1;
            evicted.spans += entry.spans.len() as u64;
            evicted.bytes += entry.bytes;
            self.evicted.insert(rollout_id);
        }
        self.span_count -= evicted.spans;
        self.span_bytes -= evicted.bytes;
        self.evictions.add(evicted);
    }
}
