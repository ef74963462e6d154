//! The training summary's storage (`TrainingReads`, and its part of the
//! write set's batch, [`add`]): each rollout's final reward in
//! `rollout_rewards`, the model version of each 1.x rollout's first model
//! call in `rollout_model_versions`, what each judged 1.x rollout gave its
//! trainer in `rollout_rows_verdicts`, what each rollout's model calls
//! used in `rollout_usage` (migrations `*_rollout_usage.sql`), and the
//! summary's rows in
//! `training_summary`, to which the write set's deltas are added
//! (migrations `*_training.sql`, `*_training_rows.sql`).
//! On a shared database each connection adds to its own shard of a row
//! (the column's default), summed when read, and the shards are folded
//! into shard 0 by the housekeeping ([`FOLD_SHARDS`]). The timeline's rows
//! are kept alike in `reward_timeline`, the measures' in
//! `training_measures` (migrations `*_training_measures.sql`).

use std::collections::HashMap;
use std::sync::LazyLock;

use async_trait::async_trait;

use super::batch::{Batch, insert_into, upsert};
use super::codec::corrupt;
use super::connection::Connection;
use super::query::Builder;
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::Timestamp;
use lightning_store_core::query::TimeRange;
use lightning_store_core::storage::{TrainingReads, WriteSet};
use lightning_store_core::training::measure::{Measure, MeasureCounts};
use lightning_store_core::training::usage::RolloutUsage;
use lightning_store_core::training::{
    Facts, MeasureKey, MeasureRow, NoRowsReasons, PeriodKey, PeriodRow, PolicyVersion, Resolution,
    RolloutReward, RowsVerdict, TrainingCounts, TrainingKey, TrainingRow,
};

/// A table of counted rows to which the write set's deltas are added: its
/// name, its key columns (before `shard`, when sharded) and its count
/// columns.
struct CountedTable {
    name: &'static str,
    keys: &'static str,
    counts: &'static [&'static str],
    /// Whether a shared database's connections each add to their own shard
    /// of a row (a `shard` column after the keys), rather than to the row.
    sharded: bool,
}

/// The count columns of the summary's rows and the timeline's
/// ([`TrainingCounts`]).
const TRAINING_COUNTS: &[&str] = &["rollouts", "succeeded", "reward_micros", "training_rows"];

/// The summary's rows, by version.
const SUMMARY: CountedTable = CountedTable {
    name: "training_summary",
    keys: "version, mode, rewarded, bin, reasons",
    counts: TRAINING_COUNTS,
    sharded: true,
};

/// The timeline's rows, by period.
const TIMELINE: CountedTable = CountedTable {
    name: "reward_timeline",
    keys: "resolution, period_start, mode, rewarded, bin",
    counts: TRAINING_COUNTS,
    sharded: true,
};

/// The measures' rows, by version ([`MeasureCounts`]).
const MEASURES: CountedTable = CountedTable {
    name: "training_measures",
    keys: "version, mode, measure, bin",
    counts: &["measured", "total"],
    sharded: true,
};

impl CountedTable {
    /// Returns the tail of an upsert adding a row's counts to its shard's
    /// (or to the row's).
    fn add_on_conflict(&self) -> String {
        let table = self.name;
        let added: Vec<String> = self
            .counts
            .iter()
            .map(|count| format!("{count} = {table}.{count} + excluded.{count}"))
            .collect();
        format!(
            " ON CONFLICT ({keys}{shard}) DO UPDATE SET {added}",
            keys = self.keys,
            shard = if self.sharded { ", shard" } else { "" },
            added = added.join(", ")
        )
    }

    /// Returns the count columns, each summed over the shards of a row.
    fn summed(&self) -> String {
        let summed: Vec<String> = self
            .counts
            .iter()
            .map(|count| format!("CAST(SUM({count}) AS BIGINT)"))
            .collect();
        summed.join(", ")
    }

    /// Returns the condition keeping the rows (or shards) that count
    /// something.
    fn counting(&self) -> String {
        format!("({})", self.any_nonzero(str::to_owned))
    }

    /// Returns the condition keeping the summed rows that count something.
    fn counting_something(&self) -> String {
        format!(
            "HAVING {}",
            self.any_nonzero(|count| format!("SUM({count})"))
        )
    }

    /// Returns `a <> 0 OR b <> 0 ...` over the count columns, each as
    /// `term` writes it.
    fn any_nonzero(&self, term: impl Fn(&str) -> String) -> String {
        let nonzero: Vec<String> = self
            .counts
            .iter()
            .map(|count| format!("{} <> 0", term(count)))
            .collect();
        nonzero.join(" OR ")
    }

