//! Rollouts: start, enqueue, dequeue (claim), read, query, update, wait.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;

use super::super::access::Caller;
use super::super::error::{StoreError, StoreResult};
use super::super::events::Change;
use super::super::idempotency::{self, IdempotencyKey, RememberedRequest};
use super::super::ids::{self, RolloutId, WorkerId};
use super::super::lifecycle;
use super::super::model::{Rollout, RolloutSpec, RolloutStatus, RolloutView, Timestamp};
use super::super::namespace::Usage;
use super::super::query::{Page, Paged, RewardedRollout, RolloutFilter};
use super::super::storage::Access;
use super::patches::RolloutPatch;
use super::runner::{Engine, Scan};
use super::training::final_rewards;
use super::tx::{self, Tx};

/// What an enqueue created.
#[derive(Debug, Clone, PartialEq)]
pub struct Enqueued {
    /// The ids of the rollouts the request created, in request order.
    pub rollout_ids: Vec<String>,
    /// The rollouts: as created, or for a repeated request id as they are
    /// now (any deleted since left out).
    pub rollouts: Vec<Rollout>,
    /// Whether the request id named an earlier request: nothing was written.
    pub repeated: bool,
}

/// A page of rollouts with the final rewards of those that have one.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardedRollouts {
    pub rollouts: Paged<RolloutView>,
    /// Final rewards by rollout id ([`crate::training`]).
    pub rewards: HashMap<String, f64>,
}

/// Returns the result of the request `key` named before, if it did and
/// has not expired; refuses the key when it named another request. The
/// key's name is locked first, so that of concurrent first uses on several
/// servers one writes and the others see its result.
async fn repeated_request(tx: &mut Tx<'_>, key: &IdempotencyKey) -> StoreResult<Option<Enqueued>> {
    let lock = idempotency::lock_name(&key.key);
    tx.store.lock_names(&[&lock]).await?;
    let Some(remembered) = tx.store.remembered_request(&key.key).await? else {
        return Ok(None);
    };
    if remembered.expires_at <= tx.now {
        return Ok(None);
    }
    if remembered.digest != key.digest {
        return Err(key.reused());
    }
    let ids: Vec<&str> = remembered.rollout_ids.iter().map(String::as_str).collect();
    let mut views = tx.rollouts(&ids, Access::Read).await?;
    let rollouts = ids
        .iter()
        .filter_map(|id| views.remove(*id).map(|view| view.rollout))
        .collect();
    Ok(Some(Enqueued {
        rollout_ids: remembered.rollout_ids,
        rollouts,
        repeated: true,
    }))
}

