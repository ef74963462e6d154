//! The write set's application at commit: one multi-row upsert per entity
//! kind (chunked under the parameter limit), then the events.
//!
//! # On a shared database (PostgreSQL)
//! The upserts travel as the data-modifying `WITH` clauses of one
//! statement, whose last clauses number and insert the events:
//!
//! ```sql
//! WITH w0 AS (INSERT INTO rollouts …), w1 AS (INSERT INTO attempts …), …,
//!   event_counter_update AS (UPDATE event_counter SET last = last + $n RETURNING last),
//!   event_rows AS (INSERT INTO events SELECT last - $n + k, … FROM event_counter_update, (VALUES …))
//! SELECT last, pg_notify(…) FROM event_counter_update
//! ```
//!
//! and `COMMIT` follows: a transaction's writes cost one round trip, plus
//! the commit. A large write set (a batch) is sent ahead of the events'
//! statement instead, so that its upserts and their triggers run before the
//! counter is taken.
//!
//! **Why the event numbers are gapless and in commit order on every
//! server.** `event_counter` is one row. A transaction that records events
//! updates it in its last statement and holds its row lock until it
//! commits or rolls back. The next transaction that records events waits
//! for that lock, so it reads `last` only after the previous holder has
//! committed (it then sees the new value) or rolled back (it then sees the
//! old value: a rolled-back transaction leaves no gap). Numbers are thus
//! handed out in the order transactions commit, and a transaction holding
//! number `n` commits after every holder of a lower number, so any
//! snapshot that sees event `n` sees all the events before it: a resuming
//! subscriber on any server reads a gapless prefix. The lock is the only
//! store-wide serialisation left, and it is taken last, for the span of one
//! statement and the commit; transactions that record no events (none of
//! the engine's writers) never take it.
//!
//! Elsewhere (SQLite) each upsert is its own statement (in-process, they
//! cost microseconds), and the single writer numbers events from its cache.

use super::codec::{self, attempt_columns, resources_columns, rollout_columns, worker_columns};
use super::query::Builder;
use super::{Arg, Connection, Dialect, Row as _, SqlTx, Statement};
use crate::core::error::StoreResult;
use crate::core::events::Event;
use crate::core::storage::WriteSet;

/// The most parameters of upserts that share the events' statement (one
/// round trip fewer); a larger write set is sent first, so that the event
/// counter is held only for the events and the commit.
const EVENTS_RIDE_ALONG: usize = 512;

/// Statements being assembled for one write set: on a shared database the
/// pieces join one statement as `WITH` clauses, as long as its parameters
/// fit; elsewhere each piece is a statement.
struct Batch<'a> {
    dialect: &'static Dialect,
    statements: Vec<Statement<'a>>,
    open: Option<Builder<'a>>,
    clauses: usize,
}

impl<'a> Batch<'a> {
    fn new(dialect: &'static Dialect) -> Self {
        Self {
            dialect,
            statements: Vec::new(),
            open: None,
            clauses: 0,
        }
    }

    /// Adds a piece binding `params` parameters, written by `build`.
    fn add(&mut self, params: usize, build: impl FnOnce(&mut Builder<'a>)) {
        if !self.dialect.shared {
            let mut b = Builder::new(self.dialect);
            build(&mut b);
            self.statements.push(b.finish());
            return;
        }
        let b = self.clause(params);
        build(b);
        b.push(")");
    }

    /// Opens the next `WITH` clause of the open statement (closing it first
    /// when `params` more would not fit).
    fn clause(&mut self, params: usize) -> &mut Builder<'a> {
        if self
            .open
            .as_ref()
            .is_some_and(|b| b.params() + params > self.dialect.max_params)
        {
            self.close();
        }
        let name = format!("w{}", self.clauses);
        let first = self.clauses == 0;
        self.clauses += 1;
        let b = self.open.get_or_insert_with(|| Builder::new(self.dialect));
        b.push(if first { "WITH " } else { ", " })
            .push(&name)
            .push(" AS (");
        b
    }

    /// Returns the parameters the open statement binds so far.
    fn open_params(&self) -> usize {
        self.open.as_ref().map_or(0, Builder::params)
    }

    /// Ends the open statement.
    fn close(&mut self) {
        if let Some(mut b) = self.open.take() {
            b.push(" SELECT 1");
            self.statements.push(b.finish());
            self.clauses = 0;
        }
    }

