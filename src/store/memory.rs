//! The in-memory backend: every transaction holds one lock over the whole
//! state, so transactions are trivially serialised. Nothing survives a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use async_trait::async_trait;
use hashbrown::hash_table::{Entry, HashTable};
use indexmap::IndexMap;
use tokio::sync::{Mutex, MutexGuard};

use super::{Store, StoreTx};
use crate::core::error::StoreResult;
use crate::core::events::{Event, EventPage};
use crate::core::model::{
    Attempt, AttemptStatus, Counts, ResourcesUpdate, Rollout, RolloutStatus, RolloutView, Span,
    Timestamp, Worker,
};
use crate::core::query::{
    AttemptSelector, Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter,
};
use crate::core::retention::{self, Eviction, RetentionPolicy};

pub use super::DEFAULT_EVENT_RETENTION;

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
}

#[derive(Default)]
struct State {
    /// Rollouts in creation order.
    rollouts: IndexMap<String, Rollout>,
    /// Attempts per rollout in sequence order.
    attempts: HashMap<String, Vec<Attempt>>,
    attempt_count: u64,
    /// Queued rollout ids with the time each entered the queue, head first.
    queue: VecDeque<(String, Timestamp)>,
    queued: HashSet<String>,
    rollouts_by_status: BTreeMap<RolloutStatus, u64>,
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
    /// The most recent events, oldest first.
    events: VecDeque<Event>,
    event_retention: usize,
    latest_event: u64,
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        Ok(Box::new(MemoryTx {
            state: self.state.lock().await,
        }))
    }
}

struct MemoryTx<'a> {
    state: MutexGuard<'a, State>,
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
fn page_of<T: crate::core::query::Sortable + Clone>(items: Vec<&T>, page: &Page) -> Paged<T> {
    page.apply(items).map(T::clone)
}

