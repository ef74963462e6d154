//! Reads: the aggregates the engine's rules consume (a rollout with its
//! latest attempt, the queue's head, due deadlines, workers), locked on a
//! shared database, and the paged queries.

use std::collections::HashMap;

use super::codec::{self, attempt_columns, resources_columns, rollout_columns, worker_columns};
use super::connection::Connection;
use super::query::{Builder, RESOURCES_SORT, ROLLOUT_SORT, WORKER_SORT};
use super::statement::{Row, Statement};
use super::training::reward_key;
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::EventPage;
use lightning_store_core::model::{
    Attempt, AttemptStatus, Counts, ResourcesUpdate, RolloutStatus, RolloutView, Timestamp, Worker,
};
use lightning_store_core::query::{
    FilterLogic, Page, Paged, ResourcesFilter, RolloutFilter, WithoutRowsFilter, WorkerFilter,
};
use lightning_store_core::storage::{Access, Held};

/// Selects a rollout (`r`) with its latest attempt (`a`); the caller
/// appends the `WHERE` clause.
pub(super) const ROLLOUT_VIEW: &str = concat!(
    "SELECT ",
    rollout_columns!("r."),
    ", ",
    attempt_columns!("a."),
    " FROM rollouts r LEFT JOIN attempts a ON a.pos = (SELECT l.pos FROM attempts l \
     WHERE l.rollout_id = r.rollout_id ORDER BY l.sequence_id DESC, l.pos DESC LIMIT 1)"
);

/// Decodes a row of [`ROLLOUT_VIEW`]'s columns starting at `at`.
pub(super) fn rollout_view(row: &impl Row, at: usize) -> StoreResult<RolloutView> {
    let attempt_at = at + codec::ROLLOUT_COLUMNS;
    Ok(RolloutView {
        rollout: codec::rollout(row, at)?,
        attempt: match row.opt_text(attempt_at + 1)? {
            Some(_) => Some(codec::attempt(row, attempt_at)?),
            None => None,
        },
    })
}

/// Returns the locking clause of a read with `access`, on `table`.
fn lock_clause<C: Connection>(access: Access, table: &str) -> String {
    match access {
        Access::Update if C::DIALECT.shared => format!(" FOR UPDATE OF {table}"),
        _ => String::new(),
    }
}

/// Returns the condition of `filter` on rollouts `r`: upstream's pool under
/// its logic, AND-ed with each narrowing condition (see [`RolloutFilter`]).
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
    let pool = Builder::combine(filter.effective_logic(), vec![status, ids, contains]);
    let modes = filter.mode_in.as_ref().map(|modes| {
        let named = modes.iter().flatten().map(|m| m.as_str());
        let mut either = vec![Some(b.one_of("r.mode", named))];
        if modes.contains(&None) {
            either.push(Some("r.mode IS NULL".to_owned()));
        }
        Builder::combine(FilterLogic::Or, either)
    });
    let created: Vec<String> = b.within("r.start_time", filter.start_time).collect();
    let resources = filter
        .resources_id
        .as_deref()
        .map(|id| b.equals("r.resources_id", id));
    let ended: Vec<String> = b.within("r.end_time", filter.end_time).collect();
    let after = filter
        .rollout_id_after
        .as_deref()
        .map(|after| format!("r.rollout_id > {}", b.arg(after)));
    // The worker's attempts (an index) name the rollouts to look up, rather
    // than every rollout probing for an attempt of the worker.
    let worker = filter.worker_id.as_deref().map(|worker| {
        format!(
            "r.rollout_id IN (SELECT w.rollout_id FROM attempts w WHERE w.worker_id = {})",
            b.arg(worker)
        )
    });
    // The rewards in the range (an index) name the rollouts.
    let reward = filter.reward.is_bounded().then(|| {
        let mut bounds = Vec::with_capacity(2);
        if let Some(min) = filter.reward.min {
            bounds.push(format!("rw.value >= {}", b.arg(reward_key(min))));
        }
        if let Some(max) = filter.reward.max {
            bounds.push(format!("rw.value <= {}", b.arg(reward_key(max))));
        }
        format!(
            "r.rollout_id IN (SELECT rw.rollout_id FROM rollout_rewards rw WHERE {})",
            bounds.join(" AND ")
        )
    });
    // The model version's rollouts (an index) name the rollouts.
    let model_version = filter.model_version.map(|version| {
        format!(
            "r.rollout_id IN (SELECT mv.rollout_id FROM rollout_model_versions mv \
             WHERE mv.model_version = {})",
            b.arg(version)
        )
    });
    // The rollouts without rows (a partial index) name the rollouts.
    let without_rows = filter.without_rows.map(|without| {
        let reason = match without {
            WithoutRowsFilter::AnyReason => String::new(),
            WithoutRowsFilter::Reason(reason) => {
                format!(" AND (v.reasons & {}) <> 0", b.arg(reason.bit()))
            }
        };
        format!(
            "r.rollout_id IN (SELECT v.rollout_id FROM rollout_rows_verdicts v \
             WHERE v.reasons <> 0{reason})"
        )
    });
    let mut conditions = vec![
        Some(pool),
        modes,
        resources,
        after,
        worker,
        reward,
        model_version,
        without_rows,
    ];
    conditions.extend(created.into_iter().chain(ended).map(Some));
    Builder::combine(FilterLogic::And, conditions)
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
    Builder::combine(filter.effective_logic(), vec![status, contains])
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
    Builder::combine(FilterLogic::And, vec![id, contains])
}

