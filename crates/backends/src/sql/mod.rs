//! The half of an SQL backend that does not depend on the database: every
//! [`StoreTx`] operation as SQL text plus row mapping ([`codec`]) and query
//! translation ([`query`]), written once in SQL that SQLite and PostgreSQL
//! both accept (`$n` parameters, `INSERT … ON CONFLICT`, `RETURNING`, text
//! and integer columns only). A backend supplies a [`Connection`]: how to
//! run a statement, read a cell, open its transaction for writing and commit
//! it, plus the few [`Dialect`] differences. Schemas live in the backend's
//! migrations; the tables and columns they must define are the ones used here.
//!
//! The shared pieces: [`statement`] (statements, bound values, rows),
//! [`dialect`], [`connection`] (what a backend supplies) and [`tx`] (the
//! transaction and its statement helpers). The storage port's roles are
//! implemented here, one `impl` per role, each method in the module of its
//! concern.
//!
//! By concern: [`reads`] holds the aggregate reads and the queries,
//! [`claim`] the claim of the queue's head,
//! [`spans`] the span operations and retention, [`sessions`] the worker
//! session records, [`apply`] the write set's application at commit
//! (multi-row upserts, and on a shared database one statement for the
//! whole set), [`requests`] the remembered request ids, [`agl1`]
//! agent-lightning 1.x's records, [`overview`] the read model's aggregates,
//! [`training`] the rollouts' final rewards and the training summary.
//!
//! Counts for statistics come from a `counters` table: the entity rows
//! (`rollouts`, `attempts`, `resources`, `workers`, `queued`, and
//! `rollouts.<status>`, `attempts.<status>` per status), the span totals and
//! the eviction totals. The span and eviction totals are maintained here,
//! once per batch. On SQLite the schema's triggers keep the entity counts;
//! on a shared database (PostgreSQL) the statements that change the rows
//! count them (the write set's upserts from the statuses before and after,
//! in the same statement; the claim and the deletes the queue entries they
//! remove), and only deleted rollouts and attempts and first-seen workers
//! and resources are counted by triggers. There a counter is several rows
//! (shards) summed when read, so that concurrent transactions do not queue
//! on one row.

mod agl1;
mod apply;
mod batch;
mod claim;
pub mod codec;
mod connection;
mod dialect;
mod floor;
mod overview;
pub mod query;
mod reads;
mod requests;
mod sessions;
mod spans;
mod statement;
mod training;
mod tx;

use std::sync::Arc;

use async_trait::async_trait;

pub use self::connection::{Cache, Connection};
pub use self::dialect::{Dialect, EVENT_BOUNDS, EVENTS_AFTER};
pub use self::floor::DeadlineFloor;
pub use self::statement::{Arg, Row, Statement};
pub use self::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::EventPage;
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::{
    Attempt, Counts, ResourcesUpdate, RolloutStatus, RolloutView, Span, Timestamp, Worker,
    WorkerSession,
};
use lightning_store_core::overview::ActivityCount;
use lightning_store_core::query::{
    Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter,
};
use lightning_store_core::retention::{Eviction, RetentionPolicy};
use lightning_store_core::storage::{
    Access, Held, ImmediateWrites, Queries, ReadModel, RuleReads, StoreTx, WriteSet,
};

/// The reads the rules need, each in the module of its concern.
#[async_trait]
impl<C: Connection> RuleReads for SqlTx<C> {
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<RolloutView>> {
        self.read_rollouts(rollout_ids, access).await
    }

    async fn due_rollouts(
        &mut self,
        now: Timestamp,
        limit: usize,
        held: Held,
    ) -> StoreResult<Vec<RolloutView>> {
        self.read_due(now, limit, held).await
    }

    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        self.read_attempts(rollout_id).await
    }

    async fn attempt(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
    ) -> StoreResult<Option<Attempt>> {
        self.read_attempt(rollout_id, attempt_id).await
    }

    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        self.read_spans_evicted(rollout_id).await
    }

    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>> {
        self.read_resources(resources_id).await
    }

    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        self.read_latest_resources().await
    }

    async fn workers(&mut self, worker_ids: &[&str], access: Access) -> StoreResult<Vec<Worker>> {
        self.read_workers(worker_ids, access).await
    }

    async fn sessions(
        &mut self,
        worker_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<WorkerSession>> {
        self.read_sessions(worker_ids, access).await
    }

    async fn due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>> {
        self.read_due_sessions(now, limit).await
    }

    async fn open_sessions(&mut self, server_id: Option<&str>) -> StoreResult<Vec<WorkerSession>> {
        self.read_open_sessions(server_id).await
    }

    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>> {
        self.read_remembered_request(request_id).await
    }
}

