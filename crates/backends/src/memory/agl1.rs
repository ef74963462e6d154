//! The in-memory backend's 1.x records: [`Agl1Reads`] and the apply step of
//! [`Agl1Writes`].

use super::records;
use super::state::{MemoryTx, State};
use async_trait::async_trait;
use lightning_store_core::agl1::{
    Agl1Rollout, Agl1RolloutDetail, Completion, CompletionPage, ModelServer, Pause, Replica,
    StoredEvent,
};
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::RolloutStatus;
use lightning_store_core::overview::Activity;
use lightning_store_core::storage::Access;
use lightning_store_core::storage::agl1::{Agl1Reads, Agl1Writes};

impl State {
    fn agl1_view(&self, rollout_id: &str) -> Option<Agl1Rollout> {
        let fields = self.agl1.fields.get(rollout_id)?;
        let rollout = self.rollouts.get(rollout_id)?;
        Some(Agl1Rollout {
            rollout: rollout.clone(),
            fields: fields.clone(),
        })
    }

    fn agl1_event(&mut self, rollout_id: &str, pos: i64) -> Option<&mut StoredEvent> {
        let events = self.agl1.events.get_mut(rollout_id)?;
        let at = events.binary_search_by_key(&pos, |e| e.pos).ok()?;
        Some(&mut events[at])
    }

    /// Applies the 1.x part of a committed write set.
    pub(super) fn apply_agl1(&mut self, writes: &mut Agl1Writes) {
        for rollout_id in writes.deleted.drain(..) {
            self.delete_rollout(&rollout_id);
        }
        for (rollout_id, fields) in writes.fields.drain(..) {
            self.agl1.fields.insert(rollout_id, fields);
        }
        for ((rollout_id, pos), data) in writes.event_data.drain(..) {
            if let Some(stored) = self.agl1_event(&rollout_id, pos) {
                stored.event.data = data;
            }
        }
        let agl1 = &mut self.agl1;
        for write in writes.events.drain(..) {
            agl1.last_event_pos += 1;
            let pos = agl1.last_event_pos;
            let event = write.event;
            if let Some(key) = write.key {
                let scope = (event.rollout_id.clone(), event.attempt_id.clone(), key.key);
                agl1.keys.insert(scope, (key.digest, pos));
            }
            agl1.events
                .entry(event.rollout_id.clone())
                .or_default()
                .push(StoredEvent { pos, event });
        }
        agl1.completions.append(&mut writes.completions);
        if std::mem::take(&mut writes.clear_models) {
            agl1.models.clear();
        }
        agl1.models.extend(writes.models.drain(..));
        if let Some(pause) = writes.pause.take() {
            agl1.pause = pause;
        }
        for (server_id, replica) in writes.replicas.drain(..) {
            match replica {
                Some(replica) => agl1.replicas.insert(server_id, replica),
                None => agl1.replicas.shift_remove(&server_id),
            };
        }
    }

    /// Deletes a rollout with everything that hangs off it but its
    /// completion log entries, keeping every count exact (also what hangs
    /// off an id without a rollout, as the SQL backends do).
    fn delete_rollout(&mut self, rollout_id: &str) {
        self.forget_training(rollout_id);
        self.agl1.fields.shift_remove(rollout_id);
        self.agl1.events.remove(rollout_id);
        self.agl1.keys.retain(|(id, _, _), _| id != rollout_id);
        if let Some(rollout) = self.rollouts.shift_remove(rollout_id) {
            if let Some(count) = self.rollouts_by_status.get_mut(&rollout.status) {
                *count = count.saturating_sub(1);
            }
            self.reindex_ended(records::ended_key(&rollout), None);
            self.recount_activity(Some(Activity::of(&rollout)), None);
        }
        for attempt in self.attempts.remove(rollout_id).unwrap_or_default() {
            self.attempt_count -= 1;
            if let Some(count) = self.attempts_by_status.get_mut(&attempt.status) {
                *count = count.saturating_sub(1);
            }
        }
        // Its queue entry, if any, is skipped from now on (as an unqueue).
        self.queued.remove(rollout_id);
        if let Some(deadline) = self.deadline_of.remove(rollout_id) {
            self.deadlines.remove(&(deadline, rollout_id.to_owned()));
        }
        self.sequence_ids.remove(rollout_id);
        if let Some(spans) = self.spans.remove(rollout_id) {
            self.span_count -= spans.spans.len() as u64;
            self.span_bytes -= spans.bytes;
        }
        self.evicted.remove(rollout_id);
    }
}

