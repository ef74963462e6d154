//! The write set's application at commit: one multi-row upsert per entity
//! kind (on SQLite chunked under the parameter limit), then the events.
//!
//! # On a shared database (PostgreSQL)
//! The upserts travel as the data-modifying `WITH` clauses of one
//! statement (`WITH w0 AS (INSERT INTO rollouts …), w1 AS (INSERT INTO
//! attempts …), …, counted AS (INSERT INTO counters …) SELECT 1`),
//! prepared and cached like any other; the last clause adds the status
//! counts and the queue's length that the upserts changed to this
//! connection's counter shards (see [`Batch::count`]). An upsert of
//! several rows takes them as one array per column (`INSERT … SELECT *
//! FROM unnest($1, $2, …)`), so a statement's text depends on which kinds
//! of rows the write set holds (and whether one or several), not on how
//! many: the database parses and plans each of these few texts once per
//! connection. The events are numbered by a call that
//! travels with the `COMMIT`, in one simple query (its values written as
//! literals), to a function of the schema (migration 0007) whose statements
//! the database plans once per connection:
//!
//! ```sql
//! SELECT append_events(CAST('{t1,t2}' AS BIGINT[]), ARRAY['change1', 'change2'], retention);
//! COMMIT; CALL wait_durable()
//! ```
//!
//! (`append_events` trims the history when a slice of the retention was
//! crossed and announces the events, then updates the counter row and
//! inserts the events at the numbers it handed out. More than 64 events
//! are written before the counter's update, as a block under a number of
//! its own, and numbered under the counter by one row: migration 0010.)
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
//! subscriber on any server reads a gapless prefix.
//!
//! The lock is the only store-wide serialisation, so it is held for as
//! little as possible: taken by the last statement, which reaches the
//! database in the same message as the `COMMIT` (asynchronous: it does not
//! wait for the disk, see the PostgreSQL backend's group commit). No
//! round trip to this server happens while it is held, whatever the load
//! on this machine; it was held across one before (the events' statement's
//! answer, then the `COMMIT`), and waits for it dominated every writer's
//! latency (docs/performance.md#fewer-round-trips-per-transaction). Nor is
//! it held for longer with more
//! events: under it go at most 64 event rows or one block's row, so a
//! 30,000-rollout enqueue holds it as briefly as a dequeue does.
//!
//! Elsewhere (SQLite) each upsert is its own statement (in-process, they
//! cost microseconds), and the single writer numbers events from its cache.

use super::agl1;
use super::batch::{Batch, Counted, insert_into, upsert, upsert_counted};
use super::codec::{self, attempt_columns, resources_columns, rollout_columns, worker_columns};
use super::connection::Connection;
use super::query::{self, Builder};
use super::requests;
use super::sessions::{self, session_columns};
use super::statement::Statement;
use super::training::{self, TrainingRows};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::Event;
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::{Attempt, ResourcesUpdate, Timestamp, Worker, WorkerSession};
use lightning_store_core::storage::{RolloutWrite, WriteSet};

/// The status counts' deltas of an upsert clause that returns the key
/// `columns` and the `status` of each row it wrote into `table` (whose
/// counters are named after it: `rollouts`, `rollouts.<status>`): the rows'
/// statuses before come from the table itself, since every clause of a
/// statement reads the snapshot taken before the statement.
fn status_deltas(table: &str, columns: &[&str], clause: &str) -> String {
    let on: Vec<String> = columns
        .iter()
        .map(|column| format!("o.{column} = w.{column}"))
        .collect();
    format!(
        "SELECT x.name, x.d FROM {clause} w LEFT JOIN {table} o ON {on} \
         CROSS JOIN LATERAL (VALUES ('{table}', CASE WHEN o.status IS NULL THEN 1 ELSE 0 END), \
         ('{table}.' || w.status, CASE WHEN o.status IS DISTINCT FROM w.status THEN 1 ELSE 0 END), \
         ('{table}.' || o.status, CASE WHEN o.status <> w.status THEN -1 ELSE 0 END)) \
         AS x (name, d) WHERE x.d <> 0",
        on = on.join(" AND ")
    )
}

/// The first instant of the minute of the nanosecond time `expression`
/// (floored, also before 1970), as [`lightning_store_core::overview::minute_of`].
fn minute_of(expression: &str) -> String {
    format!("({expression} - (({expression} % 60000000000) + 60000000000) % 60000000000)")
}

