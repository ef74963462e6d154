//! agent-lightning 1.x's operations over the same rollouts, attempts and
//! lifecycle rules as every other operation: a 1.x rollout is created as a
//! `queuing` rollout (outside the dequeue queue: the 1.x controller claims
//! it by PATCH), a PATCH to `running` starts the attempt 1.x names, and
//! `succeeded`/`failed` finish it through the normal attempt update path,
//! so the change events, completion log, statistics and metrics see every
//! step. See [`crate::agl1`] for the model. Event appends, which
//! run several to a transaction, are in [`super::appends`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use super::runner::{Engine, Scan};
use super::tx::{self, AttemptWrite, NewAttempt, Tx};
use crate::agl1::cache::DetailCache;
use crate::agl1::diagnosis;
use crate::agl1::events::{self as agl1_events, EventQuery};
use crate::agl1::{
    self as agl1, Agl1Event, Agl1Fields, Agl1Rollout, Agl1RolloutDetail, Agl1State, CompletionPage,
    DEFAULT_ATTEMPT_ID, ModelServer, NewAgl1Rollout, Pause, Replica, StatusPatch,
};
use crate::error::{StoreError, StoreResult};
use crate::events::Change;
use crate::ids::{self, RolloutId};
use crate::lifecycle;
use crate::model::{AttemptStatus, Rollout, RolloutConfig, RolloutStatus, Timestamp};
use crate::storage::Access;

/// What a creation request turns into.
enum Slot {
    /// The rollout exists: it is returned untouched.
    Existing(Box<Agl1Rollout>),
    /// The id repeats an earlier request of the batch: the same rollout.
    SameAs(usize),
    /// A rollout to create under this id.
    New(String, Box<NewAgl1Rollout>),
}

/// Returns a new 1.x rollout: a `queuing` rollout of its mode with the
/// core's default config (the 1.x timeout is the controller's to enforce,
/// docs/agent-lightning-1x.md), and its 1.x fields at version 1.
fn new_agl1_rollout(rollout_id: String, request: NewAgl1Rollout, now: Timestamp) -> Agl1Rollout {
    Agl1Rollout {
        rollout: Rollout {
            rollout_id,
            input: request.input,
            start_time: now,
            end_time: None,
            mode: Some(agl1::mode_of(request.is_train)),
            resources_id: None,
            status: RolloutStatus::Queuing,
            config: RolloutConfig::default(),
            metadata: request.metadata,
        },
        fields: Agl1Fields {
            config: request.config,
            k8s_job_name: None,
            last_attempt_id: None,
            error_message: None,
            version: 1,
            created_at: now,
            updated_at: now,
        },
    }
}

fn not_found(rollout_id: &str) -> StoreError {
    StoreError::NotFound(agl1::not_found(rollout_id))
}

/// Returns a 1.x rollout as the transaction sees it, or upstream's 404.
async fn require_agl1(
    tx: &mut Tx<'_>,
    rollout_id: &str,
    access: Access,
) -> StoreResult<Agl1Rollout> {
    tx.store
        .agl1_rollouts(&[rollout_id], access)
        .await?
        .pop()
        .ok_or_else(|| not_found(rollout_id))
}

