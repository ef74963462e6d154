//! The half of an SQL backend that does not depend on the database: every
//! [`StoreTx`] operation as SQL text plus row mapping ([`codec`]) and query
//! translation ([`query`]), written once in SQL that SQLite and PostgreSQL
//! both accept (`$n` parameters, `INSERT … ON CONFLICT`, `RETURNING`, text
//! and integer columns only). A backend supplies a [`Connection`]: how to
//! run a statement, read a cell, open its transaction for writing and commit
//! it, plus the few [`Dialect`] differences. Schemas live in the backend's
//! migrations; the tables and columns they must define are the ones used here.
//!
//! Counts for statistics come from a `counters` table. The schema's triggers
//! keep the entity rows (`rollouts`, `attempts`, `resources`, `workers`,
//! `queued`, and `rollouts.<status>`, `attempts.<status>` per status) exact; span totals are maintained here, once per batch, and so
//! are the eviction totals.

pub mod codec;
pub mod query;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;

use self::codec::{
    attempt_columns, resources_columns, rollout_columns, span_columns, worker_columns,
};
use self::query::{Builder, RESOURCES_SORT, ROLLOUT_SORT, SPAN_SORT, WORKER_SORT};
use super::StoreTx;
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

/// A value bound to a statement parameter. NULLs carry their type:
/// PostgreSQL types every parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    NullInt,
    NullText,
    Int(i64),
    Text(Cow<'a, str>),
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
}

/// Values a single-writer backend remembers across transactions (nothing
/// else writes its database), saving a query on most transactions. `None`
/// means unknown; a backend forgets everything whenever it rolls back.
#[derive(Debug, Default)]
pub struct Cache {
    /// The sequence number of the last event.
    pub latest_event: Option<u64>,
    /// No watchdog deadline is earlier than this.
    pub deadline_floor: Option<i64>,
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
    /// Tells the connection that the transaction recorded events (a shared
    /// database announces them to the other servers at commit).
    fn events_appended(&mut self) {}
    /// Commits the transaction (see [`StoreTx::commit`]).
    async fn commit(self) -> StoreResult<()>;
}

/// A [`StoreTx`] over a SQL [`Connection`].
pub struct SqlTx<C> {
    conn: C,
    /// Events retained for resuming subscribers.
    event_retention: u64,
}

