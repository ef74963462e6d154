//! Is the training learning: the reward of ended rollouts by policy
//! version and mode, kept as the store changes rather than computed by
//! scanning.
//!
//! A rollout *counts* once it ended as succeeded or failed (a cancelled
//! rollout says nothing of the policy); it counts under its policy version
//! ([`PolicyVersion`]: its resources version, of which agent-lightning 0.x
//! publishes one per training step, or else the 1.x model version that
//! served its first model call) and its mode. Its reward is its *final*
//! reward: the reward of its span with the greatest sequence id that
//! carries one ([`crate::reward`]), ties going to the one stored last,
//! whenever that span arrives (also after the end).
//! An agent-lightning 1.x rollout's reward events count the same way, in
//! the order they were recorded: its final reward is its latest reward
//! event whose value is a number (the reward its trainer reads, unless a
//! later event's value is not a number: then the trainer reads none, and
//! the rollout's training rows say why).
//!
//! The engine turns every change of what a rollout counts for into deltas
//! of the summary's rows ([`TrainingDeltas`]), in the write set of the
//! transaction that made the change; the backends add them up. A row is a
//! (version, mode, reward bin): rewards are counted in bins of two
//! significant digits ([`bin`]), from which [`summarise`] reads the
//! percentiles; the mean is exact (sums are kept in millionths).
//!
//! The same numbers are kept over time: a rollout also counts under the
//! minute and the hour it ended in ([`PeriodKey`]), rows that
//! [`summarise_periods`] reads as the reward timeline.
//!
//! An agent-lightning 1.x rollout also counts the training rows its
//! trainer builds from it ([`RowsVerdict`]): judged from its events when it
//! ends, as the trainer reads them then (events recorded after do not
//! change it), and, when it gives none, under the reasons why.
//!
//! Besides its reward, a counted rollout measures its duration, and what
//! its model calls used ([`usage`]): tokens and latency ([`measure`]),
//! kept as distributions in rows of their own.

pub mod measure;
pub mod usage;

use std::collections::HashMap;

use indexmap::{IndexMap, map::Entry};

use self::measure::{Measure, MeasureCounts};
use self::usage::RolloutUsage;
use super::distribution::{Binned, Distribution, bin, bin_value, log_bin_value};
use super::model::{Rollout, RolloutMode, RolloutStatus, Timestamp};

/// A rollout's final reward as stored: its value and where it comes in
/// the rollout's records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutReward {
    /// The sequence id of the span it was read from, or the time (in
    /// nanoseconds) a 1.x reward event was recorded.
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

/// The policy version a rollout counts under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyVersion {
    /// The rollout has no resources id and made no model call.
    None,
    /// The rollout's resources id (agent-lightning 0.x).
    Resources(String),
    /// The model version that served the rollout's first model call
    /// through the gateway (agent-lightning 1.x), for a rollout without a
    /// resources id.
    Model(i64),
}

/// The text a model version is stored as begins with this control
/// character, which no resources id holds ([`crate::ids::validate_id`]).
const MODEL_VERSION_MARK: char = '\u{1}';

impl PolicyVersion {
    /// Returns the version of a rollout with `resources_id` whose first
    /// model call was served by `model_version`.
    pub fn of(resources_id: Option<&str>, model_version: Option<i64>) -> Self {
        match (resources_id, model_version) {
            (Some(id), _) => Self::Resources(id.to_owned()),
            (None, Some(version)) => Self::Model(version),
            (None, None) => Self::None,
        }
    }

    /// Returns the version as one text key column stores it: a resources
    /// id as is, none as the empty text, a model version marked by a
    /// control character no resources id holds.
    pub fn to_stored(&self) -> String {
        match self {
            Self::None => String::new(),
            Self::Resources(id) => id.clone(),
            Self::Model(version) => format!("{MODEL_VERSION_MARK}{version}"),
        }
    }

    /// Reads a version stored by [`PolicyVersion::to_stored`].
    pub fn from_stored(stored: &str) -> Self {
        match stored.strip_prefix(MODEL_VERSION_MARK).map(str::parse) {
            Some(Ok(version)) => Self::Model(version),
            _ if stored.is_empty() => Self::None,
            _ => Self::Resources(stored.to_owned()),
        }
    }

    /// Returns the resources id, empty for another version.
    pub fn resources_id(&self) -> &str {
        match self {
            Self::Resources(id) => id,
            Self::None | Self::Model(_) => "",
        }
    }

    /// Returns the model version, if the version is one.
    pub fn model_version(&self) -> Option<i64> {
        match self {
            Self::Model(version) => Some(*version),
            Self::None | Self::Resources(_) => None,
        }
    }
}

/// Why an agent-lightning 1.x rollout gives its trainer no training row:
/// the findings of [`crate::agl1::diagnosis`] a person acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoRowsReason {
    /// The agent made no call through the gateway.
    NoModelCalls,
    /// Calls the model server answered with an error.
    FailedCalls,
    /// Calls whose answer had no response token ids.
    NoTokenIds,
    /// No reward event.
    NoReward,
    /// The last reward event's value is not a number.
    RewardNotANumber,
    /// The rollout failed.
    RolloutFailed,
}