/// The queries and the event history ([`reads`], [`spans`]).
#[async_trait]
impl<C: Connection> Queries for SqlTx<C> {
    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        self.select_rollouts(filter, page).await
    }

    async fn ended_rollout_ids(
        &mut self,
        filter: &RolloutFilter,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.select_ended_rollout_ids(filter, limit).await
    }

    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        self.select_spans(filter, page).await
    }

    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        self.select_resources(filter, page).await
    }

    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        self.select_workers(filter, page).await
    }

    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        self.read_events(after, limit).await
    }
}

/// The read model ([`overview`]).
#[async_trait]
impl<C: Connection> ReadModel for SqlTx<C> {
    async fn counts(&mut self) -> StoreResult<Counts> {
        self.read_counts().await
    }

    async fn activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        self.read_activity(from, until).await
    }

    async fn latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>> {
        self.read_latest_ended(status, limit).await
    }

    async fn error_spans(&mut self, attempts: &[(&str, &str)]) -> StoreResult<Vec<Arc<Span>>> {
        self.read_error_spans(attempts).await
    }

    async fn attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.read_attempts_with_trace(trace_id, limit).await
    }

    async fn attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>> {
        self.read_attempts_with_id(attempt_id, limit).await
    }

    async fn queue_place(&mut self, rollout_id: &str) -> StoreResult<Option<(u64, Timestamp)>> {
        self.read_queue_place(rollout_id).await
    }
}

/// The immediate writes: statements of the database transaction, rolled
/// back with it.
#[async_trait]
impl<C: Connection> ImmediateWrites for SqlTx<C> {
    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        self.claim_head(limit).await
    }

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        self.allocate_sequence(rollout_id, count).await
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        self.raise_sequence(rollout_id, at_least).await
    }

    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        self.store_spans(spans).await
    }

    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        self.evict(policy, now, max_rollouts).await
    }

    async fn next_session_epoch(&mut self) -> StoreResult<u64> {
        self.take_session_epoch().await
    }

    async fn lock_names(&mut self, names: &[&str]) -> StoreResult<()> {
        let Some(sql) = C::DIALECT.lock_names else {
            return Ok(());
        };
        if names.is_empty() {
            return Ok(());
        }
        let statement =
            Statement::new(sql).bind(Arg::Texts(names.iter().map(|&n| Some(n.into())).collect()));
        self.read(statement).await.map(drop)
    }
}

/// The commit of the write set ([`apply`]).
#[async_trait]
impl<C: Connection> StoreTx for SqlTx<C> {
    async fn commit(mut self: Box<Self>, writes: &mut WriteSet) -> StoreResult<()> {
        let earliest_deadline = writes.rollouts.values().filter_map(|w| w.deadline).min();
        let numbering = self.apply(writes).await?;
        let numbered = numbering.is_some() && !writes.events.is_empty();
        let floor = self.floor.clone();
        let rows = self.conn.commit(numbering).await;
        // Once committed, the deadlines are visible to every scan: a scan
        // that began before must not raise the floor above them.
        if let Some(deadline) = earliest_deadline {
            floor.lower(deadline.0);
        }
        let rows = rows?;
        if numbered {
            let last = match rows.first() {
                Some(row) => {
                    u64::try_from(row.int(0)?).map_err(|e| codec::corrupt("event counter", e))?
                }
                None => return Err(codec::corrupt("event counter", "no row")),
            };
            apply::number_events(&mut writes.events, last);
        }
        Ok(())
    }

    async fn rollback(self: Box<Self>) {
        self.conn.rollback().await;
    }
}

/// Explains a failed schema migration, with `explain` for the database's own
/// errors. A database that a newer lightning-store migrated further than this
/// binary knows names both versions, so an operator rolling back sees why.
pub(crate) fn migration_failure(
    error: sqlx::migrate::MigrateError,
    migrator: &sqlx::migrate::Migrator,
    explain: impl Fn(&sqlx::Error) -> String,
) -> String {
    use sqlx::migrate::MigrateError;
    match error {
        MigrateError::VersionMissing(version) => {
            let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
            format!(
                "it was written by a newer lightning-store: its schema is at migration {version}, \
                 and this lightning-store {} knows migrations up to {known} (upgrade this \
                 binary, or restore a backup taken before the upgrade)",
                env!("CARGO_PKG_VERSION")
            )
        }
        MigrateError::Execute(e) => explain(&e),
        other => other.to_string(),
    }
}