impl Engine {
    /// Creates 1.x rollouts in order. A caller-supplied id that exists
    /// returns that rollout untouched (also when it repeats in the batch),
    /// so a retried creation creates nothing twice; an id that names a
    /// rollout created through another API is refused.
    pub async fn create_agl1_rollouts(
        &self,
        requests: Vec<NewAgl1Rollout>,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        self.limits().check_batch("rollouts", requests.len())?;
        for request in &requests {
            if let Some(rollout_id) = request.rollout_id.as_deref().filter(|id| !id.is_empty()) {
                ids::validate_id("rollout_id", rollout_id)?;
            }
        }
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let given: Vec<&str> = requests
                    .iter()
                    .filter_map(|r| r.rollout_id.as_deref().filter(|id| !id.is_empty()))
                    .collect();
                let mut existing: HashMap<String, Agl1Rollout> = HashMap::new();
                let mut others = HashMap::new();
                if !given.is_empty() {
                    // Concurrent first creations of an id: one creates it,
                    // the others then find it.
                    tx.store.lock_names(&given).await?;
                    for agl1 in tx.store.agl1_rollouts(&given, Access::Read).await? {
                        existing.insert(agl1.rollout.rollout_id.clone(), agl1);
                    }
                    others = tx.rollouts(&given, Access::Read).await?;
                }
                // Every check comes before the first write: a refused batch writes nothing.
                let mut planned: HashMap<String, usize> = HashMap::new();
                let mut slots = Vec::with_capacity(requests.len());
                for request in requests {
                    let given = request.rollout_id.clone().filter(|id| !id.is_empty());
                    if let Some(rollout_id) = &given {
                        if let Some(&first) = planned.get(rollout_id) {
                            slots.push(Slot::SameAs(first));
                            continue;
                        }
                        if let Some(agl1) = existing.get(rollout_id) {
                            slots.push(Slot::Existing(Box::new(agl1.clone())));
                            continue;
                        }
                        if others.contains_key(rollout_id) {
                            return Err(StoreError::FailedPrecondition(format!(
                                "Rollout {rollout_id} exists and was not created through the 1.x API"
                            )));
                        }
                    }
                    let rollout_id =
                        given.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
                    planned.insert(rollout_id.clone(), slots.len());
                    slots.push(Slot::New(rollout_id, Box::new(request)));
                }
                let mut out: Vec<Agl1Rollout> = Vec::with_capacity(slots.len());
                for slot in slots {
                    let agl1 = match slot {
                        Slot::Existing(agl1) => *agl1,
                        Slot::SameAs(first) => out[first].clone(),
                        Slot::New(rollout_id, request) => {
                            let agl1 = new_agl1_rollout(rollout_id, *request, tx.now);
                            tx.save_rollout_change(&agl1.rollout, None, None);
                            tx.agl1()
                                .fields
                                .insert(agl1.rollout.rollout_id.clone(), agl1.fields.clone());
                            agl1
                        }
                    };
                    out.push(agl1);
                }
                Ok(out)
            })
        })
        .await
    }

    /// Lists the 1.x rollouts in any of `states`, in creation order, sliced
    /// as Python slices `[:limit]` (a negative limit drops from the end).
    pub async fn list_agl1_rollouts(
        &self,
        states: &[Agl1State],
        limit: i64,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        let statuses: Vec<RolloutStatus> = states
            .iter()
            .flat_map(|state| state.statuses().iter().copied())
            .collect();
        let statuses = &statuses;
        let mut rollouts = self
            .run(Scan::Read, |tx| {
                Box::pin(async move {
                    let limit = usize::try_from(limit).ok();
                    tx.store.list_agl1_rollouts(statuses, limit).await
                })
            })
            .await?;
        if limit < 0 {
            let keep = rollouts.len().saturating_sub(limit.unsigned_abs() as usize);
            rollouts.truncate(keep);
        }
        Ok(rollouts)
    }

    /// Returns a 1.x rollout with the attempts that have events, ordered by
    /// their first event (one read of the store: the trainer polls it). A
    /// read: see [`Scan::Read`] for what it sees. On a backend only this
    /// server writes, from the [`DetailCache`](crate::agl1::cache::DetailCache)
    /// when it holds the rollout.
    pub async fn get_agl1_rollout(
        &self,
        rollout_id: &RolloutId,
    ) -> StoreResult<Arc<Agl1RolloutDetail>> {
        let rollout_id = rollout_id.as_str();
        let ticket = match &self.details {
            Some(details) => {
                if let Some(detail) = details.get(rollout_id, self.now()) {
                    self.observer.agl1_rollout_read(true);
                    return Ok(detail);
                }
                Some(details.ticket())
            }
            None => None,
        };
        let detail = self
            .run(Scan::Read, |tx| {
                Box::pin(async move {
                    tx.store
                        .agl1_rollout_detail(rollout_id)
                        .await?
                        .ok_or_else(|| not_found(rollout_id))
                })
            })
            .await?;
        self.observer.agl1_rollout_read(false);
        let detail = Arc::new(detail);
        if let (Some(details), Some(ticket)) = (&self.details, ticket) {
            details.fill(ticket, &detail);
        }
        Ok(detail)
    }

    /// Returns how many 1.x rollout details the cache holds; `None` when
    /// the backend is shared (no cache).
    pub fn cached_agl1_details(&self) -> Option<usize> {
        self.details.as_ref().map(DetailCache::len)
    }

    /// Patches a 1.x rollout's status. A patch that sets nothing returns the
    /// rollout as it is; otherwise the version is bumped, and a state change
    /// must be one 1.x allows: `running` starts the attempt named by
    /// `last_attempt_id` (`"0"` by default), `succeeded`/`failed` finish
    /// the latest attempt (a rollout without one fails directly), and a
    /// terminal state enters the completion log.
    pub async fn patch_agl1_rollout(
        &self,
        rollout_id: &RolloutId,
        patch: StatusPatch,
    ) -> StoreResult<Agl1Rollout> {
        let rollout_id = rollout_id.as_str();
        let (agl1, target) = self
            .run(Scan::Due, |tx| {
                Box::pin(async move {
                    let mut agl1 = require_agl1(tx, rollout_id, Access::Update).await?;
                    if patch.is_empty() {
                        return Ok((agl1, None));
                    }
                    let from = agl1.state();
                    let target = match patch.state {
                        None => None,
                        Some(to) if to.is_some_and(|to| from.allows(to)) => to,
                        Some(to) => {
                            return Err(StoreError::FailedPrecondition(agl1::transition_error(
                                rollout_id, from, to,
                            )));
                        }
                    };
                    let now = tx.now;
                    let fields = &mut agl1.fields;
                    if let Some(value) = patch.k8s_job_name {
                        fields.k8s_job_name = value;
                    }
                    if let Some(value) = patch.last_attempt_id {
                        fields.last_attempt_id = value;
                    }
                    if let Some(value) = patch.error_message {
                        fields.error_message = value;
                    }
                    fields.version += 1;
                    fields.updated_at = now;
                    if let Some(to) = target {
                        transition(tx, &mut agl1, (from, to)).await?;
                        if to.is_terminal() {
                            judge_rows(tx, &agl1, to).await?;
                        }
                    }
                    tx.agl1()
                        .fields
                        .insert(rollout_id.to_owned(), agl1.fields.clone());
                    Ok((agl1, target))
                })
            })
            .await?;
        if let Some(to) = target {
            self.observer.agl1_transition(to.as_str());
        }
        Ok(agl1)
    }

    /// Deletes a 1.x rollout with its attempts, spans and events; deleting
    /// an unknown one (or one created through another API) does nothing.
    /// Its completion log entries stay, so positions never shift.
    pub async fn delete_agl1_rollout(&self, rollout_id: &RolloutId) -> StoreResult<()> {
        let rollout_id = rollout_id.as_str();
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let found = tx
                    .store
                    .agl1_rollouts(&[rollout_id], Access::Update)
                    .await?;
                if !found.is_empty() {
                    tx.agl1().deleted.insert(rollout_id.to_owned());
                    tx.record(Change::RolloutDeleted {
                        rollout_id: rollout_id.to_owned(),
                    });
                }
                Ok(())
            })
        })
        .await
    }

    /// Returns the events of a 1.x rollout's event attempt
    /// (`last_attempt_id`, `"0"` by default) as `query` presents them.
    pub async fn agl1_events(
        &self,
        rollout_id: &RolloutId,
        query: &EventQuery,
    ) -> StoreResult<Vec<Agl1Event>> {
        let rollout_id = rollout_id.as_str();
        let events = self
            .run(Scan::Read, |tx| {
                Box::pin(async move {
                    let rollout = require_agl1(tx, rollout_id, Access::Read).await?;
                    tx.store
                        .agl1_events(
                            rollout_id,
                            rollout.event_attempt_id(),
                            query.event_type.as_deref(),
                        )
                        .await
                })
            })
            .await?;
        agl1_events::present(events.into_iter().map(|e| e.event).collect(), query)
    }

    /// Returns the completion log from position `after` (at most `limit`
    /// entries), waiting up to `wait` for the first entry when there is
    /// none yet (a long poll; the server's shutdown ends the wait).
    pub async fn wait_for_completions(
        &self,
        after: i64,
        limit: usize,
        wait: Duration,
    ) -> StoreResult<CompletionPage> {
        let deadline = self.limits().deadline_after(wait);
        let mut closing = self.closing();
        // Subscribed before reading: a completion committed in between still wakes us.
        let mut events = self.bus.subscribe();
        loop {
            let page = self
                .run(Scan::Read, |tx| {
                    Box::pin(async move { tx.store.completions(after, limit).await })
                })
                .await?;
            if !page.entries.is_empty() || wait.is_zero() || *closing.borrow() {
                return Ok(page);
            }
            loop {
                let event = tokio::select! {
                    event = events.recv() => event,
                    _ = tokio::time::sleep_until(deadline) => return Ok(page),
                    _ = closing.changed() => return Ok(page),
                };
                match event {
                    Ok(event) => {
                        if let Change::RolloutChanged { status, .. } = &event.change
                            && status.is_finished()
                        {
                            break;
                        }
                    }
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return Ok(page),
                }
            }
        }
    }

    /// Registers model servers, each replacing the one with its (model,
    /// endpoint), and returns them (at most `max_batch_items` at once).
    pub async fn register_models(
        &self,
        servers: Vec<ModelServer>,
    ) -> StoreResult<Vec<ModelServer>> {
        self.limits().check_batch("models", servers.len())?;
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                for server in &servers {
                    tx.agl1().put_model(server);
                }
                tx.record(Change::ModelsChanged);
                Ok(servers)
            })
        })
        .await
    }

    /// Removes every model server.
    pub async fn delete_models(&self) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                tx.agl1().clear_models();
                tx.record(Change::ModelsChanged);
                Ok(())
            })
        })
        .await
    }

    /// Returns the servers registered for `model`.
    pub async fn models(&self, model: &str) -> StoreResult<Vec<ModelServer>> {
        self.run(Scan::Skip, |tx| Box::pin(tx.store.models(Some(model))))
            .await
    }

    /// Returns every registered model server, in registration order.
    pub async fn all_models(&self) -> StoreResult<Vec<ModelServer>> {
        self.run(Scan::Read, |tx| Box::pin(tx.store.models(None)))
            .await
    }

    /// Returns whether a 1.x rollout exists.
    pub async fn agl1_rollout_exists(&self, rollout_id: &str) -> StoreResult<bool> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move { tx.store.has_agl1_rollout(rollout_id, Access::Read).await })
        })
        .await
    }

    /// Returns the gateway's pause.
    pub async fn gateway_pause(&self) -> StoreResult<Pause> {
        self.run(Scan::Skip, |tx| Box::pin(tx.store.pause(Access::Read)))
            .await
    }

    /// Pauses the gateway (`Some`: with its retry delay and reason) or
    /// resumes it (`None`: the reason is cleared, the delay kept), for
    /// every server, and announces it as a change event.
    pub async fn set_gateway_pause(
        &self,
        pause: Option<(i64, Option<String>)>,
    ) -> StoreResult<Pause> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                let mut state = tx.store.pause(Access::Update).await?;
                state.generation += 1;
                match pause {
                    Some((retry_after_seconds, reason)) => {
                        state.paused = true;
                        state.retry_after_seconds = retry_after_seconds;
                        state.reason = reason;
                    }
                    None => {
                        state.paused = false;
                        state.reason = None;
                    }
                }
                tx.agl1().pause = Some(state.clone());
                tx.record(Change::GatewayChanged {
                    paused: state.paused,
                    generation: state.generation,
                });
                Ok(state)
            })
        })
        .await
    }

    /// Returns every server's gateway presence.
    pub async fn gateway_replicas(&self) -> StoreResult<Vec<Replica>> {
        self.run(Scan::Skip, |tx| Box::pin(tx.store.replicas()))
            .await
    }

    /// Records this server's gateway presence and removes the presence of
    /// servers silent since `stale_before`.
    pub async fn report_replica(
        &self,
        replica: &Replica,
        stale_before: Timestamp,
    ) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                for other in tx.store.replicas().await? {
                    if other.heartbeat < stale_before && other.server_id != replica.server_id {
                        tx.agl1().replicas.insert(other.server_id, None);
                    }
                }
                tx.agl1()
                    .replicas
                    .insert(replica.server_id.clone(), Some(replica.clone()));
                Ok(())
            })
        })
        .await
    }

    /// Removes this server's gateway presence (at shutdown).
    pub async fn remove_replica(&self, server_id: &str) -> StoreResult<()> {
        self.run(Scan::Skip, |tx| {
            Box::pin(async move {
                tx.agl1().replicas.insert(server_id.to_owned(), None);
                Ok(())
            })
        })
        .await
    }
}