impl NoRowsReason {
    /// Every reason, in the order they are shown.
    pub const ALL: [NoRowsReason; 6] = [
        Self::NoModelCalls,
        Self::FailedCalls,
        Self::NoTokenIds,
        Self::NoReward,
        Self::RewardNotANumber,
        Self::RolloutFailed,
    ];

    /// Returns the reason's name (as the export's reason codes spell it).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoModelCalls => "no_model_calls",
            Self::FailedCalls => "failed_calls",
            Self::NoTokenIds => "no_token_ids",
            Self::NoReward => "no_reward",
            Self::RewardNotANumber => "reward_not_a_number",
            Self::RolloutFailed => "rollout_failed",
        }
    }

    /// Parses a reason's name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }

    /// Returns the reason's bit in a [`NoRowsReasons`] mask.
    pub fn bit(self) -> i64 {
        1 << self as u8
    }
}

/// A set of [`NoRowsReason`]s, stored as a bit mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NoRowsReasons(i64);

impl NoRowsReasons {
    /// Returns the set a stored mask holds (unknown bits left out).
    pub fn from_bits(bits: i64) -> Self {
        Self(
            NoRowsReason::ALL
                .iter()
                .fold(0, |mask, reason| mask | (bits & reason.bit())),
        )
    }

    /// Returns the mask as stored.
    pub fn bits(self) -> i64 {
        self.0
    }

    /// Adds a reason.
    pub fn insert(&mut self, reason: NoRowsReason) {
        self.0 |= reason.bit();
    }

    /// Returns whether the set holds `reason`.
    pub fn contains(self, reason: NoRowsReason) -> bool {
        self.0 & reason.bit() != 0
    }

    /// Returns whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Returns the reasons in the order they are shown.
    pub fn iter(self) -> impl Iterator<Item = NoRowsReason> {
        NoRowsReason::ALL
            .into_iter()
            .filter(move |reason| self.contains(*reason))
    }
}

/// What an agent-lightning 1.x rollout gave its trainer when it ended
/// (by the trainer's rules, [`crate::agl1::diagnosis`]): its training rows
/// and, when it gave none, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowsVerdict {
    pub rows: i64,
    /// Empty when the rollout gave rows.
    pub reasons: NoRowsReasons,
}

/// One row of the summary: what a rollout counts under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrainingKey {
    pub version: PolicyVersion,
    /// The rollout's mode; empty when it has none.
    pub mode: String,
    /// The reward's bin ([`bin`]), `None` for a rollout without a reward.
    pub bin: Option<i64>,
    /// Why the rollout gave no training row: empty for a rollout that gave
    /// rows, or that was not judged (not a 1.x rollout).
    pub reasons: NoRowsReasons,
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
    /// The training rows they gave (1.x rollouts, [`RowsVerdict`]).
    pub training_rows: i64,
}

impl Summed for TrainingCounts {
    /// Adds `other` times `sign`; the reward's sum saturates.
    fn add(&mut self, other: TrainingCounts, sign: i64) {
        self.rollouts += sign * other.rollouts;
        self.succeeded += sign * other.succeeded;
        self.reward_micros = self
            .reward_micros
            .saturating_add(other.reward_micros.saturating_mul(sign));
        self.training_rows += sign * other.training_rows;
    }
}

impl Summed for MeasureCounts {
    /// Adds `other` times `sign`; the sum saturates.
    fn add(&mut self, other: MeasureCounts, sign: i64) {
        self.values += sign * other.values;
        self.total = self.total.saturating_add(other.total.saturating_mul(sign));
    }
}

/// How long a period of the reward timeline lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resolution {
    Minute,
    Hour,
}

impl Resolution {
    /// Both resolutions, every rollout counting under one period of each.
    pub const ALL: [Resolution; 2] = [Resolution::Minute, Resolution::Hour];

    /// Returns the period's length in seconds.
    pub fn seconds(self) -> i64 {
        match self {
            Resolution::Minute => 60,
            Resolution::Hour => 3600,
        }
    }

    /// Returns the first instant of the period `time` falls in.
    pub fn period_of(self, time: Timestamp) -> Timestamp {
        let nanos = self.seconds() * 1_000_000_000;
        Timestamp(time.0.div_euclid(nanos) * nanos)
    }
}

/// One row of the reward timeline: what a rollout counts under by the
/// time it ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeriodKey {
    pub resolution: Resolution,
    /// The period's first instant.
    pub start: Timestamp,
    /// The rollout's mode; empty when it has none.
    pub mode: String,
    /// The reward's bin ([`bin`]), `None` for a rollout without a reward.
    pub bin: Option<i64>,
}

/// A row of the reward timeline as stored: its key and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodRow {
    pub key: PeriodKey,
    pub counts: TrainingCounts,
}

/// One row of the measures: a bin of one measure's values, of one
/// version's rollouts of one mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeasureKey {
    pub version: PolicyVersion,
    /// The rollouts' mode; empty when they have none.
    pub mode: String,
    pub measure: Measure,
    /// The values' bin ([`crate::distribution::log_bin`]).
    pub bin: i64,
}

/// A row of the measures as stored: its key and its counts.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureRow {
    pub key: MeasureKey,
    pub counts: MeasureCounts,
}

