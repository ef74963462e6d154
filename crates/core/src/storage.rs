//! The storage port: what the engine needs from a backend. A backend stores
//! domain values and answers queries; it knows nothing of the lifecycle
//! rules, which live once in [`crate::engine`]. The backends live in
//! [`crate::store`].
//!
//! # Shape: aggregate reads, one write set
//! A transaction is a few *reads* followed by one [`WriteSet`] handed to
//! [`StoreTx::commit`]. The engine computes the whole change in memory (it
//! reads its own writes from the write set) and the backend applies it at
//! commit in as few statements as it can. The reads are aggregates, shaped
//! after what the rules consume: a rollout *with* its latest attempt
//! ([`StoreTx::rollouts`]), the head of the queue with the rollouts it
//! names ([`StoreTx::claim_queued`]), the rollouts the watchdog must look
//! at ([`StoreTx::due_rollouts`]), workers by id ([`StoreTx::workers`]).
//! On a database across the network, a dequeue is then about five round
//! trips instead of fourteen, whatever the number of rollouts it claims.
//!
//! This is restate's buffered writes (reads async, writes synchronous and
//! visible to the transaction's own reads, applied in one batch) with
//! nativelink's aggregate reads. It keeps GreptimeDB's "transaction as a
//! value" for the writes but not for the reads: a lifecycle step needs the
//! current state to decide, so the reads happen first, under row locks
//! ([`Access::Update`]), instead of as optimistic compare-and-set guards
//! that would turn every contended dequeue into a retry.
//!
//! Where this departs from the sketch in the architecture review, and why:
//! * Claims and aggregate reads are immediate and lock rows; only entity
//!   writes are buffered. A claim must remove its entries at once so that
//!   concurrent claims (`SKIP LOCKED`) pass over them, and the memory
//!   backend undoes such immediate work with an undo log when a transaction
//!   is dropped, instead of buffering it: the common path costs nothing.
//! * Event numbers are assigned by the backend at commit, not read ahead:
//!   on a shared database they come from a counter row taken last, so the
//!   only store-wide serialisation is that one row, held for one statement
//!   and a commit that does not wait for the disk (see the PostgreSQL
//!   backend's group commit).
//! * The watchdog's on-demand scan runs in the operation's transaction and
//!   commits on its own only when it found something due, so the common
//!   operation pays one query for it, not a transaction.
//!
//! Adding an entity kind (worker leases, append-only event records, a
//! model registry…) is local: a map in [`WriteSet`], a read method here if
//! the rules read it, and one apply step per backend (a multi-row upsert
//! for the SQL ones). Nothing else in the contract changes.
//!
//! # Contract
//! * [`Store::begin`] opens a transaction. Reads with [`Access::Update`]
//!   lock what they return until the transaction ends: two concurrent
//!   transactions never both change the same rollout (with its attempts) or
//!   worker, and two concurrent claims never return the same queue entry.
//!   Backends may serialise more than that (memory and SQLite serialise
//!   every transaction), never less.
//! * Dropping a transaction without committing discards everything it did,
//!   on every backend: claims, sequence ids, spans and the write set alike.
//!   The engine may fail a check after reading or buffering anything.
//! * The queue is a FIFO of rollout ids without duplicates.
//! * Span sequence counters are per rollout, start at 0 and only grow.
//! * Event sequence numbers are store-wide, gapless and in commit order:
//!   whoever reads event `n` can read every event before it. The history
//!   keeps at least the most recent events up to the backend's retention.
//! * Every query applies its [`crate::query`] filter and page exactly
//!   as the in-memory reference does (same default order, same tie order).
//! * The aggregate reads of [`crate::overview`] (created and ended
//!   counts, the latest ended rollouts, error spans, a rollout's place in
//!   the queue) cost what they return, not what the store holds:
//!   an index or an ordered structure finds them (counting the entries
//!   ahead of a queued rollout reads those entries).
//! * A transaction dropped without committing may have read writes of
//!   concurrent transactions that are not durable yet (a durable backend
//!   commits them in groups); [`StoreTx::commit`] returns only once
//!   everything the transaction read is durable. Whoever hands what a
//!   transaction read to a client commits it, even when it wrote nothing.
//! * Retention ([`StoreTx::evict_spans`]) deletes the spans of finished
//!   rollouts exactly as [`crate::retention`] decides, taking rollouts
//!   in the order they finished (no end time last), ties in creation order,
//!   and accounts each span with [`crate::retention::span_size`].
//! * Each worker has at most one session record ([`WorkerSession`]); a
//!   locked read of it ([`StoreTx::sessions`], [`StoreTx::due_sessions`],
//!   [`StoreTx::open_sessions`]) serialises every change of the worker's
//!   session, on every server. Session epochs
//!   ([`StoreTx::next_session_epoch`]) are store-wide unique and grow; a
//!   backend may skip values (a rolled-back transaction's).
//! * [`StoreTx::lock_names`] serialises the transactions that lock a
//!   common name, on every server.
//! * A remembered request id ([`RememberedRequest`]) is returned by
//!   [`StoreTx::remembered_request`] until a write set forgets it
//!   ([`WriteSet::forget_requests`]), expired or not: the engine decides
//!   what an expired one means.
//!
//! agent-lightning 1.x's records are one such addition: [`agl1`].

