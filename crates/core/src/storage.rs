//! The storage port: what the engine needs from a backend. A backend stores
//! domain values and answers queries; it knows nothing of the lifecycle
//! rules, which live once in [`crate::engine`]. The backends live in the
//! `lightning-store-backends` crate.
//!
//! # Roles
//! A transaction ([`StoreTx`]) plays six roles, each a trait of its own
//! module, with its contract written where it is declared:
//! * [`RuleReads`] ([`rule_reads`]): the reads the lifecycle rules decide
//!   on, locking what they return with [`Access::Update`];
//! * [`ImmediateWrites`] ([`immediate_writes`]): the seven writes that
//!   cannot wait for the write set (the queue claim, the span sequence
//!   counters, span inserts, retention's eviction, session epochs and name
//!   locks), each acting at once and undone with the transaction;
//! * the write set ([`WriteSet`], [`write_set`]), applied by
//!   [`StoreTx::commit`];
//! * [`Queries`] ([`queries`]) and [`ReadModel`] ([`read_model`]): the
//!   paged queries and event history clients read, and the aggregates of
//!   statistics and the console, which no rule reads;
//! * [`Agl1Reads`] ([`agl1`]): agent-lightning 1.x's reads, whose writes
//!   are part of the write set ([`Agl1Writes`]);
//! * [`TrainingReads`] ([`training`]): the rollouts' final rewards and the
//!   training summary's rows, whose changes are part of the write set.
//!
//! The conformance suite (`tests/integration/conformance/`) tests each role
//! on every backend.
//!
//! # Shape: aggregate reads, one write set
//! A transaction is a few *reads* followed by one [`WriteSet`] handed to
//! [`StoreTx::commit`]. The engine computes the whole change in memory (it
//! reads its own writes from the write set) and the backend applies it at
//! commit in as few statements as it can. The reads are aggregates, shaped
//! after what the rules consume: a rollout *with* its latest attempt
//! ([`RuleReads::rollouts`]), the head of the queue with the rollouts it
//! names ([`ImmediateWrites::claim_queued`]), the rollouts the watchdog must look
//! at ([`RuleReads::due_rollouts`]), workers by id ([`RuleReads::workers`]).
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
//!   on every backend: its immediate writes (see [`immediate_writes`] for
//!   how each backend undoes them) and the write set alike.
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
//! * Retention ([`ImmediateWrites::evict_spans`]) deletes the spans of finished
//!   rollouts exactly as [`crate::retention`] decides, taking rollouts
//!   in the order they finished (no end time last), ties in creation order,
//!   and accounts each span with [`crate::retention::span_size`].
//! * Each worker has at most one session record
//!   ([`WorkerSession`](crate::model::WorkerSession)); a
//!   locked read of it ([`RuleReads::sessions`], [`RuleReads::due_sessions`],
//!   [`RuleReads::open_sessions`]) serialises every change of the worker's
//!   session, on every server. Session epochs
//!   ([`ImmediateWrites::next_session_epoch`]) are store-wide unique and grow; a
//!   backend may skip values (a rolled-back transaction's).
//! * [`ImmediateWrites::lock_names`] serialises the transactions that lock a
//!   common name, on every server.
//! * A remembered request id
//!   ([`RememberedRequest`](crate::idempotency::RememberedRequest)) is returned by
//!   [`RuleReads::remembered_request`] until a write set forgets it
//!   ([`WriteSet::forget_requests`]), expired or not: the engine decides
//!   what an expired one means.
//!
//! agent-lightning 1.x's records are one such addition: [`agl1`].
//!
//! # Namespaces
//! Each namespace has a store of its own, which the backend's
//! [`Catalogue`] opens: the contract above holds within
//! one namespace's store, and nothing crosses between them.

pub mod agl1;
pub mod immediate_writes;
pub mod queries;
pub mod read_model;
pub mod rule_reads;
pub mod training;
pub mod write_set;

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

