//! The half of an SQL backend that does not depend on the database: every
//! [`StoreTx`] operation as SQL text plus row mapping ([`codec`]) and query
//! translation ([`query`]), written once in SQL that SQLite and PostgreSQL
//! both accept (`$n` parameters, `INSERT … ON CONFLICT`, `RETURNING`, text
//! and integer columns only). A backend supplies a [`Connection`]: how to
//! run a statement, read a cell, open its transaction for writing and commit
//! it, plus the few [`Dialect`] differences. Schemas live in the backend's
//! migrations; the tables and columns they must define are the ones used here.
//!
//! By concern: [`reads`] holds the aggregate reads and the queries,
//! [`claim`] the claim of the queue's head,
//! [`spans`] the span operations and retention, [`sessions`] the worker
//! session records, [`apply`] the write set's application at commit
//! (multi-row upserts, and on a shared database one statement for the
//! whole set), [`requests`] the remembered request ids, [`agl1`]
//! agent-lightning 1.x's records, [`overview`] the read model's aggregates.
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
mod floor;
mod overview;
pub mod query;
mod reads;
mod requests;
mod sessions;
mod spans;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

pub use self::floor::DeadlineFloor;
use self::query::Builder;
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
use lightning_store_core::storage::{Access, Held, StoreTx, WriteSet};

/// A value bound to a statement parameter. NULLs carry their type:
/// PostgreSQL types every parameter. Arrays are bound only on a shared
/// database (PostgreSQL); SQLite has none.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    NullInt,
    NullText,
    Int(i64),
    Text(Cow<'a, str>),
    /// A column of integers, for a shared database's `unnest`.
    Ints(Vec<Option<i64>>),
    /// A column of texts, for a shared database's `unnest`: borrowed where
    /// the caller holds them (the database encodes them at bind time).
    Texts(Vec<Option<Cow<'a, str>>>),
}

/// A parameter type: its NULL.
pub trait Nullable {
    /// The NULL of this type.
    const NULL: Arg<'static>;
}

impl Nullable for i64 {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for u64 {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for Timestamp {
    const NULL: Arg<'static> = Arg::NullInt;
}

impl Nullable for &str {
    const NULL: Arg<'static> = Arg::NullText;
}

impl Nullable for String {
    const NULL: Arg<'static> = Arg::NullText;
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<u64> for Arg<'_> {
    fn from(value: u64) -> Self {
        Arg::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

impl From<Timestamp> for Arg<'_> {
    fn from(value: Timestamp) -> Self {
        Arg::Int(value.0)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(value))
    }
}

impl From<String> for Arg<'_> {
    fn from(value: String) -> Self {
        Arg::Text(Cow::Owned(value))
    }
}

impl<'a, T: Into<Arg<'a>> + Nullable> From<Option<T>> for Arg<'a> {
    fn from(value: Option<T>) -> Self {
        value.map_or(T::NULL, Into::into)
    }
}

/// SQL text with its parameters (`$1`, `$2`, … in bind order).
#[derive(Debug, Clone)]
pub struct Statement<'a> {
    pub sql: Cow<'static, str>,
    pub args: Vec<Arg<'a>>,
}

impl<'a> Statement<'a> {
    /// Returns a statement without parameters bound yet.
    pub fn new(sql: &'static str) -> Self {
        Self {
            sql: Cow::Borrowed(sql),
            args: Vec::new(),
        }
    }

    /// Binds the next parameter.
    pub fn bind(mut self, value: impl Into<Arg<'a>>) -> Self {
        self.args.push(value.into());
        self
    }
}

/// One result row; cells are read by position.
pub trait Row {
    /// Returns an integer cell (`None`: NULL).
    fn opt_int(&self, index: usize) -> StoreResult<Option<i64>>;
    /// Returns a text cell (`None`: NULL).
    fn opt_text(&self, index: usize) -> StoreResult<Option<String>>;

    /// Returns an integer cell that must not be NULL.
    fn int(&self, index: usize) -> StoreResult<i64> {
        self.opt_int(index)?
            .ok_or_else(|| codec::corrupt("row", format_args!("column {index} is NULL")))
    }

