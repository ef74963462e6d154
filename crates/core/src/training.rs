//! Is the training learning: the reward of ended rollouts by policy
//! version and mode, kept as the store changes rather than computed by
//! scanning.
//!
//! A rollout *counts* once it ended as succeeded or failed (a cancelled
//! rollout says nothing of the policy); it counts under its resources
//! version (agent-lightning 0.x publishes one per training step) and its
//! mode. Its reward is its *final* reward: the reward of its span with the
//! greatest sequence id that carries one ([`crate::reward`]), ties going to
//! the one stored last, whenever that span arrives (also after the end).
//!
//! The engine turns every change of what a rollout counts for into deltas
//! of the summary's rows ([`TrainingDeltas`]), in the write set of the
//! transaction that made the change; the backends add them up. A row is a
//! (version, mode, reward bin): rewards are counted in bins of two
//! significant digits ([`bin`]), from which [`summarise`] reads the
//! percentiles; the mean is exact (sums are kept in millionths).

use indexmap::IndexMap;

use super::model::{Rollout, RolloutMode, RolloutStatus};

/// A rollout's final reward as stored: its value and the sequence id of
/// the span it was read from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutReward {
    pub sequence_id: i64,
    pub value: f64,
}

impl RolloutReward {
    /// Returns a reward read from a span, `None` when its value is not a
    /// finite number (such a reward counts as none).
    pub fn new(sequence_id: i64, value: f64) -> Option<Self> {
        value.is_finite().then_some(Self { sequence_id, value })
    }

    /// Returns whether `self`, offered after `stored`, becomes the final
    /// reward: its span comes later, or is as late and arrived last.
    pub fn supersedes(&self, stored: &RolloutReward) -> bool {
        self.sequence_id >= stored.sequence_id
    }
}

/// One row of the summary: what a rollout counts under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrainingKey {
    /// The rollout's resources id; empty when it has none.
    pub version: String,
    /// The rollout's mode; empty when it has none.
    pub mode: String,
    /// The reward's bin ([`bin`]), `None` for a rollout without a reward.
    pub bin: Option<i64>,
}

/// What a row counts, or a change of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrainingCounts {
    /// Rollouts counted.
    pub rollouts: i64,
    /// Of them, those that succeeded.
    pub succeeded: i64,
    /// The sum of their rewards, in millionths.
    pub reward_micros: i64,
}

impl TrainingCounts {
    /// Adds `other` times `sign` (1 or -1); the reward's sum saturates.
    pub fn add(&mut self, other: TrainingCounts, sign: i64) {
        self.rollouts += sign * other.rollouts;
        self.succeeded += sign * other.succeeded;
        self.reward_micros = self
            .reward_micros
            .saturating_add(other.reward_micros.saturating_mul(sign));
    }

    /// Returns whether the counts are all zero.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// A row of the summary as stored: its key and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingRow {
    pub key: TrainingKey,
    pub counts: TrainingCounts,
    /// The number of the resources version the row names, when the store
    /// holds it: its place in creation order, 1 for the first published.
    pub version_number: Option<i64>,
}

/// Returns whether a rollout counts: it ended as succeeded or failed.
pub fn counts(rollout: &Rollout) -> bool {
    matches!(
        rollout.status,
        RolloutStatus::Succeeded | RolloutStatus::Failed
    )
}

/// Returns the row a rollout counts under and what it adds, `None` when it
/// does not count ([`counts`]).
pub fn contribution(
    rollout: &Rollout,
    reward: Option<&RolloutReward>,
) -> Option<(TrainingKey, TrainingCounts)> {
    if !counts(rollout) {
        return None;
    }
    let succeeded = i64::from(rollout.status == RolloutStatus::Succeeded);
    let key = TrainingKey {
        version: rollout.resources_id.clone().unwrap_or_default(),
        mode: rollout
            .mode
            .map(|m| m.as_str())
            .unwrap_or_default()
            .to_owned(),
        bin: reward.map(|reward| bin(reward.value)),
    };
    let counts = TrainingCounts {
        rollouts: 1,
        succeeded,
        reward_micros: reward.map_or(0, |reward| micros(reward.value)),
    };
    Some((key, counts))
}

/// Returns a reward in millionths, saturating beyond ±9.2·10¹².
fn micros(value: f64) -> i64 {
    (value * 1e6).round() as i64
}

/// Returns the bin of a reward: the reward rounded to two significant
/// digits, as the bits of that `f64` (0 for zero, of either sign).
pub fn bin(value: f64) -> i64 {
    let rounded: f64 = format!("{value:.1e}").parse().unwrap_or(value);
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    rounded.to_bits() as i64
}

/// Returns the reward a bin stands for.
pub fn bin_value(bin: i64) -> f64 {
    f64::from_bits(bin as u64)
}

/// The changes a transaction makes to the summary's rows, summed by row;
/// rows whose change sums to nothing are left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainingDeltas {
    rows: IndexMap<TrainingKey, TrainingCounts>,
}

