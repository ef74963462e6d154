//! The in-memory backend's rule reads and queries.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;

use super::state::{MemoryTx, State, page_of};
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::EventPage;
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::{
    Attempt, ResourcesUpdate, RolloutView, SessionState, Span, Timestamp, Worker, WorkerSession,
};
use lightning_store_core::query::{
    AttemptSelector, Page, Paged, ResourcesFilter, RewardedRollout, RolloutFacts, RolloutFilter,
    SpanFilter, WorkerFilter,
};
use lightning_store_core::storage::{Access, Held, Queries, RuleReads};
use lightning_store_core::training::RowsVerdict;

/// What the in-memory store knows of a rollout beyond its fields.
struct Facts<'a> {
    state: &'a State,
    rollout_id: &'a str,
}

impl State {
    fn facts<'a>(&'a self, rollout_id: &'a str) -> Facts<'a> {
        Facts {
            state: self,
            rollout_id,
        }
    }
}

impl<'a> RolloutFacts<'a> for Facts<'a> {
    fn attempts(&self) -> &'a [Attempt] {
        self.state.attempts_of(self.rollout_id)
    }

    fn reward(&self) -> Option<f64> {
        self.state.training.reward_value(self.rollout_id)
    }

    fn model_version(&self) -> Option<i64> {
        self.state.training.model_version(self.rollout_id)
    }

    fn verdict(&self) -> Option<RowsVerdict> {
        self.state
            .training
            .rows_verdicts
            .get(self.rollout_id)
            .copied()
    }
}

#[async_trait]
impl RuleReads for MemoryTx<'_> {
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        _access: Access,
    ) -> StoreResult<Vec<RolloutView>> {
        let mut seen = HashSet::new();
        Ok(rollout_ids
            .iter()
            .filter(|id| seen.insert(**id))
            .filter_map(|id| self.state.view(id))
            .collect())
    }

    async fn due_rollouts(
        &mut self,
        now: Timestamp,
        limit: usize,
        // Transactions are serialised: no other one holds a rollout.
        _held: Held,
    ) -> StoreResult<Vec<RolloutView>> {
        let state = &*self.state;
        Ok(state
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline < now)
            .take(limit)
            .filter_map(|(_, rollout_id)| state.view(rollout_id))
            .collect())
    }

    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>> {
        Ok(self
            .state
            .attempts
            .get(rollout_id)
            .cloned()
            .unwrap_or_default())
    }

    async fn attempt(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
    ) -> StoreResult<Option<Attempt>> {
        Ok(self.state.attempts.get(rollout_id).and_then(|attempts| {
            attempts
                .iter()
                .rev()
                .find(|a| a.attempt_id == attempt_id)
                .cloned()
        }))
    }

    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool> {
        Ok(self.state.evicted.contains(rollout_id))
    }

    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>> {
        Ok(self.state.resources.get(resources_id).cloned())
    }

    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>> {
        let state = &*self.state;
        Ok(state
            .latest_resources
            .as_ref()
            .and_then(|id| state.resources.get(id))
            .cloned())
    }

    async fn workers(&mut self, worker_ids: &[&str], _access: Access) -> StoreResult<Vec<Worker>> {
        let mut seen = HashSet::new();
        Ok(worker_ids
            .iter()
            .filter(|id| seen.insert(**id))
            .filter_map(|id| self.state.workers.get(*id).cloned())
            .collect())
    }

    async fn sessions(
        &mut self,
        worker_ids: &[&str],
        _access: Access,
    ) -> StoreResult<Vec<WorkerSession>> {
        let mut ids: Vec<&str> = worker_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids
            .into_iter()
            .filter_map(|id| self.state.sessions.get(id).cloned())
            .collect())
    }

    async fn due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>> {
        let state = &*self.state;
        Ok(state
            .session_deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline < now)
            .take(limit)
            .filter_map(|(_, worker_id)| state.sessions.get(worker_id).cloned())
            .collect())
    }

    async fn open_sessions(&mut self, server_id: Option<&str>) -> StoreResult<Vec<WorkerSession>> {
        let mut open: Vec<WorkerSession> = self
            .state
            .sessions
            .values()
            .filter(|s| s.state == SessionState::Open)
            .filter(|s| server_id.is_none_or(|id| s.server_id == id))
            .cloned()
            .collect();
        open.sort_unstable_by(|a, b| a.worker_id.cmp(&b.worker_id));
        Ok(open)
    }

    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>> {
        Ok(self.state.requests.get(request_id).cloned())
    }
}

#[async_trait]
impl Queries for MemoryTx<'_> {
    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        let state = &*self.state;
        let matching = state
            .rollouts
            .values()
            .map(|rollout| RewardedRollout {
                rollout,
                reward: state.training.reward_value(&rollout.rollout_id),
            })
            .filter(|r| filter.matches(r.rollout, &state.facts(&r.rollout.rollout_id)))
            .collect();
        Ok(page.apply(matching).map(|r: RewardedRollout| RolloutView {
            rollout: r.rollout.clone(),
            attempt: state.latest_attempt(&r.rollout.rollout_id).cloned(),
        }))
    }

    async fn ended_rollout_ids(
        &mut self,
        filter: &RolloutFilter,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let state = &*self.state;
        let from = match filter.rollout_id_after.as_deref() {
            Some(after) => Bound::Excluded(after),
            None => Bound::Unbounded,
        };
        Ok(state
            .ended_ids
            .range::<str, _>((from, Bound::Unbounded))
            .filter_map(|rollout_id| state.rollouts.get(rollout_id))
            .filter(|r| filter.matches(r, &state.facts(&r.rollout_id)))
            .take(limit)
            .map(|r| r.rollout_id.clone())
            .collect())
    }

    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>> {
        let Some(entry) = self.state.spans.get(&filter.rollout_id) else {
            return Ok(page.apply(Vec::new()));
        };
        let mut matching: Vec<&Arc<Span>> = entry
            .spans
            .iter()
            .filter(|span| match &filter.attempt {
                AttemptSelector::Id(id) => &span.attempt_id == id,
                AttemptSelector::All | AttemptSelector::Latest => true,
            })
            .filter(|span| filter.matches_text(span))
            .collect();
        // Default order: sequence id, ties in arrival order (the sort is stable).
        matching.sort_by_key(|span| span.sequence_id);
        Ok(page_of(matching, page))
    }

    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>> {
        let matching = self
            .state
            .resources
            .values()
            .filter(|r| filter.matches(r))
            .collect();
        Ok(page_of(matching, page))
    }

    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>> {
        let matching = self
            .state
            .workers
            .values()
            .filter(|w| filter.matches(w))
            .collect();
        Ok(page_of(matching, page))
    }

    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage> {
        let state = &*self.state;
        let oldest = state
            .events
            .front()
            .map_or(state.latest_event + 1, |e| e.seq);
        let skip =
            usize::try_from(after.saturating_add(1).saturating_sub(oldest)).unwrap_or(usize::MAX);
        Ok(EventPage {
            events: state
                .events
                .iter()
                .skip(skip)
                .take(limit)
                .cloned()
                .collect(),
            oldest,
            latest: state.latest_event,
        })
    }
}
