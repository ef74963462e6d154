//! The training summary's storage ([`crate::training`]): the final reward
//! each rollout has, and the summary's rows. The engine decides every
//! change; a backend stores the rewards the write set gives
//! ([`WriteSet::rewards`](super::WriteSet::rewards)) and adds the write
//! set's deltas to the summary's rows and the timeline's
//! ([`WriteSet::training`](super::WriteSet::training)), to the timeline's
//! and to the measures'.
//!
//! # Contract
//! * A reward written for a rollout replaces the stored one unless the
//!   stored one's sequence id is greater ([`RolloutReward::supersedes`]).
//! * A model version written for a rollout is stored unless the rollout
//!   has one ([`WriteSet::model_versions`](super::WriteSet::model_versions)):
//!   the first stays.
//! * A verdict written for a rollout
//!   ([`WriteSet::rows_verdicts`](super::WriteSet::rows_verdicts))
//!   replaces the stored one; `None` deletes it.
//! * What a rollout's calls used, written
//!   ([`WriteSet::usage`](super::WriteSet::usage)), is added to what it
//!   stored.
//! * Deleting a rollout deletes its reward, its model version, its
//!   verdict and its usage; the summary's rows change only by the deltas
//!   the write set gives.
//! * [`TrainingReads::training_rows`], [`TrainingReads::measure_rows`] and
//!   [`TrainingReads::timeline_rows`] read the rows whose counts are not
//!   all zero, costing what they return, not the rollouts counted.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::query::TimeRange;
use crate::training::{Facts, MeasureRow, PeriodRow, Resolution, RolloutReward, TrainingRow};

/// The reads of the training summary.
#[async_trait]
pub trait TrainingReads: Send {
    /// Returns the stored rewards of those of `rollout_ids` that have one,
    /// in no particular order.
    async fn rewards(&mut self, rollout_ids: &[&str]) -> StoreResult<Vec<(String, RolloutReward)>>;
    /// Returns what the store holds of each of `rollout_ids` that it holds
    /// anything of: its final reward, the model version of its first model
    /// call, its verdict (what a judged 1.x rollout gave its trainer) and
    /// what its model calls used. One read for the four, as settling the
    /// summary needs them of every rollout that counts or stops counting.
    async fn facts(&mut self, rollout_ids: &[&str]) -> StoreResult<HashMap<String, Facts>>;
    /// Returns the summary's rows (of `mode` only, when given), each with
    /// the number of the resources version it names when the store holds
    /// it (its place in the resources' creation order, from 1), in no
    /// particular order; a key may come in several rows (a shared
    /// database's shards), which [`summarise`](crate::training::summarise)
    /// adds up.
    async fn training_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<TrainingRow>>;
    /// Returns the measures' rows (of `mode` only, when given), in no
    /// particular order; a key may come in several rows (a shared
    /// database's shards), which [`summarise`](crate::training::summarise)
    /// adds up.
    async fn measure_rows(&mut self, mode: Option<&str>) -> StoreResult<Vec<MeasureRow>>;
    /// Returns the timeline's rows of `resolution` (of `mode` only, when
    /// given) whose period starts in `starts`, in no particular order.
    async fn timeline_rows(
        &mut self,
        resolution: Resolution,
        mode: Option<&str>,
        starts: TimeRange,
    ) -> StoreResult<Vec<PeriodRow>>;
}