    /// On a shared database: the statement folding the table's shards into
    /// shard 0 (the sums do not change). It never waits for a connection
    /// adding to its shard: rows locked by a transaction that has not
    /// committed are skipped (folded next time), and a connection's upsert
    /// of a row being folded waits for the fold's commit, then inserts its
    /// shard's row again. Two folds at once (two servers) lock the rows of
    /// shard 0 in key order, so neither waits for the other in a cycle.
    fn fold_shards(&self) -> String {
        let (table, keys) = (self.name, self.keys);
        let matched: Vec<String> = keys
            .split(", ")
            .chain(["shard"])
            .map(|key| format!("t.{key} = d.{key}"))
            .collect();
        let sums: Vec<String> = self
            .counts
            .iter()
            .map(|count| format!("SUM({count})"))
            .collect();
        format!(
            "WITH doomed AS (SELECT {keys}, shard FROM {table} WHERE shard <> 0 \
             FOR UPDATE SKIP LOCKED), \
             folded AS (DELETE FROM {table} t USING doomed d WHERE {matched} RETURNING t.*) \
             INSERT INTO {table} ({keys}, shard, {counts}) \
             SELECT {keys}, 0, {sums} \
             FROM folded GROUP BY {keys} ORDER BY {keys}{on_conflict}",
            matched = matched.join(" AND "),
            counts = self.counts.join(", "),
            sums = sums.join(", "),
            on_conflict = self.add_on_conflict(),
        )
    }
}

/// What each rollout's model calls used ([`RolloutUsage`]): one row per
/// rollout, which only its own calls write, so it needs no shards.
const USAGE: CountedTable = CountedTable {
    name: "rollout_usage",
    keys: "rollout_id",
    counts: &[
        "calls",
        "latency_ms",
        "reported",
        "prompt_tokens",
        "response_tokens",
    ],
    sharded: false,
};

/// The upserts' tails: the summary's, the timeline's, the measures', the
/// usage's.
static ADD_ON_CONFLICT: LazyLock<[String; 4]> = LazyLock::new(|| {
    [
        SUMMARY.add_on_conflict(),
        TIMELINE.add_on_conflict(),
        MEASURES.add_on_conflict(),
        USAGE.add_on_conflict(),
    ]
});

/// The statements reading the summary's rows (of one mode, or of every
/// mode), as they are: the summary sums a key's rows (on a shared
/// database, a row's shards) itself, which costs less than grouping them
/// in SQL (docs/performance.md#what-model-calls-used).
static SUMMARY_ROWS: LazyLock<[String; 2]> = LazyLock::new(|| {
    [" AND mode = $1", ""].map(|filter| {
        format!(
            "SELECT version, mode, rewarded, bin, {counts}, CAST(r.number AS BIGINT), \
             reasons FROM training_summary LEFT JOIN (SELECT resources_id, \
             ROW_NUMBER() OVER (ORDER BY pos) AS number FROM resources) r \
             ON r.resources_id = version WHERE {counting}{filter}",
            counts = SUMMARY.counts.join(", "),
            counting = SUMMARY.counting(),
        )
    })
});

/// The statements reading the measures' rows (of one mode, or of every
/// mode) as they are, not summed by bin: the summary sums a bin's rows (on a
/// shared database, a row's shards) itself, and grouping them in SQL cost
/// more than the rest of the read (docs/performance.md#what-model-calls-used).
static MEASURE_ROWS: LazyLock<[String; 2]> = LazyLock::new(|| measure_statements(false));

/// [`MEASURE_ROWS`] where the dialect [packs rows](super::Dialect::packs_rows):
/// one result row per (version, mode, measure) holds its bins as text (`bin
/// measured total` triples, see [`packed_bins`]); a realistic spread gives
/// each tens of bins.
static PACKED_MEASURE_ROWS: LazyLock<[String; 2]> = LazyLock::new(|| measure_statements(true));

/// The measures' statements, their bins packed or not.
fn measure_statements(packed: bool) -> [String; 2] {
    let (bins, grouping) = match packed {
        true => (
            "string_agg(bin || ' ' || measured || ' ' || total, ' ')",
            " GROUP BY version, mode, measure",
        ),
        false => ("bin, measured, total", ""),
    };
    [" AND mode = $1", ""].map(|filter| {
        format!(
            "SELECT version, mode, measure, {bins} FROM training_measures \
             WHERE {counting}{filter}{grouping}",
            counting = MEASURES.counting(),
        )
    })
}