/// Judges what a 1.x rollout that ends in `state` gives its trainer, from
/// its events as the trainer reads them once it sees the rollout end
/// ([`crate::training::RowsVerdict`]).
async fn judge_rows(tx: &mut Tx<'_>, agl1: &Agl1Rollout, state: Agl1State) -> StoreResult<()> {
    let rollout_id = agl1.rollout.rollout_id.as_str();
    let events: Vec<Agl1Event> = tx
        .store
        .agl1_events(rollout_id, agl1.event_attempt_id(), None)
        .await?
        .into_iter()
        .map(|stored| stored.event)
        .collect();
    tx.judge_rows(rollout_id, diagnosis::verdict(state, &events)?);
    Ok(())
}

/// Moves a 1.x rollout from `from` to `to` through the core's lifecycle
/// (the caller checked that 1.x allows the transition and locked the
/// rollout).
async fn transition(
    tx: &mut Tx<'_>,
    agl1: &mut Agl1Rollout,
    (from, to): (Agl1State, Agl1State),
) -> StoreResult<()> {
    let rollout_id = agl1.rollout.rollout_id.clone();
    let latest = tx
        .require_rollout(&rollout_id, Access::Update)
        .await?
        .attempt;
    let rollout = &mut agl1.rollout;
    let now = tx.now;
    let (attempt_status, rollout_status) = match to {
        Agl1State::Running => {
            let attempt_id = agl1
                .fields
                .last_attempt_id
                .clone()
                .unwrap_or_else(|| DEFAULT_ATTEMPT_ID.to_owned());
            if tx.attempt(&rollout_id, &attempt_id).await?.is_some() {
                return Err(StoreError::FailedPrecondition(format!(
                    "Rollout {rollout_id}: attempt {attempt_id} already ran"
                )));
            }
            let new = NewAttempt {
                worker_id: None,
                attempt_id: Some(attempt_id),
            };
            let mut attempt = tx::create_attempt(tx, rollout, latest.as_ref(), false, new);
            // The controller has launched it: it runs.
            lifecycle::set_attempt_status(&mut attempt, AttemptStatus::Running, now);
            let how = AttemptWrite {
                is_latest: true,
                sync_worker: false,
            };
            return tx::write_attempt(tx, rollout, &attempt, how).await;
        }
        Agl1State::Succeeded => (AttemptStatus::Succeeded, RolloutStatus::Succeeded),
        Agl1State::Failed => (AttemptStatus::Failed, RolloutStatus::Failed),
        Agl1State::Queuing => {
            return Err(StoreError::FailedPrecondition(agl1::transition_error(
                &rollout_id,
                from,
                Some(to),
            )));
        }
    };
    // A running rollout ends with its attempt; a queuing one never started.
    match latest.filter(|_| from == Agl1State::Running) {
        Some(mut attempt) => {
            lifecycle::set_attempt_status(&mut attempt, attempt_status, now);
            let how = AttemptWrite {
                is_latest: true,
                sync_worker: attempt.worker_id.is_some(),
            };
            tx::write_attempt(tx, rollout, &attempt, how).await
        }
        None => {
            let before = rollout.status;
            let _ = lifecycle::set_rollout_status(rollout, rollout_status, now);
            tx.save_rollout_change(rollout, None, Some(before));
            Ok(())
        }
    }
}
