//! Attempts: start, update, expire, read, query.

use super::super::access::Caller;
use super::super::error::{StoreError, StoreResult};
use super::super::ids::{AttemptId, RolloutId, WorkerId};
use super::super::lifecycle;
use super::super::model::{Attempt, RolloutView};
use super::super::query::{Page, Paged};
use super::super::storage::Access;
use super::patches::{AttemptPatch, AttemptUpdate};
use super::runner::{Engine, Scan};
use super::tx::{self, AttemptWrite, Tx};

impl Engine {
    /// Creates a new attempt for a rollout whatever its status, for
    /// `worker_id` when given (which `caller` must be allowed to act for).
    pub async fn start_attempt(
        &self,
        rollout_id: &RolloutId,
        worker_id: Option<WorkerId>,
        caller: &Caller,
    ) -> StoreResult<RolloutView> {
        caller.check_worker(worker_id.as_deref())?;
        let worker_id = worker_id.map(WorkerId::into_string);
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                let RolloutView {
                    mut rollout,
                    attempt: latest,
                } = tx.require_rollout(rollout_id, Access::Update).await?;
                let attempt = tx::create_attempt(
                    tx,
                    &mut rollout,
                    latest.as_ref(),
                    false,
                    tx::NewAttempt::for_worker(worker_id),
                );
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

    /// Lists a rollout's attempts.
    pub async fn query_attempts(
        &self,
        rollout_id: &RolloutId,
        page: &Page,
    ) -> StoreResult<Paged<Attempt>> {
        page.validate::<Attempt>()?;
        let attempts = self
            .run(Scan::Due, |tx| {
                Box::pin(async move {
                    tx.require_rollout(rollout_id, Access::Read).await?;
                    tx.store.attempts(rollout_id).await
                })
            })
            .await?;
        Ok(page.apply(attempts))
    }

    /// Returns a rollout's latest attempt, `None` when it has none.
    pub async fn latest_attempt(&self, rollout_id: &RolloutId) -> StoreResult<Option<Attempt>> {
        let view = self
            .run(Scan::Due, |tx| {
                Box::pin(async move { tx.require_rollout(rollout_id, Access::Read).await })
            })
            .await?;
        Ok(view.attempt)
    }

    /// Overwrites selected fields of an attempt (`attempt_id` may be `latest`) and propagates its
    /// status to the rollout (`docs/semantics.md#update-attempt`). A worker id it writes must be
    /// one `caller` may act for. A writer that presents its session's `owner_epoch` is refused
    /// (FAILED_PRECONDITION) unless that session still owns the attempt.
    pub async fn update_attempt(
        &self,
        rollout_id: &RolloutId,
        attempt_id: &AttemptId,
        patch: AttemptPatch,
        owner_epoch: Option<u64>,
        caller: &Caller,
    ) -> StoreResult<Attempt> {
        caller.check_worker(patch.worker_id.as_deref())?;
        self.run(Scan::Due, |tx| {
            Box::pin(
                async move { apply_update(tx, rollout_id, attempt_id, patch, owner_epoch).await },
            )
        })
        .await
    }

    /// Applies several attempt updates in one transaction, in order, each
    /// seeing the ones before it (`docs/semantics.md#update-attempts`): all
    /// or none. Returns each update's attempt in order; the first failure
    /// fails the batch, its message prefixed with `updates[i]: `, as does the
    /// first worker id `caller` may not act for (checked before anything is written).
    pub async fn update_attempts(
        &self,
        updates: Vec<AttemptUpdate>,
        caller: &Caller,
    ) -> StoreResult<Vec<Attempt>> {
        if updates.is_empty() {
            return Err(StoreError::invalid("updates must not be empty"));
        }
        self.limits().check_batch("updates", updates.len())?;
        for (index, update) in updates.iter().enumerate() {
            caller
                .check_worker(update.patch.worker_id.as_deref())
                .map_err(|error| error.in_item("updates", index))?;
        }
        self.run(Scan::Due, |tx| {
            Box::pin(async move {
                // The rollouts are read and locked with one read (the
                // backends lock in id order); each update then finds its
                // rollout in the transaction.
                let rollout_ids: Vec<&str> =
                    updates.iter().map(|u| u.rollout_id.as_str()).collect();
                tx.rollouts(&rollout_ids, Access::Update).await?;
                let mut attempts = Vec::with_capacity(updates.len());
                for (index, update) in updates.into_iter().enumerate() {
                    let AttemptUpdate {
                        rollout_id,
                        attempt_id,
                        patch,
                        owner_epoch,
                    } = update;
                    let attempt = apply_update(tx, &rollout_id, &attempt_id, patch, owner_epoch)
                        .await
                        .map_err(|error| error.in_item("updates", index))?;
                    attempts.push(attempt);
                }
                Ok(attempts)
            })
        })
        .await
    }
}

/// The rule of one attempt update, in `tx`: see [`Engine::update_attempt`].
async fn apply_update(
    tx: &mut Tx<'_>,
    rollout_id: &RolloutId,
    attempt_id: &AttemptId,
    patch: AttemptPatch,
    owner_epoch: Option<u64>,
) -> StoreResult<Attempt> {
    let now = tx.now;
    let RolloutView {
        mut rollout,
        attempt: latest,
    } = tx.require_rollout(rollout_id, Access::Update).await?;
    let latest = latest.ok_or_else(|| StoreError::no_attempts(rollout_id))?;
    let mut attempt = if attempt_id.is_latest() || **attempt_id == latest.attempt_id {
        latest.clone()
    } else {
        tx.attempt(rollout_id, attempt_id)
            .await?
            .ok_or_else(|| StoreError::attempt_not_found(rollout_id, attempt_id))?
    };
    tx::check_owner(tx, &attempt, &latest, owner_epoch).await?;
    let mut sync = false;
    if let Some(worker_id) = patch.worker_id {
        sync |= !worker_id.is_empty();
        attempt.worker_id = Some(worker_id.into_string());
    }
    if let Some(status) = patch.status {
        lifecycle::set_attempt_status(&mut attempt, status, now);
        sync |= attempt.worker_id.is_some();
    }
    if let Some(time) = patch.last_heartbeat_time {
        attempt.last_heartbeat_time = Some(time);
    }
    if let Some(metadata) = patch.metadata {
        attempt.metadata = metadata;
    }
    let how = AttemptWrite {
        is_latest: attempt.attempt_id == latest.attempt_id,
        sync_worker: sync,
    };
    tx::write_attempt(tx, &mut rollout, &attempt, how).await?;
    Ok(attempt)
}