/// The activity counts' deltas of a rollout upsert clause that returns
/// `rollout_id, status, start_time, end_time`: the minute a rollout was
/// created in, and the minute it ended in while its status is terminal, as
/// they were (the table's snapshot before the statement) against as they
/// are (see [`lightning_store_core::overview::Activity::of`]).
fn minute_deltas(clause: &str) -> String {
    let finished = "('succeeded', 'failed', 'cancelled')";
    let changed = "(o.status IS DISTINCT FROM w.status OR o.end_time IS DISTINCT FROM w.end_time)";
    format!(
        "SELECT x.minute, x.name, x.d FROM {clause} w LEFT JOIN rollouts o \
         ON o.rollout_id = w.rollout_id CROSS JOIN LATERAL (VALUES \
         ({new_start}, 'created', CASE WHEN o.rollout_id IS NULL \
             OR o.start_time <> w.start_time THEN 1 ELSE 0 END), \
         ({old_start}, 'created', CASE WHEN o.start_time <> w.start_time THEN -1 ELSE 0 END), \
         ({new_end}, w.status, CASE WHEN w.end_time IS NOT NULL AND w.status IN {finished} \
             AND {changed} THEN 1 ELSE 0 END), \
         ({old_end}, o.status, CASE WHEN o.end_time IS NOT NULL AND o.status IN {finished} \
             AND {changed} THEN -1 ELSE 0 END)) \
         AS x (minute, name, d) WHERE x.d <> 0",
        new_start = minute_of("w.start_time"),
        old_start = minute_of("o.start_time"),
        new_end = minute_of("w.end_time"),
        old_end = minute_of("o.end_time"),
    )
}

/// On a shared database: the call that numbers `events` from the event
/// counter, inserts them and announces them, and trims the history when the
/// numbers cross a slice of the retention (see [`SqlTx::trim_events`]): the
/// `append_events` function (migration 0007), whose statements the database
/// plans once per connection. Its one row is the new `last`. It runs with
/// the `COMMIT`, as one simple query, so its values are written as
/// literals: only this short call is parsed on every commit.
fn numbering(events: &[Event], retention: u64) -> String {
    use std::fmt::Write as _;
    let mut sql = String::from("SELECT append_events(CAST('{");
    for (k, event) in events.iter().enumerate() {
        let separator = if k > 0 { "," } else { "" };
        let _ = write!(sql, "{separator}{}", event.time.0);
    }
    sql.push_str("}' AS BIGINT[]), ARRAY[");
    for (k, event) in events.iter().enumerate() {
        let separator = if k > 0 { ", " } else { "" };
        let change = query::text_literal(&codec::change_text(&event.change));
        let _ = write!(sql, "{separator}{change}");
    }
    let _ = write!(sql, "], {retention})");
    sql
}

/// Gives `events` their numbers, the last of which is `last`.
pub(super) fn number_events(events: &mut [Event], last: u64) {
    let first = last + 1 - events.len() as u64;
    for (offset, event) in events.iter_mut().enumerate() {
        event.seq = first + offset as u64;
    }
}

/// The rows of a write set's core entities, in write order: what the
/// upserts of one commit write.
struct Rows<'w> {
    resources: Vec<&'w ResourcesUpdate>,
    /// The rollouts whose mode and resources version are as stored.
    rollouts: Vec<&'w RolloutWrite>,
    /// The rollouts whose mode or resources version may have changed.
    relabelled: Vec<&'w RolloutWrite>,
    attempts: Vec<&'w Attempt>,
    workers: Vec<&'w Worker>,
    sessions: Vec<&'w WorkerSession>,
    unqueued: Vec<&'w str>,
    queued: Vec<(&'w String, &'w Timestamp)>,
    remembered: Vec<&'w RememberedRequest>,
    training: TrainingRows<'w>,
}

impl<'w> Rows<'w> {
    fn of(writes: &'w WriteSet) -> Self {
        Self {
            resources: writes.resources.values().collect(),
            rollouts: writes.rollouts.values().filter(|w| !w.relabelled).collect(),
            relabelled: writes.rollouts.values().filter(|w| w.relabelled).collect(),
            attempts: writes.attempts.values().collect(),
            workers: writes.workers.values().collect(),
            sessions: writes.sessions.values().collect(),
            unqueued: writes.unqueue.iter().map(String::as_str).collect(),
            queued: writes.enqueue.iter().collect(),
            remembered: writes.requests.values().collect(),
            training: TrainingRows::of(writes),
        }
    }

