//! The training summary's storage (`TrainingReads`, and its part of the
//! write set's batch, [`add`]): each rollout's final reward in
//! `rollout_rewards`, and the summary's rows in `training_summary`, to
//! which the write set's deltas are added (migrations `*_training.sql`).
//! On a shared database each connection adds to its own shard of a row
//! (the column's default), summed when read, and the shards are folded
//! into shard 0 by the housekeeping ([`FOLD_SHARDS`]).

use async_trait::async_trait;

use super::batch::{Batch, insert_into, upsert};
use super::connection::Connection;
use super::query::Builder;
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::storage::{TrainingReads, WriteSet};
use lightning_store_core::training::{RolloutReward, TrainingCounts, TrainingKey, TrainingRow};

/// On a shared database: folds the shards of the summary's rows into
/// shard 0, in one statement (the sums do not change). It never waits for
/// a connection adding to its shard: rows locked by a transaction that
/// has not committed are skipped (folded next time), and a connection's
/// upsert of a row being folded waits for the fold's commit, then inserts
/// its shard's row again. Two folds at once (two servers) lock the rows
/// of shard 0 in key order, so neither waits for the other in a cycle.
pub(super) const FOLD_SHARDS: &str = "WITH doomed AS (SELECT version, mode, rewarded, bin, shard \
     FROM training_summary WHERE shard <> 0 FOR UPDATE SKIP LOCKED), \
     folded AS (DELETE FROM training_summary t USING doomed d \
     WHERE t.version = d.version AND t.mode = d.mode AND t.rewarded = d.rewarded \
     AND t.bin = d.bin AND t.shard = d.shard \
     RETURNING t.version, t.mode, t.rewarded, t.bin, t.rollouts, t.succeeded, t.reward_micros) \
     INSERT INTO training_summary \
     (version, mode, rewarded, bin, shard, rollouts, succeeded, reward_micros) \
     SELECT version, mode, rewarded, bin, 0, SUM(rollouts), SUM(succeeded), SUM(reward_micros) \
     FROM folded GROUP BY version, mode, rewarded, bin ORDER BY version, mode, rewarded, bin \
     ON CONFLICT (version, mode, rewarded, bin, shard) DO UPDATE SET \
     rollouts = training_summary.rollouts + excluded.rollouts, \
     succeeded = training_summary.succeeded + excluded.succeeded, \
     reward_micros = training_summary.reward_micros + excluded.reward_micros";

/// The rows of the write set's training part.
pub(super) struct TrainingRows<'w> {
    rewards: Vec<(&'w String, &'w RolloutReward)>,
    deltas: Vec<(&'w TrainingKey, &'w TrainingCounts)>,
}

impl<'w> TrainingRows<'w> {
    pub(super) fn of(writes: &'w WriteSet) -> Self {
        Self {
            rewards: writes.rewards.iter().collect(),
            deltas: writes.training.rows().collect(),
        }
    }
}

/// Adds the rewards (each unless the stored one comes later) and the
/// summary's deltas to `batch`.
pub(super) fn add<'a>(batch: &mut Batch<'a>, rows: &'a TrainingRows<'a>) {
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
                (reward.value.to_bits() as i64).into(),
            ]
        },
    );
    upsert(
        batch,
        &rows.deltas,
        insert_into!(
            "training_summary",
            "version, mode, rewarded, bin, rollouts, succeeded, reward_micros"
        ),
        " ON CONFLICT (version, mode, rewarded, bin, shard) DO UPDATE SET \
         rollouts = training_summary.rollouts + excluded.rollouts, \
         succeeded = training_summary.succeeded + excluded.succeeded, \
         reward_micros = training_summary.reward_micros + excluded.reward_micros",
        |(key, delta)| {
            [
                key.version.as_str().into(),
                key.mode.as_str().into(),
                i64::from(key.bin.is_some()).into(),
                key.bin.unwrap_or(0).into(),
                delta.rollouts.into(),
                delta.succeeded.into(),
                delta.reward_micros.into(),
            ]
        },
    );
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
        let mut rewards = Vec::with_capacity(rows.len());
        for row in &rows {
            let reward = RolloutReward {
                sequence_id: row.int(1)?,
                value: f64::from_bits(row.int(2)? as u64),
            };
            rewards.push((row.text(0)?, reward));
        }
        Ok(rewards)
    }

    async fn training_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<TrainingRow>> {
        /// The rows summed over their shards, with `$where` before the grouping.
        macro_rules! summed {
            ($where:literal) => {
                concat!(
                    "SELECT s.version, s.mode, s.rewarded, s.bin, \
                     CAST(SUM(s.rollouts) AS BIGINT), CAST(SUM(s.succeeded) AS BIGINT), \
                     CAST(SUM(s.reward_micros) AS BIGINT), CAST(MAX(r.version) AS BIGINT) \
                     FROM training_summary s LEFT JOIN (SELECT resources_id, \
                     ROW_NUMBER() OVER (ORDER BY pos) AS version FROM resources) r \
                     ON r.resources_id = s.version",
                    $where,
                    " GROUP BY s.version, s.mode, s.rewarded, s.bin \
                     HAVING SUM(s.rollouts) <> 0 OR SUM(s.succeeded) <> 0 \
                     OR SUM(s.reward_micros) <> 0"
                )
            };
        }
        let statement = match mode {
            Some(mode) => Statement::new(summed!(" WHERE s.mode = $1")).bind(mode),
            None => Statement::new(summed!("")),
        };
        let rows = self.read(statement).await?;
        let mut training = Vec::with_capacity(rows.len());
        for row in &rows {
            training.push(TrainingRow {
                key: TrainingKey {
                    version: row.text(0)?,
                    mode: row.text(1)?,
                    bin: (row.int(2)? != 0).then(|| row.int(3)).transpose()?,
                },
                counts: TrainingCounts {
                    rollouts: row.int(4)?,
                    succeeded: row.int(5)?,
                    reward_micros: row.int(6)?,
                },
                version_number: row.opt_int(7)?,
            });
        }
        Ok(training)
    }
}