pub use self::agl1::{Agl1Reads, Agl1Writes};
pub use self::immediate_writes::ImmediateWrites;
pub use self::queries::Queries;
pub use self::read_model::ReadModel;
pub use self::rule_reads::{Access, Held, RuleReads};
pub use self::training::TrainingReads;
pub use self::write_set::{RolloutWrite, WriteSet};
use crate::error::{StoreError, StoreResult};
use crate::model::Timestamp;
use crate::namespace::{Namespace, NamespaceName, NamespaceSettings};

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

    /// Returns whether two read transactions side by side take less time
    /// than one reading the same: each runs on a connection of its own, and
    /// each of its statements sees a snapshot of its own anyway
    /// (PostgreSQL). By default not, and a read that needs several
    /// statements keeps them in one transaction, one snapshot (SQLite's
    /// readers run on the calling thread).
    fn parallel_reads(&self) -> bool {
        false
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

/// One transaction of a backend: its roles (see the module docs for the
/// contract) and the commit of its write set.
#[async_trait]
pub trait StoreTx:
    RuleReads + ImmediateWrites + Queries + ReadModel + Agl1Reads + TrainingReads + Send
{
    /// Applies the write set and commits: keeps the immediate writes,
    /// assigns each of the set's events the next sequence number (gapless,
    /// in commit order) and returns once the transaction (and everything it
    /// read) is durable.
    async fn commit(self: Box<Self>, writes: &mut WriteSet) -> StoreResult<()>;

    /// Rolls the transaction back and returns once its locks are released.
    /// Dropping a transaction rolls it back too, but a backend across the
    /// network may release its locks a moment later.
    async fn rollback(self: Box<Self>) {}
}

/// The namespaces of one backend: which exist, with their settings, and
/// the store that holds each one's data.
///
/// # Contract
/// * A namespace's store is a [`Store`] of its own: nothing written through
///   it is read through another's (queues, sequence ids, event numbers,
///   sessions and name locks are all per namespace), and the conformance
///   suite holds for each.
/// * The default namespace ([`crate::namespace::DEFAULT_NAMESPACE`], id 0)
///   always exists and holds what the backend held before namespaces: an
///   upgrade moves nothing. It cannot be deleted.
/// * Names are unique among the namespaces that exist; ids are never
///   reused, so a store opened for a deleted namespace never reads or
///   writes the data of a new one of the same name.
/// * [`Catalogue::delete`] takes effect at once on every server sharing the
///   backend: [`Catalogue::find`] no longer returns it. Its data goes with
///   [`Catalogue::purge`], which never holds up the other namespaces' calls
///   and may be run again after a crash ([`Catalogue::deleted`] lists what
///   is left to purge).
#[async_trait]
pub trait Catalogue: Send + Sync + 'static {
    /// Returns the namespaces that exist, the default one first, then by
    /// name.
    async fn list(&self) -> StoreResult<Vec<Namespace>>;

    /// Returns the default namespace (which always exists).
    async fn default_namespace(&self) -> StoreResult<Namespace> {
        self.find(&NamespaceName::default_namespace())
            .await?
            .ok_or_else(|| StoreError::Internal("the catalogue lacks the default namespace".into()))
    }

    /// Returns the namespace named `name`, if it exists.
    async fn find(&self, name: &NamespaceName) -> StoreResult<Option<Namespace>>;

    /// Creates the namespace `name`, empty, with `settings`; an existing
    /// name is refused ([`Namespace::already_exists`]).
    async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace>;

    /// Returns the store of `namespace` (the default namespace's is the
    /// store the backend was opened as). The caller keeps it while it
    /// serves the namespace and closes it ([`Store::close`]) when done.
    async fn open(&self, namespace: &Namespace) -> StoreResult<Arc<dyn Store>>;

    /// Returns the bytes `namespace`'s data takes in the backend (tables
    /// and indexes, or files), as the backend measures them.
    async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64>;

    /// Deletes the namespace `name` from the catalogue and returns what it
    /// was; its data stays until [`Catalogue::purge`]. The default
    /// namespace is refused (failed precondition), an unknown name is not
    /// found ([`Namespace::not_found`]).
    async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace>;

    /// Removes the data of a deleted namespace; running it again after it
    /// ended (or broke off) finishes what is left.
    async fn purge(&self, namespace: &Namespace) -> StoreResult<()>;

    /// Returns the deleted namespaces whose data is not purged yet.
    async fn deleted(&self) -> StoreResult<Vec<Namespace>>;
}