impl TrainingDeltas {
    /// Notes that a rollout stopped counting as `before` and counts as
    /// `after` now (either `None`: it did not, or does not).
    pub fn moved(
        &mut self,
        before: Option<(TrainingKey, TrainingCounts)>,
        after: Option<(TrainingKey, TrainingCounts)>,
    ) {
        if before == after {
            return;
        }
        for (change, sign) in [(before, -1), (after, 1)] {
            if let Some((key, counts)) = change {
                let row = self.rows.entry(key.clone()).or_default();
                row.add(counts, sign);
                if row.is_zero() {
                    self.rows.shift_remove(&key);
                }
            }
        }
    }

    /// Returns whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Returns the changed rows with their changes.
    pub fn rows(&self) -> impl Iterator<Item = (&TrainingKey, &TrainingCounts)> {
        self.rows.iter()
    }
}

/// What one version's rollouts of one mode came to.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSummary {
    /// The resources id (empty: rollouts without one).
    pub version: String,
    /// The number of the resources version, when the store holds it: its
    /// place in creation order, 1 for the first published.
    pub version_number: Option<i64>,
    /// The mode (empty: rollouts without one).
    pub mode: String,
    /// Rollouts that ended as succeeded or failed.
    pub rollouts: i64,
    /// Of them, those that succeeded.
    pub succeeded: i64,
    /// Of them, those with a reward.
    pub rewarded: i64,
    /// The mean reward of those with one.
    pub reward_mean: Option<f64>,
    /// The 10th, 50th and 90th percentiles of their rewards, to two
    /// significant digits (nearest rank over the bins).
    pub reward_p10: Option<f64>,
    pub reward_p50: Option<f64>,
    pub reward_p90: Option<f64>,
    /// The rewards' distribution: (a bin's reward, rollouts in it), in
    /// ascending order of reward, empty bins left out.
    pub bins: Vec<(f64, i64)>,
}

impl VersionSummary {
    /// Returns the summary of `version` (a resources id) with no counted
    /// rollout in `mode`.
    pub fn empty(version: &str, mode: RolloutMode) -> Self {
        Self {
            version: version.to_owned(),
            version_number: None,
            mode: mode.as_str().to_owned(),
            rollouts: 0,
            succeeded: 0,
            rewarded: 0,
            reward_mean: None,
            reward_p10: None,
            reward_p50: None,
            reward_p90: None,
            bins: Vec::new(),
        }
    }
}

/// The rows of one (version, mode), summed.
#[derive(Default)]
struct Group {
    version_number: Option<i64>,
    /// (the bin's reward, rollouts in it).
    bins: Vec<(f64, i64)>,
    counts: TrainingCounts,
}

impl Group {
    fn into_summary(self, version: String, mode: String) -> VersionSummary {
        let Group {
            version_number,
            mut bins,
            counts,
        } = self;
        bins.retain(|&(_, n)| n > 0);
        bins.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rewarded: i64 = bins.iter().map(|&(_, n)| n).sum();
        let percentile = |p: f64| nearest_rank(&bins, rewarded, p);
        VersionSummary {
            version,
            version_number,
            mode,
            rollouts: counts.rollouts,
            succeeded: counts.succeeded,
            rewarded,
            reward_mean: (rewarded > 0)
                .then(|| counts.reward_micros as f64 / 1e6 / rewarded as f64),
            reward_p10: percentile(0.1),
            reward_p50: percentile(0.5),
            reward_p90: percentile(0.9),
            bins,
        }
    }
}

/// Sums rows into one summary per (version, mode), in version order (by
/// number, versions the store does not hold last, by id), then mode.
pub fn summarise(rows: Vec<TrainingRow>) -> Vec<VersionSummary> {
    let mut groups: IndexMap<(String, String), Group> = IndexMap::new();
    for row in rows {
        let TrainingRow {
            key,
            counts,
            version_number,
        } = row;
        let group = groups.entry((key.version, key.mode)).or_default();
        group.version_number = version_number;
        group.counts.add(counts, 1);
        if let Some(bin) = key.bin {
            group.bins.push((bin_value(bin), counts.rollouts));
        }
    }
    let mut summaries: Vec<VersionSummary> = groups
        .into_iter()
        .map(|((version, mode), group)| group.into_summary(version, mode))
        .filter(|summary| summary.rollouts > 0)
        .collect();
    summaries.sort_by(|a, b| {
        (
            a.version_number.is_none(),
            a.version_number,
            &a.version,
            &a.mode,
        )
            .cmp(&(
                b.version_number.is_none(),
                b.version_number,
                &b.version,
                &b.mode,
            ))
    });
    summaries
}