    /// Ends the open statement with `events` numbered from the event
    /// counter (shared database only); its one row is the new `last`.
    fn close_with_events(&mut self, events: &[Event], announce: &str) -> Statement<'a> {
        let params = 1 + 2 * events.len();
        if self
            .open
            .as_ref()
            .is_some_and(|b| b.params() + params > self.dialect.max_params)
        {
            self.close();
        }
        let first = self.clauses == 0;
        let mut b = self
            .open
            .take()
            .unwrap_or_else(|| Builder::new(self.dialect));
        self.clauses = 0;
        let count = b.arg(events.len() as u64);
        b.push(if first { "WITH " } else { ", " });
        b.push(&format!(
            "event_counter_update AS (UPDATE event_counter SET last = last + CAST({count} AS BIGINT) \
             RETURNING last), event_rows AS (INSERT INTO events (seq, time, change) \
             SELECT c.last - CAST({count} AS BIGINT) + v.k, v.t, v.c FROM event_counter_update c, (VALUES "
        ));
        for (k, event) in events.iter().enumerate() {
            let time = b.arg(event.time);
            let change = b.arg(codec::change_text(&event.change));
            if k > 0 {
                b.push(", ");
            }
            b.push(&format!("({}, CAST({time} AS BIGINT), {change})", k + 1));
        }
        b.push(&format!(
            ") AS v (k, t, c)) SELECT last, {announce} FROM event_counter_update"
        ));
        b.finish()
    }

    fn finish(mut self) -> Vec<Statement<'a>> {
        self.close();
        self.statements
    }
}

/// Appends `(…), (…)` for `rows` of placeholders.
fn values<'a>(b: &mut Builder<'a>, rows: impl Iterator<Item = Vec<Arg<'a>>>) {
    for (i, row) in rows.enumerate() {
        let placeholders: Vec<String> = row.into_iter().map(|arg| b.arg(arg)).collect();
        if i > 0 {
            b.push(", ");
        }
        b.push("(").push(&placeholders.join(", ")).push(")");
    }
}

