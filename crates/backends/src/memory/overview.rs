//! The aggregate reads of [`lightning_store_core::overview`] over the in-memory
//! state, the per-minute activity counts and the ordered index of ended
//! rollouts they read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::State;
use lightning_store_core::model::{
    Attempt, Rollout, RolloutStatus, RolloutView, Span, SpanStatusCode, Timestamp,
};
use lightning_store_core::overview::{Activity, ActivityCount};

/// Rollouts that have an end time, by status, in (end time, rollout id)
/// order.
pub(super) type EndedIndex = BTreeMap<RolloutStatus, BTreeSet<(Timestamp, String)>>;

/// Activity counts by (minute, activity).
pub(super) type ActivityCounts = BTreeMap<(Timestamp, Activity), i64>;

/// A rollout's key in the index of ended rollouts: status, end time, id.
pub(super) type EndedKey = (RolloutStatus, Timestamp, String);

/// Returns the rollout's key in the index of ended rollouts, if it ended.
pub(super) fn ended_key(rollout: &Rollout) -> Option<EndedKey> {
    let end = rollout.end_time?;
    Some((rollout.status, end, rollout.rollout_id.clone()))
}

impl State {
    /// Moves a rollout in the index of ended rollouts from `before` (its
    /// key before the change) to `after`.
    pub(super) fn reindex_ended(&mut self, before: Option<EndedKey>, after: Option<EndedKey>) {
        if before == after {
            return;
        }
        if let Some((status, end, rollout_id)) = before
            && let Some(ended) = self.ended.get_mut(&status)
        {
            ended.remove(&(end, rollout_id));
        }
        if let Some((status, end, rollout_id)) = after {
            self.ended
                .entry(status)
                .or_default()
                .insert((end, rollout_id));
        }
    }

    /// Moves a rollout's activity counts from what it counted for before a
    /// change (`None`: it did not exist) to what it counts for after
    /// (`None`: deleted), as [`Activity::of`] says.
    pub(super) fn recount_activity(
        &mut self,
        before: Option<[Option<(Timestamp, Activity)>; 2]>,
        after: Option<[Option<(Timestamp, Activity)>; 2]>,
    ) {
        let before = before.unwrap_or_default();
        let after = after.unwrap_or_default();
        if before == after {
            return;
        }
        for (key, delta) in before
            .into_iter()
            .flatten()
            .map(|key| (key, -1))
            .chain(after.into_iter().flatten().map(|key| (key, 1)))
        {
            let count = self.activity.entry(key).or_default();
            *count += delta;
            if *count == 0 {
                self.activity.remove(&key);
            }
        }
    }

    pub(super) fn activity(&self, from: Timestamp, until: Timestamp) -> Vec<ActivityCount> {
        let start = (from, Activity::Created);
        self.activity
            .range(start..)
            .take_while(|((minute, _), _)| *minute < until)
            .map(|(&(minute, activity), &count)| ActivityCount {
                minute,
                activity,
                count,
            })
            .collect()
    }

    /// Forgets the activity counts of the minutes before `before`.
    pub(super) fn forget_activity(&mut self, before: Timestamp) {
        self.activity = self.activity.split_off(&(before, Activity::Created));
    }

    pub(super) fn latest_ended(&self, status: RolloutStatus, limit: usize) -> Vec<RolloutView> {
        let Some(ended) = self.ended.get(&status) else {
            return Vec::new();
        };
        ended
            .iter()
            .rev()
            .take(limit)
            .filter_map(|(_, rollout_id)| self.view(rollout_id))
            .collect()
    }

    pub(super) fn error_spans(&self, attempts: &[(&str, &str)]) -> Vec<Arc<Span>> {
        attempts
            .iter()
            .filter_map(|&(rollout_id, attempt_id)| {
                let spans = &self.spans.get(rollout_id)?.spans;
                // Arrival order: the last of equal sequence ids wins.
                spans
                    .iter()
                    .filter(|s| {
                        s.attempt_id == attempt_id && s.status.code == SpanStatusCode::Error
                    })
                    .reduce(|best, s| {
                        if s.sequence_id >= best.sequence_id {
                            s
                        } else {
                            best
                        }
                    })
                    .cloned()
            })
            .collect()
    }

    /// Scans every span (see [`StoreTx::attempts_with_trace`]).
    pub(super) fn attempts_with_trace(
        &self,
        trace_id: &str,
        limit: usize,
    ) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = self
            .spans
            .values()
            .flat_map(|rollout| rollout.spans.iter())
            .filter(|span| span.trace_id == trace_id)
            .map(|span| (span.rollout_id.clone(), span.attempt_id.clone()))
            .collect();
        found.sort();
        found.dedup();
        found.truncate(limit);
        found
    }

    /// Scans every attempt: an id lookup a person makes, not a rule's read
    /// (about a millisecond per 100,000 attempts).
    pub(super) fn attempts_with_id(&self, attempt_id: &str, limit: usize) -> Vec<Attempt> {
        let mut found: Vec<Attempt> = self
            .attempts
            .values()
            .flatten()
            .filter(|a| a.attempt_id == attempt_id)
            .cloned()
            .collect();
        found.sort_by(|a, b| a.rollout_id.cmp(&b.rollout_id));
        found.truncate(limit);
        found
    }

    pub(super) fn queue_place(&self, rollout_id: &str) -> Option<(u64, Timestamp)> {
        let ticket = *self.queued.get(rollout_id)?;
        // Tickets grow from head to tail; entries taken out of the queue
        // stay until they reach the head and are not counted.
        let at = self.queue.partition_point(|e| e.ticket < ticket);
        let entry = self.queue.get(at).filter(|e| e.ticket == ticket)?;
        let ahead = self.queue.range(..at).filter(|e| self.is_queued(e)).count();
        Some((ahead as u64, entry.since))
    }
}
