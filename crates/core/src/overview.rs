//! The read model of people watching the store (the console's Overview and
//! a waiting rollout's page): aggregates of what the store holds, each cheap
//! enough to be read again on every change. Their rules live here; the
//! engine reads them in one transaction each ([`super::engine`]) through
//! the storage port's aggregate reads ([`super::storage::StoreTx`]).

use std::sync::Arc;
use std::time::Duration;

use super::model::{Counts, Rollout, RolloutStatus, RolloutView, Span, Timestamp};

/// Nanoseconds in a minute.
pub const MINUTE: i64 = 60_000_000_000;

/// Minutes of history [`per_minute`] covers.
pub const MINUTES: usize = 60;

/// Minutes of activity counts a store keeps (twice the window, so that a
/// late change of a rollout near the window's start is still counted).
pub const KEPT_MINUTES: i64 = 2 * MINUTES as i64;

/// Most failures [`super::engine::Engine::latest_failures`] returns.
pub const MAX_FAILURES: usize = 100;

/// Failures an API call returns when it names no limit.
pub const DEFAULT_FAILURES: usize = 10;

/// What a per-minute activity count counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Activity {
    /// Rollouts created (`start_time`) in the minute.
    Created,
    /// Rollouts that ended (`end_time`) in the minute and have this
    /// terminal status now.
    Ended(RolloutStatus),
}

impl Activity {
    /// Returns the activity's name in storage: `created`, or the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Ended(status) => status.as_str(),
        }
    }

    /// Parses a name written by [`Activity::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "created" => Some(Self::Created),
            _ => RolloutStatus::parse(name)
                .filter(|s| s.is_finished())
                .map(Self::Ended),
        }
    }

    /// Returns the activities a rollout counts for, as it is: its creation
    /// minute, and its end minute while it has a terminal status.
    pub fn of(rollout: &Rollout) -> [Option<(Timestamp, Activity)>; 2] {
        let ended = rollout
            .end_time
            .filter(|_| rollout.status.is_finished())
            .map(|end| (minute_of(end), Self::Ended(rollout.status)));
        [Some((minute_of(rollout.start_time), Self::Created)), ended]
    }
}

/// A per-minute activity count (a storage answer; backends keep the counts
/// in the commit of every change, so reading a window reads its minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityCount {
    /// The minute's first instant.
    pub minute: Timestamp,
    pub activity: Activity,
    pub count: i64,
}

/// Returns the first instant of the minute `time` is in.
pub fn minute_of(time: Timestamp) -> Timestamp {
    Timestamp(time.0 - time.0.rem_euclid(MINUTE))
}

/// Rollouts created and finished in one minute: by their `start_time`, and
/// by their `end_time` and present terminal status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteCounts {
    /// The minute's first instant (a wall-clock minute, UTC).
    pub start: Timestamp,
    /// Rollouts created (enqueued, or started without the queue).
    pub created: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// The window [`per_minute`] covers at `now`: the [`MINUTES`]
/// wall-clock minutes up to and including the one `now` is in (which is
/// partial), as a half-open range.
pub fn minute_window(now: Timestamp) -> (Timestamp, Timestamp) {
    let current = now.0.div_euclid(MINUTE) * MINUTE;
    let from = current.saturating_sub(MINUTE * (MINUTES as i64 - 1));
    (Timestamp(from), Timestamp(current.saturating_add(MINUTE)))
}

/// Spreads the counts of [`minute_window`]'s range over its [`MINUTES`]
/// minutes, oldest first; minutes without a rollout count zero, so the
/// answer always has [`MINUTES`] entries.
pub fn per_minute(from: Timestamp, counts: &[ActivityCount]) -> Vec<MinuteCounts> {
    let mut minutes: Vec<MinuteCounts> = (0..MINUTES as i64)
        .map(|k| MinuteCounts {
            start: Timestamp(from.0.saturating_add(k * MINUTE)),
            created: 0,
            succeeded: 0,
            failed: 0,
            cancelled: 0,
        })
        .collect();
    for count in counts {
        let slice = count.minute.0.saturating_sub(from.0).div_euclid(MINUTE);
        let Some(minute) = usize::try_from(slice).ok().and_then(|k| minutes.get_mut(k)) else {
            continue;
        };
        let n = u64::try_from(count.count).unwrap_or(0);
        match count.activity {
            Activity::Created => minute.created += n,
            Activity::Ended(RolloutStatus::Succeeded) => minute.succeeded += n,
            Activity::Ended(RolloutStatus::Failed) => minute.failed += n,
            Activity::Ended(RolloutStatus::Cancelled) => minute.cancelled += n,
            Activity::Ended(_) => {}
        }
    }
    minutes
}

/// The rollout at the head of the queue: the next one a dequeue claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRollout {
    pub rollout_id: String,
    /// When it entered the queue.
    pub since: Timestamp,
    /// How long it has waited, at the engine's present.
    pub age: Duration,
}

