//! The aggregate reads of [`lightning_store_core::overview`], each one statement
//! over a table or an index of the schema (migrations
//! `*_console_queries.sql`): the per-minute activity counts
//! (`rollout_minutes`, kept by the schema's triggers on SQLite and by the
//! write set's statement on a shared database, see [`super::apply`]), the
//! latest ended rollouts (`rollouts_ended`: status, end time, rollout id),
//! the latest attempts' error spans (by rollout and attempt, with [`codec::ERROR_BODY_PREFIX`]),
//! a rollout's place in the queue (`queue`'s positions), attempts by id
//! alone (`attempts_by_id` on PostgreSQL; SQLite reads the table).

use std::collections::HashMap;
use std::sync::Arc;

use super::codec::{self, attempt_columns, span_columns};
use super::connection::Connection;
use super::query::{Builder, text_literal};
use super::reads::{ROLLOUT_VIEW, rollout_view};
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{Attempt, RolloutStatus, RolloutView, Span, Timestamp};
use lightning_store_core::overview::{Activity, ActivityCount};

impl<C: Connection> SqlTx<C> {
    pub(super) async fn read_activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        // A shared database keeps one row per connection's shard: summed.
        let sql = "SELECT minute, name, CAST(SUM(value) AS BIGINT) FROM rollout_minutes \
                   WHERE minute >= $1 AND minute < $2 GROUP BY minute, name";
        let rows = self
            .read(Statement::new(sql).bind(from).bind(until))
            .await?;
        let mut counts = Vec::with_capacity(rows.len());
        for row in &rows {
            let name = row.text(1)?;
            let activity = Activity::parse(&name)
                .ok_or_else(|| codec::corrupt("activity count", format_args!("name {name}")))?;
            counts.push(ActivityCount {
                minute: Timestamp(row.int(0)?),
                activity,
                count: row.int(2)?,
            });
        }
        Ok(counts)
    }

    pub(super) async fn read_latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(ROLLOUT_VIEW);
        let status = b.arg(status.as_str());
        let limit = b.arg(i64::try_from(limit).unwrap_or(i64::MAX));
        b.push(&format!(
            " WHERE r.status = {status} AND r.end_time IS NOT NULL \
             ORDER BY r.end_time DESC, r.rollout_id DESC LIMIT {limit}"
        ));
        let rows = self.read(b.finish()).await?;
        rows.iter().map(|row| rollout_view(row, 0)).collect()
    }

    pub(super) async fn read_error_spans(
        &mut self,
        attempts: &[(&str, &str)],
    ) -> StoreResult<Vec<Arc<Span>>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Builder::new(C::DIALECT);
        let pairs: Vec<String> = attempts
            .iter()
            .map(|&(rollout_id, attempt_id)| {
                let rollout = b.equals("rollout_id", rollout_id);
                let attempt = b.equals("attempt_id", attempt_id);
                format!("({rollout} AND {attempt})")
            })
            .collect();
        let prefix = text_literal(codec::ERROR_BODY_PREFIX);
        let length = codec::ERROR_BODY_PREFIX.len();
        b.push(&format!(
            concat!(
                "SELECT ",
                span_columns!(),
                " FROM (SELECT ",
                span_columns!(),
                ", ROW_NUMBER() OVER (PARTITION BY rollout_id, attempt_id \
                 ORDER BY sequence_id DESC, pos DESC) AS k FROM spans \
                 WHERE ({}) AND substr(body, 1, {}) = {}) AS e WHERE k = 1"
            ),
            pairs.join(" OR "),
            length,
            prefix
        ));
        let mut by_attempt: HashMap<(String, String), Arc<Span>> = HashMap::new();
        for row in self.read(b.finish()).await? {
            let span = codec::span(&row)?;
            let key = (span.rollout_id.clone(), span.attempt_id.clone());
            by_attempt.insert(key, Arc::new(span));
        }
        Ok(attempts
            .iter()
            .filter_map(|&(r, a)| by_attempt.remove(&(r.to_owned(), a.to_owned())))
            .collect())
    }

    pub(super) async fn read_attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let sql = "SELECT DISTINCT rollout_id, attempt_id FROM spans WHERE trace_id = $1 \
                   ORDER BY rollout_id, attempt_id LIMIT $2";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(Statement::new(sql).bind(trace_id).bind(limit))
            .await?;
        rows.iter()
            .map(|row| Ok((row.text(0)?, row.text(1)?)))
            .collect()
    }

    pub(super) async fn read_attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>> {
        let sql = concat!(
            "SELECT ",
            attempt_columns!(""),
            " FROM attempts WHERE attempt_id = $1 ORDER BY rollout_id LIMIT $2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read(Statement::new(sql).bind(attempt_id).bind(limit))
            .await?;
        rows.iter().map(|row| codec::attempt(row, 0)).collect()
    }

    pub(super) async fn read_queue_place(
        &mut self,
        rollout_id: &str,
    ) -> StoreResult<Option<(u64, Timestamp)>> {
        // Positions only grow: the entries ahead have smaller ones.
        let sql = "SELECT (SELECT COUNT(*) FROM queue a WHERE a.pos < q.pos), \
                   COALESCE(q.enqueue_time, r.start_time) \
                   FROM queue q JOIN rollouts r ON r.rollout_id = q.rollout_id \
                   WHERE q.rollout_id = $1";
        let row = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        row.map(|row| {
            let ahead = u64::try_from(row.int(0)?).map_err(|e| codec::corrupt("queue", e))?;
            Ok((ahead, Timestamp(row.int(1)?)))
        })
        .transpose()
    }
}