/// What a counted rollout adds: its summary row, when it ended, its
/// counts, and what it measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub key: TrainingKey,
    /// When the rollout ended (its start when it records no end).
    pub ended: Timestamp,
    pub counts: TrainingCounts,
    /// Each measure the rollout has a value of, with the bin it counts in
    /// and what it counts there ([`Measure::of`]).
    pub measures: Vec<(Measure, i64, MeasureCounts)>,
}

impl Contribution {
    /// Returns the timeline rows the rollout counts under, one per
    /// resolution.
    fn periods(&self) -> impl Iterator<Item = PeriodKey> + '_ {
        Resolution::ALL.into_iter().map(|resolution| PeriodKey {
            resolution,
            start: resolution.period_of(self.ended),
            mode: self.key.mode.clone(),
            bin: self.key.bin,
        })
    }

    /// Returns the measures' rows the rollout counts in, with its counts.
    fn measured(&self) -> impl Iterator<Item = (MeasureKey, MeasureCounts)> + '_ {
        self.measures.iter().map(|&(measure, bin, counts)| {
            let key = MeasureKey {
                version: self.key.version.clone(),
                mode: self.key.mode.clone(),
                measure,
                bin,
            };
            (key, counts)
        })
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

/// What the summary knows of a rollout besides the rollout itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts {
    /// Its final reward.
    pub reward: Option<RolloutReward>,
    /// The model version that served its first model call, if it made one
    /// through the gateway.
    pub model_version: Option<i64>,
    /// What it gave its trainer, if it was judged (a 1.x rollout).
    pub verdict: Option<RowsVerdict>,
    /// What its model calls used.
    pub usage: RolloutUsage,
}

/// Returns the rows a rollout counts under and what it adds, `None` when
/// it does not count ([`counts`]).
pub fn contribution(rollout: &Rollout, facts: Facts) -> Option<Contribution> {
    let Facts {
        reward,
        model_version,
        verdict,
        usage,
    } = facts;
    if !counts(rollout) {
        return None;
    }
    let succeeded = i64::from(rollout.status == RolloutStatus::Succeeded);
    let key = TrainingKey {
        version: PolicyVersion::of(rollout.resources_id.as_deref(), model_version),
        mode: rollout
            .mode
            .map(|m| m.as_str())
            .unwrap_or_default()
            .to_owned(),
        bin: reward.map(|reward| bin(reward.value)),
        reasons: verdict.map(|verdict| verdict.reasons).unwrap_or_default(),
    };
    let counts = TrainingCounts {
        rollouts: 1,
        succeeded,
        reward_micros: reward.map_or(0, |reward| micros(reward.value)),
        training_rows: verdict.map_or(0, |verdict| verdict.rows),
    };
    let measures = Measure::ALL
        .into_iter()
        .filter_map(|measure| {
            let (bin, counts) = measure.of(rollout, &usage)?;
            Some((measure, bin, counts))
        })
        .collect();
    Some(Contribution {
        key,
        ended: rollout.end_time.unwrap_or(rollout.start_time),
        counts,
        measures,
    })
}

/// Returns a reward in millionths, saturating beyond ±9.2·10¹².
fn micros(value: f64) -> i64 {
    (value * 1e6).round() as i64
}

/// The changes a transaction makes to the summary's rows, the timeline's
/// and the measures', summed by row; rows whose change sums to nothing are
/// left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainingDeltas {
    rows: IndexMap<TrainingKey, TrainingCounts>,
    periods: IndexMap<PeriodKey, TrainingCounts>,
    measures: IndexMap<MeasureKey, MeasureCounts>,
}

/// The counts of a row, which deltas add to.
pub trait Summed: Copy + Default + PartialEq {
    /// Adds `other` times `sign` (1 or -1).
    fn add(&mut self, other: Self, sign: i64);

    /// Returns whether the counts are all zero: the row counts nothing.
    fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// Adds `counts` times `sign` to `key`'s row of `rows`, dropping a row
/// that comes to nothing.
fn shift<K: std::hash::Hash + Eq, C: Summed>(
    rows: &mut IndexMap<K, C>,
    key: K,
    counts: C,
    sign: i64,
) {
    match rows.entry(key) {
        Entry::Occupied(mut row) => {
            row.get_mut().add(counts, sign);
            if row.get().is_zero() {
                row.shift_remove();
            }
        }
        Entry::Vacant(slot) => {
            let mut row = C::default();
            row.add(counts, sign);
            if !row.is_zero() {
                slot.insert(row);
            }
        }
    }
}

impl TrainingDeltas {
    /// Notes that a rollout stopped counting as `before` and counts as
    /// `after` now (either `None`: it did not, or does not).
    pub fn moved(&mut self, before: Option<Contribution>, after: Option<Contribution>) {
        if before == after {
            return;
        }
        for (change, sign) in [(before, -1), (after, 1)] {
            if let Some(contribution) = change {
                for period in contribution.periods() {
                    shift(&mut self.periods, period, contribution.counts, sign);
                }
                for (key, counts) in contribution.measured() {
                    shift(&mut self.measures, key, counts, sign);
                }
                shift(&mut self.rows, contribution.key, contribution.counts, sign);
            }
        }
    }

    /// Returns whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.periods.is_empty() && self.measures.is_empty()
    }

    /// Returns the summary's changed rows with their changes.
    pub fn rows(&self) -> impl Iterator<Item = (&TrainingKey, &TrainingCounts)> {
        self.rows.iter()
    }

