//! The aggregate reads of [`lightning_store_core::overview`] over the in-memory
//! state ([`ReadModel`]), and the upkeep of the per-minute activity counts
//! and the ordered index of ended rollouts they read.

use std::sync::Arc;

use async_trait::async_trait;

use super::records::EndedKey;
use super::state::{MemoryTx, State};
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{
    Attempt, Counts, RolloutStatus, RolloutView, Span, SpanStatusCode, Timestamp,
};
use lightning_store_core::overview::{Activity, ActivityCount};
use lightning_store_core::storage::ReadModel;

impl State {
    /// Moves a rollout in the indexes of ended rollouts from `before` (its
    /// key before the change) to `after`.
    pub(super) fn reindex_ended(&mut self, before: Option<EndedKey>, after: Option<EndedKey>) {
        if before == after {
            return;
        }
        if let Some((status, end, rollout_id)) = before {
            self.ended_ids.remove(&rollout_id);
            if let Some(ended) = self.ended.get_mut(&status) {
                ended.remove(&(end, rollout_id));
            }
        }
        if let Some((status, end, rollout_id)) = after {
            self.ended_ids.insert(rollout_id.clone());
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

    /// Scans every span (see [`ReadModel::attempts_with_trace`]).
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

#[async_trait]
impl ReadModel for MemoryTx<'_> {
    async fn counts(&mut self) -> StoreResult<Counts> {
        let state = &*self.state;
        Ok(Counts {
            rollouts: state.rollouts.len() as u64,
            attempts: state.attempt_count,
            spans: state.span_count,
            resources: state.resources.len() as u64,
            workers: state.workers.len() as u64,
            queued: state.queued.len() as u64,
            rollouts_by_status: state.rollouts_by_status.clone(),
            attempts_by_status: state.attempts_by_status.clone(),
            oldest_queued_time: state.queue.front().map(|entry| entry.since),
            oldest_queued_rollout_id: state.queue.front().map(|entry| entry.rollout_id.clone()),
            span_bytes: state.span_bytes,
            evicted_rollouts: state.evictions.rollouts,
            evicted_spans: state.evictions.spans,
            evicted_span_bytes: state.evictions.bytes,
        })
    }

    async fn activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>> {
        Ok(self.state.activity(from, until))
    }

    async fn latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>> {
        Ok(self.state.latest_ended(status, limit))
    }

    async fn error_spans(&mut self, attempts: &[(&str, &str)]) -> StoreResult<Vec<Arc<Span>>> {
        Ok(self.state.error_spans(attempts))
    }

    async fn attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        Ok(self.state.attempts_with_trace(trace_id, limit))
    }

    async fn attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>> {
        Ok(self.state.attempts_with_id(attempt_id, limit))
    }

    async fn queue_place(&mut self, rollout_id: &str) -> StoreResult<Option<(u64, Timestamp)>> {
        Ok(self.state.queue_place(rollout_id))
    }
}
