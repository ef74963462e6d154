//! The read model's aggregates ([`crate::overview`]): what the
//! console's Overview and a waiting rollout's page show. Each is one
//! read-only transaction over the storage port's aggregate reads, cheap
//! enough to be read again on every change of the store.

use std::collections::BTreeMap;

use super::super::error::{StoreError, StoreResult};
use super::super::ids::{self, RolloutId};
use super::super::model::RolloutStatus;
use super::super::overview::{
    self, Failure, Found, MAX_FAILURES, MAX_FOUND_ATTEMPTS, MinuteCounts, QueuePlace, QueuedRollout,
};
use super::super::storage::{Access, StoreTx};
use super::runner::Engine;

impl Engine {
    /// Returns how many rollouts have each status, every status present
    /// (zero included); kept as counters, in the commit of every change.
    pub async fn rollouts_by_status(&self) -> StoreResult<BTreeMap<RolloutStatus, u64>> {
        let counts = self.read(|store| Box::pin(store.counts())).await?;
        Ok(RolloutStatus::ALL
            .iter()
            .map(|&status| {
                let count = counts.rollouts_by_status.get(&status).copied();
                (status, count.unwrap_or(0))
            })
            .collect())
    }

    /// Returns the rollouts created and finished in each of the last
    /// [`overview::MINUTES`] wall-clock minutes (the current one last,
    /// partial): by start time, and by end time and present terminal
    /// status. Read from counts the backends keep in the commit of every
    /// change: the read costs the window's sixty minutes, whatever the
    /// number of rollouts in them.
    pub async fn finished_per_minute(&self) -> StoreResult<Vec<MinuteCounts>> {
        let (from, until) = overview::minute_window(self.now());
        let counts = self
            .read(|store| Box::pin(store.activity(from, until)))
            .await?;
        Ok(overview::per_minute(from, &counts))
    }

    /// Returns the rollout at the head of the queue (the oldest queued one)
    /// and how long it has waited; `None` when the queue is empty.
    pub async fn oldest_queued(&self) -> StoreResult<Option<QueuedRollout>> {
        let counts = self.read(|store| Box::pin(store.counts())).await?;
        Ok(QueuedRollout::from_counts(&counts, self.now()))
    }

    /// Returns where a queued rollout stands in the queue; `None` when it
    /// is not queued (running or finished); NOT_FOUND for an unknown one.
    pub async fn queue_place(&self, rollout_id: &RolloutId) -> StoreResult<Option<QueuePlace>> {
        let rollout_id = rollout_id.clone();
        self.read(move |store| {
            Box::pin(async move {
                let Some((ahead, since)) = store.queue_place(&rollout_id).await? else {
                    return match store.rollouts(&[&rollout_id], Access::Read).await?.len() {
                        0 => Err(StoreError::rollout_not_found(&rollout_id)),
                        _ => Ok(None),
                    };
                };
                let queued = store.counts().await?.queued;
                Ok(Some(QueuePlace::new(ahead, queued, since)))
            })
        })
        .await
    }

    /// Returns the `limit` (at most [`MAX_FAILURES`]) most recently ended
    /// failed rollouts, the latest first, each with what the store records
    /// of why it failed.
    pub async fn latest_failures(&self, limit: usize) -> StoreResult<Vec<Failure>> {
        if limit > MAX_FAILURES {
            return Err(StoreError::invalid(format!(
                "limit must be at most {MAX_FAILURES}"
            )));
        }
        self.read(|store| Box::pin(latest_failures_in(store, limit)))
            .await
    }

    /// Returns what `id` names, exactly: a rollout, attempts (of any
    /// rollout), a worker, a resources snapshot, each looked up by a key or
    /// an index; and the attempts with spans of the trace `id`, which no
    /// index serves (a scan of the spans, for a person's search box: span
    /// ingest pays nothing for it). Blanks around the id are ignored.
    pub async fn find_id(&self, id: &str) -> StoreResult<Vec<Found>> {
        let id = id.trim().to_owned();
        ids::validate_id("id", &id)?;
        self.read(move |store| {
            Box::pin(async move {
                let mut found = Vec::new();
                let key = [id.as_str()];
                for view in store.rollouts(&key, Access::Read).await? {
                    found.push(Found::Rollout(view.rollout.rollout_id));
                }
                for attempt in store.attempts_with_id(&id, MAX_FOUND_ATTEMPTS).await? {
                    found.push(Found::Attempt {
                        rollout_id: attempt.rollout_id,
                        attempt_id: attempt.attempt_id,
                    });
                }
                for worker in store.workers(&key, Access::Read).await? {
                    found.push(Found::Worker(worker.worker_id));
                }
                if let Some(update) = store.resources(&id).await? {
                    found.push(Found::Resources(update.resources_id));
                }
                for (rollout_id, attempt_id) in
                    store.attempts_with_trace(&id, MAX_FOUND_ATTEMPTS).await?
                {
                    found.push(Found::Trace {
                        rollout_id,
                        attempt_id,
                    });
                }
                Ok(found)
            })
        })
        .await
    }
}

/// Returns the `limit` most recently ended failed rollouts, the latest
/// first, each with what the store records of why it failed.
pub(super) async fn latest_failures_in(
    store: &mut dyn StoreTx,
    limit: usize,
) -> StoreResult<Vec<Failure>> {
    let failed = store.latest_ended(RolloutStatus::Failed, limit).await?;
    let attempts: Vec<(&str, &str)> = failed
        .iter()
        .filter_map(|view| view.attempt.as_ref())
        .map(|a| (a.rollout_id.as_str(), a.attempt_id.as_str()))
        .collect();
    let mut error_spans = store.error_spans(&attempts).await?.into_iter().peekable();
    let ids: Vec<&str> = failed
        .iter()
        .map(|view| view.rollout.rollout_id.as_str())
        .collect();
    let mut agl1_errors: BTreeMap<String, String> = store
        .agl1_rollouts(&ids, Access::Read)
        .await?
        .into_iter()
        .filter_map(|r| Some((r.rollout.rollout_id, r.fields.error_message?)))
        .collect();
    Ok(failed
        .into_iter()
        .map(|rollout| {
            // Error spans come in the order of the attempts.
            let error_span = error_spans.next_if(|span| {
                rollout.attempt.as_ref().is_some_and(|a| {
                    a.rollout_id == span.rollout_id && a.attempt_id == span.attempt_id
                })
            });
            let agl1_error = agl1_errors.remove(&rollout.rollout.rollout_id);
            Failure {
                rollout,
                error_span,
                agl1_error,
            }
        })
        .collect())
}
