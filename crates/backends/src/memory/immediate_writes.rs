//! The in-memory backend's immediate writes: each changes the state at
//! once and notes in the transaction's undo log what the drop of an
//! uncommitted transaction must restore (see [`super::state::MemoryTx`]).

use std::sync::Arc;

use async_trait::async_trait;

use super::records::RolloutSpans;
use super::state::MemoryTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{RolloutView, Span, Timestamp};
use lightning_store_core::retention::{Eviction, RetentionPolicy};
use lightning_store_core::storage::ImmediateWrites;

#[async_trait]
impl ImmediateWrites for MemoryTx<'_> {
    async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        let mut claimed = Vec::new();
        while claimed.len() < limit {
            let Some(entry) = self.state.queue.pop_front() else {
                break;
            };
            let queued = self.state.is_queued(&entry);
            if queued {
                self.state.queued.remove(&entry.rollout_id);
                claimed.extend(self.state.view(&entry.rollout_id));
            }
            self.undo.claimed.push((entry, queued));
        }
        Ok(claimed)
    }

    async fn allocate_sequence_ids(&mut self, rollout_id: &str, count: u64) -> StoreResult<i64> {
        let counter = self.counter(rollout_id);
        let first = *counter + 1;
        *counter += i64::try_from(count).unwrap_or(i64::MAX);
        Ok(first)
    }

    async fn raise_sequence_id(&mut self, rollout_id: &str, at_least: i64) -> StoreResult<()> {
        let counter = self.counter(rollout_id);
        *counter = (*counter).max(at_least);
        Ok(())
    }

    async fn insert_spans(&mut self, spans: &[Arc<Span>]) -> StoreResult<Vec<bool>> {
        let state = &mut *self.state;
        let mut stored = Vec::with_capacity(spans.len());
        for span in spans {
            if !state.spans.contains_key(&span.rollout_id) {
                state
                    .spans
                    .insert(span.rollout_id.clone(), RolloutSpans::default());
            }
            let entry = state.spans.get_mut(&span.rollout_id).expect("inserted");
            let size = entry.insert(&state.span_hasher, span);
            if let Some(size) = size {
                state.span_count += 1;
                state.span_bytes += size;
                self.undo.spans.push(span.rollout_id.clone());
            }
            stored.push(size.is_some());
        }
        Ok(stored)
    }

    async fn evict_spans(
        &mut self,
        policy: &RetentionPolicy,
        now: Timestamp,
        max_rollouts: usize,
    ) -> StoreResult<Eviction> {
        let state = &*self.state;
        // Finished rollouts holding spans, in the order they finished; the
        // sort is stable, so ties stay in creation order.
        let mut candidates: Vec<(Option<Timestamp>, &str)> = state
            .rollouts
            .values()
            .filter(|r| r.status.is_finished())
            .filter(|r| {
                state
                    .spans
                    .get(&r.rollout_id)
                    .is_some_and(|s| !s.spans.is_empty())
            })
            .map(|r| (r.end_time, r.rollout_id.as_str()))
            .collect();
        candidates.sort_by_key(|&(end_time, _)| (end_time.is_none(), end_time));
        let mut evicted = Eviction {
            done: true,
            ..Eviction::default()
        };
        let mut stored_bytes = state.span_bytes;
        for (end_time, rollout_id) in candidates {
            if !policy.evicts(end_time, stored_bytes, now) {
                break;
            }
            if self.evict.len() == max_rollouts {
                evicted.done = false;
                break;
            }
            let entry = &state.spans[rollout_id];
            stored_bytes -= entry.bytes;
            evicted.rollouts += 1;
            evicted.spans += entry.spans.len() as u64;
            evicted.bytes += entry.bytes;
            self.evict.push(rollout_id.to_owned());
        }
        Ok(evicted)
    }

    async fn next_session_epoch(&mut self) -> StoreResult<u64> {
        let state = &mut *self.state;
        self.undo
            .session_epoch
            .get_or_insert(state.last_session_epoch);
        state.last_session_epoch += 1;
        Ok(state.last_session_epoch)
    }

    async fn lock_names(&mut self, _names: &[&str]) -> StoreResult<()> {
        // Every transaction holds the whole state.
        Ok(())
    }
}

impl MemoryTx<'_> {
    /// Returns a rollout's span sequence counter, noting its value for undo.
    fn counter(&mut self, rollout_id: &str) -> &mut i64 {
        let state = &mut *self.state;
        if !self.undo.sequence_ids.contains_key(rollout_id) {
            let before = state.sequence_ids.get(rollout_id).copied();
            self.undo.sequence_ids.insert(rollout_id.to_owned(), before);
        }
        state.sequence_ids.entry(rollout_id.to_owned()).or_default()
    }
}