#[async_trait]
impl StoreTx for MemoryTx<'_> {
    async fn rollout(&mut self, rollout_id: &str) -> StoreResult<Option<Rollout>> {
        Ok(self.state.rollouts.get(rollout_id).cloned())
    }

    async fn put_rollout(&mut self, rollout: &Rollout) -> StoreResult<()> {
        let state = &mut *self.state;
        let before = match state.rollouts.get_mut(&rollout.rollout_id) {
            Some(existing) => {
                let before = existing.status;
                existing.clone_from(rollout);
                Some(before)
            }
            None => {
                state
                    .rollouts
                    .insert(rollout.rollout_id.clone(), rollout.clone());
                None
            }
        };
        recount(&mut state.rollouts_by_status, before, rollout.status);
        Ok(())
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
            .filter(|r| filter.matches(r))
            .collect();
        Ok(page.apply(matching).map(|rollout: &Rollout| RolloutView {
            rollout: rollout.clone(),
            attempt: state
                .attempts
                .get(&rollout.rollout_id)
                .and_then(|a| a.last())
                .cloned(),
        }))
    }

    async fn enqueue(&mut self, rollout_id: &str, now: Timestamp) -> StoreResult<bool> {
        if !self.state.queued.insert(rollout_id.to_owned()) {
            return Ok(false);
        }
        self.state.queue.push_back((rollout_id.to_owned(), now));
        Ok(true)
    }

    async fn pop_queue(&mut self) -> StoreResult<Option<String>> {
        let head = self
            .state
            .queue
            .pop_front()
            .map(|(rollout_id, _)| rollout_id);
        if let Some(rollout_id) = &head {
            self.state.queued.remove(rollout_id);
        }
        Ok(head)
    }

    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        Ok(self
            .state
            .attempts
            .get(rollout_id)
            .cloned()
            .unwrap_or_default())
    }

    async fn latest_attempt(&mut self, rollout_id: &str) -> StoreResult<Option<Attempt>> {
        Ok(self
            .state
            .attempts
            .get(rollout_id)
            .and_then(|a| a.last())
            .cloned())
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

    async fn put_attempt(&mut self, attempt: &Attempt) -> StoreResult<()> {
        let state = &mut *self.state;
        let attempts = state
            .attempts
            .entry(attempt.rollout_id.clone())
            .or_default();
        match attempts
            .iter_mut()
            .rev()
            .find(|a| a.attempt_id == attempt.attempt_id)
        {
            Some(existing) => {
                let before = existing.status;
                existing.clone_from(attempt);
                recount(&mut state.attempts_by_status, Some(before), attempt.status);
            }
            None => {
                let at = attempts.partition_point(|a| a.sequence_id <= attempt.sequence_id);
                attempts.insert(at, attempt.clone());
                state.attempt_count += 1;
                recount(&mut state.attempts_by_status, None, attempt.status);
            }
        }
        Ok(())
    }

    async fn set_watchdog_deadline(
        &mut self,
        rollout_id: &str,
        deadline: Option<Timestamp>,
    ) -> StoreResult<()> {
        let state = &mut *self.state;
        if state.deadline_of.get(rollout_id) == deadline.as_ref() {
            return Ok(());
        }
        if let Some(old) = state.deadline_of.remove(rollout_id) {
            state.deadlines.remove(&(old, rollout_id.to_owned()));
        }
        if let Some(deadline) = deadline {
            state.deadline_of.insert(rollout_id.to_owned(), deadline);
            state.deadlines.insert((deadline, rollout_id.to_owned()));
        }
        Ok(())
    }

    async fn due_rollouts(&mut self, now: Timestamp) -> StoreResult<Vec<String>> {
        Ok(self
            .state
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline < now)
            .map(|(_, rollout_id)| rollout_id.clone())
            .collect())
    }

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        let counter = self
            .state
            .sequence_ids
            .entry(rollout_id.to_owned())
            .or_default();
        let first = *counter + 1;
        *counter += i64::try_from(count).unwrap_or(i64::MAX);
        Ok(first)
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        let counter = self
            .state
            .sequence_ids
            .entry(rollout_id.to_owned())
            .or_default();
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
        let state = &mut *self.state;
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
        let mut due = Vec::new();
        let mut stored_bytes = state.span_bytes;
        for (end_time, rollout_id) in candidates {
            if !policy.evicts(end_time, stored_bytes, now) {
                break;
            }
            if due.len() == max_rollouts {
                evicted.done = false;
                break;
            }
            stored_bytes -= state.spans[rollout_id].bytes;
            due.push(rollout_id.to_owned());
        }
        for rollout_id in due {
            let Some(entry) = state.spans.remove(&rollout_id) else {
                continue;
            };
            evicted.rollouts += 1;
            evicted.spans += entry.spans.len() as u64;
            evicted.bytes += entry.bytes;
            state.evicted.insert(rollout_id);
        }
        state.span_count -= evicted.spans;
        state.span_bytes -= evicted.bytes;
        state.evictions.add(evicted);
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

    async fn put_resources(&mut self, update: &ResourcesUpdate) -> StoreResult<()> {
        self.state
            .resources
            .insert(update.resources_id.clone(), update.clone());
        self.state.latest_resources = Some(update.resources_id.clone());
        Ok(())
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

    async fn worker(&mut self, worker_id: &str) -> StoreResult<Option<Worker>> {
        Ok(self.state.workers.get(worker_id).cloned())
    }

    async fn put_worker(&mut self, worker: &Worker) -> StoreResult<()> {
        self.state
            .workers
            .insert(worker.worker_id.clone(), worker.clone());
        Ok(())
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

    async fn counts(&mut self) -> StoreResult<Counts> {
        let state = &*self.state;
        Ok(Counts {
            rollouts: state.rollouts.len() as u64,
            attempts: state.attempt_count,
            spans: state.span_count,
            resources: state.resources.len() as u64,
            workers: state.workers.len() as u64,
            queued: state.queue.len() as u64,
            rollouts_by_status: state.rollouts_by_status.clone(),
            attempts_by_status: state.attempts_by_status.clone(),
            oldest_queued_time: state.queue.front().map(|(_, since)| *since),
            span_bytes: state.span_bytes,
            evicted_rollouts: state.evictions.rollouts,
            evicted_spans: state.evictions.spans,
            evicted_span_bytes: state.evictions.bytes,
        })
    }

    async fn append_events(&mut self, events: &mut [Event]) -> StoreResult<()> {
        let state = &mut *self.state;
        for event in events {
            state.latest_event += 1;
            event.seq = state.latest_event;
            if state.events.len() == state.event_retention {
                state.events.pop_front();
            }
            state.events.push_back(event.clone());
        }
        Ok(())
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

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        Ok(())
    }
}
