//! The in-memory backend: every transaction holds one lock over the whole
//! state, so transactions are trivially serialised. Nothing survives a restart.
//!
//! The write set is applied at commit, under the lock, in one go. The few
//! operations that act at once (claims, sequence ids, span inserts) keep an
//! undo log, which a transaction dropped without committing replays: a
//! dropped transaction leaves the state exactly as it found it.
//!
//! One file over 600 lines on purpose: the state, its undo log and the one
//! `StoreTx` implementation over them are one unit (every operation reads
//! and writes the same locked state); agent-lightning 1.x's records are in
//! [`agl1`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use async_trait::async_trait;
use hashbrown::hash_table::{Entry, HashTable};
use indexmap::IndexMap;
use tokio::sync::{Mutex, MutexGuard};

use lightning_store_core::error::StoreResult;
use lightning_store_core::events::{Event, EventPage};
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::{
    Attempt, AttemptStatus, Counts, ResourcesUpdate, Rollout, RolloutStatus, RolloutView,
    SessionState, Span, Timestamp, Worker, WorkerSession,
};
use lightning_store_core::overview::{Activity, ActivityCount};
use lightning_store_core::query::{
    AttemptSelector, Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter,
};
use lightning_store_core::retention::{self, Eviction, RetentionPolicy};
use lightning_store_core::storage::{Access, Held, RolloutWrite, Store, StoreTx, WriteSet};

pub use lightning_store_core::storage::DEFAULT_EVENT_RETENTION;

/// agent-lightning 1.x's records.
mod agl1;
/// The aggregate reads of the read model.
mod overview;

/// The in-memory backend.
pub struct MemoryStore {
    state: Mutex<State>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// Returns an empty store retaining [`DEFAULT_EVENT_RETENTION`] events.
    pub fn new() -> Self {
        Self::with_event_retention(DEFAULT_EVENT_RETENTION)
    }

    /// Returns an empty store retaining the last `events` events.
    pub fn with_event_retention(events: usize) -> Self {
        Self {
            state: Mutex::new(State {
                event_retention: events.max(1),
                ..State::default()
            }),
        }
    }
}

/// The spans of one rollout, shared with whoever received or read them.
#[derive(Default)]
struct RolloutSpans {
    /// In arrival order.
    spans: Vec<Arc<Span>>,
    /// Positions in `spans` keyed by (attempt id, span id), for duplicate
    /// detection without a copy of the ids.
    index: HashTable<usize>,
    /// Sum of the spans' sizes.
    bytes: u64,
}

impl RolloutSpans {
    /// Appends `span` unless a span with its (attempt id, span id) is
    /// stored; returns its accounted size when it was appended.
    fn insert(&mut self, hasher: &RandomState, span: &Arc<Span>) -> Option<u64> {
        let key = |s: &Span| hasher.hash_one((&s.attempt_id, &s.span_id));
        let spans = &self.spans;
        let same = |&at: &usize| {
            spans[at].attempt_id == span.attempt_id && spans[at].span_id == span.span_id
        };
        match self.index.entry(key(span), same, |&at| key(&spans[at])) {
            Entry::Occupied(_) => None,
            Entry::Vacant(slot) => {
                slot.insert(self.spans.len());
                let size = retention::span_size(span);
                self.bytes += size;
                self.spans.push(span.clone());
                Some(size)
            }
        }
    }

    /// Removes the span appended last (undoing [`RolloutSpans::insert`]);
    /// returns its accounted size.
    fn remove_last(&mut self, hasher: &RandomState) -> Option<u64> {
        let span = self.spans.pop()?;
        let at = self.spans.len();
        let hash = hasher.hash_one((&span.attempt_id, &span.span_id));
        if let Ok(entry) = self.index.find_entry(hash, |&pos| pos == at) {
            entry.remove();
        }
        let size = retention::span_size(&span);
        self.bytes -= size;
        Some(size)
    }
}