impl QueuedRollout {
    /// Returns the head of the queue as the store's `counts` record it, and
    /// how long it has waited at `now`; `None` when the queue is empty.
    pub fn from_counts(counts: &Counts, now: Timestamp) -> Option<Self> {
        let rollout_id = counts.oldest_queued_rollout_id.clone()?;
        let since = counts.oldest_queued_time?;
        Some(Self {
            rollout_id,
            since,
            age: age(since, now),
        })
    }
}

/// Where a queued rollout stands in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePlace {
    /// Rollouts ahead of it: 0 when the next dequeue claims it.
    pub ahead: u64,
    /// Rollouts in the queue, itself included.
    pub queued: u64,
    /// When it entered the queue.
    pub since: Timestamp,
}

impl QueuePlace {
    /// Returns the place of a rollout with `ahead` rollouts before it, of
    /// `queued` counted in the same snapshot (which holds at least itself
    /// and those ahead).
    pub fn new(ahead: u64, queued: u64, since: Timestamp) -> Self {
        Self {
            ahead,
            queued: queued.max(ahead + 1),
            since,
        }
    }
}

/// A failed rollout with what the store records of why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The rollout (status `failed`, its end time) with its latest attempt
    /// (`failed`, `timeout` or `unresponsive`, its worker and times).
    pub rollout: RolloutView,
    /// The latest attempt's last span (in sequence order) whose status is
    /// ERROR, if it has one: its name and status description say what
    /// went wrong.
    pub error_span: Option<Arc<Span>>,
    /// The error message an agent-lightning 1.x controller recorded.
    pub agl1_error: Option<String>,
}

/// What an id names ([`super::engine::Engine::find_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Rollout(String),
    Attempt {
        rollout_id: String,
        attempt_id: String,
    },
    Worker(String),
    Resources(String),
    /// An attempt with spans of the trace.
    Trace {
        rollout_id: String,
        attempt_id: String,
    },
}

/// Most attempts one id finds: attempt ids are unique per rollout only.
pub const MAX_FOUND_ATTEMPTS: usize = 20;

/// Returns how long ago `since` was at `now` (zero for a future time).
pub fn age(since: Timestamp, now: Timestamp) -> Duration {
    Duration::from_nanos(u64::try_from(now.0.saturating_sub(since.0)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_ends_with_the_current_minute() {
        let now = Timestamp(10 * MINUTE * 60 + 5 * MINUTE + 7);
        let (from, until) = minute_window(now);
        assert_eq!(until.0, now.0 - 7 + MINUTE);
        assert_eq!(until.0 - from.0, MINUTE * MINUTES as i64);
        assert!(from <= now && now < until);
    }

    #[test]
    fn counts_spread_over_every_minute_of_the_window() {
        let from = Timestamp(0);
        let count = |minute: i64, activity, count| ActivityCount {
            minute: Timestamp(minute * MINUTE),
            activity,
            count,
        };
        let counts = [
            count(0, Activity::Ended(RolloutStatus::Succeeded), 3),
            count(1, Activity::Created, 4),
            count(59, Activity::Ended(RolloutStatus::Failed), 2),
            count(59, Activity::Ended(RolloutStatus::Cancelled), 1),
            // Outside the window: ignored.
            count(60, Activity::Ended(RolloutStatus::Failed), 9),
            count(-1, Activity::Created, 9),
        ];
        let minutes = per_minute(from, &counts);
        assert_eq!(minutes.len(), MINUTES);
        assert_eq!((minutes[0].start, minutes[0].succeeded), (Timestamp(0), 3));
        assert_eq!((minutes[1].created, minutes[1].succeeded), (4, 0));
        assert_eq!(minutes[59].start, Timestamp(59 * MINUTE));
        assert_eq!((minutes[59].failed, minutes[59].cancelled), (2, 1));
        let total: u64 = minutes
            .iter()
            .map(|m| m.created + m.succeeded + m.failed + m.cancelled)
            .sum();
        assert_eq!(total, 10);
    }

    #[test]
    fn activities_have_stored_names_and_minutes() {
        for activity in [
            Activity::Created,
            Activity::Ended(RolloutStatus::Succeeded),
            Activity::Ended(RolloutStatus::Failed),
            Activity::Ended(RolloutStatus::Cancelled),
        ] {
            assert_eq!(Activity::parse(activity.as_str()), Some(activity));
        }
        assert_eq!(Activity::parse("running"), None);
        assert_eq!(minute_of(Timestamp(MINUTE + 5)), Timestamp(MINUTE));
        assert_eq!(minute_of(Timestamp(-5)), Timestamp(-MINUTE));
    }

    #[test]
    fn an_age_is_never_negative() {
        assert_eq!(age(Timestamp(5), Timestamp(3)), Duration::ZERO);
        assert_eq!(age(Timestamp(3), Timestamp(5)), Duration::from_nanos(2));
    }
}