    /// Returns a text cell that must not be NULL.
    fn text(&self, index: usize) -> StoreResult<String> {
        self.opt_text(index)?
            .ok_or_else(|| codec::corrupt("row", format_args!("column {index} is NULL")))
    }
}

/// What differs between the SQL dialects this module writes.
#[derive(Debug)]
pub struct Dialect {
    /// Returns a condition true when the text expression `haystack`
    /// contains the text expression `needle` (case-sensitively).
    pub contains: fn(haystack: &str, needle: &str) -> String,
    /// Returns a text expression that sorts by code point.
    pub binary_text: fn(expression: &str) -> String,
    /// The most parameters one statement may bind.
    pub max_params: usize,
    /// Several servers write the database at once (PostgreSQL): reads lock
    /// the rows they return (`FOR UPDATE`, `SKIP LOCKED` on the queue head
    /// and the due deadlines), a write set is sent as one statement of
    /// data-modifying `WITH` clauses, counters are sharded, and event
    /// numbers come from a counter row (see [`apply`]). Otherwise the
    /// database has one writer that serialises transactions (SQLite).
    pub shared: bool,
    /// A statement whose one row holds a new session epoch, greater than
    /// every one before it.
    pub next_session_epoch: &'static str,
    /// A statement that locks the names in its one parameter (an array of
    /// texts) until the transaction ends ([`StoreTx::lock_names`]); `None`
    /// where one writer serialises every transaction.
    pub lock_names: Option<&'static str>,
    /// A statement returning the `(seq, time, change)` of the events after
    /// number `$1`, at most `$2` of them, in order.
    pub events_after: &'static str,
    /// A statement whose one row holds the numbers of the oldest and the
    /// latest event kept (NULLs when there is none).
    pub event_bounds: &'static str,
}

/// [`Dialect::events_after`] where `events` holds one row per event.
pub const EVENTS_AFTER: &str =
    "SELECT seq, time, change FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";

/// [`Dialect::event_bounds`] where `events` holds one row per event.
pub const EVENT_BOUNDS: &str = "SELECT MIN(seq), MAX(seq) FROM events";

/// Values a single-writer backend remembers across transactions (nothing
/// else writes its database), saving a query on most transactions. `None`
/// means unknown; a backend forgets everything whenever it rolls back.
#[derive(Debug, Default)]
pub struct Cache {
    /// The sequence number of the last event.
    pub latest_event: Option<u64>,
}

impl Cache {
    /// Forgets every value.
    pub fn clear(&mut self) {
        *self = Cache::default();
    }
}

/// One transaction's use of a database connection.
#[async_trait]
pub trait Connection: Send {
    type Row: Row + Send + Sync;

    /// The dialect of the database.
    const DIALECT: &'static Dialect;

    /// Readies the transaction for its first write; called before every
    /// write (the later calls are cheap).
    async fn begin_write(&mut self) -> StoreResult<()>;
    /// Runs a statement that returns nothing. The connection may defer it
    /// to its next [`Connection::fetch`] or commit, which then report its
    /// failure.
    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<()>;
    /// Runs every deferred statement, then this one, and returns its rows.
    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<Self::Row>>;
    /// Returns the cache of a single-writer backend (`None` for a database
    /// that others may write).
    fn cache(&mut self) -> Option<&mut Cache>;
    /// Runs `last` (a statement without parameters), if given, and
    /// commits the transaction (see [`StoreTx::commit`]), in one round trip
    /// on a database across the network: the locks `last` takes are held
    /// for no round trip. Returns the rows of `last`.
    async fn commit(self, last: Option<String>) -> StoreResult<Vec<Self::Row>>;
    /// Rolls the transaction back (see [`StoreTx::rollback`]).
    async fn rollback(self);
}

/// A [`StoreTx`] over a SQL [`Connection`].
pub struct SqlTx<C> {
    conn: C,
    /// Events retained for resuming subscribers.
    event_retention: u64,
    /// The store's floor of the watchdog deadlines.
    floor: Arc<DeadlineFloor>,
    /// Whether this transaction claimed queue entries (a claim then no
    /// longer waits for entries that others hold; see [`claim`]).
    holds_claims: bool,
}