#[derive(Default)]
struct State {
    /// Rollouts in creation order.
    rollouts: IndexMap<String, Rollout>,
    /// Attempts per rollout in sequence order.
    attempts: HashMap<String, Vec<Attempt>>,
    attempt_count: u64,
    /// Queue entries, head first. An entry whose ticket is no longer its
    /// rollout's in `queued` was taken out of the queue (and is skipped):
    /// removing it from the middle would cost a shift of the entries behind.
    queue: VecDeque<QueueEntry>,
    /// The ticket of each queued rollout's entry.
    queued: HashMap<String, u64>,
    next_ticket: u64,
    rollouts_by_status: BTreeMap<RolloutStatus, u64>,
    /// Rollouts that have an end time ([`overview`]).
    ended: overview::EndedIndex,
    /// Rollouts created and ended per minute ([`overview`]).
    activity: overview::ActivityCounts,
    attempts_by_status: BTreeMap<AttemptStatus, u64>,
    deadlines: BTreeSet<(Timestamp, String)>,
    deadline_of: HashMap<String, Timestamp>,
    sequence_ids: HashMap<String, i64>,
    spans: HashMap<String, RolloutSpans>,
    /// Hashes the span keys of every [`RolloutSpans`].
    span_hasher: RandomState,
    span_count: u64,
    span_bytes: u64,
    /// Rollouts whose spans retention deleted.
    evicted: HashSet<String>,
    evictions: Eviction,
    /// Resources snapshots in creation order.
    resources: IndexMap<String, ResourcesUpdate>,
    latest_resources: Option<String>,
    /// Workers in first-seen order.
    workers: IndexMap<String, Worker>,
    /// Session records by worker id, with an index of their deadlines.
    sessions: HashMap<String, WorkerSession>,
    session_deadlines: BTreeSet<(Timestamp, String)>,
    last_session_epoch: u64,
    /// Remembered request ids, with an index of their expiries.
    requests: HashMap<String, RememberedRequest>,
    request_expiries: BTreeSet<(Timestamp, String)>,
    /// The most recent events, oldest first.
    events: VecDeque<Event>,
    event_retention: usize,
    latest_event: u64,
    /// agent-lightning 1.x's records.
    agl1: agl1::Agl1State,
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn exclusive(&self) -> bool {
        true
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        Ok(Box::new(MemoryTx {
            state: self.state.lock().await,
            undo: Undo::default(),
            evict: Vec::new(),
        }))
    }
}

/// One entry of the queue.
#[derive(Debug, Clone)]
struct QueueEntry {
    rollout_id: String,
    /// When the rollout entered the queue.
    since: Timestamp,
    ticket: u64,
}

/// What a transaction did at once, to be undone if it is dropped.
#[derive(Default)]
struct Undo {
    /// Queue entries popped, head first, each with whether it was claimed
    /// (the others had been taken out of the queue and were passed over).
    claimed: Vec<(QueueEntry, bool)>,
    /// The last session epoch before the transaction took one.
    session_epoch: Option<u64>,
    /// Span sequence counters before their first change (`None`: absent).
    sequence_ids: HashMap<String, Option<i64>>,
    /// Rollouts whose spans got a span appended, once per span, in order.
    spans: Vec<String>,
}