    /// Returns the timeline's changed rows with their changes.
    pub fn periods(&self) -> impl Iterator<Item = (&PeriodKey, &TrainingCounts)> {
        self.periods.iter()
    }

    /// Returns the measures' changed rows with their changes.
    pub fn measures(&self) -> impl Iterator<Item = (&MeasureKey, &MeasureCounts)> {
        self.measures.iter()
    }
}

/// What a set of counted rollouts came to: their counts and their
/// rewards' mean and percentiles.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RewardStats {
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
    /// The training rows they gave (1.x rollouts).
    pub training_rows: i64,
}

/// The counted 1.x rollouts of a version that gave no training row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WithoutRows {
    pub rollouts: i64,
    /// Of them, those with each reason (a rollout may have several), in
    /// the order of [`NoRowsReason::ALL`], reasons none has left out.
    pub by_reason: Vec<(NoRowsReason, i64)>,
}

/// What one version's rollouts of one mode came to.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSummary {
    pub version: PolicyVersion,
    /// The number of the resources version, when the store holds it: its
    /// place in creation order, 1 for the first published.
    pub version_number: Option<i64>,
    /// The mode (empty: rollouts without one).
    pub mode: String,
    pub stats: RewardStats,
    pub without_rows: WithoutRows,
    /// The distribution of each measure ([`Measure::ALL`]) its rollouts
    /// have values of, in that order.
    pub measures: Vec<(Measure, Distribution)>,
}

impl VersionSummary {
    /// Returns the version's number: a resources version's place in
    /// creation order, or a model version.
    pub fn number(&self) -> Option<i64> {
        self.version_number.or(self.version.model_version())
    }

    /// Returns the distribution of `measure` (of no value when the
    /// rollouts have none).
    pub fn measure(&self, measure: Measure) -> Distribution {
        self.measures
            .iter()
            .find(|(m, _)| *m == measure)
            .map(|(_, distribution)| distribution.clone())
            .unwrap_or_default()
    }

    /// Returns the summary of `version` with no counted rollout in `mode`.
    pub fn empty(version: PolicyVersion, mode: RolloutMode) -> Self {
        Self {
            version,
            version_number: None,
            mode: mode.as_str().to_owned(),
            stats: RewardStats::default(),
            without_rows: WithoutRows::default(),
            measures: Vec::new(),
        }
    }
}

/// What the rollouts of one mode that ended in one period came to.
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodSummary {
    /// The period's first instant.
    pub start: Timestamp,
    /// The mode (empty: rollouts without one).
    pub mode: String,
    pub stats: RewardStats,
}

/// The reward timeline: what the rollouts that ended in each period came
/// to, by mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub resolution: Resolution,
    /// The periods with counted rollouts, in time order, then mode.
    pub periods: Vec<PeriodSummary>,
}

/// A timeline left to choose its resolution reads minutes when the hours
/// it covers start less than this many hours apart (at most 240 minutes),
/// hours otherwise.
pub const MINUTES_UNDER_HOURS: i64 = 3;

/// Returns the resolution a timeline whose hours are `hours` (summarised,
/// in time order) reads at when left to choose ([`MINUTES_UNDER_HOURS`]).
pub fn resolution_for(hours: &[PeriodSummary]) -> Resolution {
    let span = match (hours.first(), hours.last()) {
        (Some(first), Some(last)) => last.start.0 - first.start.0,
        _ => 0,
    };
    if span < MINUTES_UNDER_HOURS * Resolution::Hour.seconds() * 1_000_000_000 {
        Resolution::Minute
    } else {
        Resolution::Hour
    }
}

/// The rows of one group (a version's or a period's, of one mode), summed.
#[derive(Default)]
struct Group {
    /// The rewarded rollouts by bin, and their rewards' sum in millionths.
    rewards: Binned,
    counts: TrainingCounts,
    without_rows: i64,
    /// Rollouts without rows by reason, indexed as [`NoRowsReason::ALL`].
    by_reason: [i64; NoRowsReason::ALL.len()],
}

impl Group {
    fn add(&mut self, bin: Option<i64>, reasons: NoRowsReasons, counts: TrainingCounts) {
        self.counts.add(counts, 1);
        if let Some(bin) = bin {
            self.rewards
                .add(bin_value(bin), counts.rollouts, counts.reward_micros);
        }
        if !reasons.is_empty() {
            self.without_rows += counts.rollouts;
            for (index, reason) in NoRowsReason::ALL.into_iter().enumerate() {
                if reasons.contains(reason) {
                    self.by_reason[index] += counts.rollouts;
                }
            }
        }
    }

    fn without_rows(&self) -> WithoutRows {
        WithoutRows {
            rollouts: self.without_rows,
            by_reason: NoRowsReason::ALL
                .into_iter()
                .zip(self.by_reason)
                .filter(|&(_, rollouts)| rollouts != 0)
                .collect(),
        }
    }

    fn into_stats(self) -> RewardStats {
        let Group {
            rewards, counts, ..
        } = self;
        let (rewards, bins) = rewards.summarise();
        let rewarded = rewards.values;
        RewardStats {
            rollouts: counts.rollouts,
            succeeded: counts.succeeded,
            rewarded,
            // The sum over every row is the rewarded rows' (the others add
            // none), divided as the mean is exact to a millionth.
            reward_mean: (rewarded > 0)
                .then(|| counts.reward_micros as f64 / 1e6 / rewarded as f64),
            reward_p10: rewards.p10,
            reward_p50: rewards.p50,
            reward_p90: rewards.p90,
            bins,
            training_rows: counts.training_rows,
        }
    }
}