pub mod agl1;

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use indexmap::{IndexMap, IndexSet};

use super::error::StoreResult;
use super::events::{Event, EventPage};
use super::idempotency::RememberedRequest;
use super::model::{
    Attempt, Counts, ResourcesUpdate, Rollout, RolloutStatus, RolloutView, Span, Timestamp, Worker,
    WorkerSession,
};
use super::overview::ActivityCount;
use super::query::{Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter};
use super::retention::{Eviction, RetentionPolicy};

/// Events a backend retains by default for resuming subscribers.
pub const DEFAULT_EVENT_RETENTION: usize = 100_000;

/// A storage backend.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Returns the backend's name, reported by statistics.
    fn name(&self) -> &'static str;

    /// Opens a transaction.
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>>;

    /// Opens a transaction that only reads (queries, the event history,
    /// the counts): it need not be serialised with the writers, as long as
    /// it reads one consistent committed state (never a later event without
    /// the earlier ones) and its commit returns only once what it read is
    /// durable. By default, a [`Store::begin`] transaction.
    async fn begin_read(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        self.begin().await
    }

    /// Returns whether this server is the only one that uses the backend
    /// (SQLite holds its file exclusively): every session it records as open
    /// at start-up was then left by an earlier run of this server.
    fn exclusive(&self) -> bool {
        false
    }

    /// For a backend that other servers share: a stream that yields
    /// whenever another server may have committed events (a hint: some may
    /// be missed, and readers also poll). `None` when no other server
    /// writes the backend.
    async fn commit_hints(&self) -> StoreResult<Option<BoxStream<'static, ()>>> {
        Ok(None)
    }

    /// Cuts short the transactions running now, when the server's drain
    /// deadline has passed: each fails as the shutdown's
    /// ([`crate::error::StoreError::shutting_down`]) with nothing of
    /// it committed, so the drain is not held by a long transaction. Later
    /// transactions run normally. By default nothing is cut.
    fn interrupt(&self) {}

    /// Stops the backend's background work and closes its connections;
    /// returns once they are closed. Transactions begun afterwards fail.
    async fn close(&self) {}
}

/// Whether a read locks what it returns until the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A plain read: the rows may change before the transaction ends.
    Read,
    /// The rows are locked against concurrent changes: the transaction may
    /// write them back.
    Update,
}

/// What a due scan ([`StoreTx::due_rollouts`]) does with the due rollouts
/// that concurrent transactions hold (backends that serialise every
/// transaction never see one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Passes over them (they are due again on the next scan): the
    /// background timer, which must not queue behind other work.
    Skip,
    /// Waits for them, in rollout id order, and returns those still due
    /// once their holders are done: the scan of an operation, which must
    /// answer with every verdict due by its `now`.
    Wait,
}

/// One transaction of a backend. See the module docs for the contract; the
/// 1.x reads are in [`agl1::Agl1Reads`].
#[async_trait]
pub trait StoreTx: agl1::Agl1Reads + Send {
    /// Returns the existing rollouts among `rollout_ids`, each with its
    /// latest attempt, in the order of `rollout_ids` (duplicates once).
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<RolloutView>>;
    /// Returns matching rollouts with their latest attempts; default order is creation order.
    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>>;
    /// Removes up to `limit` entries from the queue's head and returns their
    /// rollouts (locked, with their latest attempts), head first. An entry
    /// whose rollout does not exist is removed and not returned. It comes
    /// back empty only when the queue was empty at some instant during the
    /// call: entries that concurrent transactions hold are waited for (a
    /// holder that rolls back leaves them here) while this transaction holds
    /// no claimed entry, and passed over once it does (they are being
    /// claimed).
    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>>;
    /// Returns, locked, up to `limit` rollouts whose watchdog deadline is
    /// before `now`, earliest deadline first, with their latest attempts;
    /// rollouts concurrent transactions hold are passed over or waited for,
    /// as `held` says. With [`Held::Wait`], an empty answer means that no
    /// rollout is due at `now` in what is committed once the holders are
    /// done.
    async fn due_rollouts(
        &mut self,
        now: Timestamp,
        limit: usize,
        held: Held,
    ) -> StoreResult<Vec<RolloutView>>;

