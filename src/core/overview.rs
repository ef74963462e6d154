//! The read model of people watching the store (the console's Overview and
//! a waiting rollout's page): aggregates of what the store holds, each cheap
//! enough to be read again on every change. Their rules live here; the
//! engine reads them in one transaction each ([`super::engine`]) through
//! the storage port's aggregate reads ([`super::storage::StoreTx`]).

use std::sync::Arc;
use std::time::Duration;

use super::model::{RolloutStatus, RolloutView, Span, Timestamp};

/// Nanoseconds in a minute: the slice width [`per_minute`] reads counts
/// with.
pub const MINUTE: i64 = 60_000_000_000;

/// Minutes of history [`per_minute`] covers.
pub const MINUTES: usize = 60;

/// Most failures [`super::engine::Engine::latest_failures`] returns.
pub const MAX_FAILURES: usize = 100;

/// Failures an API call returns when it names no limit.
pub const DEFAULT_FAILURES: usize = 10;

/// Rollouts of one terminal status that ended in one slice of a time range
/// (a storage answer: slice `k` of width `w` starts at `from + k * w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndedCount {
    pub slice: u64,
    pub status: RolloutStatus,
    pub count: u64,
}

/// Rollouts created in one slice of a time range (a storage answer, sliced
/// as [`EndedCount`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreatedCount {
    pub slice: u64,
    pub count: u64,
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

/// Spreads counts of [`minute_window`]'s range (read with slices one
/// minute wide) over its [`MINUTES`] minutes, oldest first; minutes without
/// a rollout count zero, so the answer always has [`MINUTES`] entries.
pub fn per_minute(
    from: Timestamp,
    created: &[CreatedCount],
    ended: &[EndedCount],
) -> Vec<MinuteCounts> {
    let mut minutes: Vec<MinuteCounts> = (0..MINUTES as i64)
        .map(|k| MinuteCounts {
            start: Timestamp(from.0.saturating_add(k * MINUTE)),
            created: 0,
            succeeded: 0,
            failed: 0,
            cancelled: 0,
        })
        .collect();
    for count in created {
        if let Some(minute) = slot(&mut minutes, count.slice) {
            minute.created += count.count;
        }
    }
    for count in ended {
        let Some(minute) = slot(&mut minutes, count.slice) else {
            continue;
        };
        match count.status {
            RolloutStatus::Succeeded => minute.succeeded += count.count,
            RolloutStatus::Failed => minute.failed += count.count,
            RolloutStatus::Cancelled => minute.cancelled += count.count,
            _ => {}
        }
    }
    minutes
}

/// Returns the minute of a slice; `None` outside the window.
fn slot(minutes: &mut [MinuteCounts], slice: u64) -> Option<&mut MinuteCounts> {
    usize::try_from(slice).ok().and_then(|k| minutes.get_mut(k))
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
        let counts = [
            EndedCount {
                slice: 0,
                status: RolloutStatus::Succeeded,
                count: 3,
            },
            EndedCount {
                slice: 59,
                status: RolloutStatus::Failed,
                count: 2,
            },
            EndedCount {
                slice: 59,
                status: RolloutStatus::Cancelled,
                count: 1,
            },
            // Outside the window: ignored.
            EndedCount {
                slice: 60,
                status: RolloutStatus::Failed,
                count: 9,
            },
        ];
        let created = [CreatedCount { slice: 1, count: 4 }];
        let minutes = per_minute(from, &created, &counts);
        assert_eq!(minutes.len(), MINUTES);
        assert_eq!((minutes[0].start, minutes[0].succeeded), (Timestamp(0), 3));
        assert_eq!((minutes[1].created, minutes[1].succeeded), (4, 0));
        assert_eq!(minutes[59].start, Timestamp(59 * MINUTE));
        assert_eq!((minutes[59].failed, minutes[59].cancelled), (2, 1));
        let total: u64 = minutes
            .iter()
            .map(|m| m.succeeded + m.failed + m.cancelled)
            .sum();
        assert_eq!(total, 6);
    }

    #[test]
    fn an_age_is_never_negative() {
        assert_eq!(age(Timestamp(5), Timestamp(3)), Duration::ZERO);
        assert_eq!(age(Timestamp(3), Timestamp(5)), Duration::from_nanos(2));
    }
}
