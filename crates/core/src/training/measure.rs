//! What counted rollouts measure besides their reward: each measure's
//! value of a rollout, and what a row of the measures counts. The summary
//! keeps them by policy version and mode ([`super::MeasureKey`]), read as
//! a [`crate::distribution::Distribution`].

use crate::model::Rollout;

/// A quantity each counted rollout measures once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// From its creation to its end, in milliseconds: how long the
    /// algorithm waited for it, its time in the queue and its retries
    /// included (agent-lightning's `start_time` and `end_time`).
    Duration,
}

impl Measure {
    /// Every measure, in the order they are shown.
    pub const ALL: [Measure; 1] = [Measure::Duration];

    /// Returns the number the measure is stored as.
    pub fn code(self) -> i64 {
        match self {
            Self::Duration => 1,
        }
    }

    /// Reads a measure stored by [`Measure::code`].
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|measure| measure.code() == code)
    }

    /// Returns what a counted rollout measures, `None` when it measures
    /// nothing (a rollout recording no end).
    pub fn of(self, rollout: &Rollout) -> Option<i64> {
        match self {
            Self::Duration => {
                let end = rollout.end_time?;
                Some((end.0 - rollout.start_time.0).max(0) / 1_000_000)
            }
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

    #[test]
    fn a_rollout_measures_its_whole_milliseconds_from_creation_to_end() {
        assert_eq!(
            Measure::Duration.of(&ended(1_000, Some(3_500))),
            Some(2_500)
        );
        assert_eq!(Measure::Duration.of(&ended(1_000, None)), None);
        // An end recorded before the start (a clock stepped back) is 0.
        assert_eq!(Measure::Duration.of(&ended(5_000, Some(3_000))), Some(0));
    }

    #[test]
    fn measures_are_stored_as_codes_they_are_read_back_from() {
        for measure in Measure::ALL {
            assert_eq!(Measure::from_code(measure.code()), Some(measure));
        }
        assert_eq!(Measure::from_code(0), None);
    }
}