impl<C: Connection> SqlTx<C> {
    /// Returns a transaction over `conn` that keeps at least the last
    /// `event_retention` events and skips due scans below `floor`.
    pub fn new(conn: C, event_retention: u64, floor: Arc<DeadlineFloor>) -> Self {
        Self {
            conn,
            event_retention: event_retention.max(1),
            floor,
            holds_claims: false,
        }
    }

    async fn read(&mut self, statement: Statement<'_>) -> StoreResult<Vec<C::Row>> {
        self.conn.fetch(statement).await
    }

    async fn read_one(&mut self, statement: Statement<'_>) -> StoreResult<Option<C::Row>> {
        Ok(self.read(statement).await?.into_iter().next())
    }

    async fn read_int(&mut self, statement: Statement<'_>) -> StoreResult<i64> {
        match self.read_one(statement).await? {
            Some(row) => row.int(0),
            None => Err(codec::corrupt("aggregate", "no row")),
        }
    }

    async fn write(&mut self, statement: Statement<'_>) -> StoreResult<()> {
        self.conn.begin_write().await?;
        self.conn.execute(statement).await
    }

    async fn write_returning(&mut self, statement: Statement<'_>) -> StoreResult<Vec<C::Row>> {
        self.conn.begin_write().await?;
        self.conn.fetch(statement).await
    }

    /// Adds to named counters.
    async fn add_counters(&mut self, deltas: &[(&'static str, i64)]) -> StoreResult<()> {
        let mut b = Builder::new(C::DIALECT);
        if C::DIALECT.shared {
            // The schema's `bump_counter` adds to this connection's shard.
            let calls: Vec<String> = deltas
                .iter()
                .map(|&(name, delta)| {
                    format!(
                        "bump_counter({}, CAST({} AS BIGINT))",
                        b.arg(name),
                        b.arg(delta)
                    )
                })
                .collect();
            b.push(&format!("SELECT {}", calls.join(", ")));
            return self.write(b.finish()).await;
        }
        b.push("UPDATE counters SET value = value + CASE name");
        let mut names = Vec::with_capacity(deltas.len());
        for &(name, delta) in deltas {
            let name_arg = b.arg(name);
            let delta_arg = b.arg(delta);
            b.push(&format!(
                " WHEN {name_arg} THEN CAST({delta_arg} AS BIGINT)"
            ));
            names.push(name_arg);
        }
        b.push(&format!(" ELSE 0 END WHERE name IN ({})", names.join(", ")));
        self.write(b.finish()).await
    }

    /// Returns the page of `select` (which ends before its `ORDER BY`) and
    /// the number of rows `count` finds.
    async fn paged<T>(
        &mut self,
        select: Statement<'_>,
        count: Statement<'_>,
        page: &Page,
        decode: impl Fn(&C::Row) -> StoreResult<T>,
    ) -> StoreResult<Paged<T>> {
        let items = self
            .read(select)
            .await?
            .iter()
            .map(decode)
            .collect::<StoreResult<Vec<T>>>()?;
        let total = self.read_int(count).await?;
        Ok(Paged {
            items,
            limit: page.limit,
            offset: page.offset,
            total: usize::try_from(total).unwrap_or(usize::MAX),
        })
    }
}

/// The operations, each in the module of its concern.
#[async_trait]
impl<C: Connection> StoreTx for SqlTx<C> {
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<RolloutView>> {
        self.read_rollouts(rollout_ids, access).await
    }

    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        self.select_rollouts(filter, page).await
    }

    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        self.claim_head(limit).await
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

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        self.allocate_sequence(rollout_id, count).await
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        self.raise_sequence(rollout_id, at_least).await
    }

    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        self.store_spans(spans).await
    }

    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        self.select_spans(filter, page).await
    }

    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        self.read_spans_evicted(rollout_id).await
    }

    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        self.evict(policy, now, max_rollouts).await
    }

    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>> {
        self.read_resources(resources_id).await
    }

    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        self.read_latest_resources().await
    }

    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        self.select_resources(filter, page).await
    }

    async fn workers(&mut self, worker_ids: &[&str], access: Access) -> StoreResult<Vec<Worker>> {
        self.read_workers(worker_ids, access).await
    }

    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        self.select_workers(filter, page).await
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

    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>> {
        self.read_remembered_request(request_id).await
    }

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

    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        self.read_events(after, limit).await
    }

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