    /// Adds every upsert and queue change to `batch`, in the order the
    /// write set's rows depend on each other.
    fn add_to<'a>(&'a self, batch: &mut Batch<'a>, writes: &WriteSet) {
        requests::add(batch, writes.forget_requests, &self.remembered);
        if let Some(before) = writes.forget_activity {
            batch.add(1, |b| {
                let before = b.arg(before);
                b.push(&format!(
                    "DELETE FROM rollout_minutes WHERE minute < {before}"
                ));
            });
        }
        add_resources(batch, &self.resources);
        add_rollouts(batch, &self.rollouts, false);
        add_rollouts(batch, &self.relabelled, true);
        add_attempts(batch, &self.attempts);
        add_workers(batch, &self.workers);
        add_sessions(batch, &self.sessions);
        add_queue_changes(batch, &self.unqueued, &self.queued);
        training::add(batch, &self.training);
    }
}

/// Adds the resources snapshots, the last of which becomes the latest.
fn add_resources<'a>(batch: &mut Batch<'a>, resources: &'a [&'a ResourcesUpdate]) {
    upsert(
        batch,
        resources,
        insert_into!("resources", resources_columns!()),
        " ON CONFLICT (resources_id) DO UPDATE SET \
         create_time = excluded.create_time, update_time = excluded.update_time, \
         version = excluded.version, resources = excluded.resources",
        |update| {
            [
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
}

/// Adds the rollouts with their watchdog deadlines, counted by status.
/// Adds the rollouts' upserts. An existing row is assigned only the
/// columns that change: SQLite rewrites every index over a column an
/// `UPDATE` assigns, even to the same value, so the start time (fixed at
/// creation) is never assigned, and the mode and resources version only by
/// the writes that set them (`relabelled`, see [`RolloutWrite::relabelled`]).
fn add_rollouts<'a>(batch: &mut Batch<'a>, rollouts: &'a [&'a RolloutWrite], relabelled: bool) {
    /// The columns every update assigns, then those only a relabelling does.
    macro_rules! changing {
        () => {
            " ON CONFLICT (rollout_id) DO UPDATE SET input = excluded.input, \
             end_time = excluded.end_time, status = excluded.status, config = excluded.config, \
             metadata = excluded.metadata, watchdog_deadline = excluded.watchdog_deadline"
        };
    }
    const CHANGING: &str = changing!();
    const RELABELLING: &str = concat!(
        changing!(),
        ", mode = excluded.mode, resources_id = excluded.resources_id"
    );
    upsert_counted(
        batch,
        rollouts,
        insert_into!(
            "rollouts",
            concat!(rollout_columns!(""), ", watchdog_deadline")
        ),
        if relabelled { RELABELLING } else { CHANGING },
        |write| {
            let rollout = &write.rollout;
            [
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
        Some(Counted {
            returning: " RETURNING rollout_id, status, start_time, end_time",
            deltas: &|clause| status_deltas("rollouts", &["rollout_id"], clause),
            minutes: Some(&minute_deltas),
        }),
    );
}

/// Adds the attempts, counted by status.
fn add_attempts<'a>(batch: &mut Batch<'a>, attempts: &'a [&'a Attempt]) {
    upsert_counted(
        batch,
        attempts,
        insert_into!("attempts", attempt_columns!("")),
        " ON CONFLICT (rollout_id, attempt_id) DO UPDATE SET \
         sequence_id = excluded.sequence_id, start_time = excluded.start_time, \
         end_time = excluded.end_time, status = excluded.status, \
         worker_id = excluded.worker_id, last_heartbeat_time = excluded.last_heartbeat_time, \
         metadata = excluded.metadata",
        |attempt| {
            [
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
        Some(Counted {
            returning: " RETURNING rollout_id, attempt_id, status",
            deltas: &|clause| status_deltas("attempts", &["rollout_id", "attempt_id"], clause),
            minutes: None,
        }),
    );
}

/// Adds the workers.
fn add_workers<'a>(batch: &mut Batch<'a>, workers: &'a [&'a Worker]) {
    upsert(
        batch,
        workers,
        insert_into!("workers", worker_columns!()),
        " ON CONFLICT (worker_id) DO UPDATE SET \
         status = excluded.status, heartbeat_stats = excluded.heartbeat_stats, \
         last_heartbeat_time = excluded.last_heartbeat_time, \
         last_dequeue_time = excluded.last_dequeue_time, \
         last_busy_time = excluded.last_busy_time, last_idle_time = excluded.last_idle_time, \
         current_rollout_id = excluded.current_rollout_id, \
         current_attempt_id = excluded.current_attempt_id",
        |worker| {
            [
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
}

/// Adds the worker session records.
fn add_sessions<'a>(batch: &mut Batch<'a>, sessions: &'a [&'a WorkerSession]) {
    upsert(
        batch,
        sessions,
        insert_into!("worker_sessions", session_columns!()),
        " ON CONFLICT (worker_id) DO UPDATE SET epoch = excluded.epoch, \
         server_id = excluded.server_id, state = excluded.state, \
         deadline = excluded.deadline, attempts = excluded.attempts",
        |session| {
            [
                session.worker_id.as_str().into(),
                session.epoch.into(),
                session.server_id.as_str().into(),
                session.state.as_str().into(),
                session.deadline.into(),
                sessions::attempts_text(&session.attempts).into(),
            ]
        },
    );
}

/// Adds the queue's removals, then its appends (counted as its length).
fn add_queue_changes<'a>(
    batch: &mut Batch<'a>,
    unqueued: &'a [&'a str],
    queued: &'a [(&'a String, &'a Timestamp)],
) {
    // Removals never name a rollout the appends name (the write set
    // keeps the last intent), so their order within one statement does
    // not matter.
    let shared = batch.dialect().shared;
    for part in unqueued.chunks(batch.dialect().max_params) {
        let clause = batch.add(part.len(), |b| {
            b.push("DELETE FROM queue WHERE ");
            let condition = b.one_of("rollout_id", part.iter().copied());
            b.push(&condition);
            if shared {
                b.push(" RETURNING rollout_id");
            }
        });
        if let Some(clause) = clause {
            batch.count(format!("SELECT 'queued', -1 FROM {clause}"));
        }
    }
    // A multi-row insert assigns positions in `VALUES` order: the queue
    // keeps the order of the write set. Only the entries inserted count.
    upsert_counted(
        batch,
        queued,
        insert_into!("queue", "rollout_id, enqueue_time"),
        " ON CONFLICT (rollout_id) DO NOTHING",
        |&(rollout_id, since)| [rollout_id.as_str().into(), (*since).into()],
        Some(Counted {
            returning: " RETURNING rollout_id",
            deltas: &|clause| format!("SELECT 'queued', 1 FROM {clause}"),
            minutes: None,
        }),
    );
}