/// Adds one upsert per chunk of `rows` (each of `columns` values).
fn upsert<'a, T: 'a>(
    batch: &mut Batch<'a>,
    rows: &'a [T],
    columns: usize,
    head: &str,
    tail: &str,
    row: impl Fn(&'a T) -> Vec<Arg<'a>>,
) {
    let chunk = (batch.dialect.max_params / columns).max(1);
    for part in rows.chunks(chunk) {
        batch.add(part.len() * columns, |b| {
            b.push(head);
            values(b, part.iter().map(&row));
            b.push(tail);
        });
    }
}

impl<C: Connection> SqlTx<C> {
    /// Applies a write set (see the module docs) and numbers its events.
    pub(super) async fn apply(&mut self, writes: &mut WriteSet) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        let resources: Vec<_> = writes.resources.values().collect();
        let rollouts: Vec<_> = writes.rollouts.values().collect();
        let attempts: Vec<_> = writes.attempts.values().collect();
        let workers: Vec<_> = writes.workers.values().collect();
        let queued: Vec<_> = writes.enqueue.iter().collect();
        let earliest_deadline = rollouts.iter().filter_map(|w| w.deadline).min();
        let mut batch = Batch::new(C::DIALECT);
        upsert(
            &mut batch,
            &resources,
            5,
            concat!("INSERT INTO resources (", resources_columns!(), ") VALUES "),
            " ON CONFLICT (resources_id) DO UPDATE SET \
             create_time = excluded.create_time, update_time = excluded.update_time, \
             version = excluded.version, resources = excluded.resources",
            |update| {
                vec![
                    update.resources_id.as_str().into(),
                    update.create_time.into(),
                    update.update_time.into(),
                    update.version.into(),
                    codec::json_text(&update.resources).into(),
                ]
            },
        );
        if let Some(latest) = resources.last() {
            batch.add(1, |b| {
                let id = b.arg(latest.resources_id.as_str());
                b.push(&format!(
                    "INSERT INTO latest_resources (id, resources_id) VALUES (0, {id}) \
                     ON CONFLICT (id) DO UPDATE SET resources_id = excluded.resources_id"
                ));
            });
        }
        upsert(
            &mut batch,
            &rollouts,
            10,
            concat!(
                "INSERT INTO rollouts (",
                rollout_columns!(""),
                ", watchdog_deadline) VALUES "
            ),
            " ON CONFLICT (rollout_id) DO UPDATE SET input = excluded.input, \
             start_time = excluded.start_time, end_time = excluded.end_time, \
             mode = excluded.mode, resources_id = excluded.resources_id, \
             status = excluded.status, config = excluded.config, metadata = excluded.metadata, \
             watchdog_deadline = excluded.watchdog_deadline",
            |write| {
                let rollout = &write.rollout;
                vec![
                    rollout.rollout_id.as_str().into(),
                    codec::json_text(&rollout.input).into(),
                    rollout.start_time.into(),
                    rollout.end_time.into(),
                    rollout.mode.map(|m| m.as_str()).into(),
                    rollout.resources_id.as_deref().into(),
                    rollout.status.as_str().into(),
                    codec::config_text(&rollout.config).into(),
                    codec::json_text(&rollout.metadata).into(),
                    write.deadline.into(),
                ]
            },
        );
        upsert(
            &mut batch,
            &attempts,
            9,
            concat!("INSERT INTO attempts (", attempt_columns!(""), ") VALUES "),
            " ON CONFLICT (rollout_id, attempt_id) DO UPDATE SET \
             sequence_id = excluded.sequence_id, start_time = excluded.start_time, \
             end_time = excluded.end_time, status = excluded.status, \
             worker_id = excluded.worker_id, last_heartbeat_time = excluded.last_heartbeat_time, \
             metadata = excluded.metadata",
            |attempt| {
                vec![
                    attempt.rollout_id.as_str().into(),
                    attempt.attempt_id.as_str().into(),
                    i64::from(attempt.sequence_id).into(),
                    attempt.start_time.into(),
                    attempt.end_time.into(),
                    attempt.status.as_str().into(),
                    attempt.worker_id.as_deref().into(),
                    attempt.last_heartbeat_time.into(),
                    codec::json_text(&attempt.metadata).into(),
                ]
            },
        );
        upsert(
            &mut batch,
            &workers,
            9,
            concat!("INSERT INTO workers (", worker_columns!(), ") VALUES "),
            " ON CONFLICT (worker_id) DO UPDATE SET \
             status = excluded.status, heartbeat_stats = excluded.heartbeat_stats, \
             last_heartbeat_time = excluded.last_heartbeat_time, \
             last_dequeue_time = excluded.last_dequeue_time, \
             last_busy_time = excluded.last_busy_time, last_idle_time = excluded.last_idle_time, \
             current_rollout_id = excluded.current_rollout_id, \
             current_attempt_id = excluded.current_attempt_id",
            |worker| {
                vec![
                    worker.worker_id.as_str().into(),
                    worker.status.as_str().into(),
                    codec::json_text(&worker.heartbeat_stats).into(),
                    worker.last_heartbeat_time.into(),
                    worker.last_dequeue_time.into(),
                    worker.last_busy_time.into(),
                    worker.last_idle_time.into(),
                    worker.current_rollout_id.as_deref().into(),
                    worker.current_attempt_id.as_deref().into(),
                ]
            },
        );
        // A multi-row insert assigns positions in `VALUES` order: the queue
        // keeps the order of the write set.
        upsert(
            &mut batch,
            &queued,
            2,
            "INSERT INTO queue (rollout_id, enqueue_time) VALUES ",
            " ON CONFLICT (rollout_id) DO NOTHING",
            |&(rollout_id, since)| vec![rollout_id.as_str().into(), (*since).into()],
        );

        if C::DIALECT.shared {
            self.apply_shared(batch, &mut writes.events).await?;
        } else {
            for statement in batch.finish() {
                self.write(statement).await?;
            }
            self.append_events(&mut writes.events).await?;
        }
        if let (Some(deadline), Some(cache)) = (earliest_deadline, self.conn.cache())
            && let Some(floor) = &mut cache.deadline_floor
        {
            *floor = (*floor).min(deadline.0);
        }
        Ok(())
    }

    /// Sends a shared database's batch: the events ride with the last
    /// statement (or, beyond one statement's parameters, each chunk with
    /// its own), numbered by the event counter.
    async fn apply_shared(
        &mut self,
        mut batch: Batch<'_>,
        events: &mut [Event],
    ) -> StoreResult<()> {
        if events.is_empty() {
            for statement in batch.finish() {
                self.write(statement).await?;
            }
            return Ok(());
        }
        // A large write set goes ahead on its own: the events' statement
        // takes the event counter, which every other writer needs next, and
        // holds it until the commit; only small sets ride along with it.
        if batch.open_params() > EVENTS_RIDE_ALONG {
            batch.close();
        }
        let chunk = ((C::DIALECT.max_params - 1) / 2).max(1);
        // (statement, whether it numbers a chunk of the events)
        let mut statements: Vec<(Statement<'_>, bool)> = Vec::new();
        for part in events.chunks(chunk) {
            let numbering = batch.close_with_events(part, C::DIALECT.announce);
            statements.extend(batch.statements.drain(..).map(|s| (s, false)));
            statements.push((numbering, true));
        }
        let mut lasts = Vec::new();
        for (statement, numbering) in statements {
            let rows = self.write_returning(statement).await?;
            if numbering {
                let last = match rows.first() {
                    Some(row) => u64::try_from(row.int(0)?)
                        .map_err(|e| codec::corrupt("event counter", e))?,
                    None => return Err(codec::corrupt("event counter", "no row")),
                };
                lasts.push(last);
            }
        }
        let mut latest = 0;
        for (last, part) in lasts.into_iter().zip(events.chunks_mut(chunk)) {
            let first = last + 1 - part.len() as u64;
            for (offset, event) in part.iter_mut().enumerate() {
                event.seq = first + offset as u64;
            }
            latest = last;
        }
        self.trim_events(latest - events.len() as u64, latest).await
    }

    /// Numbers and inserts events after the last one (a single writer's).
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
        self.trim_events(before, seq).await?;
        if let Some(cache) = self.conn.cache() {
            cache.latest_event = Some(seq);
        }
        Ok(())
    }

    /// Trims the history once the latest event moved from `before` to `seq`
    /// across a slice of the retention: the history holds between
    /// `retention` and `retention + slice` events, and most commits skip it.
    async fn trim_events(&mut self, before: u64, seq: u64) -> StoreResult<()> {
        let slice = (self.event_retention / 8).max(1);
        if seq / slice != before / slice && seq > self.event_retention {
            let sql = "DELETE FROM events WHERE seq <= $1";
            let statement = Statement::new(sql).bind(seq - self.event_retention);
            self.write(statement).await?;
        }
        Ok(())
    }
}
