//! Spans: sequence counters, batched inserts with their per-rollout and
//! store-wide totals, queries, and retention.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::codec::{self, span_columns};
use super::connection::Connection;
use super::query::{Builder, SPAN_SORT};
use super::statement::{Arg, Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{Span, Timestamp};
use lightning_store_core::query::{AttemptSelector, Page, Paged, SpanFilter};
use lightning_store_core::retention::{self, Eviction, RetentionPolicy};

/// Columns of one span row, in insertion order.
const SPAN_INSERT_COLUMNS: usize = 11;

/// The columns [`SPAN_INSERT_COLUMNS`] counts.
macro_rules! span_insert_columns {
    () => {
        "rollout_id, attempt_id, span_id, sequence_id, trace_id, parent_id, name, \
         start_time, end_time, size, body"
    };
}

/// On a shared database: inserts the spans given as one array per column
/// (in [`span_insert_columns`] order, kept in arrival order), skipping
/// stored keys (a key given twice is stored by its first occurrence), adds
/// the stored ones to their rollouts' totals and to this connection's
/// counter shards, and returns how many it stored (`$12` the number given)
/// with, only when that is fewer, their keys: one row `(count, NULL, NULL,
/// NULL)` when all were stored, else one row per stored key (or one of
/// NULLs when none was).
const INSERT_SPANS_WITH_TOTALS: &str = concat!(
    "WITH stored AS (INSERT INTO spans (",
    span_insert_columns!(),
    ") SELECT r, a, s, q, t, p, n, st, et, sz, b FROM unnest(CAST($1 AS TEXT[]), \
     CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), CAST($4 AS BIGINT[]), CAST($5 AS TEXT[]), \
     CAST($6 AS TEXT[]), CAST($7 AS TEXT[]), CAST($8 AS BIGINT[]), CAST($9 AS BIGINT[]), \
     CAST($10 AS BIGINT[]), CAST($11 AS TEXT[])) WITH ORDINALITY \
     AS u (r, a, s, q, t, p, n, st, et, sz, b, k) ORDER BY k \
     ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING \
     RETURNING rollout_id, attempt_id, span_id, size), \
     totals AS (INSERT INTO rollout_spans (rollout_id, last_sequence_id, spans, span_bytes) \
     SELECT rollout_id, 0, COUNT(*), SUM(size) FROM stored GROUP BY rollout_id \
     ON CONFLICT (rollout_id) DO UPDATE SET spans = rollout_spans.spans + excluded.spans, \
     span_bytes = rollout_spans.span_bytes + excluded.span_bytes), \
     counted AS (INSERT INTO counters (name, shard, value) \
     SELECT name, pg_backend_pid(), value FROM (SELECT 'spans' AS name, COUNT(*) AS value \
     FROM stored UNION ALL SELECT 'span_bytes', COALESCE(SUM(size), 0) FROM stored) AS c \
     WHERE value <> 0 ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value) \
     SELECT c.n, s.rollout_id, s.attempt_id, s.span_id \
     FROM (SELECT COUNT(*) AS n FROM stored) AS c LEFT JOIN stored AS s ON c.n < $12"
);

/// Returns, per span, whether the insert that returned `keys` (the keys it
/// stored, as rows whose three key columns start at `column`; rows of NULL
/// keys are skipped) stored it: a key that appears twice in `spans` was
/// stored by its first occurrence.
fn stored_flags(spans: &[Arc<Span>], keys: &[impl Row], column: usize) -> StoreResult<Vec<bool>> {
    let mut first: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(spans.len());
    for (at, span) in spans.iter().enumerate() {
        first
            .entry((&span.rollout_id, &span.attempt_id, &span.span_id))
            .or_insert(at);
    }
    let mut stored = vec![false; spans.len()];
    for row in keys {
        let Some(rollout_id) = row.opt_text(column)? else {
            continue;
        };
        let (attempt_id, span_id) = (row.text(column + 1)?, row.text(column + 2)?);
        if let Some(&at) = first.get(&(rollout_id.as_str(), attempt_id.as_str(), span_id.as_str()))
        {
            stored[at] = true;
        }
    }
    Ok(stored)
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

impl<C: Connection> SqlTx<C> {
    pub(super) async fn allocate_sequence(
        &mut self,
        rollout_id: &str,
        count: u64,
    ) -> StoreResult<i64> {
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

    pub(super) async fn raise_sequence(
        &mut self,
        rollout_id: &str,
        at_least: i64,
    ) -> StoreResult<()> {
        let sql = "INSERT INTO rollout_spans (rollout_id, last_sequence_id) VALUES ($1, $2) \
                   ON CONFLICT (rollout_id) DO UPDATE SET last_sequence_id = CASE \
                   WHEN excluded.last_sequence_id > rollout_spans.last_sequence_id \
                   THEN excluded.last_sequence_id ELSE rollout_spans.last_sequence_id END";
        let statement = Statement::new(sql).bind(rollout_id).bind(at_least.max(0));
        self.write(statement).await
    }

    /// Inserts spans, skipping stored keys, and adds the stored ones to the
    /// per-rollout totals and to the store-wide counters. On a shared
    /// database that is one statement of fixed text (whole columns bound as
    /// arrays and expanded with `unnest`), prepared once per connection
    /// whatever the batch size; elsewhere multi-row inserts and one
    /// statement per total.
    pub(super) async fn store_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        if C::DIALECT.shared {
            return self.store_spans_with_totals(spans).await;
        }
        let sizes: Vec<u64> = spans
            .iter()
            .map(|span| retention::span_size(span))
            .collect();
        let rows = self.insert_spans(spans, &sizes).await?;
        // As many stored keys as spans: all were stored (a key given twice
        // is stored once), and the rows need not be read.
        let stored = if rows.len() == spans.len() {
            vec![true; spans.len()]
        } else {
            stored_flags(spans, &rows, 0)?
        };
        let mut per_rollout: Vec<(&str, i64, u64)> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        let (mut count, mut bytes) = (0i64, 0u64);
        for ((span, &size), _) in spans.iter().zip(&sizes).zip(&stored).filter(|(_, s)| **s) {
            let slot = *at.entry(span.rollout_id.as_str()).or_insert_with(|| {
                per_rollout.push((span.rollout_id.as_str(), 0, 0));
                per_rollout.len() - 1
            });
            per_rollout[slot].1 += 1;
            per_rollout[slot].2 += size;
            count += 1;
            bytes += size;
        }
        for part in per_rollout.chunks((C::DIALECT.max_params / 3).max(1)) {
            let mut b = Builder::new(C::DIALECT);
            b.push("INSERT INTO rollout_spans (rollout_id, last_sequence_id, spans, span_bytes) VALUES ");
            for (i, &(rollout_id, spans, bytes)) in part.iter().enumerate() {
                let values = [b.arg(rollout_id), b.arg(spans), b.arg(bytes)];
                if i > 0 {
                    b.push(", ");
                }
                b.push(&format!("({}, 0, {}, {})", values[0], values[1], values[2]));
            }
            b.push(
                " ON CONFLICT (rollout_id) DO UPDATE SET \
                 spans = rollout_spans.spans + excluded.spans, \
                 span_bytes = rollout_spans.span_bytes + excluded.span_bytes",
            );
            self.write(b.finish()).await?;
        }
        if count > 0 {
            let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
            self.add_counters(&[("spans", count), ("span_bytes", bytes)])
                .await?;
        }
        Ok(stored)
    }

    /// Inserts spans in multi-row statements; returns the stored keys'
    /// rows. The text is written directly (no placeholder string per
    /// value): it is the same for every chunk of a size, so the database's
    /// statement cache prepares it once.
    async fn insert_spans(
        &mut self,
        spans: &[Arc<Span>],
        sizes: &[u64],
    ) -> StoreResult<Vec<C::Row>> {
        let mut inserted = Vec::new();
        let chunk = (C::DIALECT.max_params / SPAN_INSERT_COLUMNS).max(1);
        for (chunk_spans, chunk_sizes) in spans.chunks(chunk).zip(sizes.chunks(chunk)) {
            let mut sql = String::with_capacity(160 + chunk_spans.len() * 80);
            sql.push_str(concat!(
                "INSERT INTO spans (",
                span_insert_columns!(),
                ") VALUES "
            ));
            let mut args = Vec::with_capacity(chunk_spans.len() * SPAN_INSERT_COLUMNS);
            for (i, (span, &size)) in chunk_spans.iter().zip(chunk_sizes).enumerate() {
                let first = i * SPAN_INSERT_COLUMNS + 1;
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push('(');
                for column in 0..SPAN_INSERT_COLUMNS {
                    if column > 0 {
                        sql.push_str(", ");
                    }
                    let _ = write!(sql, "${}", first + column);
                }
                sql.push(')');
                args.extend([
                    Arg::from(span.rollout_id.as_str()),
                    span.attempt_id.as_str().into(),
                    span.span_id.as_str().into(),
                    span.sequence_id.into(),
                    span.trace_id.as_str().into(),
                    span.parent_id.as_deref().into(),
                    span.name.as_str().into(),
                    span.start_time.into(),
                    span.end_time.into(),
                    size.into(),
                    codec::span_body(span, size).into(),
                ]);
            }
            sql.push_str(
                " ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING \
                 RETURNING rollout_id, attempt_id, span_id",
            );
            let statement = Statement {
                sql: sql.into(),
                args,
            };
            inserted.extend(self.write_returning(statement).await?);
        }
        Ok(inserted)
    }

    /// [`SqlTx::store_spans`] on a shared database: the keys stored are
    /// read back only when some were not.
    async fn store_spans_with_totals(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        let rows = self.insert_spans_with_totals(spans).await?;
        let stored = match rows.first() {
            Some(row) => row.int(0)?,
            None => return Err(codec::corrupt("span insert", "no row")),
        };
        // As many stored as given: the keys were distinct and new.
        if usize::try_from(stored).ok() == Some(spans.len()) {
            return Ok(vec![true; spans.len()]);
        }
        stored_flags(spans, &rows, 1)
    }

    /// Inserts spans and adds the stored ones to the per-rollout totals and
    /// the counters, in one statement; returns the rows of
    /// [`INSERT_SPANS_WITH_TOTALS`].
    async fn insert_spans_with_totals(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<C::Row>> {
        let sizes: Vec<u64> = spans
            .iter()
            .map(|span| retention::span_size(span))
            .collect();
        let column = |value: fn(&Span) -> Option<&str>| -> Arg<'_> {
            Arg::Texts(spans.iter().map(|s| value(s).map(Cow::Borrowed)).collect())
        };
        let statement = Statement::new(INSERT_SPANS_WITH_TOTALS)
            .bind(column(|s| Some(&s.rollout_id)))
            .bind(column(|s| Some(&s.attempt_id)))
            .bind(column(|s| Some(&s.span_id)))
            .bind(Arg::Ints(
                spans.iter().map(|s| Some(s.sequence_id)).collect(),
            ))
            .bind(column(|s| Some(&s.trace_id)))
            .bind(column(|s| s.parent_id.as_deref()))
            .bind(column(|s| Some(&s.name)))
            .bind(Arg::Ints(
                spans.iter().map(|s| s.start_time.map(|t| t.0)).collect(),
            ))
            .bind(Arg::Ints(
                spans.iter().map(|s| s.end_time.map(|t| t.0)).collect(),
            ))
            .bind(Arg::Ints(
                sizes
                    .iter()
                    .map(|&size| Some(i64::try_from(size).unwrap_or(i64::MAX)))
                    .collect(),
            ))
            .bind(Arg::Texts(
                spans
                    .iter()
                    .zip(&sizes)
                    .map(|(s, &size)| Some(Cow::Owned(codec::span_body(s, size))))
                    .collect(),
            ))
            .bind(i64::try_from(spans.len()).unwrap_or(i64::MAX));
        self.write_returning(statement).await
    }

    pub(super) async fn select_spans(
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

    pub(super) async fn read_spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        let sql = "SELECT evicted FROM rollout_spans WHERE rollout_id = $1";
        let row = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        Ok(row.map(|row| row.int(0)).transpose()? == Some(1))
    }

    pub(super) async fn evict(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        let sql = "SELECT CAST(COALESCE(SUM(value), 0) AS BIGINT) FROM counters \
                   WHERE name = 'span_bytes'";
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
}