/// Sums rows, and the measures' rows, into one summary per (version,
/// mode), the rows of one key (a row's shards) summed, in version order
/// (resources versions by number, then model versions, then the versions
/// the store does not hold by id), then mode.
pub fn summarise(rows: Vec<TrainingRow>, measured: Vec<MeasureRow>) -> Vec<VersionSummary> {
    let mut groups: IndexMap<(PolicyVersion, String), (Option<i64>, Group)> = IndexMap::new();
    for row in rows {
        let TrainingRow {
            key,
            counts,
            version_number,
        } = row;
        let (number, group) = groups.entry((key.version, key.mode)).or_default();
        *number = version_number;
        group.add(key.bin, key.reasons, counts);
    }
    let mut measures: IndexMap<(PolicyVersion, String), [Binned; Measure::ALL.len()]> =
        IndexMap::new();
    // A bin's centre is computed once per bin (it formats a number), not
    // once per row.
    let mut centres: HashMap<i64, f64> = HashMap::new();
    for MeasureRow { key, counts } in measured {
        let index = Measure::ALL
            .iter()
            .position(|&measure| measure == key.measure)
            .expect("every measure is in ALL");
        let centre = *centres
            .entry(key.bin)
            .or_insert_with(|| log_bin_value(key.bin));
        measures.entry((key.version, key.mode)).or_default()[index].add(
            centre,
            counts.values,
            counts.total,
        );
    }
    let mut summaries: Vec<VersionSummary> = groups
        .into_iter()
        .map(|((version, mode), (version_number, group))| {
            let binned = measures
                .swap_remove(&(version.clone(), mode.clone()))
                .unwrap_or_default();
            VersionSummary {
                version,
                version_number,
                mode,
                without_rows: group.without_rows(),
                stats: group.into_stats(),
                measures: Measure::ALL
                    .into_iter()
                    .zip(binned)
                    .map(|(measure, binned)| (measure, binned.into_distribution()))
                    .filter(|(_, distribution)| distribution.values > 0)
                    .collect(),
            }
        })
        .filter(|summary| summary.stats.rollouts > 0)
        .collect();
    summaries.sort_by_cached_key(|summary| {
        let rank = match (&summary.version, summary.version_number) {
            (_, Some(_)) => 0,
            (PolicyVersion::Model(_), None) => 1,
            (PolicyVersion::Resources(_), None) => 2,
            (PolicyVersion::None, None) => 3,
        };
        (
            rank,
            summary.number(),
            summary.version.clone(),
            summary.mode.clone(),
        )
    });
    summaries
}