struct MemoryTx<'a> {
    state: MutexGuard<'a, State>,
    undo: Undo,
    /// Rollouts whose spans retention deletes at commit.
    evict: Vec<String>,
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
fn recount<S: Ord>(counts: &mut BTreeMap<S, u64>, before: Option<S>, after: S) {
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
fn page_of<T: lightning_store_core::query::Sortable + Clone>(
    items: Vec<&T>,
    page: &Page,
) -> Paged<T> {
    page.apply(items).map(T::clone)
}

impl State {
    /// Returns a rollout with its latest attempt.
    fn view(&self, rollout_id: &str) -> Option<RolloutView> {
        let rollout = self.rollouts.get(rollout_id)?;
        Some(RolloutView {
            rollout: rollout.clone(),
            attempt: self.latest_attempt(rollout_id).cloned(),
        })
    }

    fn latest_attempt(&self, rollout_id: &str) -> Option<&Attempt> {
        self.attempts_of(rollout_id).last()
    }

    /// Returns a rollout's attempts in sequence order.
    fn attempts_of(&self, rollout_id: &str) -> &[Attempt] {
        self.attempts.get(rollout_id).map_or(&[], Vec::as_slice)
    }

    fn put_rollout(&mut self, write: RolloutWrite) {
        let RolloutWrite {
            rollout, deadline, ..
        } = write;
        let rollout_id = rollout.rollout_id.clone();
        let status = rollout.status;
        let ended = overview::ended_key(&rollout);
        let activity = Activity::of(&rollout);
        // Replacing keeps the rollout's place in creation order.
        let previous = self.rollouts.insert(rollout_id.clone(), rollout);
        let before = previous.as_ref().map(|p| p.status);
        let ended_before = previous.as_ref().and_then(overview::ended_key);
        self.recount_activity(previous.as_ref().map(Activity::of), Some(activity));
        recount(&mut self.rollouts_by_status, before, status);
        self.reindex_ended(ended_before, ended);
        self.set_deadline(rollout_id, deadline);
    }

    fn set_deadline(&mut self, rollout_id: String, deadline: Option<Timestamp>) {
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

    fn put_attempt(&mut self, attempt: Attempt) {
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
    fn is_queued(&self, entry: &QueueEntry) -> bool {
        self.queued.get(&entry.rollout_id) == Some(&entry.ticket)
    }

    fn put_session(&mut self, session: WorkerSession) {
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
    fn apply(&mut self, writes: &mut WriteSet) {
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
    fn forget_requests(&mut self, by: Timestamp) {
        while let Some(first) = self.request_expiries.first()
            && first.0 <= by
        {
            let (_, request_id) = self.request_expiries.pop_first().expect("not empty");
            self.requests.remove(&request_id);
        }
    }

    /// Remembers a request id, replacing what was remembered under it.
    fn remember_request(&mut self, request: RememberedRequest) {
        if let Some(old) = self.requests.get(&request.request_id) {
            self.request_expiries
                .remove(&(old.expires_at, request.request_id.clone()));
        }
        self.request_expiries
            .insert((request.expires_at, request.request_id.clone()));
        self.requests.insert(request.request_id.clone(), request);
    }

    /// Deletes the spans of the given rollouts (planned by retention).
    fn evict(&mut self, rollout_ids: Vec<String>) {
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

#[async_trait]
impl StoreTx for MemoryTx<'_> {
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        _access: Access,
    ) -> StoreResult<Vec<RolloutView>> {
        let mut seen = HashSet::new();
        Ok(rollout_ids
            .iter()
            .filter(|id| seen.insert(**id))
            .filter_map(|id| self.state.view(id))
            .collect())
    }

    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        let state = &*self.state;
        let matching = state
            .rollouts
            .values()
            .filter(|r| filter.matches(r, || state.attempts_of(&r.rollout_id)))
            .collect();
        Ok(page.apply(matching).map(|rollout: &Rollout| RolloutView {
            rollout: rollout.clone(),
            attempt: state.latest_attempt(&rollout.rollout_id).cloned(),
        }))
    }

    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        let mut claimed = Vec::new();
        while claimed.len() < limit {
            let Some(entry) = self.state.queue.pop_front() else {
                break;
            };
            let queued = self.state.is_queued(&entry);
            if queued {
                self.state.queued.remove(&entry.rollout_id);
                claimed.extend(self.state.view(&entry.rollout_id));
            }
            self.undo.claimed.push((entry, queued));
        }
        Ok(claimed)
    }

    async fn due_rollouts(
        &mut self,
        now: Timestamp,
        limit: usize,
        // Transactions are serialised: no other one holds a rollout.
        _held: Held,
    ) -> StoreResult<Vec<RolloutView>> {
        let state = &*self.state;
        Ok(state
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline < now)
            .take(limit)
            .filter_map(|(_, rollout_id)| state.view(rollout_id))
            .collect())
    }

    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        Ok(self
            .state
            .attempts
            .get(rollout_id)
            .cloned()
            .unwrap_or_default())
    }

    async fn attempt(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
    ) -> StoreResult<Option<Attempt>> {
        Ok(self.state.attempts.get(rollout_id).and_then(|attempts| {
            attempts
                .iter()
                .rev()
                .find(|a| a.attempt_id == attempt_id)
                .cloned()
        }))
    }

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        let counter = self.counter(rollout_id);
        let first = *counter + 1;
        *counter += i64::try_from(count).unwrap_or(i64::MAX);
        Ok(first)
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        let counter = self.counter(rollout_id);
        *counter = (*counter).max(at_least);
        Ok(())
    }

    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        let state = &mut *self.state;
        let mut stored = Vec::with_capacity(spans.len());
        for span in spans {
            if !state.spans.contains_key(&span.rollout_id) {
                state
                    .spans
                    .insert(span.rollout_id.clone(), RolloutSpans::default());
            }
            let entry = state.spans.get_mut(&span.rollout_id).expect("inserted");
            let size = entry.insert(&state.span_hasher, span);
            if let Some(size) = size {
                state.span_count += 1;
                state.span_bytes += size;
                self.undo.spans.push(span.rollout_id.clone());
            }
            stored.push(size.is_some());
        }
        Ok(stored)
    }

    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        let Some(entry) = self.state.spans.get(&filter.rollout_id) else {
            return Ok(page.apply(Vec::new()));
        };
        let mut matching: Vec<&Arc<Span>> = entry
            .spans
            .iter()
            .filter(|span| match &filter.attempt {
                AttemptSelector::Id(id) => &span.attempt_id == id,
                AttemptSelector::All | AttemptSelector::Latest => true,
            })
            .filter(|span| filter.matches_text(span))
            .collect();
        // Default order: sequence id, ties in arrival order (the sort is stable).
        matching.sort_by_key(|span| span.sequence_id);
        Ok(page_of(matching, page))
    }

    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        Ok(self.state.evicted.contains(rollout_id))
    }

    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        let state = &*self.state;
        // Finished rollouts holding spans, in the order they finished; the
        // sort is stable, so ties stay in creation order.
        let mut candidates: Vec<(Option<Timestamp>, &str)> = state
            .rollouts
            .values()
            .filter(|r| r.status.is_finished())
            .filter(|r| {
                state
                    .spans
                    .get(&r.rollout_id)
                    .is_some_and(|s| !s.spans.is_empty())
            })
            .map(|r| (r.end_time, r.rollout_id.as_str()))
            .collect();
        candidates.sort_by_key(|&(end_time, _)| (end_time.is_none(), end_time));
        let mut evicted = Eviction {
            done: true,
            ..Eviction::default()
        };
        let mut stored_bytes = state.span_bytes;
        for (end_time, rollout_id) in candidates {
            if !policy.evicts(end_time, stored_bytes, now) {
                break;
            }
            if self.evict.len() == max_rollouts {
                evicted.done = false;
                break;
            }
            let entry = &state.spans[rollout_id];
            stored_bytes -= entry.bytes;
            evicted.rollouts += 1;
            evicted.spans += entry.spans.len() as u64;
            evicted.bytes += entry.bytes;
            self.evict.push(rollout_id.to_owned());
        }
        Ok(evicted)
    }

    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>> {
        Ok(self.state.resources.get(resources_id).cloned())
    }

    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        let state = &*self.state;
        Ok(state
            .latest_resources
            .as_ref()
            .and_then(|id| state.resources.get(id))
            .cloned())
    }

    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        let matching = self
            .state
            .resources
            .values()
            .filter(|r| filter.matches(r))
            .collect();
        Ok(page_of(matching, page))
    }

    async fn workers(&mut self, worker_ids: &[&str], _access: Access) -> StoreResult<Vec<Worker>> {
        let mut seen = HashSet::new();
        Ok(worker_ids
            .iter()
            .filter(|id| seen.insert(**id))
            .filter_map(|id| self.state.workers.get(*id).cloned())
            .collect())
    }

    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        let matching = self
            .state
            .workers
            .values()
            .filter(|w| filter.matches(w))
            .collect();
        Ok(page_of(matching, page))
    }

    async fn sessions(
        &mut self,
        worker_ids: &[&str],
        _access: Access,
    ) -> StoreResult<Vec<WorkerSession>> {
        let mut ids: Vec<&str> = worker_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids
            .into_iter()
            .filter_map(|id| self.state.sessions.get(id).cloned())
            .collect())
    }

    async fn due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>> {
        let state = &*self.state;
        Ok(state
            .session_deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline < now)
            .take(limit)
            .filter_map(|(_, worker_id)| state.sessions.get(worker_id).cloned())
            .collect())
    }

    async fn open_sessions(&mut self, server_id: Option<&str>) -> StoreResult<Vec<WorkerSession>> {
        let mut open: Vec<WorkerSession> = self
            .state
            .sessions
            .values()
            .filter(|s| s.state == SessionState::Open)
            .filter(|s| server_id.is_none_or(|id| s.server_id == id))
            .cloned()
            .collect();
        open.sort_unstable_by(|a, b| a.worker_id.cmp(&b.worker_id));
        Ok(open)
    }

    async fn next_session_epoch(&mut self) -> StoreResult<u64> {
        let state = &mut *self.state;
        self.undo
            .session_epoch
            .get_or_insert(state.last_session_epoch);
        state.last_session_epoch += 1;
        Ok(state.last_session_epoch)
    }

    async fn lock_names(&mut self, _names: &[&str]) -> StoreResult<()> {
        // Every transaction holds the whole state.
        Ok(())
    }

    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>> {
        Ok(self.state.requests.get(request_id).cloned())
    }

    async fn counts(&mut self) -> StoreResult<Counts> {
        let state = &*self.state;
        Ok(Counts {
            rollouts: state.rollouts.len() as u64,
            attempts: state.attempt_count,
            spans: state.span_count,
            resources: state.resources.len() as u64,
            workers: state.workers.len() as u64,
            queued: state.queued.len() as u64,
            rollouts_by_status: state.rollouts_by_status.clone(),
            attempts_by_status: state.attempts_by_status.clone(),
            oldest_queued_time: state.queue.front().map(|entry| entry.since),
            oldest_queued_rollout_id: state.queue.front().map(|entry| entry.rollout_id.clone()),
            span_bytes: state.span_bytes,
            evicted_rollouts: state.evictions.rollouts,
            evicted_spans: state.evictions.spans,
            evicted_span_bytes: state.evictions.bytes,
        })
    }

    async fn activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        Ok(self.state.activity(from, until))
    }

    async fn latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>> {
        Ok(self.state.latest_ended(status, limit))
    }

    async fn error_spans(&mut self, attempts: &[(&str, &str)]) -> StoreResult<Vec<Arc<Span>>> {
        Ok(self.state.error_spans(attempts))
    }

    async fn attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        Ok(self.state.attempts_with_trace(trace_id, limit))
    }

    async fn attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>> {
        Ok(self.state.attempts_with_id(attempt_id, limit))
    }

    async fn queue_place(&mut self, rollout_id: &str) -> StoreResult<Option<(u64, Timestamp)>> {
        Ok(self.state.queue_place(rollout_id))
    }

    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        let state = &*self.state;
        let oldest = state
            .events
            .front()
            .map_or(state.latest_event + 1, |e| e.seq);
        let skip =
            usize::try_from(after.saturating_add(1).saturating_sub(oldest)).unwrap_or(usize::MAX);
        Ok(EventPage {
            events: state
                .events
                .iter()
                .skip(skip)
                .take(limit)
                .cloned()
                .collect(),
            oldest,
            latest: state.latest_event,
        })
    }

    async fn commit(mut self: Box<Self>, writes: &mut WriteSet) -> StoreResult<()> {
        let evict = std::mem::take(&mut self.evict);
        self.state.evict(evict);
        self.state.apply(writes);
        // Committed: nothing is undone.
        self.undo = Undo::default();
        Ok(())
    }
}

impl MemoryTx<'_> {
    /// Returns a rollout's span sequence counter, noting its value for undo.
    fn counter(&mut self, rollout_id: &str) -> &mut i64 {
        let state = &mut *self.state;
        if !self.undo.sequence_ids.contains_key(rollout_id) {
            let before = state.sequence_ids.get(rollout_id).copied();
            self.undo.sequence_ids.insert(rollout_id.to_owned(), before);
        }
        state.sequence_ids.entry(rollout_id.to_owned()).or_default()
    }
}