impl Engine {
    /// Creates a rollout with its first attempt, bypassing the queue, for
    /// `worker_id` when given (which `caller` must be allowed to act for).
    pub async fn start_rollout(
        &self,
        spec: RolloutSpec,
        worker_id: Option<WorkerId>,
        caller: &Caller,
    ) -> StoreResult<RolloutView> {
        caller.check_worker(worker_id.as_deref())?;
        check_spec(&spec)?;
        let worker_id = worker_id.map(WorkerId::into_string);
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let latest = match spec.resources_id {
                    Some(_) => None,
                    None => tx.latest_resources_id().await?,
                };
                let mut rollout = new_rollout(spec, latest, tx.now);
                let new = tx::NewAttempt::for_worker(worker_id);
                let attempt = tx::create_attempt(tx, &mut rollout, None, true, new);
                if let Some(worker_id) = &attempt.worker_id {
                    tx::sync_worker(tx, worker_id, &attempt, false).await?;
                }
                Ok(RolloutView {
                    rollout,
                    attempt: Some(attempt),
                })
            })
        })
        .await
    }

    /// Creates rollouts in status `queuing` at the queue's tail, in order.
    /// Under a client's `request_id`, a request already made under it (and
    /// not expired) returns that request's rollouts and writes nothing; the
    /// same id with other specs is refused (`FAILED_PRECONDITION`).
    pub async fn enqueue_rollouts(
        &self,
        specs: Vec<RolloutSpec>,
        request_id: Option<String>,
    ) -> StoreResult<Enqueued> {
        self.limits().check_batch("rollouts", specs.len())?;
        for (index, spec) in specs.iter().enumerate() {
            check_spec(spec).map_err(|error| error.in_item("rollouts", index))?;
        }
        let key = match request_id {
            Some(id) => {
                idempotency::validate_request_id("request_id", &id)?;
                Some(IdempotencyKey::of_enqueue(id, &specs))
            }
            None => None,
        };
        let ttl = self.config.request_id_ttl.as_secs_f64();
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                if let Some(key) = &key
                    && let Some(repeated) = repeated_request(tx, key).await?
                {
                    return Ok(repeated);
                }
                let usage = Usage {
                    queued_rollouts: specs.len() as u64,
                    ..Usage::default()
                };
                self.check_quotas(tx, usage).await?;
                // The latest resources are resolved once for the whole batch.
                let latest = if specs.iter().any(|s| s.resources_id.is_none()) {
                    tx.latest_resources_id().await?
                } else {
                    None
                };
                let mut created = Vec::with_capacity(specs.len());
                let mut previous: Option<Timestamp> = None;
                for spec in specs {
                    // As upstream, each rollout of a batch has its own
                    // creation time, so sorting a batch by start time keeps
                    // its order: the clock's present, strictly after the
                    // previous rollout's (a manual clock stands still).
                    let created_at = self
                        .now()
                        .max(previous.map_or(tx.now, |t| Timestamp(t.0 + 1)));
                    previous = Some(created_at);
                    let rollout = new_rollout(spec, latest.clone(), created_at);
                    tx.save_new_rollout(&rollout, None);
                    tx.enqueue_since(&rollout.rollout_id, created_at);
                    tx.record(Change::RolloutCreated {
                        rollout_id: rollout.rollout_id.clone(),
                        status: rollout.status,
                    });
                    created.push(rollout);
                }
                let rollout_ids: Vec<String> =
                    created.iter().map(|r| r.rollout_id.clone()).collect();
                if let Some(key) = key {
                    tx.remember_request(RememberedRequest {
                        request_id: key.key,
                        digest: key.digest,
                        rollout_ids: rollout_ids.clone(),
                        expires_at: tx.now.plus_seconds(ttl),
                    });
                }
                Ok(Enqueued {
                    rollout_ids,
                    rollouts: created,
                    repeated: false,
                })
            })
        })
        .await
    }

    /// Claims up to `limit` rollouts from the queue's head for `worker_id`
    /// (which `caller` must name when its token is bound to workers); waits
    /// up to `wait` for the first one when the queue is empty. A wait that
    /// the server's shutdown cuts short with nothing claimed is unavailable,
    /// not an empty queue. `limit` is the client's number as sent (negative
    /// included): this check owns the refusal.
    pub async fn dequeue(
        &self,
        limit: i64,
        worker_id: Option<WorkerId>,
        wait: Duration,
        caller: &Caller,
    ) -> StoreResult<Vec<RolloutView>> {
        caller.check_worker_named(worker_id.as_deref())?;
        let worker_id = worker_id.map(WorkerId::into_string);
        let largest = self.limits().max_batch_items;
        let limit = usize::try_from(limit)
            .ok()
            .filter(|limit| (1..=largest).contains(limit))
            .ok_or_else(|| {
                StoreError::invalid(format!(
                    "limit must be between 1 and {largest}, got {limit}"
                ))
            })?;
        let deadline = self.limits().deadline_after(wait);
        let mut closing = self.closing();
        loop {
            // Register interest before looking, so an enqueue between the
            // look and the wait still wakes us.
            let signal = self.bus.queue_signal().notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            let claimed = self
                .claim_from_queue(limit, worker_id.clone(), true)
                .await?;
            if !claimed.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(claimed);
            }
            if *closing.borrow() {
                return Err(StoreError::shutting_down());
            }
            tokio::select! {
                _ = signal => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = closing.changed() => {}
            }
        }
    }

    async fn claim_from_queue(
        &self,
        limit: usize,
        worker_id: Option<String>,
        idle_when_empty: bool,
    ) -> StoreResult<Vec<RolloutView>> {
        self.run(Scan::Due, |tx| {
            Box::pin(async move { claim(tx, limit, worker_id.as_deref(), idle_when_empty).await })
        })
        .await
    }

    /// Lists rollouts with their latest attempts.
    pub async fn query_rollouts(
        &self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>> {
        self.check_rollout_query(filter, page)?;
        self.run(Scan::Read, |tx| {
            Box::pin(async move { tx.store.query_rollouts(filter, page).await })
        })
        .await
    }

    /// Lists rollouts with their latest attempts and, read in the same
    /// transaction, the final rewards of those that have one.
    pub async fn query_rewarded_rollouts(
        &self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<RewardedRollouts> {
        self.check_rollout_query(filter, page)?;
        self.run(Scan::Read, |tx| {
            Box::pin(async move {
                let rollouts = tx.store.query_rollouts(filter, page).await?;
                let ids: Vec<&str> = rollouts
                    .items
                    .iter()
                    .map(|view| view.rollout.rollout_id.as_str())
                    .collect();
                let rewards = final_rewards(tx.store.as_mut(), &ids).await?;
                Ok(RewardedRollouts { rollouts, rewards })
            })
        })
        .await
    }

    /// Checks a rollout query's sort field and the ids it names.
    fn check_rollout_query(&self, filter: &RolloutFilter, page: &Page) -> StoreResult<()> {
        page.validate::<RewardedRollout>()?;
        if let Some(rollout_ids) = &filter.rollout_id_in {
            self.limits()
                .check_ids("rollout_id_in", rollout_ids.len())?;
            for rollout_id in rollout_ids {
                ids::validate_id("rollout_id_in", rollout_id)?;
            }
        }
        if let Some(worker_id) = &filter.worker_id {
            ids::validate_worker_id("worker_id", worker_id)?;
        }
        if let Some(resources_id) = &filter.resources_id {
            ids::validate_id("resources_id", resources_id)?;
        }
        Ok(())
    }

    /// Returns a rollout with its latest attempt.
    pub async fn get_rollout(&self, rollout_id: &RolloutId) -> StoreResult<RolloutView> {
        self.run(Scan::Read, |tx| {
            Box::pin(async move { tx.require_rollout(rollout_id, Access::Read).await })
        })
        .await
    }

    /// Returns the rollouts among `rollout_ids` with their latest attempts,
    /// keyed by id, read in one transaction (unknown ids are omitted): a
    /// watch of many rollouts costs one query, not one per id.
    pub async fn get_rollouts(
        &self,
        rollout_ids: &[RolloutId],
    ) -> StoreResult<HashMap<String, RolloutView>> {
        self.limits().check_ids("rollout_ids", rollout_ids.len())?;
        let ids: Vec<&str> = rollout_ids.iter().map(RolloutId::as_str).collect();
        self.run(Scan::Read, |tx| {
            Box::pin(async move { tx.rollouts(&ids, Access::Read).await })
        })
        .await
    }

    /// Overwrites selected fields of a rollout (no transition rules,
    /// `docs/semantics.md#update-rollout`).
    pub async fn update_rollout(
        &self,
        rollout_id: &RolloutId,
        patch: RolloutPatch,
    ) -> StoreResult<Rollout> {
        if let Some(Some(resources_id)) = &patch.resources_id {
            ids::validate_id("resources_id", resources_id)?;
        }
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let view = tx.rollout(rollout_id, Access::Update).await?;
                let RolloutView {
                    mut rollout,
                    attempt: latest,
                } = view.ok_or_else(|| StoreError::item_not_found("rollout_id", rollout_id))?;
                let before = rollout.status;
                let relabels = patch.mode.is_some() || patch.resources_id.is_some();
                patch_rollout(tx, &mut rollout, patch);
                tx.leave_queue(&rollout, before);
                if relabels {
                    tx.save_relabelled_rollout(&rollout, latest.as_ref());
                } else {
                    tx.save_rollout(&rollout, latest.as_ref());
                }
                tx.note_completion(&rollout, Some(before));
                tx.record(Change::RolloutChanged {
                    rollout_id: rollout.rollout_id.clone(),
                    status: rollout.status,
                });
                Ok(rollout)
            })
        })
        .await
    }

    /// Waits until every known rollout among `rollout_ids` is terminal or
    /// `timeout` passes (`None`: no limit); returns the terminal ones in
    /// request order. Unknown ids are omitted. A wait that the server's
    /// shutdown cuts short is unavailable (the client waits again elsewhere).
    pub async fn wait_for_rollouts(
        &self,
        rollout_ids: &[RolloutId],
        timeout: Option<Duration>,
    ) -> StoreResult<Vec<Rollout>> {
        self.limits().check_ids("rollout_ids", rollout_ids.len())?;
        let deadline = timeout.map(|timeout| self.limits().deadline_after(timeout));
        let mut closing = self.closing();
        let mut events = self.bus.subscribe();
        let mut finished: HashMap<String, Rollout> = HashMap::new();
        let mut pending: HashSet<String> = HashSet::new();
        let mut reread = true;
        loop {
            if reread {
                reread = false;
                let found = self.get_rollouts(rollout_ids).await?;
                pending.clear();
                for (rollout_id, view) in found {
                    if view.rollout.status.is_finished() {
                        finished.insert(rollout_id, view.rollout);
                    } else if !finished.contains_key(&rollout_id) {
                        pending.insert(rollout_id);
                    }
                }
            }
            if pending.is_empty() {
                break;
            }
            let deadline = deadline.unwrap_or_else(|| self.limits().deadline_after(Duration::MAX));
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            if *closing.borrow() {
                return Err(StoreError::shutting_down());
            }
            let event = tokio::select! {
                event = events.recv() => event,
                _ = tokio::time::sleep_until(deadline) => break,
                _ = closing.changed() => return Err(StoreError::shutting_down()),
            };
            match event {
                Ok(event) => {
                    if let Change::RolloutDeleted { rollout_id } = &event.change {
                        pending.remove(rollout_id);
                    }
                    if let Change::RolloutChanged { rollout_id, status } = &event.change
                        && status.is_finished()
                        && pending.remove(rollout_id)
                    {
                        let view = self
                            .run(Scan::Skip, |tx| {
                                Box::pin(async move { tx.rollout(rollout_id, Access::Read).await })
                            })
                            .await?;
                        if let Some(view) = view {
                            finished.insert(rollout_id.clone(), view.rollout);
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => reread = true,
                Err(RecvError::Closed) => break,
            }
        }
        Ok(rollout_ids
            .iter()
            .filter_map(|id| finished.get(id.as_str()).cloned())
            .collect())
    }
}

/// Claims up to `limit` rollouts from the queue's head, each with a new
/// attempt of `worker_id`, whose worker is synchronised with the last one;
/// finding the queue empty marks the worker idle when `idle_when_empty`
/// (a dequeue's rule; a session may still hold other attempts).
pub(super) async fn claim(
    tx: &mut Tx<'_>,
    limit: usize,
    worker_id: Option<&str>,
    idle_when_empty: bool,
) -> StoreResult<Vec<RolloutView>> {
    let mut claimed = Vec::new();
    // Entries whose rollout is no longer queuing are dropped from the
    // queue; the claim goes on past them.
    while claimed.len() < limit {
        let entries = tx.claim_queued(limit - claimed.len()).await?;
        if entries.is_empty() {
            break;
        }
        for view in entries {
            let RolloutView {
                mut rollout,
                attempt: latest,
            } = view;
            if !rollout.status.is_queuing() {
                let rollout_id = rollout.rollout_id.as_str();
                tracing::debug!(rollout_id, status = %rollout.status, "queued rollout is no longer queuing, skipping");
                continue;
            }
            let new = tx::NewAttempt::for_worker(worker_id.map(str::to_owned));
            let attempt = tx::create_attempt(tx, &mut rollout, latest.as_ref(), false, new);
            claimed.push(RolloutView {
                rollout,
                attempt: Some(attempt),
            });
        }
    }
    if let Some(worker_id) = worker_id {
        match claimed.last().and_then(|view| view.attempt.as_ref()) {
            Some(attempt) => tx::sync_worker(tx, worker_id, attempt, true).await?,
            None if !idle_when_empty => {}
            None => {
                let mut worker = tx.worker(worker_id).await?;
                lifecycle::mark_idle_after_empty_dequeue(&mut worker, tx.now);
                tx.save_worker(&worker);
            }
        }
    }
    Ok(claimed)
}

/// Applies a client's patch to a rollout; a status that puts the rollout
/// back in line enqueues it.
fn patch_rollout(tx: &mut Tx<'_>, rollout: &mut Rollout, patch: RolloutPatch) {
    if let Some(input) = patch.input {
        rollout.input = input;
    }
    if let Some(mode) = patch.mode {
        rollout.mode = mode;
    }
    if let Some(resources_id) = patch.resources_id {
        rollout.resources_id = resources_id;
    }
    if let Some(config) = patch.config {
        rollout.config = config;
    }
    if let Some(metadata) = patch.metadata {
        rollout.metadata = metadata;
    }
    if let Some(status) = patch.status
        && lifecycle::set_rollout_status(rollout, status, tx.now)
    {
        tx.enqueue(&rollout.rollout_id);
    }
}

/// Checks what the engine stores of a spec by the id rule: its resources id.
fn check_spec(spec: &RolloutSpec) -> StoreResult<()> {
    match &spec.resources_id {
        Some(resources_id) => ids::validate_id("resources_id", resources_id),
        None => Ok(()),
    }
}

fn new_rollout(spec: RolloutSpec, latest_resources: Option<String>, now: Timestamp) -> Rollout {
    Rollout {
        rollout_id: ids::new_rollout_id(),
        input: spec.input,
        start_time: now,
        end_time: None,
        mode: spec.mode,
        resources_id: spec.resources_id.or(latest_resources),
        status: RolloutStatus::Queuing,
        config: spec.config,
        metadata: spec.metadata,
    }
}