impl<C: Connection> SqlTx<C> {
    /// Returns a transaction over `conn` that keeps at least the last
    /// `event_retention` events.
    pub fn new(conn: C, event_retention: u64) -> Self {
        Self {
            conn,
            event_retention: event_retention.max(1),
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

    /// Adds to named rows of the `counters` table.
    async fn add_counters(&mut self, deltas: &[(&'static str, i64)]) -> StoreResult<()> {
        let mut b = Builder::new(C::DIALECT);
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

fn rollout_condition<'a>(b: &mut Builder<'a>, filter: &'a RolloutFilter) -> String {
    let status = filter
        .status_in
        .as_ref()
        .map(|s| b.one_of("r.status", s.iter().map(|s| s.as_str())));
    let ids = filter
        .rollout_id_in
        .as_ref()
        .map(|ids| b.one_of("r.rollout_id", ids.iter().map(String::as_str)));
    let contains = filter
        .rollout_id_contains
        .as_deref()
        .map(|part| b.contains("r.rollout_id", part));
    Builder::combine(filter.logic, vec![status, ids, contains])
}

fn span_condition<'a>(b: &mut Builder<'a>, filter: &'a SpanFilter) -> String {
    let mut condition = format!("rollout_id = {}", b.arg(filter.rollout_id.as_str()));
    if let AttemptSelector::Id(attempt_id) = &filter.attempt {
        condition.push_str(&format!(" AND attempt_id = {}", b.arg(attempt_id.as_str())));
    }
    let mut text = Vec::with_capacity(8);
    text.extend(b.text_match("trace_id", &filter.trace_id));
    text.extend(b.text_match("span_id", &filter.span_id));
    text.extend(b.text_match("parent_id", &filter.parent_id));
    text.extend(b.text_match("name", &filter.name));
    format!("{condition} AND {}", Builder::combine(filter.logic, text))
}

fn worker_condition<'a>(b: &mut Builder<'a>, filter: &'a WorkerFilter) -> String {
    let status = filter
        .status_in
        .as_ref()
        .map(|s| b.one_of("status", s.iter().map(|s| s.as_str())));
    let contains = filter
        .worker_id_contains
        .as_deref()
        .map(|part| b.contains("worker_id", part));
    Builder::combine(filter.logic, vec![status, contains])
}

fn resources_condition<'a>(b: &mut Builder<'a>, filter: &'a ResourcesFilter) -> String {
    let id = filter
        .resources_id
        .as_deref()
        .map(|id| b.equals("resources_id", id));
    let contains = filter
        .resources_id_contains
        .as_deref()
        .map(|part| b.contains("resources_id", part));
    Builder::combine(crate::core::query::FilterLogic::And, vec![id, contains])
}

/// Columns of one span row, in insertion order.
const SPAN_INSERT_COLUMNS: usize = 11;

#[async_trait]
impl<C: Connection> StoreTx for SqlTx<C> {
    async fn rollout(&mut self, rollout_id: &str) -> StoreResult<Option<Rollout>> {
        let sql = concat!(
            "SELECT ",
            rollout_columns!(""),
            " FROM rollouts WHERE rollout_id = $1"
        );
        let row = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        row.map(|row| codec::rollout(&row, 0)).transpose()
    }

    async fn put_rollout(&mut self, rollout: &Rollout) -> StoreResult<()> {
        let sql = concat!(
            "INSERT INTO rollouts (",
            rollout_columns!(""),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (rollout_id) DO UPDATE SET input = excluded.input, \
             start_time = excluded.start_time, end_time = excluded.end_time, \
             mode = excluded.mode, resources_id = excluded.resources_id, \
             status = excluded.status, config = excluded.config, metadata = excluded.metadata"
        );
        let statement = Statement::new(sql)
            .bind(rollout.rollout_id.as_str())
            .bind(codec::json_text(&rollout.input))
            .bind(rollout.start_time)
            .bind(rollout.end_time)
            .bind(rollout.mode.map(|m| m.as_str()))
            .bind(rollout.resources_id.as_deref())
            .bind(rollout.status.as_str())
            .bind(codec::config_text(&rollout.config))
            .bind(codec::json_text(&rollout.metadata));
        self.write(statement).await
    }

    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            rollout_columns!("r."),
            ", ",
            attempt_columns!("a."),
            " FROM rollouts r LEFT JOIN attempts a ON a.pos = (SELECT l.pos FROM attempts l \
             WHERE l.rollout_id = r.rollout_id ORDER BY l.sequence_id DESC, l.pos DESC LIMIT 1) \
             WHERE "
        ));
        let condition = rollout_condition(&mut b, filter);
        b.push(&condition);
        b.order_and_page(page, ROLLOUT_SORT, "r.pos");
        let mut count = Builder::new(C::DIALECT);
        count.push("SELECT COUNT(*) FROM rollouts r WHERE ");
        let condition = rollout_condition(&mut count, filter);
        count.push(&condition);
        self.paged(b.finish(), count.finish(), page, |row| {
            let at = codec::ROLLOUT_COLUMNS;
            Ok(RolloutView {
                rollout: codec::rollout(row, 0)?,
                attempt: match row.opt_text(at + 1)? {
                    Some(_) => Some(codec::attempt(row, at)?),
                    None => None,
                },
            })
        })
        .await
    }

    async fn enqueue(&mut self, rollout_id: &str, now: Timestamp) -> StoreResult<bool> {
        let sql = "INSERT INTO queue (rollout_id, enqueue_time) VALUES ($1, $2) \
                   ON CONFLICT (rollout_id) DO NOTHING RETURNING rollout_id";
        let rows = self
            .write_returning(Statement::new(sql).bind(rollout_id).bind(now))
            .await?;
        Ok(!rows.is_empty())
    }

    async fn pop_queue(&mut self) -> StoreResult<Option<String>> {
        let sql = "DELETE FROM queue WHERE pos = (SELECT MIN(pos) FROM queue) RETURNING rollout_id";
        let rows = self.write_returning(Statement::new(sql)).await?;
        rows.first().map(|row| row.text(0)).transpose()
    }

    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        let sql = concat!(
            "SELECT ",
            attempt_columns!(""),
            " FROM attempts WHERE rollout_id = $1 ORDER BY sequence_id, pos"
        );
        let rows = self.read(Statement::new(sql).bind(rollout_id)).await?;
        rows.iter().map(|row| codec::attempt(row, 0)).collect()
    }

    async fn latest_attempt(&mut self, rollout_id: &str) -> StoreResult<Option<Attempt>> {
        let sql = concat!(
            "SELECT ",
            attempt_columns!(""),
            " FROM attempts WHERE rollout_id = $1 ORDER BY sequence_id DESC, pos DESC LIMIT 1"
        );
        let row = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        row.map(|row| codec::attempt(&row, 0)).transpose()
    }

    async fn attempt(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
    ) -> StoreResult<Option<Attempt>> {
        let sql = concat!(
            "SELECT ",
            attempt_columns!(""),
            " FROM attempts WHERE rollout_id = $1 AND attempt_id = $2"
        );
        let statement = Statement::new(sql).bind(rollout_id).bind(attempt_id);
        let row = self.read_one(statement).await?;
        row.map(|row| codec::attempt(&row, 0)).transpose()
    }

    async fn put_attempt(&mut self, attempt: &Attempt) -> StoreResult<()> {
        let sql = concat!(
            "INSERT INTO attempts (",
            attempt_columns!(""),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (rollout_id, attempt_id) DO UPDATE SET \
             sequence_id = excluded.sequence_id, start_time = excluded.start_time, \
             end_time = excluded.end_time, status = excluded.status, \
             worker_id = excluded.worker_id, last_heartbeat_time = excluded.last_heartbeat_time, \
             metadata = excluded.metadata"
        );
        let statement = Statement::new(sql)
            .bind(attempt.rollout_id.as_str())
            .bind(attempt.attempt_id.as_str())
            .bind(i64::from(attempt.sequence_id))
            .bind(attempt.start_time)
            .bind(attempt.end_time)
            .bind(attempt.status.as_str())
            .bind(attempt.worker_id.as_deref())
            .bind(attempt.last_heartbeat_time)
            .bind(codec::json_text(&attempt.metadata));
        self.write(statement).await
    }

    async fn set_watchdog_deadline(
        &mut self,
        rollout_id: &str,
        deadline: Option<Timestamp>,
    ) -> StoreResult<()> {
        let sql = "UPDATE rollouts SET watchdog_deadline = $2 WHERE rollout_id = $1";
        let statement = Statement::new(sql).bind(rollout_id).bind(deadline);
        self.write(statement).await?;
        if let (Some(deadline), Some(cache)) = (deadline, self.conn.cache())
            && let Some(floor) = &mut cache.deadline_floor
        {
            *floor = (*floor).min(deadline.0);
        }
        Ok(())
    }

    async fn due_rollouts(&mut self, now: Timestamp) -> StoreResult<Vec<String>> {
        // A cached floor answers "nothing is due" without a query; it is only
        // set after a query found nothing due, and every new deadline lowers it.
        if let Some(cache) = self.conn.cache() {
            if cache.deadline_floor.is_some_and(|floor| now.0 <= floor) {
                return Ok(Vec::new());
            }
            let sql = "SELECT MIN(watchdog_deadline) FROM rollouts";
            let earliest = match self.read_one(Statement::new(sql)).await? {
                Some(row) => row.opt_int(0)?,
                None => None,
            };
            let floor = earliest.unwrap_or(i64::MAX);
            if now.0 <= floor {
                if let Some(cache) = self.conn.cache() {
                    cache.deadline_floor = Some(floor);
                }
                return Ok(Vec::new());
            }
        }
        let sql = "SELECT rollout_id FROM rollouts WHERE watchdog_deadline < $1 \
                   ORDER BY watchdog_deadline, rollout_id";
        let rows = self.read(Statement::new(sql).bind(now)).await?;
        rows.iter().map(|row| row.text(0)).collect()
    }

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        let sql = "INSERT INTO rollout_spans (rollout_id, last_sequence_id) VALUES ($1, $2) \
                   ON CONFLICT (rollout_id) DO UPDATE SET \
                   last_sequence_id = rollout_spans.last_sequence_id + excluded.last_sequence_id \
                   RETURNING last_sequence_id";
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let statement = Statement::new(sql).bind(rollout_id).bind(count);
        let rows = self.write_returning(statement).await?;
        let last = match rows.first() {
            Some(row) => row.int(0)?,
            None => return Err(codec::corrupt("sequence counter", "no row")),
        };
        Ok(last - count + 1)
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        let sql = "INSERT INTO rollout_spans (rollout_id, last_sequence_id) VALUES ($1, $2) \
                   ON CONFLICT (rollout_id) DO UPDATE SET last_sequence_id = CASE \
                   WHEN excluded.last_sequence_id > rollout_spans.last_sequence_id \
                   THEN excluded.last_sequence_id ELSE rollout_spans.last_sequence_id END";
        let statement = Statement::new(sql).bind(rollout_id).bind(at_least.max(0));
        self.write(statement).await
    }

    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        let mut inserted: HashSet<(String, String, String)> = HashSet::new();
        let sizes: Vec<u64> = spans
            .iter()
            .map(|span| retention::span_size(span))
            .collect();
        let chunk = (C::DIALECT.max_params / SPAN_INSERT_COLUMNS).max(1);
        for (chunk_spans, chunk_sizes) in spans.chunks(chunk).zip(sizes.chunks(chunk)) {
            let mut b = Builder::new(C::DIALECT);
            b.push(
                "INSERT INTO spans (rollout_id, attempt_id, span_id, sequence_id, trace_id, \
                 parent_id, name, start_time, end_time, size, body) VALUES ",
            );
            for (i, (span, &size)) in chunk_spans.iter().zip(chunk_sizes).enumerate() {
                let values = [
                    b.arg(span.rollout_id.as_str()),
                    b.arg(span.attempt_id.as_str()),
                    b.arg(span.span_id.as_str()),
                    b.arg(span.sequence_id),
                    b.arg(span.trace_id.as_str()),
                    b.arg(span.parent_id.as_deref()),
                    b.arg(span.name.as_str()),
                    b.arg(span.start_time),
                    b.arg(span.end_time),
                    b.arg(size),
                    b.arg(codec::span_body(span)),
                ];
                if i > 0 {
                    b.push(", ");
                }
                b.push("(").push(&values.join(", ")).push(")");
            }
            b.push(
                " ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING \
                 RETURNING rollout_id, attempt_id, span_id",
            );
            for row in self.write_returning(b.finish()).await? {
                inserted.insert((row.text(0)?, row.text(1)?, row.text(2)?));
            }
        }

        // A key that appears twice in `spans` was stored by its first occurrence.
        let mut stored = Vec::with_capacity(spans.len());
        let mut per_rollout: HashMap<&str, (i64, u64)> = HashMap::new();
        let (mut count, mut bytes) = (0i64, 0u64);
        for (span, &size) in spans.iter().zip(&sizes) {
            let key = (
                span.rollout_id.clone(),
                span.attempt_id.clone(),
                span.span_id.clone(),
            );
            let fresh = inserted.remove(&key);
            if fresh {
                let entry = per_rollout.entry(span.rollout_id.as_str()).or_default();
                entry.0 += 1;
                entry.1 += size;
                count += 1;
                bytes += size;
            }
            stored.push(fresh);
        }
        for (rollout_id, (spans, bytes)) in per_rollout {
            let sql = "INSERT INTO rollout_spans (rollout_id, last_sequence_id, spans, span_bytes) \
                       VALUES ($1, 0, $2, $3) ON CONFLICT (rollout_id) DO UPDATE SET \
                       spans = rollout_spans.spans + excluded.spans, \
                       span_bytes = rollout_spans.span_bytes + excluded.span_bytes";
            let statement = Statement::new(sql).bind(rollout_id).bind(spans).bind(bytes);
            self.write(statement).await?;
        }
        if count > 0 {
            let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
            self.add_counters(&[("spans", count), ("span_bytes", bytes)])
                .await?;
        }
        Ok(stored)
    }

    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!("SELECT ", span_columns!(), " FROM spans WHERE "));
        let condition = span_condition(&mut b, filter);
        b.push(&condition);
        b.order_and_page(page, SPAN_SORT, "sequence_id, pos");
        let mut count = Builder::new(C::DIALECT);
        count.push("SELECT COUNT(*) FROM spans WHERE ");
        let condition = span_condition(&mut count, filter);
        count.push(&condition);
        self.paged(b.finish(), count.finish(), page, |row| {
            codec::span(row).map(Arc::new)
        })
        .await
    }

    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        let sql = "SELECT evicted FROM rollout_spans WHERE rollout_id = $1";
        let row = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        Ok(row.map(|row| row.int(0)).transpose()? == Some(1))
    }

    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        let sql = "SELECT value FROM counters WHERE name = 'span_bytes'";
        let mut stored_bytes = u64::try_from(self.read_int(Statement::new(sql)).await?)
            .map_err(|e| codec::corrupt("counter", e))?;
        // One candidate beyond the limit tells whether another pass has work.
        let sql = "SELECT s.rollout_id, r.end_time, s.spans, s.span_bytes \
                   FROM rollout_spans s JOIN rollouts r ON r.rollout_id = s.rollout_id \
                   WHERE s.spans > 0 AND r.status IN ('failed', 'succeeded', 'cancelled') \
                   ORDER BY (r.end_time IS NULL), r.end_time, r.pos LIMIT $1";
        let limit = i64::try_from(max_rollouts.saturating_add(1)).unwrap_or(i64::MAX);
        let candidates = self.read(Statement::new(sql).bind(limit)).await?;
        let mut evicted = Eviction {
            done: true,
            ..Eviction::default()
        };
        for row in &candidates {
            let rollout_id = row.text(0)?;
            let end_time = row.opt_int(1)?.map(Timestamp);
            if !policy.evicts(end_time, stored_bytes, now) {
                break;
            }
            if evicted.rollouts == max_rollouts as u64 {
                evicted.done = false;
                break;
            }
            let (spans, bytes) = (row.int(2)?, row.int(3)?);
            let bytes = u64::try_from(bytes).map_err(|e| codec::corrupt("span bytes", e))?;
            let sql = "DELETE FROM spans WHERE rollout_id = $1";
            self.write(Statement::new(sql).bind(rollout_id.as_str()))
                .await?;
            let sql = "UPDATE rollout_spans SET spans = 0, span_bytes = 0, evicted = 1 \
                       WHERE rollout_id = $1";
            self.write(Statement::new(sql).bind(rollout_id.as_str()))
                .await?;
            stored_bytes = stored_bytes.saturating_sub(bytes);
            evicted.rollouts += 1;
            evicted.spans += spans.unsigned_abs();
            evicted.bytes += bytes;
        }
        if evicted.rollouts > 0 {
            let [rollouts, spans, bytes] =
                [evicted.rollouts, evicted.spans, evicted.bytes].map(|n| n as i64);
            self.add_counters(&[
                ("spans", -spans),
                ("span_bytes", -bytes),
                ("evicted_rollouts", rollouts),
                ("evicted_spans", spans),
                ("evicted_span_bytes", bytes),
            ])
            .await?;
        }
        Ok(evicted)
    }

    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>> {
        let sql = concat!(
            "SELECT ",
            resources_columns!(),
            " FROM resources WHERE resources_id = $1"
        );
        let row = self
            .read_one(Statement::new(sql).bind(resources_id))
            .await?;
        row.map(|row| codec::resources(&row)).transpose()
    }

    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        let sql = concat!(
            "SELECT ",
            resources_columns!(),
            " FROM resources WHERE resources_id = (SELECT resources_id FROM latest_resources)"
        );
        let row = self.read_one(Statement::new(sql)).await?;
        row.map(|row| codec::resources(&row)).transpose()
    }

    async fn put_resources(&mut self, update: &ResourcesUpdate) -> StoreResult<()> {
        let sql = concat!(
            "INSERT INTO resources (",
            resources_columns!(),
            ") VALUES ($1, $2, $3, $4, $5) ON CONFLICT (resources_id) DO UPDATE SET \
             create_time = excluded.create_time, update_time = excluded.update_time, \
             version = excluded.version, resources = excluded.resources"
        );
        let statement = Statement::new(sql)
            .bind(update.resources_id.as_str())
            .bind(update.create_time)
            .bind(update.update_time)
            .bind(update.version)
            .bind(codec::json_text(&update.resources));
        self.write(statement).await?;
        let sql = "INSERT INTO latest_resources (id, resources_id) VALUES (0, $1) \
                   ON CONFLICT (id) DO UPDATE SET resources_id = excluded.resources_id";
        let statement = Statement::new(sql).bind(update.resources_id.as_str());
        self.write(statement).await
    }

    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            resources_columns!(),
            " FROM resources WHERE "
        ));
        let condition = resources_condition(&mut b, filter);
        b.push(&condition);
        b.order_and_page(page, RESOURCES_SORT, "pos");
        let mut count = Builder::new(C::DIALECT);
        count.push("SELECT COUNT(*) FROM resources WHERE ");
        let condition = resources_condition(&mut count, filter);
        count.push(&condition);
        self.paged(b.finish(), count.finish(), page, codec::resources)
            .await
    }

    async fn worker(&mut self, worker_id: &str) -> StoreResult<Option<Worker>> {
        let sql = concat!(
            "SELECT ",
            worker_columns!(),
            " FROM workers WHERE worker_id = $1"
        );
        let row = self.read_one(Statement::new(sql).bind(worker_id)).await?;
        row.map(|row| codec::worker(&row)).transpose()
    }

    async fn put_worker(&mut self, worker: &Worker) -> StoreResult<()> {
        let sql = concat!(
            "INSERT INTO workers (",
            worker_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (worker_id) DO UPDATE SET \
             status = excluded.status, heartbeat_stats = excluded.heartbeat_stats, \
             last_heartbeat_time = excluded.last_heartbeat_time, \
             last_dequeue_time = excluded.last_dequeue_time, \
             last_busy_time = excluded.last_busy_time, last_idle_time = excluded.last_idle_time, \
             current_rollout_id = excluded.current_rollout_id, \
             current_attempt_id = excluded.current_attempt_id"
        );
        let statement = Statement::new(sql)
            .bind(worker.worker_id.as_str())
            .bind(worker.status.as_str())
            .bind(codec::json_text(&worker.heartbeat_stats))
            .bind(worker.last_heartbeat_time)
            .bind(worker.last_dequeue_time)
            .bind(worker.last_busy_time)
            .bind(worker.last_idle_time)
            .bind(worker.current_rollout_id.as_deref())
            .bind(worker.current_attempt_id.as_deref());
        self.write(statement).await
    }

    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            worker_columns!(),
            " FROM workers WHERE "
        ));
        let condition = worker_condition(&mut b, filter);
        b.push(&condition);
        b.order_and_page(page, WORKER_SORT, "pos");
        let mut count = Builder::new(C::DIALECT);
        count.push("SELECT COUNT(*) FROM workers WHERE ");
        let condition = worker_condition(&mut count, filter);
        count.push(&condition);
        self.paged(b.finish(), count.finish(), page, codec::worker)
            .await
    }

    async fn counts(&mut self) -> StoreResult<Counts> {
        let rows = self
            .read(Statement::new("SELECT name, value FROM counters"))
            .await?;
        let mut counts = Counts::default();
        for row in rows {
            let value = u64::try_from(row.int(1)?).map_err(|e| codec::corrupt("counter", e))?;
            let name = row.text(0)?;
            if let Some(status) = name.strip_prefix("rollouts.") {
                let status = codec::parse_enum("counter", status, RolloutStatus::parse)?;
                counts.rollouts_by_status.insert(status, value);
                continue;
            }
            if let Some(status) = name.strip_prefix("attempts.") {
                let status = codec::parse_enum("counter", status, AttemptStatus::parse)?;
                counts.attempts_by_status.insert(status, value);
                continue;
            }
            let field = match name.as_str() {
                "rollouts" => &mut counts.rollouts,
                "attempts" => &mut counts.attempts,
                "spans" => &mut counts.spans,
                "span_bytes" => &mut counts.span_bytes,
                "resources" => &mut counts.resources,
                "workers" => &mut counts.workers,
                "queued" => &mut counts.queued,
                "evicted_rollouts" => &mut counts.evicted_rollouts,
                "evicted_spans" => &mut counts.evicted_spans,
                "evicted_span_bytes" => &mut counts.evicted_span_bytes,
                _ => continue,
            };
            *field = value;
        }
        // Rows queued before the queue recorded entry times count from the
        // rollout's creation.
        let sql = "SELECT COALESCE(q.enqueue_time, r.start_time) FROM queue q \
                   JOIN rollouts r ON r.rollout_id = q.rollout_id ORDER BY q.pos LIMIT 1";
        if let Some(row) = self.read_one(Statement::new(sql)).await? {
            counts.oldest_queued_time = Some(Timestamp(row.int(0)?));
        }
        Ok(counts)
    }

    async fn append_events(&mut self, events: &mut [Event]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let cached = self.conn.cache().and_then(|cache| cache.latest_event);
        let before = match cached {
            Some(latest) => latest,
            None => {
                let sql = "SELECT COALESCE(MAX(seq), 0) FROM events";
                u64::try_from(self.read_int(Statement::new(sql)).await?)
                    .map_err(|e| codec::corrupt("event sequence", e))?
            }
        };
        let mut seq = before;
        let chunk = (C::DIALECT.max_params / 3).max(1);
        for chunk_events in events.chunks_mut(chunk) {
            let mut b = Builder::new(C::DIALECT);
            b.push("INSERT INTO events (seq, time, change) VALUES ");
            for (i, event) in chunk_events.iter_mut().enumerate() {
                seq += 1;
                event.seq = seq;
                let values = [
                    b.arg(seq),
                    b.arg(event.time),
                    b.arg(codec::change_text(&event.change)),
                ];
                if i > 0 {
                    b.push(", ");
                }
                b.push("(").push(&values.join(", ")).push(")");
            }
            self.write(b.finish()).await?;
        }
        // Trimming once per slice of the retention keeps it off most commits;
        // the history holds between `retention` and `retention + slice` events.
        let slice = (self.event_retention / 8).max(1);
        if seq / slice != before / slice && seq > self.event_retention {
            let sql = "DELETE FROM events WHERE seq <= $1";
            let statement = Statement::new(sql).bind(seq - self.event_retention);
            self.write(statement).await?;
        }
        if let Some(cache) = self.conn.cache() {
            cache.latest_event = Some(seq);
        }
        self.conn.events_appended();
        Ok(())
    }

    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        let sql = "SELECT seq, time, change FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(Statement::new(sql).bind(after).bind(limit))
            .await?;
        let events = rows.iter().map(codec::event).collect::<StoreResult<_>>()?;
        let sql = "SELECT MIN(seq), MAX(seq) FROM events";
        let (oldest, latest) = match self.read_one(Statement::new(sql)).await? {
            Some(row) => (row.opt_int(0)?, row.opt_int(1)?),
            None => (None, None),
        };
        let latest = latest.map_or(0, |l| l.unsigned_abs());
        Ok(EventPage {
            events,
            oldest: oldest.map_or(latest + 1, |o| o.unsigned_abs()),
            latest,
        })
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        self.conn.commit().await
    }
}