    /// Returns a rollout's attempts in sequence order.
    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>>;
    /// Returns one attempt of a rollout.
    async fn attempt(&mut self, rollout_id: &str, attempt_id: &str)
    -> StoreResult<Option<Attempt>>;

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
    /// Returns matching snapshots; default order is creation order.
    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>>;

    /// Returns the existing workers among `worker_ids` (duplicates once).
    async fn workers(&mut self, worker_ids: &[&str], access: Access) -> StoreResult<Vec<Worker>>;
    /// Returns matching workers; default order is first-seen order.
    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>>;

    /// Returns the session records of the existing workers among
    /// `worker_ids`, in id order (duplicates once).
    async fn sessions(
        &mut self,
        worker_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<WorkerSession>>;
    /// Returns, locked, up to `limit` session records whose deadline is
    /// before `now`, earliest deadline first (ties in worker id order);
    /// records concurrent transactions hold are passed over.
    async fn due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>>;
    /// Returns, locked, the `open` session records in worker id order: all
    /// of them, or only those `server_id` holds.
    async fn open_sessions(&mut self, server_id: Option<&str>) -> StoreResult<Vec<WorkerSession>>;
    /// Returns a session epoch greater than every one returned before.
    async fn next_session_epoch(&mut self) -> StoreResult<u64>;
    /// Locks caller-chosen names (e.g. the ids of records to create) until
    /// the transaction ends: transactions locking a common name run one
    /// after the other, so a record created under a name no row holds yet
    /// is created once. A row lock cannot serve there (there is no row to
    /// lock); backends that serialise every transaction do nothing.
    async fn lock_names(&mut self, names: &[&str]) -> StoreResult<()>;
    /// Returns what is remembered of a client's request id.
    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>>;

    /// Returns entity counts, the counts per status and the time the queue's
    /// head entered the queue.
    async fn counts(&mut self) -> StoreResult<Counts>;

    /// Returns the per-minute activity counts of the minutes in
    /// `from..until` (see [`ActivityCount`]), minutes and activities
    /// without one left out.
    async fn activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>>;
    /// Returns up to `limit` rollouts of `status` that have an end time,
    /// with their latest attempts: the latest end time first, ties by
    /// rollout id, greatest first.
    async fn latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>>;
    /// Returns, for each of the (rollout id, attempt id) pairs, its last
    /// span with status ERROR (greatest sequence id, ties by arrival),
    /// in the order of `attempts`; attempts without one are left out.
    async fn error_spans(&mut self, attempts: &[(&str, &str)]) -> StoreResult<Vec<Arc<Span>>>;
    /// Returns up to `limit` attempts whose id is `attempt_id`, of any
    /// rollout, in (rollout id, attempt id) order.
    async fn attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>>;
    /// Returns up to `limit` (rollout id, attempt id) pairs with a span of
    /// trace `trace_id`, in that order. No index serves it: a scan of the
    /// spans, for a person's search, never a rule's read.
    async fn attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>>;
    /// Returns how many queue entries are ahead of the rollout's and when it
    /// entered the queue; `None` when it is not queued.
    async fn queue_place(&mut self, rollout_id: &str) -> StoreResult<Option<(u64, Timestamp)>>;

    /// Returns up to `limit` retained events with a sequence number above
    /// `after`, with the bounds of the retained history.
    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage>;

    /// Applies the write set and commits: assigns each of its events the
    /// next sequence number (gapless, in commit order) and returns once the
    /// transaction (and everything it read) is durable.
    async fn commit(self: Box<Self>, writes: &mut WriteSet) -> StoreResult<()>;

    /// Rolls the transaction back and returns once its locks are released.
    /// Dropping a transaction rolls it back too, but a backend across the
    /// network may release its locks a moment later.
    async fn rollback(self: Box<Self>) {}
}

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
/// [`StoreTx::commit`] in this order: the 1.x records
/// ([`agl1::Agl1Writes`]), request ids (forgotten, then remembered),
/// activity counts forgotten, resources, rollouts (with their activity
/// counts), attempts, workers, sessions, queue (removals, then appends),
/// events. The engine never forgets activity counts in a write set that
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
    pub agl1: agl1::Agl1Writes,
    /// Request ids that expired at or before this time are forgotten.
    pub forget_requests: Option<Timestamp>,
    /// The activity counts of minutes before this time are forgotten.
    pub forget_activity: Option<Timestamp>,
    /// Request ids remembered (inserted or replaced), keyed by id.
    pub requests: IndexMap<String, RememberedRequest>,
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