impl<C: Connection> SqlTx<C> {
    /// Applies a write set (see the module docs): the 1.x part, then one
    /// batch of upserts and queue changes, then the events. A single
    /// writer numbers and inserts its events (and appends to the
    /// completion log) too; on a shared database, returns the statements
    /// that do, to be run with the `COMMIT`: the completions' (no rows),
    /// then the events' (one row).
    pub(super) async fn apply(&mut self, writes: &mut WriteSet) -> StoreResult<Option<String>> {
        if writes.is_empty() {
            return Ok(None);
        }
        self.apply_agl1(&mut writes.agl1).await?;
        let rows = Rows::of(writes);
        let earliest_deadline = (rows.rollouts.iter().chain(&rows.relabelled))
            .filter_map(|w| w.deadline)
            .min();
        let mut batch = Batch::new(C::DIALECT);
        rows.add_to(&mut batch, writes);
        for statement in batch.finish() {
            self.write(statement).await?;
        }
        if writes.fold_training_shards && C::DIALECT.shared {
            for fold in training::FOLD_SHARDS.iter() {
                self.write(Statement::new(fold)).await?;
            }
        }
        // A single writer's next transaction sees these deadlines at once.
        if let Some(deadline) = earliest_deadline {
            self.floor.lower(deadline.0);
        }
        drop(rows);
        if C::DIALECT.shared {
            return Ok(self.commit_statements(writes));
        }
        self.append_events(&mut writes.events).await?;
        Ok(None)
    }

    /// On a shared database: the statements that travel with the
    /// `COMMIT`, `None` when there are none.
    fn commit_statements(&self, writes: &WriteSet) -> Option<String> {
        let mut last = Vec::new();
        if !writes.agl1.completions.is_empty() {
            last.push(agl1::completions_appended(&writes.agl1.completions));
        }
        if !writes.events.is_empty() {
            last.push(numbering(&writes.events, self.event_retention));
        }
        (!last.is_empty()).then(|| last.join("; "))
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