/// Keeps the first occurrence of each id, in order.
fn distinct<'a>(ids: &[&'a str]) -> Vec<&'a str> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}

impl<C: Connection> SqlTx<C> {
    pub(super) async fn read_rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<RolloutView>> {
        let ids = distinct(rollout_ids);
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut by_id: HashMap<String, RolloutView> = HashMap::with_capacity(ids.len());
        // Rows are locked in id order, so that two transactions locking
        // overlapping sets cannot deadlock.
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        let chunk = C::DIALECT.max_params.max(1);
        let locks_entries = C::DIALECT.shared && matches!(access, Access::Update);
        for part in sorted.chunks(chunk) {
            let mut b = Builder::new(C::DIALECT);
            if locks_entries {
                // The rollouts' queue entries are locked before the
                // rollouts, the order a claim takes them in: an update
                // that takes a rollout out of the queue and a claim of its
                // entry then wait for each other one way only (locking the
                // rollout first deadlocked with a claim that held the
                // entry; `tests/integration/postgres_claim.rs`). The
                // condition without columns is checked once, before the
                // rollouts are read.
                let entries = b.one_of("rollout_id", part.iter().copied());
                b.push(&format!(
                    "WITH entries AS MATERIALIZED (SELECT pos FROM queue WHERE {entries} \
                     ORDER BY rollout_id FOR UPDATE) "
                ));
            }
            b.push(ROLLOUT_VIEW).push(" WHERE ");
            let condition = b.one_of("r.rollout_id", part.iter().copied());
            b.push(&condition);
            if locks_entries {
                b.push(" AND (SELECT COUNT(*) FROM entries) >= 0");
            }
            b.push(" ORDER BY r.rollout_id");
            b.push(&lock_clause::<C>(access, "r"));
            for row in self.read(b.finish()).await? {
                let view = rollout_view(&row, 0)?;
                by_id.insert(view.rollout.rollout_id.clone(), view);
            }
        }
        Ok(ids.into_iter().filter_map(|id| by_id.remove(id)).collect())
    }