/// Sums timeline rows (of one resolution) into one summary per (period,
/// mode), in time order, then mode.
pub fn summarise_periods(rows: Vec<PeriodRow>) -> Vec<PeriodSummary> {
    let mut groups: IndexMap<(Timestamp, String), Group> = IndexMap::new();
    for PeriodRow { key, counts } in rows {
        groups.entry((key.start, key.mode)).or_default().add(
            key.bin,
            NoRowsReasons::default(),
            counts,
        );
    }
    let mut summaries: Vec<PeriodSummary> = groups
        .into_iter()
        .map(|((start, mode), group)| PeriodSummary {
            start,
            mode,
            stats: group.into_stats(),
        })
        .filter(|summary| summary.stats.rollouts > 0)
        .collect();
    summaries.sort_by(|a, b| (a.start, &a.mode).cmp(&(b.start, &b.mode)));
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::distribution::log_bin;
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

    /// The facts of a rollout with `value` as its final reward.
    fn rewarded(value: f64) -> Facts {
        Facts {
            reward: Some(reward(value)),
            ..Facts::default()
        }
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
            let counted = contribution(&rollout(status, train, "rs-1"), rewarded(0.5));
            assert_eq!(counted.map(|c| c.counts.succeeded), counts, "{status:?}");
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
        deltas.moved(None, contribution(&done, rewarded(1.0)));
        deltas.moved(contribution(&done, rewarded(1.0)), None);
        assert!(deltas.is_empty());
        deltas.moved(
            contribution(&done, rewarded(1.0)),
            contribution(&done, rewarded(0.0)),
        );
        let rows: Vec<_> = deltas.rows().map(|(k, c)| (k.bin, c.rollouts)).collect();
        assert_eq!(rows, [(Some(bin(1.0)), -1), (Some(bin(0.0)), 1)]);
    }

    #[test]
    fn durations_follow_each_rollouts_counting_against_a_direct_computation() {
        let train = Some(RolloutMode::Train);
        let ended = |id: &str, status, end_ms: i64| Rollout {
            rollout_id: id.into(),
            end_time: Some(Timestamp(end_ms * 1_000_000)),
            ..rollout(status, train, "rs-1")
        };
        // The rows the deltas of every change come to, summed as a backend
        // adds them.
        let mut rows: IndexMap<TrainingKey, TrainingCounts> = IndexMap::new();
        let mut measured: IndexMap<MeasureKey, MeasureCounts> = IndexMap::new();
        let mut apply = |before: Option<Contribution>, after: Option<Contribution>| {
            let mut deltas = TrainingDeltas::default();
            deltas.moved(before, after);
            for (key, counts) in deltas.rows() {
                shift(&mut rows, key.clone(), *counts, 1);
            }
            for (key, counts) in deltas.measures() {
                shift(&mut measured, key.clone(), *counts, 1);
            }
        };
        let counted = |r: &Rollout, facts| contribution(r, facts);
        // Ends after 1.2 s, then its reward arrives after its end.
        let late = ended("late", RolloutStatus::Succeeded, 1_200);
        apply(None, counted(&late, Facts::default()));
        apply(
            counted(&late, Facts::default()),
            counted(&late, rewarded(0.5)),
        );
        // Fails after 3 s, is put back in the queue (it stops counting),
        // and succeeds after 45 s: counted once, at 45 s.
        let retried = ended("retried", RolloutStatus::Failed, 3_000);
        apply(None, counted(&retried, Facts::default()));
        let requeued = Rollout {
            status: RolloutStatus::Requeuing,
            end_time: None,
            ..retried.clone()
        };
        apply(
            counted(&retried, Facts::default()),
            counted(&requeued, Facts::default()),
        );
        let retried = ended("retried", RolloutStatus::Succeeded, 45_000);
        apply(None, counted(&retried, rewarded(1.0)));
        // Cancelled after 9 s: not counted.
        let cancelled = ended("cancelled", RolloutStatus::Cancelled, 9_000);
        apply(None, counted(&cancelled, Facts::default()));
        // Ends after 0.25 s, then is deleted.
        let deleted = ended("deleted", RolloutStatus::Succeeded, 250);
        apply(None, counted(&deleted, Facts::default()));
        apply(counted(&deleted, Facts::default()), None);
        let quick = ended("quick", RolloutStatus::Succeeded, 87);
        apply(None, counted(&quick, Facts::default()));

        let summary = summarise(
            rows.into_iter()
                .map(|(key, counts)| TrainingRow {
                    key,
                    counts,
                    version_number: Some(1),
                })
                .collect(),
            measured
                .into_iter()
                .map(|(key, counts)| MeasureRow { key, counts })
                .collect(),
        );
        // Directly: the rollouts that count now, and how long each took.
        let mut direct: Vec<i64> = [&late, &retried, &quick]
            .iter()
            .map(|r| r.end_time.unwrap().0 / 1_000_000)
            .collect();
        direct.sort_unstable();
        let rank = |p: f64| {
            let n = direct.len() as f64;
            Some(log_bin_value(log_bin(
                direct[((p * n).ceil() as usize).max(1) - 1],
            )))
        };
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].stats.rollouts, 3);
        assert_eq!(
            summary[0].measure(Measure::Duration),
            Distribution {
                values: 3,
                mean: Some(direct.iter().sum::<i64>() as f64 / 3.0),
                p10: rank(0.1),
                p50: rank(0.5),
                p90: rank(0.9),
            }
        );
        assert_eq!(summary[0].measure(Measure::Duration).p50, Some(1_260.0));
    }

    #[test]
    fn tokens_and_latency_follow_usage_that_arrives_before_and_after_the_end() {
        let done = rollout(RolloutStatus::Succeeded, Some(RolloutMode::Val), "rs-1");
        let used = |calls: i64, latency_ms: i64, prompt_tokens: i64| Facts {
            usage: RolloutUsage {
                calls,
                latency_ms,
                reported: calls,
                prompt_tokens,
                response_tokens: 2 * prompt_tokens,
            },
            ..Facts::default()
        };
        let mut measured: IndexMap<MeasureKey, MeasureCounts> = IndexMap::new();
        let mut apply = |before: Option<Contribution>, after: Option<Contribution>| {
            let mut deltas = TrainingDeltas::default();
            deltas.moved(before, after);
            for (key, counts) in deltas.measures() {
                shift(&mut measured, key.clone(), *counts, 1);
            }
        };
        // Ends after two calls; a third call's span arrives after the end.
        apply(None, contribution(&done, used(2, 300, 100)));
        apply(
            contribution(&done, used(2, 300, 100)),
            contribution(&done, used(3, 900, 150)),
        );
        let summary = summarise(
            vec![TrainingRow {
                key: contribution(&done, Facts::default()).unwrap().key,
                counts: TrainingCounts {
                    rollouts: 1,
                    ..TrainingCounts::default()
                },
                version_number: None,
            }],
            measured
                .into_iter()
                .map(|(key, counts)| MeasureRow { key, counts })
                .collect(),
        );
        let of = |measure| summary[0].measure(measure);
        assert_eq!(of(Measure::PromptTokens).values, 1);
        assert_eq!(of(Measure::PromptTokens).mean, Some(150.0));
        assert_eq!(of(Measure::ResponseTokens).mean, Some(300.0));
        // Three calls, counted at their mean of 300 ms.
        assert_eq!(
            of(Measure::CallLatency),
            Distribution {
                values: 3,
                mean: Some(300.0),
                p10: Some(log_bin_value(log_bin(300))),
                p50: Some(log_bin_value(log_bin(300))),
                p90: Some(log_bin_value(log_bin(300))),
            }
        );
    }

    #[test]
    fn a_summary_reads_percentiles_by_nearest_rank_and_an_exact_mean() {
        let row = val_row_of_rs_2;
        // Rewards 0 ×6, 0.5 ×3, 1 ×1, and two rollouts without a reward.
        let rows = vec![
            row(Some(1.0), 1, 1, 1.0),
            row(Some(0.0), 6, 2, 0.0),
            row(Some(0.5), 3, 3, 1.5),
            row(None, 2, 0, 0.0),
        ];
        let summary = summarise(rows, Vec::new());
        assert_eq!(summary.len(), 1);
        let stats = &summary[0].stats;
        assert_eq!(
            (stats.rollouts, stats.succeeded, stats.rewarded),
            (12, 6, 10)
        );
        assert_eq!(stats.reward_mean, Some(0.25));
        assert_eq!(stats.reward_p10, Some(0.0));
        assert_eq!(stats.reward_p50, Some(0.0));
        assert_eq!(stats.reward_p90, Some(0.5));
    }

    /// A summary row of resources version `rs-2` (number 2) in `val`:
    /// rollouts in the bin of `bin_of` (none: without a reward), how many
    /// succeeded, and their rewards' sum.
    fn val_row_of_rs_2(
        bin_of: Option<f64>,
        rollouts: i64,
        succeeded: i64,
        reward: f64,
    ) -> TrainingRow {
        TrainingRow {
            key: TrainingKey {
                version: PolicyVersion::Resources("rs-2".into()),
                mode: "val".into(),
                bin: bin_of.map(bin),
                reasons: NoRowsReasons::default(),
            },
            counts: TrainingCounts {
                rollouts,
                succeeded,
                reward_micros: micros(reward),
                training_rows: 0,
            },
            version_number: Some(2),
        }
    }

    #[test]
    fn a_keys_shards_sum_to_the_summary_of_its_row() {
        let row = val_row_of_rs_2;
        let measured = |bin: i64, values, total| MeasureRow {
            key: MeasureKey {
                version: PolicyVersion::Resources("rs-2".into()),
                mode: "val".into(),
                measure: Measure::Duration,
                bin,
            },
            counts: MeasureCounts { values, total },
        };
        let rows = vec![
            row(Some(1.0), 2, 2, 2.0),
            row(Some(0.5), 3, 1, 1.5),
            row(None, 1, 0, 0.0),
        ];
        let measures = vec![measured(60, 4, 4_200), measured(70, 2, 6_100)];
        // The same counts in shards: a shard may count less than nothing
        // (a rollout moved out of a row another connection added it to),
        // and a key's shards may come to nothing at all.
        let sharded_rows = vec![
            row(Some(1.0), 3, 2, 3.0),
            row(Some(0.5), 4, 2, 2.0),
            row(Some(0.0), 1, 1, 0.0),
            row(Some(1.0), -1, 0, -1.0),
            row(None, 1, 0, 0.0),
            row(Some(0.5), -1, -1, -0.5),
            row(Some(0.0), -1, -1, 0.0),
        ];
        let sharded_measures = vec![
            measured(60, 5, 5_300),
            measured(70, 2, 6_100),
            measured(80, 1, 10_000),
            measured(60, -1, -1_100),
            measured(80, -1, -10_000),
        ];
        let whole = summarise(rows, measures);
        assert_eq!(whole[0].stats.rollouts, 6);
        assert_eq!(whole[0].measure(Measure::Duration).values, 6);
        assert_eq!(summarise(sharded_rows, sharded_measures), whole);
    }

    #[test]
    fn judged_rollouts_count_their_rows_and_without_rows_each_reason_against_a_direct_count() {
        use NoRowsReason::*;
        let mut done = rollout(RolloutStatus::Succeeded, Some(RolloutMode::Train), "rs-1");
        done.resources_id = None;
        // (rows, reasons, model version) of each judged rollout, and one not judged.
        let judged: [(i64, &[NoRowsReason], Option<i64>); 5] = [
            (3, &[], Some(1)),
            (0, &[NoTokenIds, NoReward], Some(1)),
            (0, &[NoTokenIds], Some(1)),
            (0, &[FailedCalls, RolloutFailed], Some(1)),
            (0, &[NoModelCalls, NoReward], None),
        ];
        let mut deltas = TrainingDeltas::default();
        for &(rows, reasons, model_version) in &judged {
            let mut verdict = RowsVerdict {
                rows,
                ..RowsVerdict::default()
            };
            reasons
                .iter()
                .for_each(|&reason| verdict.reasons.insert(reason));
            let facts = Facts {
                model_version,
                verdict: Some(verdict),
                ..Facts::default()
            };
            deltas.moved(None, contribution(&done, facts));
        }
        deltas.moved(None, contribution(&done, Facts::default()));
        let rows = deltas
            .rows()
            .map(|(key, counts)| TrainingRow {
                key: key.clone(),
                counts: *counts,
                version_number: None,
            })
            .collect();
        let summaries = summarise(rows, Vec::new());
        for summary in &summaries {
            let mine: Vec<_> = judged
                .iter()
                .filter(|j| PolicyVersion::of(None, j.2) == summary.version)
                .collect();
            let direct_rows: i64 = mine.iter().map(|j| j.0).sum();
            assert_eq!(summary.stats.training_rows, direct_rows);
            let without = mine.iter().filter(|j| j.0 == 0).count() as i64;
            assert_eq!(summary.without_rows.rollouts, without);
            let by_reason: Vec<(NoRowsReason, i64)> = NoRowsReason::ALL
                .into_iter()
                .map(|r| (r, mine.iter().filter(|j| j.1.contains(&r)).count() as i64))
                .filter(|&(_, n)| n > 0)
                .collect();
            assert_eq!(summary.without_rows.by_reason, by_reason);
        }
        let versions: Vec<_> = summaries.iter().map(|s| s.stats.rollouts).collect();
        assert_eq!(versions, [4, 2], "model version 1, then no version");
        assert_eq!(
            summaries[0].without_rows.by_reason,
            [
                (FailedCalls, 1),
                (NoTokenIds, 2),
                (NoReward, 1),
                (RolloutFailed, 1)
            ]
        );
        assert_eq!(
            NoRowsReasons::from_bits(-1).iter().count(),
            NoRowsReason::ALL.len(),
            "unknown bits are left out"
        );
    }

    #[test]
    fn summaries_come_in_version_order_model_versions_after_resources_unknown_last() {
        let row = |version: PolicyVersion, number: Option<i64>| TrainingRow {
            key: TrainingKey {
                version,
                mode: "train".into(),
                bin: None,
                reasons: NoRowsReasons::default(),
            },
            counts: TrainingCounts {
                rollouts: 1,
                succeeded: 1,
                ..TrainingCounts::default()
            },
            version_number: number,
        };
        let resources = |id: &str| PolicyVersion::Resources(id.into());
        let rows = vec![
            row(PolicyVersion::None, None),
            row(PolicyVersion::Model(12), None),
            row(resources("rs-gone"), None),
            row(resources("rs-b"), Some(10)),
            row(PolicyVersion::Model(3), None),
            row(resources("rs-a"), Some(2)),
        ];
        let order: Vec<String> = summarise(rows, Vec::new())
            .into_iter()
            .map(|s| s.version.to_stored())
            .collect();
        assert_eq!(order, ["rs-a", "rs-b", "\u{1}3", "\u{1}12", "rs-gone", ""]);
    }

    #[test]
    fn a_policy_version_is_stored_as_text_it_is_read_back_from() {
        for version in [
            PolicyVersion::None,
            PolicyVersion::Resources("rs-1".into()),
            PolicyVersion::Resources("3".into()),
            PolicyVersion::Model(3),
            PolicyVersion::Model(-1),
        ] {
            assert_eq!(
                PolicyVersion::from_stored(&version.to_stored()),
                version,
                "{version:?}"
            );
        }
        assert!(crate::ids::validate_id("resources_id", "\u{1}3").is_err());
        assert_eq!(
            PolicyVersion::of(Some("rs-1"), Some(4)),
            PolicyVersion::Resources("rs-1".into()),
            "a resources id comes first"
        );
        assert_eq!(PolicyVersion::of(None, Some(4)), PolicyVersion::Model(4));
    }

    #[test]
    fn a_rollout_counts_under_the_minute_and_the_hour_it_ended_in() {
        let mut done = rollout(RolloutStatus::Succeeded, Some(RolloutMode::Val), "rs-1");
        let ended = Timestamp(((2 * 3600 + 5 * 60 + 7) as i64) * 1_000_000_000);
        done.end_time = Some(ended);
        let mut deltas = TrainingDeltas::default();
        deltas.moved(None, contribution(&done, rewarded(0.5)));
        let periods: Vec<_> = deltas
            .periods()
            .map(|(key, counts)| (key.resolution, key.start.0 / 1_000_000_000, counts.rollouts))
            .collect();
        assert_eq!(
            periods,
            [
                (Resolution::Minute, 2 * 3600 + 5 * 60, 1),
                (Resolution::Hour, 2 * 3600, 1)
            ]
        );
        assert_eq!(
            Resolution::Minute.period_of(Timestamp(-1)),
            Timestamp(-60_000_000_000)
        );
    }

    #[test]
    fn periods_are_summarised_in_time_order_then_mode() {
        let row = |minute: i64, mode: &str, value: f64| PeriodRow {
            key: PeriodKey {
                resolution: Resolution::Minute,
                start: Timestamp(minute * 60_000_000_000),
                mode: mode.into(),
                bin: Some(bin(value)),
            },
            counts: TrainingCounts {
                rollouts: 2,
                succeeded: 1,
                reward_micros: micros(2.0 * value),
                training_rows: 0,
            },
        };
        let summaries = summarise_periods(vec![
            row(3, "train", 1.0),
            row(1, "val", 0.5),
            row(1, "train", 0.25),
            row(3, "train", 0.0),
        ]);
        let read: Vec<_> = summaries
            .iter()
            .map(|s| {
                (
                    s.start.0 / 60_000_000_000,
                    s.mode.as_str(),
                    s.stats.rollouts,
                )
            })
            .collect();
        assert_eq!(read, [(1, "train", 2), (1, "val", 2), (3, "train", 4)]);
        assert_eq!(summaries[2].stats.reward_mean, Some(0.5));
        assert_eq!(summaries[2].stats.reward_p10, Some(0.0));
        assert_eq!(summaries[2].stats.reward_p90, Some(1.0));
    }
}