/// Reads the bins a row of [`PACKED_MEASURE_ROWS`] holds: `(bin, counts)`
/// of each `bin measured total` triple.
fn packed_bins(text: &str) -> StoreResult<Vec<(i64, MeasureCounts)>> {
    let numbers = text
        .split_ascii_whitespace()
        .map(str::parse::<i64>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| corrupt("measure bins", error))?;
    if numbers.len() % 3 != 0 {
        return Err(corrupt("measure bins", "not triples"));
    }
    Ok(numbers
        .chunks_exact(3)
        .map(|triple| {
            let counts = MeasureCounts {
                values: triple[1],
                total: triple[2],
            };
            (triple[0], counts)
        })
        .collect())
}

/// On a shared database: the statements folding the shards of the
/// summary's rows, the timeline's and the measures' into shard 0
/// ([`CountedTable::fold_shards`]).
pub(super) static FOLD_SHARDS: LazyLock<[String; 3]> = LazyLock::new(|| {
    [
        SUMMARY.fold_shards(),
        TIMELINE.fold_shards(),
        MEASURES.fold_shards(),
    ]
});

/// Returns the stored form of a reward: its f64 bits with, for a negative
/// reward, the 63 bits after the sign flipped, so that the integers order
/// as the rewards do (filters and sorts compare them in SQL; migrations
/// `*_reward_order.sql`). Its own inverse.
pub(super) fn reward_key(value: f64) -> i64 {
    flip_negative(value.to_bits() as i64)
}

/// Returns the reward a stored key holds ([`reward_key`]).
fn reward_of_key(key: i64) -> f64 {
    f64::from_bits(flip_negative(key) as u64)
}

fn flip_negative(bits: i64) -> i64 {
    bits ^ ((bits >> 63) & i64::MAX)
}

/// The rows of the write set's training part.
pub(super) struct TrainingRows<'w> {
    rewards: Vec<(&'w String, &'w RolloutReward)>,
    model_versions: Vec<(&'w String, &'w i64)>,
    verdicts: Vec<(&'w String, &'w RowsVerdict)>,
    usage: Vec<(&'w String, &'w RolloutUsage)>,
    /// The rollouts whose verdict is dropped.
    dropped_verdicts: Vec<&'w str>,
    /// The summary's deltas, each with its version as stored.
    deltas: Vec<(String, &'w TrainingKey, &'w TrainingCounts)>,
    periods: Vec<(&'w PeriodKey, &'w TrainingCounts)>,
    /// The measures' deltas, each with its version as stored.
    measures: Vec<(String, &'w MeasureKey, &'w MeasureCounts)>,
}

impl<'w> TrainingRows<'w> {
    pub(super) fn of(writes: &'w WriteSet) -> Self {
        Self {
            rewards: writes.rewards.iter().collect(),
            model_versions: writes.model_versions.iter().collect(),
            verdicts: writes
                .rows_verdicts
                .iter()
                .filter_map(|(rollout_id, verdict)| Some((rollout_id, verdict.as_ref()?)))
                .collect(),
            usage: writes.usage.iter().collect(),
            dropped_verdicts: writes
                .rows_verdicts
                .iter()
                .filter(|(_, verdict)| verdict.is_none())
                .map(|(rollout_id, _)| rollout_id.as_str())
                .collect(),
            deltas: writes
                .training
                .rows()
                .map(|(key, delta)| (key.version.to_stored(), key, delta))
                .collect(),
            periods: writes.training.periods().collect(),
            measures: writes
                .training
                .measures()
                .map(|(key, delta)| (key.version.to_stored(), key, delta))
                .collect(),
        }
    }
}