/// Returns the `p`-th percentile by nearest rank: the value of the
/// `ceil(p·n)`-th smallest of `n` (at least the first).
fn nearest_rank(sorted_bins: &[(f64, i64)], n: i64, p: f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let rank = ((p * n as f64).ceil() as i64).max(1);
    let mut seen = 0;
    sorted_bins.iter().find_map(|&(value, count)| {
        seen += count;
        (seen >= rank).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Json, RolloutConfig, RolloutMode, Timestamp};

    fn rollout(status: RolloutStatus, mode: Option<RolloutMode>, version: &str) -> Rollout {
        Rollout {
            rollout_id: "ro-1".into(),
            input: Json::Null,
            start_time: Timestamp(0),
            end_time: Some(Timestamp(1)),
            mode,
            resources_id: Some(version.into()),
            status,
            config: RolloutConfig::default(),
            metadata: Json::Null,
        }
    }

    fn reward(value: f64) -> RolloutReward {
        RolloutReward::new(1, value).expect("finite")
    }

    #[test]
    fn bins_keep_two_significant_digits() {
        for (value, binned) in [
            (0.0, 0.0),
            (-0.0, 0.0),
            (1.0, 1.0),
            (0.5, 0.5),
            (0.123, 0.12),
            (0.126, 0.13),
            (-2.71, -2.7),
            (12345.0, 12000.0),
        ] {
            assert_eq!(bin_value(bin(value)), binned, "{value}");
        }
        assert_eq!(bin(-0.0), bin(0.0));
    }

    #[test]
    fn only_succeeded_and_failed_rollouts_count() {
        let train = Some(RolloutMode::Train);
        for (status, counts) in [
            (RolloutStatus::Succeeded, Some(1)),
            (RolloutStatus::Failed, Some(0)),
            (RolloutStatus::Cancelled, None),
            (RolloutStatus::Running, None),
            (RolloutStatus::Queuing, None),
        ] {
            let counted = contribution(&rollout(status, train, "rs-1"), Some(&reward(0.5)));
            assert_eq!(counted.map(|(_, c)| c.succeeded), counts, "{status:?}");
        }
    }

    #[test]
    fn a_reward_that_is_not_a_number_counts_as_none() {
        assert_eq!(RolloutReward::new(3, f64::NAN), None);
        assert_eq!(RolloutReward::new(3, f64::INFINITY), None);
    }

    #[test]
    fn a_later_or_equal_span_supersedes_the_stored_reward() {
        let stored = RolloutReward::new(5, 1.0).unwrap();
        assert!(RolloutReward::new(6, 0.0).unwrap().supersedes(&stored));
        assert!(RolloutReward::new(5, 0.0).unwrap().supersedes(&stored));
        assert!(!RolloutReward::new(4, 0.0).unwrap().supersedes(&stored));
    }

    #[test]
    fn deltas_that_cancel_out_leave_no_row() {
        let done = rollout(RolloutStatus::Succeeded, None, "rs-1");
        let mut deltas = TrainingDeltas::default();
        deltas.moved(None, contribution(&done, Some(&reward(1.0))));
        deltas.moved(contribution(&done, Some(&reward(1.0))), None);
        assert!(deltas.is_empty());
        deltas.moved(
            contribution(&done, Some(&reward(1.0))),
            contribution(&done, Some(&reward(0.0))),
        );
        let rows: Vec<_> = deltas.rows().map(|(k, c)| (k.bin, c.rollouts)).collect();
        assert_eq!(rows, [(Some(bin(1.0)), -1), (Some(bin(0.0)), 1)]);
    }

    #[test]
    fn a_summary_reads_percentiles_by_nearest_rank_and_an_exact_mean() {
        let key = |bin_of: Option<f64>| TrainingKey {
            version: "rs-2".into(),
            mode: "val".into(),
            bin: bin_of.map(bin),
        };
        let row = |bin_of: Option<f64>, rollouts, succeeded, reward: f64| TrainingRow {
            key: key(bin_of),
            counts: TrainingCounts {
                rollouts,
                succeeded,
                reward_micros: micros(reward),
            },
            version_number: Some(2),
        };
        // Rewards 0 ×6, 0.5 ×3, 1 ×1, and two rollouts without a reward.
        let rows = vec![
            row(Some(1.0), 1, 1, 1.0),
            row(Some(0.0), 6, 2, 0.0),
            row(Some(0.5), 3, 3, 1.5),
            row(None, 2, 0, 0.0),
        ];
        let summary = summarise(rows);
        assert_eq!(summary.len(), 1);
        let summary = &summary[0];
        assert_eq!(
            (summary.rollouts, summary.succeeded, summary.rewarded),
            (12, 6, 10)
        );
        assert_eq!(summary.reward_mean, Some(0.25));
        assert_eq!(summary.reward_p10, Some(0.0));
        assert_eq!(summary.reward_p50, Some(0.0));
        assert_eq!(summary.reward_p90, Some(0.5));
    }

    #[test]
    fn summaries_come_in_version_order_unknown_versions_last() {
        let row = |version: &str, number: Option<i64>| TrainingRow {
            key: TrainingKey {
                version: version.into(),
                mode: "train".into(),
                bin: None,
            },
            counts: TrainingCounts {
                rollouts: 1,
                succeeded: 1,
                reward_micros: 0,
            },
            version_number: number,
        };
        let order: Vec<String> = summarise(vec![
            row("", None),
            row("rs-b", Some(10)),
            row("rs-a", Some(2)),
        ])
        .into_iter()
        .map(|s| s.version)
        .collect();
        assert_eq!(order, ["rs-a", "rs-b", ""]);
    }
}
