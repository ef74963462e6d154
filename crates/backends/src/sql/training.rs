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
                reward_key(reward.value).into(),
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
                value: reward_of_key(row.int(2)?),
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

#[cfg(test)]
mod tests {
    use super::*;

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