#[async_trait]
impl Agl1Reads for MemoryTx<'_> {
    async fn agl1_rollouts(
        &mut self,
        rollout_ids: &[&str],
        _access: Access,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        let mut out: Vec<Agl1Rollout> = Vec::with_capacity(rollout_ids.len());
        for rollout_id in rollout_ids {
            if let Some(agl1) = self.state.agl1_view(rollout_id)
                && !out.iter().any(|o| o.rollout.rollout_id == *rollout_id)
            {
                out.push(agl1);
            }
        }
        Ok(out)
    }

    async fn has_agl1_rollout(&mut self, rollout_id: &str, _access: Access) -> StoreResult<bool> {
        let state = &*self.state;
        Ok(state.agl1.fields.contains_key(rollout_id) && state.rollouts.contains_key(rollout_id))
    }

    async fn list_agl1_rollouts(
        &mut self,
        statuses: &[RolloutStatus],
        limit: Option<usize>,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        let state = &*self.state;
        Ok(state
            .agl1
            .fields
            .iter()
            .filter_map(|(rollout_id, fields)| {
                let rollout = state.rollouts.get(rollout_id)?;
                statuses.contains(&rollout.status).then(|| Agl1Rollout {
                    rollout: rollout.clone(),
                    fields: fields.clone(),
                })
            })
            .take(limit.unwrap_or(usize::MAX))
            .collect())
    }

    async fn completions(&mut self, after: i64, limit: usize) -> StoreResult<CompletionPage> {
        let state = &*self.state;
        let log = &state.agl1.completions;
        let start = usize::try_from(after.max(0)).unwrap_or(usize::MAX);
        let entries = log
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(position, rollout_id)| Completion {
                position: position as i64,
                rollout_id: rollout_id.clone(),
                rollout: state.agl1_view(rollout_id),
            })
            .collect();
        Ok(CompletionPage {
            entries,
            total: log.len() as i64,
        })
    }

    async fn agl1_events(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: Option<&str>,
    ) -> StoreResult<Vec<StoredEvent>> {
        Ok(self
            .state
            .agl1
            .events
            .get(rollout_id)
            .map(|events| {
                events
                    .iter()
                    .filter(|e| e.event.attempt_id == attempt_id)
                    .filter(|e| event_type.is_none_or(|t| e.event.event_type == t))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn latest_agl1_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: &str,
    ) -> StoreResult<Option<StoredEvent>> {
        Ok(self.state.agl1.events.get(rollout_id).and_then(|events| {
            events
                .iter()
                .rev()
                .find(|e| e.event.attempt_id == attempt_id && e.event.event_type == event_type)
                .cloned()
        }))
    }

    async fn agl1_rollout_detail(
        &mut self,
        rollout_id: &str,
    ) -> StoreResult<Option<Agl1RolloutDetail>> {
        let state = &self.state;
        let (Some(fields), Some(rollout)) = (
            state.agl1.fields.get(rollout_id),
            state.rollouts.get(rollout_id),
        ) else {
            return Ok(None);
        };
        let mut attempts: Vec<String> = Vec::new();
        for event in state.agl1.events.get(rollout_id).into_iter().flatten() {
            if !attempts.contains(&event.event.attempt_id) {
                attempts.push(event.event.attempt_id.clone());
            }
        }
        let deadline = state.deadline_of.get(rollout_id).copied();
        Ok(Some(Agl1RolloutDetail::of(
            rollout, fields, deadline, attempts,
        )))
    }

    async fn keyed_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, StoredEvent)>> {
        let scope = (rollout_id.to_owned(), attempt_id.to_owned(), key.to_owned());
        let Some((digest, pos)) = self.state.agl1.keys.get(&scope).cloned() else {
            return Ok(None);
        };
        Ok(self
            .state
            .agl1_event(rollout_id, pos)
            .map(|event| (digest, event.clone())))
    }

    async fn models(&mut self, model: Option<&str>) -> StoreResult<Vec<ModelServer>> {
        Ok(self
            .state
            .agl1
            .models
            .values()
            .filter(|server| model.is_none_or(|model| server.model == model))
            .cloned()
            .collect())
    }

    async fn pause(&mut self, _access: Access) -> StoreResult<Pause> {
        Ok(self.state.agl1.pause.clone())
    }

    async fn replicas(&mut self) -> StoreResult<Vec<Replica>> {
        let mut replicas: Vec<Replica> = self.state.agl1.replicas.values().cloned().collect();
        replicas.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        Ok(replicas)
    }
}
