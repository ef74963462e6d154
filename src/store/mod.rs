//! Persistence behind one trait. A backend stores domain values and answers
//! queries; it knows nothing of the lifecycle rules, which live once in
//! [`crate::core::engine`].
//!
//! # Contract
//! * [`Store::begin`] opens a transaction. Everything read and written
//!   through one [`StoreTx`] is isolated from other transactions, and
//!   [`StoreTx::commit`] makes all of its writes visible (and, for durable
//!   backends, durable) at once. Transactions are serialised as far as the
//!   engine can observe: two concurrent dequeues never claim the same rollout.
//! * Dropping a transaction without committing discards its writes. The
//!   engine performs every check before its first write, so an operation
//!   that fails validation never reaches a write; backends without undo (the
//!   in-memory one) rely on this.
//! * The queue is a FIFO of rollout ids without duplicates.
//! * Span sequence counters are per rollout, start at 0 and only grow.
//! * Event sequence numbers are store-wide and gapless; the history keeps at
//!   least the most recent events up to the backend's retention.
//! * Every query applies its [`crate::core::query`] filter and page exactly
//!   as the in-memory reference does (same default order, same tie order).
//! * A transaction dropped without committing may have read writes of
//!   concurrent transactions that are not durable yet (a durable backend
//!   commits them in groups); [`StoreTx::commit`] returns only once
//!   everything the transaction read is durable. Whoever hands what a
//!   transaction read to a client commits it, even when it wrote nothing.
//! * Retention ([`StoreTx::evict_spans`]) deletes the spans of finished
//!   rollouts exactly as [`crate::core::retention`] decides, taking rollouts
//!   in the order they finished (no end time last), ties in creation order,
//!   and accounts each span with [`crate::core::retention::span_size`].

pub mod memory;
pub mod postgres;
mod sql;
pub mod sqlite;

/// Events a backend retains by default for resuming subscribers.
pub const DEFAULT_EVENT_RETENTION: usize = 100_000;

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::core::error::StoreResult;
use crate::core::events::{Event, EventPage};
use crate::core::model::{
    Attempt, Counts, ResourcesUpdate, Rollout, RolloutView, Span, Timestamp, Worker,
};
use crate::core::query::{Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter};
use crate::core::retention::{Eviction, RetentionPolicy};

/// A storage backend.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Returns the backend's name, reported by statistics.
    fn name(&self) -> &'static str;

    /// Opens a transaction.
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>>;

    /// Opens a transaction that only reads the event history or the
    /// counts: it need not be serialised with the writers, as long as it
    /// never sees a later event without the earlier ones. By default, a
    /// [`Store::begin`] transaction.
    async fn begin_read(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        self.begin().await
    }

    /// For a backend that other servers share: a stream that yields
    /// whenever another server may have committed events (a hint: some may
    /// be missed, and readers also poll). `None` when no other server
    /// writes the backend.
    async fn commit_hints(&self) -> StoreResult<Option<BoxStream<'static, ()>>> {
        Ok(None)
    }
}

/// One transaction of a backend. See the module docs for the contract.
#[async_trait]
pub trait StoreTx: Send {
    /// Returns a rollout.
    async fn rollout(&mut self, rollout_id: &str) -> StoreResult<Option<Rollout>>;
    /// Inserts a rollout or replaces the one with the same id.
    async fn put_rollout(&mut self, rollout: &Rollout) -> StoreResult<()>;
    /// Returns matching rollouts with their latest attempts; default order is creation order.
    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>>;

    /// Appends a rollout id to the queue's tail unless it is already queued,
    /// recording `now` as the time it entered the queue; returns whether it
    /// was appended.
    async fn enqueue(&mut self, rollout_id: &str, now: Timestamp) -> StoreResult<bool>;
    /// Removes and returns the id at the queue's head.
    async fn pop_queue(&mut self) -> StoreResult<Option<String>>;

    /// Returns a rollout's attempts in sequence order.
    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>>;
    /// Returns a rollout's attempt with the highest sequence id.
    async fn latest_attempt(&mut self, rollout_id: &str) -> StoreResult<Option<Attempt>>;
    /// Returns one attempt of a rollout.
    async fn attempt(&mut self, rollout_id: &str, attempt_id: &str)
    -> StoreResult<Option<Attempt>>;
    /// Inserts an attempt or replaces the one with the same ids.
    async fn put_attempt(&mut self, attempt: &Attempt) -> StoreResult<()>;

    /// Records when the watchdog must next look at a rollout (`None`: never).
    async fn set_watchdog_deadline(
        &mut self,
        rollout_id: &str,
        deadline: Option<Timestamp>,
    ) -> StoreResult<()>;
    /// Returns the rollouts whose watchdog deadline is before `now`.
    async fn due_rollouts(&mut self, now: Timestamp) -> StoreResult<Vec<String>>;

    /// Advances a rollout's span sequence counter by `count` and returns the
    /// first of the `count` values handed out.
    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64>;
    /// Raises a rollout's span sequence counter to at least `at_least`.
    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()>;
    /// Stores spans in order, skipping any whose (rollout, attempt, span id)
    /// is already stored; returns, per span, whether it was stored.
    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>>;
    /// Returns the matching spans of the filter's rollout. The filter's
    /// attempt is `All` or `Id` (the engine resolves `Latest`); default order
    /// is sequence id, then arrival.
    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>>;
    /// Returns whether retention has deleted spans of a rollout.
    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool>;
    /// Deletes the spans of up to `max_rollouts` finished rollouts that
    /// `policy` lets go at `now`, and marks those rollouts evicted.
    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction>;

    /// Returns a resources snapshot.
    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>>;
    /// Returns the most recently written resources snapshot.
    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>>;
    /// Inserts or replaces a snapshot and makes it the latest.
    async fn put_resources(&mut self, update: &ResourcesUpdate) -> StoreResult<()>;
    /// Returns matching snapshots; default order is creation order.
    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>>;

    /// Returns a worker.
    async fn worker(&mut self, worker_id: &str) -> StoreResult<Option<Worker>>;
    /// Inserts or replaces a worker.
    async fn put_worker(&mut self, worker: &Worker) -> StoreResult<()>;
    /// Returns matching workers; default order is first-seen order.
    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>>;

    /// Returns entity counts, the counts per status and the time the queue's
    /// head entered the queue.
    async fn counts(&mut self) -> StoreResult<Counts>;

    /// Appends events to the history, assigning each the next sequence
    /// number (gapless, in commit order).
    async fn append_events(&mut self, events: &mut [Event]) -> StoreResult<()>;
    /// Returns up to `limit` retained events with a sequence number above
    /// `after`, with the bounds of the retained history.
    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage>;

    /// Commits the transaction.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}
