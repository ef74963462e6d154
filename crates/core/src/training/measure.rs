//! What counted rollouts measure besides their reward: each measure's
//! value of a rollout, and what a row of the measures counts. The summary
//! keeps them by policy version and mode ([`super::MeasureKey`]), read as
//! a [`crate::distribution::Distribution`].

use super::usage::RolloutUsage;
use crate::distribution::log_bin;
use crate::model::Rollout;

/// A quantity each counted rollout measures once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// From its creation to its end, in milliseconds: how long the
    /// algorithm waited for it, its time in the queue and its retries
    /// included (agent-lightning's `start_time` and `end_time`).
    Duration,
    /// The prompt tokens of its model calls that reported them
    /// ([`super::usage`]).
    PromptTokens,
    /// The response tokens of those calls.
    ResponseTokens,
    /// Its model calls' latency, in milliseconds: each call counts, at
    /// its rollout's mean (the mean over calls is exact, the percentiles
    /// are of calls placed at their rollout's mean latency).
    CallLatency,
}

impl Measure {
    /// Every measure, in the order they are shown.
    pub const ALL: [Measure; 4] = [
        Measure::Duration,
        Measure::PromptTokens,
        Measure::ResponseTokens,
        Measure::CallLatency,
    ];

    /// Returns the number the measure is stored as.
    pub fn code(self) -> i64 {
        match self {
            Self::Duration => 1,
            Self::PromptTokens => 2,
            Self::ResponseTokens => 3,
            Self::CallLatency => 4,
        }
    }

    /// Reads a measure stored by [`Measure::code`].
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|measure| measure.code() == code)
    }

    /// Returns what a counted rollout whose model calls used `usage`
    /// measures: the bin it counts in ([`log_bin`]) and what it counts
    /// there; `None` when it measures nothing (a rollout recording no end,
    /// one without calls, or whose calls reported no tokens).
    pub fn of(self, rollout: &Rollout, usage: &RolloutUsage) -> Option<(i64, MeasureCounts)> {
        let one = |value: i64| (log_bin(value), MeasureCounts::of(value));
        match self {
            Self::Duration => {
                let end = rollout.end_time?;
                Some(one((end.0 - rollout.start_time.0).max(0) / 1_000_000))
            }
            Self::PromptTokens => (usage.reported > 0).then(|| one(usage.prompt_tokens)),
            Self::ResponseTokens => (usage.reported > 0).then(|| one(usage.response_tokens)),
            Self::CallLatency => (usage.calls > 0).then(|| {
                let counts = MeasureCounts {
                    values: usage.calls,
                    total: usage.latency_ms,
                };
                (log_bin(usage.latency_ms / usage.calls), counts)
            }),
        }
    }
}

/// What a row of the measures counts, or a change of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeasureCounts {
    /// The values counted.
    pub values: i64,
    /// Their sum, in the measure's unit (saturating).
    pub total: i64,
}

impl MeasureCounts {
    /// Returns the counts of one value.
    pub fn of(value: i64) -> Self {
        Self {
            values: 1,
            total: value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Json, RolloutConfig, RolloutStatus, Timestamp};

    fn ended(start_ms: i64, end_ms: Option<i64>) -> Rollout {
        Rollout {
            rollout_id: "ro-1".into(),
            input: Json::Null,
            start_time: Timestamp(start_ms * 1_000_000),
            end_time: end_ms.map(|ms| Timestamp(ms * 1_000_000 + 999_999)),
            mode: None,
            resources_id: None,
            status: RolloutStatus::Succeeded,
            config: RolloutConfig::default(),
            metadata: Json::Null,
        }
    }

    fn duration(rollout: &Rollout) -> Option<i64> {
        let (_, counts) = Measure::Duration.of(rollout, &RolloutUsage::default())?;
        Some(counts.total)
    }

    #[test]
    fn a_rollout_measures_its_whole_milliseconds_from_creation_to_end() {
        assert_eq!(duration(&ended(1_000, Some(3_500))), Some(2_500));
        assert_eq!(duration(&ended(1_000, None)), None);
        // An end recorded before the start (a clock stepped back) is 0.
        assert_eq!(duration(&ended(5_000, Some(3_000))), Some(0));
    }

    #[test]
    fn a_rollout_measures_its_tokens_once_and_counts_each_call_at_its_mean_latency() {
        let rollout = ended(0, Some(1));
        let usage = RolloutUsage {
            calls: 4,
            latency_ms: 1_000,
            reported: 3,
            prompt_tokens: 900,
            response_tokens: 60,
        };
        let of = |measure: Measure| measure.of(&rollout, &usage);
        assert_eq!(
            of(Measure::PromptTokens),
            Some((log_bin(900), MeasureCounts::of(900)))
        );
        assert_eq!(
            of(Measure::ResponseTokens),
            Some((log_bin(60), MeasureCounts::of(60)))
        );
        assert_eq!(
            of(Measure::CallLatency),
            Some((
                log_bin(250),
                MeasureCounts {
                    values: 4,
                    total: 1_000
                }
            ))
        );
        let silent = RolloutUsage {
            calls: 2,
            latency_ms: 10,
            ..RolloutUsage::default()
        };
        assert_eq!(Measure::PromptTokens.of(&rollout, &silent), None);
        assert!(Measure::CallLatency.of(&rollout, &silent).is_some());
        let none = RolloutUsage::default();
        for measure in [
            Measure::PromptTokens,
            Measure::ResponseTokens,
            Measure::CallLatency,
        ] {
            assert_eq!(measure.of(&rollout, &none), None, "{measure:?}");
        }
    }

    #[test]
    fn measures_are_stored_as_codes_they_are_read_back_from() {
        for measure in Measure::ALL {
            assert_eq!(Measure::from_code(measure.code()), Some(measure));
        }
        assert_eq!(Measure::from_code(0), None);
    }
}
