//! The aggregate reads of [`crate::core::overview`] over the in-memory
//! state, and the ordered indexes of creation and end times they read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::State;
use crate::core::model::{
    Attempt, Rollout, RolloutStatus, RolloutView, Span, SpanStatusCode, Timestamp,
};
use crate::core::overview::{CreatedCount, EndedCount};

/// Rollouts that have an end time, by status, in (end time, rollout id)
/// order.
pub(super) type EndedIndex = BTreeMap<RolloutStatus, BTreeSet<(Timestamp, String)>>;

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

    /// Moves a rollout in the multiset of creation times from `before` to
    /// `after`.
    pub(super) fn reindex_created(&mut self, before: Option<Timestamp>, after: Option<Timestamp>) {
        if before == after {
            return;
        }
        if let Some(time) = before
            && let Some(count) = self.created.get_mut(&time)
        {
            *count -= 1;
            if *count == 0 {
                self.created.remove(&time);
            }
        }
        if let Some(time) = after {
            *self.created.entry(time).or_default() += 1;
        }
    }

    pub(super) fn created_counts(
        &self,
        from: Timestamp,
        until: Timestamp,
        width: i64,
    ) -> Vec<CreatedCount> {
        let mut counts: Vec<CreatedCount> = Vec::new();
        for (start, &n) in self.created.range(from..until) {
            let slice = u64::try_from((start.0 - from.0) / width.max(1)).unwrap_or(0);
            match counts.last_mut() {
                Some(last) if last.slice == slice => last.count += n,
                _ => counts.push(CreatedCount { slice, count: n }),
            }
        }
        counts
    }

    pub(super) fn ended_counts(
        &self,
        from: Timestamp,
        until: Timestamp,
        width: i64,
    ) -> Vec<EndedCount> {
        let mut counts: Vec<EndedCount> = Vec::new();
        let finished = self.ended.iter().filter(|(s, _)| s.is_finished());
        for (&status, ended) in finished {
            for (end, _) in ended.range((from, String::new())..(until, String::new())) {
                let slice = u64::try_from((end.0 - from.0) / width.max(1)).unwrap_or(0);
                match counts.last_mut() {
                    Some(last) if last.status == status && last.slice == slice => last.count += 1,
                    _ => counts.push(EndedCount {
                        slice,
                        status,
                        count: 1,
                    }),
                }
            }
        }
        counts
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