/// Adds the rewards (each unless the stored one comes later), the model
/// versions (each unless the rollout has one), the verdicts (and their
/// deletions), the usage (added to the stored) and the summary's deltas
/// to `batch`.
pub(super) fn add<'a>(batch: &mut Batch<'a>, rows: &'a TrainingRows<'a>) {
    for part in rows.dropped_verdicts.chunks(batch.dialect().max_params) {
        batch.add(part.len(), |b| {
            b.push("DELETE FROM rollout_rows_verdicts WHERE ");
            let condition = b.one_of("rollout_id", part.iter().copied());
            b.push(&condition);
        });
    }
    upsert(
        batch,
        &rows.rewards,
        insert_into!("rollout_rewards", "rollout_id, sequence_id, value"),
        " ON CONFLICT (rollout_id) DO UPDATE SET \
         sequence_id = excluded.sequence_id, value = excluded.value \
         WHERE excluded.sequence_id >= rollout_rewards.sequence_id",
        |(rollout_id, reward)| {
            [
                rollout_id.as_str().into(),
                reward.sequence_id.into(),
                reward_key(reward.value).into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.model_versions,
        insert_into!("rollout_model_versions", "rollout_id, model_version"),
        " ON CONFLICT (rollout_id) DO NOTHING",
        |(rollout_id, model_version)| [rollout_id.as_str().into(), (**model_version).into()],
    );
    upsert(
        batch,
        &rows.verdicts,
        insert_into!(
            "rollout_rows_verdicts",
            "rollout_id, training_rows, reasons"
        ),
        " ON CONFLICT (rollout_id) DO UPDATE SET \
         training_rows = excluded.training_rows, reasons = excluded.reasons",
        |(rollout_id, verdict)| {
            [
                rollout_id.as_str().into(),
                verdict.rows.into(),
                verdict.reasons.bits().into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.usage,
        insert_into!(
            "rollout_usage",
            "rollout_id, calls, latency_ms, reported, prompt_tokens, response_tokens"
        ),
        &ADD_ON_CONFLICT[3],
        |(rollout_id, usage)| {
            [
                rollout_id.as_str().into(),
                usage.calls.into(),
                usage.latency_ms.into(),
                usage.reported.into(),
                usage.prompt_tokens.into(),
                usage.response_tokens.into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.deltas,
        insert_into!(
            "training_summary",
            "version, mode, rewarded, bin, reasons, rollouts, succeeded, reward_micros, \
             training_rows"
        ),
        &ADD_ON_CONFLICT[0],
        |(version, key, delta)| {
            [
                version.as_str().into(),
                key.mode.as_str().into(),
                i64::from(key.bin.is_some()).into(),
                key.bin.unwrap_or(0).into(),
                key.reasons.bits().into(),
                delta.rollouts.into(),
                delta.succeeded.into(),
                delta.reward_micros.into(),
                delta.training_rows.into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.periods,
        insert_into!(
            "reward_timeline",
            "resolution, period_start, mode, rewarded, bin, rollouts, succeeded, reward_micros, \
             training_rows"
        ),
        &ADD_ON_CONFLICT[1],
        |(key, delta)| {
            [
                key.resolution.seconds().into(),
                key.start.0.into(),
                key.mode.as_str().into(),
                i64::from(key.bin.is_some()).into(),
                key.bin.unwrap_or(0).into(),
                delta.rollouts.into(),
                delta.succeeded.into(),
                delta.reward_micros.into(),
                delta.training_rows.into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.measures,
        insert_into!(
            "training_measures",
            "version, mode, measure, bin, measured, total"
        ),
        &ADD_ON_CONFLICT[2],
        |(version, key, delta)| {
            [
                version.as_str().into(),
                key.mode.as_str().into(),
                key.measure.code().into(),
                key.bin.into(),
                delta.values.into(),
                delta.total.into(),
            ]
        },
    );
}

/// Reads the bin and the counts of a row of the summary or the timeline,
/// read with their two key columns first: `rewarded`, `bin`, then their
/// counts (as stored, or [`CountedTable::summed`]).
fn binned_counts(row: &impl Row) -> StoreResult<(Option<i64>, TrainingCounts)> {
    let bin = (row.int(2)? != 0).then(|| row.int(3)).transpose()?;
    let counts = TrainingCounts {
        rollouts: row.int(4)?,
        succeeded: row.int(5)?,
        reward_micros: row.int(6)?,
        training_rows: row.int(7)?,
    };
    Ok((bin, counts))
}

/// Reads a stored reward: its sequence id at `column`, its key
/// ([`reward_key`]) after.
fn reward_at(row: &impl Row, column: usize) -> StoreResult<RolloutReward> {
    Ok(RolloutReward {
        sequence_id: row.int(column)?,
        value: reward_of_key(row.int(column + 1)?),
    })
}

/// A table of what the store holds of a rollout besides the rollout (a
/// part of its [`Facts`]), one row per rollout, read as five integer
/// columns after the rollout id ([`TrainingReads::facts`]).
#[derive(Clone, Copy)]
enum Fact {
    Reward,
    ModelVersion,
    Verdict,
    Usage,
}

impl Fact {
    const ALL: [Fact; 4] = [Fact::Reward, Fact::ModelVersion, Fact::Verdict, Fact::Usage];

    /// Returns the table and its five columns (zeros where it has fewer:
    /// the union's columns take the type of `rollout_usage`'s, `BIGINT`).
    fn table(self) -> (&'static str, &'static str) {
        match self {
            Fact::Reward => ("rollout_rewards", "sequence_id, value, 0, 0, 0"),
            Fact::ModelVersion => ("rollout_model_versions", "model_version, 0, 0, 0, 0"),
            Fact::Verdict => ("rollout_rows_verdicts", "training_rows, reasons, 0, 0, 0"),
            Fact::Usage => (
                "rollout_usage",
                "calls, latency_ms, reported, prompt_tokens, response_tokens",
            ),
        }
    }

    /// Reads the fact from `row` (the rollout id, the fact's index in
    /// [`Fact::ALL`], its five columns) into `facts`.
    fn read(self, row: &impl Row, facts: &mut Facts) -> StoreResult<()> {
        match self {
            Fact::Reward => facts.reward = Some(reward_at(row, 2)?),
            Fact::ModelVersion => facts.model_version = Some(row.int(2)?),
            Fact::Verdict => {
                facts.verdict = Some(RowsVerdict {
                    rows: row.int(2)?,
                    reasons: NoRowsReasons::from_bits(row.int(3)?),
                });
            }
            Fact::Usage => {
                facts.usage = RolloutUsage {
                    calls: row.int(2)?,
                    latency_ms: row.int(3)?,
                    reported: row.int(4)?,
                    prompt_tokens: row.int(5)?,
                    response_tokens: row.int(6)?,
                };
            }
        }
        Ok(())
    }
}

#[async_trait]
impl<C: Connection> TrainingReads for SqlTx<C> {
    async fn rewards(&mut self, rollout_ids: &[&str]) -> StoreResult<Vec<(String, RolloutReward)>> {
        let mut b = Builder::new(C::DIALECT);
        let condition = b.one_of("rollout_id", rollout_ids.iter().copied());
        b.push(&format!(
            "SELECT rollout_id, sequence_id, value FROM rollout_rewards WHERE {condition}"
        ));
        let rows = self.read(b.finish()).await?;
        rows.iter()
            .map(|row| Ok((row.text(0)?, reward_at(row, 1)?)))
            .collect()
    }

    async fn facts(&mut self, rollout_ids: &[&str]) -> StoreResult<HashMap<String, Facts>> {
        let mut facts: HashMap<String, Facts> = HashMap::with_capacity(rollout_ids.len());
        // Each of the union's selects binds the ids (on SQLite, one
        // parameter each).
        let chunk = (C::DIALECT.max_params / Fact::ALL.len()).max(1);
        for part in rollout_ids.chunks(chunk) {
            let mut b = Builder::new(C::DIALECT);
            let selects: Vec<String> = Fact::ALL
                .iter()
                .enumerate()
                .map(|(index, fact)| {
                    let (table, columns) = fact.table();
                    let condition = b.one_of("rollout_id", part.iter().copied());
                    format!(
                        "SELECT rollout_id, CAST({index} AS BIGINT), {columns} FROM {table} \
                         WHERE {condition}"
                    )
                })
                .collect();
            b.push(&selects.join(" UNION ALL "));
            for row in &self.read(b.finish()).await? {
                let fact = usize::try_from(row.int(1)?)
                    .ok()
                    .and_then(|index| Fact::ALL.get(index))
                    .ok_or_else(|| corrupt("rollout facts", "an unknown table"))?;
                fact.read(row, facts.entry(row.text(0)?).or_default())?;
            }
        }
        Ok(facts)
    }

    async fn training_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<TrainingRow>> {
        let statement = match mode {
            Some(mode) => Statement::new(&SUMMARY_ROWS[0]).bind(mode),
            None => Statement::new(&SUMMARY_ROWS[1]),
        };
        let rows = self.read(statement).await?;
        let mut training = Vec::with_capacity(rows.len());
        for row in &rows {
            let (bin, counts) = binned_counts(row)?;
            training.push(TrainingRow {
                key: TrainingKey {
                    version: PolicyVersion::from_stored(&row.text(0)?),
                    mode: row.text(1)?,
                    bin,
                    reasons: NoRowsReasons::from_bits(row.int(9)?),
                },
                counts,
                version_number: row.opt_int(8)?,
            });
        }
        Ok(training)
    }

    async fn measure_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<MeasureRow>> {
        let packed = C::DIALECT.packs_rows;
        let statements = match packed {
            true => &PACKED_MEASURE_ROWS,
            false => &MEASURE_ROWS,
        };
        let statement = match mode {
            Some(mode) => Statement::new(&statements[0]).bind(mode),
            None => Statement::new(&statements[1]),
        };
        let rows = self.read(statement).await?;
        let mut measured = Vec::with_capacity(rows.len() * if packed { 20 } else { 1 });
        for row in &rows {
            // A measure this version does not know (written by a newer
            // replica sharing the database) is left out.
            let Some(measure) = Measure::from_code(row.int(2)?) else {
                continue;
            };
            let version = PolicyVersion::from_stored(&row.text(0)?);
            let mode = row.text(1)?;
            if !packed {
                let key = MeasureKey {
                    version,
                    mode,
                    measure,
                    bin: row.int(3)?,
                };
                let counts = MeasureCounts {
                    values: row.int(4)?,
                    total: row.int(5)?,
                };
                measured.push(MeasureRow { key, counts });
                continue;
            }
            for (bin, counts) in packed_bins(&row.text(3)?)? {
                let key = MeasureKey {
                    version: version.clone(),
                    mode: mode.clone(),
                    measure,
                    bin,
                };
                measured.push(MeasureRow { key, counts });
            }
        }
        Ok(measured)
    }

    async fn timeline_rows(
        &mut self,
        resolution: Resolution,
        mode: Option<&str>,
        starts: TimeRange,
    ) -> StoreResult<Vec<PeriodRow>> {
        let mut b = Builder::new(C::DIALECT);
        let mut conditions = vec![format!("resolution = {}", b.arg(resolution.seconds()))];
        if let Some(mode) = mode {
            conditions.push(b.equals("mode", mode));
        }
        conditions.extend(b.within("period_start", starts));
        b.push(&format!(
            "SELECT period_start, mode, rewarded, bin, {summed} FROM reward_timeline \
             WHERE {conditions} GROUP BY period_start, mode, rewarded, bin {having}",
            summed = TIMELINE.summed(),
            conditions = conditions.join(" AND "),
            having = TIMELINE.counting_something(),
        ));
        let rows = self.read(b.finish()).await?;
        let mut timeline = Vec::with_capacity(rows.len());
        for row in &rows {
            let (bin, counts) = binned_counts(row)?;
            timeline.push(PeriodRow {
                key: PeriodKey {
                    resolution,
                    start: Timestamp(row.int(0)?),
                    mode: row.text(1)?,
                    bin,
                },
                counts,
            });
        }
        Ok(timeline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_bins_read_the_triples_of_the_aggregated_text() {
        let counts = |values, total| MeasureCounts { values, total };
        assert_eq!(
            packed_bins("60 2 2000 -1 1 0").unwrap(),
            [(60, counts(2, 2000)), (-1, counts(1, 0))]
        );
        assert!(packed_bins("60 2").is_err());
        assert!(packed_bins("60 x 1").is_err());
    }

    #[test]
    fn reward_keys_order_as_the_rewards_and_give_them_back() {
        let rewards = [
            f64::MIN,
            -2.0,
            -1.0,
            -1e-300,
            -0.0,
            0.0,
            1e-300,
            0.5,
            1.0,
            f64::MAX,
        ];
        let keys: Vec<i64> = rewards.iter().map(|r| reward_key(*r)).collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:?}");
        for reward in rewards {
            assert_eq!(
                reward_of_key(reward_key(reward)).to_bits(),
                reward.to_bits()
            );
        }
    }

    #[test]
    fn the_sqlite_migration_turns_stored_bits_into_keys() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE rollout_rewards (rollout_id TEXT PRIMARY KEY, \
             sequence_id INTEGER NOT NULL, value INTEGER NOT NULL)",
        )
        .unwrap();
        let rewards = [-2.5, -0.0, 0.0, 0.75, f64::MIN, 1e300];
        for (index, reward) in rewards.iter().enumerate() {
            db.execute(
                "INSERT INTO rollout_rewards VALUES (?1, 1, ?2)",
                (index.to_string(), reward.to_bits() as i64),
            )
            .unwrap();
        }
        db.execute_batch(include_str!(
            "../../migrations/sqlite/0008_reward_order.sql"
        ))
        .unwrap();
        for (index, reward) in rewards.iter().enumerate() {
            let key: i64 = db
                .query_row(
                    "SELECT value FROM rollout_rewards WHERE rollout_id = ?1",
                    [index.to_string()],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(key, reward_key(*reward), "{reward}");
        }
    }
}
