//! The writes that cannot wait for the write set: each acts on the store at
//! once, inside the transaction, because its effect must be seen before the
//! commit (by this transaction's next reads, by the client's answer, or by
//! concurrent transactions that must pass over or queue behind it).
//!
//! What they share:
//! * **At once.** Each is done (or, for [`ImmediateWrites::evict_spans`] on
//!   the memory backend, decided) when it returns; later reads of the same
//!   transaction see it, other transactions do not before the commit.
//! * **Undone with the transaction.** A transaction rolled back or dropped
//!   without committing leaves no trace of them. On the SQL backends
//!   (SQLite, PostgreSQL) they are statements of the database's transaction,
//!   which rolls them back; the memory backend, whose transaction holds the
//!   whole state, records what each changed in an undo log that it replays
//!   when the transaction is dropped (and clears when it commits). The one
//!   exception is said where it is: a session epoch taken on PostgreSQL is
//!   never handed out again.
//! * **Kept by the commit**, before the write set is applied, in the same
//!   database transaction: they become visible together with it.
//!
//! The conformance suite checks each contract on every backend
//! (`tests/integration/conformance/immediate_writes.rs`).

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::{RolloutView, Span, Timestamp};
use crate::retention::{Eviction, RetentionPolicy};

/// The writes a transaction makes at once, outside its write set.
#[async_trait]
pub trait ImmediateWrites: Send {
    /// Removes up to `limit` entries from the queue's head and returns their
    /// rollouts (locked, with their latest attempts), head first. An entry
    /// whose rollout does not exist is removed and not returned. It comes
    /// back empty only when the queue was empty at some instant during the
    /// call: entries that concurrent transactions hold are waited for (a
    /// holder that rolls back leaves them here) while this transaction holds
    /// no claimed entry, and passed over once it does (they are being
    /// claimed).
    ///
    /// *At once:* the entries leave the queue (and the queued count) when it
    /// returns. *Rollback:* the entries are back at the head, in their order
    /// and with the time each entered the queue (SQL: the `DELETE` is rolled
    /// back; memory: the undo log pushes them back). *Commit:* they stay
    /// removed; the claimed rollouts' new state comes with the write set.
    /// *Why not in the write set:* two concurrent claims must never take the
    /// same entry, and a claim must not wait behind another for the whole of
    /// its transaction: removing the entry at once under its row lock lets a
    /// concurrent claim pass over it (`SKIP LOCKED`).
    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>>;

    /// Advances a rollout's span sequence counter by `count` and returns the
    /// first of the `count` values handed out (the counter starts at 0).
    ///
    /// *At once:* a later allocation or raise in the same transaction starts
    /// after these values. *Rollback:* the counter is back at its value
    /// before the transaction (SQL: rolled back; memory: the undo log keeps
    /// each counter's value before its first change). *Commit:* kept.
    /// *Why not in the write set:* the values are handed to the spans and
    /// the client before the commit, and concurrent allocations for one
    /// rollout must not hand out the same values: the counter's row lock
    /// serialises them.
    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64>;
    /// Raises a rollout's span sequence counter to at least `at_least` (a
    /// span that came with its own sequence id); never lowers it.
    ///
    /// *At once, rollback, commit:* as
    /// [`ImmediateWrites::allocate_sequence_ids`]. *Why not in the write
    /// set:* a later allocation in the same transaction, or in a concurrent
    /// one, must continue above it.
    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()>;

    /// Stores spans in order, skipping any whose (rollout, attempt, span id)
    /// is already stored (also by an earlier span of the same call); returns,
    /// per span, whether it was stored.
    ///
    /// *At once:* the stored spans are returned by the transaction's span
    /// queries and counted (spans, span bytes). *Rollback:* none of them is
    /// stored (SQL: rolled back; memory: the undo log removes the spans it
    /// appended, last first, with their counts). *Commit:* kept.
    /// *Why not in the write set:* whether a span is a duplicate must be
    /// decided against what concurrent transactions store (the span's
    /// unique key), the answer needs it, and spans are the bulk of the data:
    /// they go to their table once instead of being held by the engine until
    /// the commit.
    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>>;

    /// Deletes the spans of up to `max_rollouts` finished rollouts that
    /// `policy` lets go at `now`, and marks those rollouts evicted. Retention
    /// deletes the spans of finished rollouts exactly as
    /// [`crate::retention`] decides, taking rollouts in the order they
    /// finished (no end time last), ties in creation order, and accounts each
    /// span with [`crate::retention::span_size`]. Returns what it deletes;
    /// `done` is false when more rollouts are due than `max_rollouts`.
    ///
    /// *At once:* the rollouts are chosen from what is stored when it is
    /// called; the SQL backends delete their spans then, the memory backend
    /// (whose transaction holds the whole state, so no other transaction can
    /// tell) at the commit: the transaction must not read the evicted spans
    /// afterwards. *Rollback:* nothing is deleted or marked. *Commit:* the
    /// spans are gone, [`super::RuleReads::spans_evicted`] is true for the
    /// rollouts, and the counts move from stored to evicted. *Why not in the
    /// write set:* the choice reads the stored span sizes of every finished
    /// rollout, which only the backend holds (the engine never loads the
    /// spans), and the deletion must match the sizes the choice read.
    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction>;

    /// Returns a session epoch greater than every one returned before, on
    /// every server: session epochs are store-wide unique and grow.
    ///
    /// *At once:* a second call in the same transaction returns a greater
    /// epoch. *Rollback:* SQLite rolls its counter row back and the memory
    /// backend's undo log restores the last epoch, so the value may be
    /// handed out again (no committed state holds it); PostgreSQL takes it
    /// from a sequence, which never goes back: the value is skipped.
    /// *Commit:* kept. *Why not in the write set:* the epoch is written into
    /// the session record the write set carries, so it must be known, and
    /// unique across servers, before the commit.
    async fn next_session_epoch(&mut self) -> StoreResult<u64>;

    /// Locks caller-chosen names (e.g. the ids of records to create) until
    /// the transaction ends: transactions locking a common name run one
    /// after the other, on every server, so a record created under a name
    /// no row holds yet is created once. A row lock cannot serve there
    /// (there is no row to lock).
    ///
    /// *At once:* it returns once it holds the locks (PostgreSQL:
    /// transaction-scoped advisory locks, taken in hash order; backends that
    /// serialise every transaction, memory and SQLite, do nothing). It
    /// writes nothing. *Rollback and commit:* both release the locks.
    /// *Why not in the write set:* a lock serialises only the reads made
    /// after it, so it must be taken before them.
    async fn lock_names(&mut self, names: &[&str]) -> StoreResult<()>;
}
