//! The in-memory backend's training summary: the rollouts' final rewards
//! and usage, and the summary's rows, the timeline's and the measures'
//! (`TrainingReads`, and their apply step).

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use super::state::{MemoryTx, State};
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::Timestamp;
use lightning_store_core::query::TimeRange;
use lightning_store_core::storage::{TrainingReads, WriteSet};
use lightning_store_core::training::{
    Facts, MeasureRow, PeriodKey, PeriodRow, Resolution, RolloutReward, Summed, TrainingRow,
};

impl State {
    /// Stores the write set's rewards (unless a stored one comes later),
    /// model versions (unless one is stored) and verdicts, and adds its
    /// usage to the rollouts' and its deltas to the summary's rows.
    pub(super) fn apply_training(&mut self, writes: &mut WriteSet) {
        let training = &mut self.training;
        for (rollout_id, reward) in writes.rewards.drain(..) {
            match training.rewards.get_mut(&rollout_id) {
                Some(stored) if !reward.supersedes(stored) => {}
                Some(stored) => *stored = reward,
                None => {
                    training.rewards.insert(rollout_id, reward);
                }
            }
        }
        for (rollout_id, model_version) in writes.model_versions.drain(..) {
            training
                .model_versions
                .entry(rollout_id)
                .or_insert(model_version);
        }
        for (rollout_id, verdict) in writes.rows_verdicts.drain(..) {
            match verdict {
                Some(verdict) => training.rows_verdicts.insert(rollout_id, verdict),
                None => training.rows_verdicts.remove(&rollout_id),
            };
        }
        for (rollout_id, usage) in writes.usage.drain(..) {
            training.usage.entry(rollout_id).or_default().add(usage);
        }
        add_deltas(&mut training.rows, writes.training.rows());
        add_deltas(&mut training.periods, writes.training.periods());
        add_deltas(&mut training.measures, writes.training.measures());
    }

    /// Forgets a deleted rollout's reward, model version, verdict and
    /// usage.
    pub(super) fn forget_training(&mut self, rollout_id: &str) {
        self.training.rewards.remove(rollout_id);
        self.training.usage.remove(rollout_id);
        self.training.model_versions.remove(rollout_id);
        self.training.rows_verdicts.remove(rollout_id);
    }
}

/// Adds each delta to its row of `rows`, dropping the rows that come to
/// nothing.
fn add_deltas<'d, K: Ord + Clone + 'd, C: Summed + 'd>(
    rows: &mut BTreeMap<K, C>,
    deltas: impl Iterator<Item = (&'d K, &'d C)>,
) {
    for (key, delta) in deltas {
        // Most deltas land on a row that exists: look it up before cloning
        // the key for a new one.
        match rows.get_mut(key) {
            Some(row) => {
                row.add(*delta, 1);
                if row.is_zero() {
                    rows.remove(key);
                }
            }
            None if !delta.is_zero() => {
                rows.insert(key.clone(), *delta);
            }
            None => {}
        }
    }
}

#[async_trait]
impl TrainingReads for MemoryTx<'_> {
    async fn rewards(&mut self, rollout_ids: &[&str]) -> StoreResult<Vec<(String, RolloutReward)>> {
        let rewards = &self.state.training.rewards;
        Ok(rollout_ids
            .iter()
            .filter_map(|&id| rewards.get(id).map(|reward| (id.to_owned(), *reward)))
            .collect())
    }

    async fn facts(&mut self, rollout_ids: &[&str]) -> StoreResult<HashMap<String, Facts>> {
        let training = &self.state.training;
        Ok(rollout_ids
            .iter()
            .filter_map(|&rollout_id| {
                let usage = training.usage.get(rollout_id).copied();
                let facts = Facts {
                    reward: training.rewards.get(rollout_id).copied(),
                    model_version: training.model_versions.get(rollout_id).copied(),
                    verdict: training.rows_verdicts.get(rollout_id).copied(),
                    usage: usage.unwrap_or_default(),
                };
                let held = facts.reward.is_some()
                    || facts.model_version.is_some()
                    || facts.verdict.is_some()
                    || usage.is_some();
                held.then(|| (rollout_id.to_owned(), facts))
            })
            .collect())
    }

    async fn training_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<TrainingRow>> {
        let state = &*self.state;
        Ok(state
            .training
            .rows
            .iter()
            .filter(|(key, _)| mode.is_none_or(|mode| key.mode == mode))
            .map(|(key, counts)| TrainingRow {
                key: key.clone(),
                counts: *counts,
                version_number: state
                    .resources
                    .get_index_of(key.version.resources_id())
                    .map(|index| index as i64 + 1),
            })
            .collect())
    }

    async fn measure_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<MeasureRow>> {
        Ok(self
            .state
            .training
            .measures
            .iter()
            .filter(|(key, _)| mode.is_none_or(|mode| key.mode == mode))
            .map(|(key, counts)| MeasureRow {
                key: key.clone(),
                counts: *counts,
            })
            .collect())
    }

    async fn timeline_rows(
        &mut self,
        resolution: Resolution,
        mode: Option<&str>,
        starts: TimeRange,
    ) -> StoreResult<Vec<PeriodRow>> {
        let bound = |start: Timestamp| PeriodKey {
            resolution,
            start,
            mode: String::new(),
            bin: None,
        };
        // No period starts at the last instant, so `to` is never unbounded.
        let from = bound(starts.from.unwrap_or(Timestamp(i64::MIN)));
        let to = bound(starts.until.unwrap_or(Timestamp(i64::MAX)));
        Ok(self
            .state
            .training
            .periods
            .range(from..to)
            .filter(|(key, _)| mode.is_none_or(|mode| key.mode == mode))
            .map(|(key, counts)| PeriodRow {
                key: key.clone(),
                counts: *counts,
            })
            .collect())
    }
}