    pub(super) async fn select_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        // The page's positions first, from the indexes alone where they
        // suffice; only the page's rows are then read whole, with their
        // latest attempts (a sort would otherwise carry every matching
        // row's columns and attempt).
        let mut b = Builder::new(C::DIALECT);
        b.push("WITH page AS (SELECT r.pos FROM rollouts r WHERE ");
        let condition = rollout_condition(&mut b, filter);
        b.push(&condition);
        let order = b.order_by(page, ROLLOUT_SORT, "r.pos");
        b.push(&order);
        b.page_window(page);
        b.push(") ")
            .push(ROLLOUT_VIEW)
            .push(" WHERE r.pos IN (SELECT pos FROM page)")
            .push(&order);
        let mut count = Builder::new(C::DIALECT);
        count.push("SELECT COUNT(*) FROM rollouts r WHERE ");
        let condition = rollout_condition(&mut count, filter);
        count.push(&condition);
        self.paged(b.finish(), count.finish(), page, |row| rollout_view(row, 0))
            .await
    }

    /// Lists ended rollouts' ids in id order (`Queries::ended_rollout_ids`):
    /// a walk of the rollout id index from the filter's position, each row
    /// checked against the filter, until `limit` match.
    pub(super) async fn select_ended_rollout_ids(
        &mut self,
        filter: &RolloutFilter,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let mut b = Builder::new(C::DIALECT);
        b.push("SELECT r.rollout_id FROM ")
            .push(C::DIALECT.rollouts_by_id)
            .push(" WHERE r.end_time IS NOT NULL AND ");
        let condition = rollout_condition(&mut b, filter);
        b.push(&condition);
        let limit = b.arg(i64::try_from(limit).unwrap_or(i64::MAX));
        b.push(&format!(" ORDER BY r.rollout_id LIMIT {limit}"));
        self.read(b.finish())
            .await?
            .iter()
            .map(|row| row.text(0))
            .collect()
    }

    pub(super) async fn read_due(
        &mut self,
        now: Timestamp,
        limit: usize,
        held: Held,
    ) -> StoreResult<Vec<RolloutView>> {
        // The floor answers "nothing is due" without a query on most
        // operations; the earliest deadline resets it when it cannot.
        if self.floor.nothing_due(now.0) {
            return Ok(Vec::new());
        }
        let start = self.floor.scan_starts();
        let sql = "SELECT MIN(watchdog_deadline) FROM rollouts";
        let earliest = match self.read_one(Statement::new(sql)).await? {
            Some(row) => row.opt_int(0)?,
            None => None,
        };
        if earliest.is_none_or(|earliest| now.0 <= earliest) {
            self.floor.found(start, earliest);
            return Ok(Vec::new());
        }
        if C::DIALECT.shared && held == Held::Wait {
            return self.wait_for_due(now, limit).await;
        }
        let lock = if C::DIALECT.shared {
            " FOR UPDATE OF r SKIP LOCKED"
        } else {
            ""
        };
        let mut b = Builder::new(C::DIALECT);
        b.push(ROLLOUT_VIEW);
        let now = b.arg(now);
        let limit = b.arg(i64::try_from(limit).unwrap_or(i64::MAX));
        b.push(&format!(
            " WHERE r.watchdog_deadline < {now} \
             ORDER BY r.watchdog_deadline, r.rollout_id LIMIT {limit}{lock}"
        ));
        let rows = self.read(b.finish()).await?;
        rows.iter().map(|row| rollout_view(row, 0)).collect()
    }

    /// A shared database's due scan that waits for the due rollouts other
    /// transactions hold ([`Held::Wait`]): picks the due rollouts without
    /// locks, then locks them in id order (two such scans cannot deadlock)
    /// and keeps those still due once their holders are done (the database
    /// reads a waited-for row again as committed). When every one was
    /// settled meanwhile, it looks again, on a newer snapshot, so that an
    /// empty answer means nothing is due.
    async fn wait_for_due(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>> {
        loop {
            let mut b = Builder::new(C::DIALECT);
            b.push("SELECT rollout_id FROM rollouts r");
            let at = b.arg(now);
            let limit = b.arg(i64::try_from(limit).unwrap_or(i64::MAX));
            b.push(&format!(
                " WHERE r.watchdog_deadline < {at} \
                 ORDER BY r.watchdog_deadline, r.rollout_id LIMIT {limit}"
            ));
            let due = self
                .read(b.finish())
                .await?
                .iter()
                .map(|row| row.text(0))
                .collect::<StoreResult<Vec<String>>>()?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            let mut b = Builder::new(C::DIALECT);
            b.push(ROLLOUT_VIEW).push(" WHERE ");
            let condition = b.one_of("r.rollout_id", due.iter().map(String::as_str));
            let at = b.arg(now);
            b.push(&format!(
                "{condition} AND r.watchdog_deadline < {at} \
                 ORDER BY r.rollout_id FOR UPDATE OF r"
            ));
            let mut by_id = HashMap::with_capacity(due.len());
            for row in self.read(b.finish()).await? {
                let view = rollout_view(&row, 0)?;
                by_id.insert(view.rollout.rollout_id.clone(), view);
            }
            if !by_id.is_empty() {
                // Earliest deadline first, as the candidates were picked.
                return Ok(due.iter().filter_map(|id| by_id.remove(id)).collect());
            }
        }
    }

    pub(super) async fn read_attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        let sql = concat!(
            "SELECT ",
            attempt_columns!(""),
            " FROM attempts WHERE rollout_id = $1 ORDER BY sequence_id, pos"
        );
        let rows = self.read(Statement::new(sql).bind(rollout_id)).await?;
        rows.iter().map(|row| codec::attempt(row, 0)).collect()
    }

    pub(super) async fn read_attempt(
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

    pub(super) async fn read_resources(
        &mut self,
        resources_id: &str,
    ) -> StoreResult<Option<ResourcesUpdate>> {
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

    pub(super) async fn read_latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        let sql = concat!(
            "SELECT ",
            resources_columns!(),
            " FROM resources WHERE resources_id = (SELECT resources_id FROM latest_resources)"
        );
        let row = self.read_one(Statement::new(sql)).await?;
        row.map(|row| codec::resources(&row)).transpose()
    }

    pub(super) async fn select_resources(
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

    pub(super) async fn read_workers(
        &mut self,
        worker_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<Worker>> {
        let ids = distinct(worker_ids);
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            worker_columns!(),
            " FROM workers WHERE "
        ));
        let condition = b.one_of("worker_id", ids.iter().copied());
        b.push(&condition).push(" ORDER BY worker_id");
        b.push(&lock_clause::<C>(access, "workers"));
        let mut by_id: HashMap<String, Worker> = HashMap::new();
        for row in self.read(b.finish()).await? {
            let worker = codec::worker(&row)?;
            by_id.insert(worker.worker_id.clone(), worker);
        }
        Ok(ids.into_iter().filter_map(|id| by_id.remove(id)).collect())
    }

    pub(super) async fn select_workers(
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

    pub(super) async fn read_counts(&mut self) -> StoreResult<Counts> {
        let sql = "SELECT name, CAST(SUM(value) AS BIGINT) FROM counters GROUP BY name";
        let rows = self.read(Statement::new(sql)).await?;
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
        let sql = "SELECT COALESCE(q.enqueue_time, r.start_time), q.rollout_id FROM queue q \
                   JOIN rollouts r ON r.rollout_id = q.rollout_id ORDER BY q.pos LIMIT 1";
        if let Some(row) = self.read_one(Statement::new(sql)).await? {
            counts.oldest_queued_time = Some(Timestamp(row.int(0)?));
            counts.oldest_queued_rollout_id = Some(row.text(1)?);
        }
        Ok(counts)
    }

    pub(super) async fn read_events(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        let sql = C::DIALECT.events_after;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(Statement::new(sql).bind(after).bind(limit))
            .await?;
        let events = rows.iter().map(codec::event).collect::<StoreResult<_>>()?;
        let sql = C::DIALECT.event_bounds;
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
}
