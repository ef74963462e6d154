//! agent-lightning 1.x event appends, coalesced: appends that arrive while
//! others wait for a transaction run together as one engine transaction
//! (one backend transaction, one multi-row insert, one commit and one
//! durability wait) and are answered together once it is durable.
//!
//! Every append is queued; the first one queued when no drainer is running
//! spawns one. A drainer opens a transaction (on SQLite: waits for the one
//! writer), then takes what is queued: the appends that arrived while it
//! waited join it; appends left, or the next one to arrive, start the next
//! drainer once this one holds its rollouts' locks, so that it queues for
//! the store behind this one. Each member is checked on its own
//! (its rollout exists, its `Idempotency-Key`, the routed-experts
//! supersede); one whose check fails gets its own error and stages nothing,
//! the others go on. An error of the store itself (a failed read or
//! commit) fails every member that passed its checks, as a failed group
//! commit fails every waiter. The drainer runs on its own task: an append
//! whose caller goes away is still recorded and never strands the others.
//!
//! A member whose rule reads earlier events of its (rollout, attempt) (an
//! idempotency key, a routing tensor) waits for the next batch when the
//! batch already holds an append to the same attempt, so that it reads
//! that append as it would have alone. A batch is a prefix of the queue,
//! so the events of an attempt are stored in append order. Rollouts are
//! locked in id order, so that two batches on a shared database cannot
//! deadlock.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::append_queue::{Append, Request};
use super::runner::Engine;
use super::tx::Tx;
use crate::agl1::events::{
    MODEL_REQUEST, REWARD, drop_routed_experts, parse_data, reward_value, supersedes,
};
use crate::agl1::{self as agl1, Agl1Event, NewAgl1Event};
use crate::error::{StoreError, StoreResult};
use crate::ids::{AttemptId, RolloutId};
use crate::storage::Access;
use crate::storage::agl1::EventWrite;
use crate::training::RolloutReward;

/// Locks the batch's rollouts in id order (so that two batches cannot
/// deadlock) and returns those that exist.
async fn lock_rollouts(tx: &mut Tx<'_>, requests: &[Request]) -> StoreResult<Vec<String>> {
    let mut rollout_ids: Vec<&str> = requests.iter().map(|r| r.rollout_id.as_str()).collect();
    rollout_ids.sort_unstable();
    rollout_ids.dedup();
    let mut present = Vec::with_capacity(rollout_ids.len());
    for rollout_id in rollout_ids {
        if tx
            .store
            .has_agl1_rollout(rollout_id, Access::Update)
            .await?
        {
            present.push(rollout_id.to_owned());
        }
    }
    Ok(present)
}

/// What a member's checks decided.
enum Verdict {
    /// Its event is staged in the transaction.
    Staged(Agl1Event),
    /// Its idempotency key returned the event first recorded under it.
    Recorded(Agl1Event),
}

impl Engine {
    /// Appends an event to one attempt of a 1.x rollout (any attempt id;
    /// terminal rollouts accept events too) with the server's time. A model
    /// request with a routing tensor drops the tensor of the attempt's
    /// previous model request when it supersedes it, in the same
    /// transaction. A repeated idempotency key returns the event first
    /// recorded under it (and refuses another event under the same key).
    /// Concurrent appends share a transaction (see `core::engine::appends`); once this
    /// future is first polled, the append is made even if it is dropped.
    pub async fn append_agl1_event(
        self: &Arc<Self>,
        rollout_id: &RolloutId,
        attempt_id: &AttemptId,
        new: NewAgl1Event,
    ) -> StoreResult<Agl1Event> {
        let (rollout_id, attempt_id) = (rollout_id.as_str(), attempt_id.as_str());
        let (done, outcome) = oneshot::channel();
        let request = Request {
            rollout_id: rollout_id.to_owned(),
            attempt_id: attempt_id.to_owned(),
            new,
        };
        if self.appends.push(Append { request, done }) {
            tokio::spawn(self.clone().drain_appends());
        }
        outcome
            .await
            .unwrap_or_else(|_| Err(StoreError::Internal("the event append was dropped".into())))
    }

    /// Runs one batch of queued appends in one transaction and answers its
    /// members; once its rollouts are locked, starts the next drainer when
    /// appends wait ([`AppendQueue::hand_over`]).
    /// (Boxed: it spawns itself.)
    fn drain_appends(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut tx = match self.begin(self.now()).await {
                Ok(tx) => tx,
                Err(error) => {
                    for append in self.appends.take_all() {
                        let _ = append.done.send(Err(error.clone()));
                    }
                    return;
                }
            };
            let batch = self.appends.take_batch();
            let (requests, dones): (Vec<Request>, Vec<_>) =
                batch.into_iter().map(|a| (a.request, a.done)).unzip();
            let present = lock_rollouts(&mut tx, &requests).await;
            // The next drainer starts once this batch holds its rollouts: on
            // a shared database it runs beside this one, and its appends to
            // the same rollouts wait for this commit, so they are stored
            // after.
            if self.appends.hand_over() {
                tokio::spawn(self.clone().drain_appends());
            }
            let checked = match present {
                Ok(present) => self.check_appends(&mut tx, requests, &present).await,
                Err(error) => Err(error),
            };
            let verdicts = match checked {
                Ok(verdicts) => verdicts,
                Err(error) => {
                    tx.into_parts().0.rollback().await;
                    for done in dones {
                        let _ = done.send(Err(error.clone()));
                    }
                    return;
                }
            };
            let committed = self.commit(tx).await;
            for (done, verdict) in dones.into_iter().zip(verdicts) {
                let outcome = match (verdict, &committed) {
                    (Err(error), _) => Err(error),
                    (Ok(_), Err(error)) => Err(error.clone()),
                    (Ok(Verdict::Staged(event)), Ok(())) => {
                        self.observer.agl1_event(&event.event_type);
                        self.bus.publish_appended(&event.rollout_id);
                        Ok(event)
                    }
                    (Ok(Verdict::Recorded(event)), Ok(())) => {
                        self.observer.agl1_event(&event.event_type);
                        Ok(event)
                    }
                };
                let _ = done.send(outcome);
            }
        })
    }

    /// Checks each member of a batch in order (`present`: its locked
    /// rollouts that exist) and stages the events of those that pass. The
    /// outer error is the store's (it fails the batch); the inner ones are
    /// the members' own.
    async fn check_appends(
        &self,
        tx: &mut Tx<'_>,
        requests: Vec<Request>,
        present: &[String],
    ) -> StoreResult<Vec<StoreResult<Verdict>>> {
        let mut verdicts = Vec::with_capacity(requests.len());
        for request in requests {
            let verdict = match present.contains(&request.rollout_id) {
                true => self.check_append(tx, request).await?,
                false => Err(StoreError::NotFound(agl1::not_found(&request.rollout_id))),
            };
            verdicts.push(verdict);
        }
        Ok(verdicts)
    }

    /// Checks one member of a batch whose rollout exists and stages its event.
    async fn check_append(
        &self,
        tx: &mut Tx<'_>,
        request: Request,
    ) -> StoreResult<StoreResult<Verdict>> {
        let Request {
            rollout_id,
            attempt_id,
            new,
        } = request;
        if let Some(key) = &new.idempotency
            && let Some((digest, stored)) = tx
                .store
                .keyed_event(&rollout_id, &attempt_id, &key.key)
                .await?
        {
            if digest != key.digest {
                return Ok(Err(StoreError::FailedPrecondition(format!(
                    "Idempotency-Key {:?} was used for another event",
                    key.key
                ))));
            }
            return Ok(Ok(Verdict::Recorded(stored.event)));
        }
        if new.event_type == MODEL_REQUEST
            && new.has_routed_experts
            && let Some(previous) = tx
                .store
                .latest_agl1_event(&rollout_id, &attempt_id, MODEL_REQUEST)
                .await?
        {
            let superseded = parse_data(&previous.event.data).and_then(|mut earlier| {
                let dropped = supersedes(&parse_data(&new.data)?, &earlier);
                drop_routed_experts(&mut earlier);
                Ok(dropped.then(|| earlier.to_string()))
            });
            match superseded {
                Ok(Some(data)) => {
                    let key = (rollout_id.clone(), previous.pos);
                    tx.agl1().event_data.insert(key, data);
                }
                Ok(None) => {}
                Err(error) => return Ok(Err(error)),
            }
        }
        let event = Agl1Event {
            event_type: new.event_type,
            rollout_id,
            attempt_id,
            // Read under the rollout's lock: timestamps follow the order of the appends.
            timestamp: self.now(),
            data: new.data,
        };
        if event.event_type == REWARD
            && let Some(reward) = event_reward(&event)
        {
            tx.offer_reward(&event.rollout_id, reward);
        }
        if event.event_type == MODEL_REQUEST {
            // Only a rollout's first model request gives its version: once
            // the store holds one, later requests are not read for theirs.
            let versioned = self
                .versioned
                .as_ref()
                .is_some_and(|known| known.contains(&event.rollout_id));
            // The data is read, once, only for what the caller did not pass.
            let wanted = (!versioned && new.model_version.is_none()) || new.call.is_none();
            let read = wanted.then(|| agl1::events::model_request(&event.data));
            let model_version = match versioned {
                true => None,
                false => new
                    .model_version
                    .or_else(|| read.and_then(|read| read.model_version)),
            };
            if let Some(model_version) = model_version {
                tx.offer_model_version(&event.rollout_id, model_version);
            }
            let call = new.call.or(read.map(|read| read.call)).unwrap_or_default();
            tx.offer_call(&event.rollout_id, call);
        }
        tx.agl1().events.push(EventWrite {
            event: event.clone(),
            key: new.idempotency,
        });
        Ok(Ok(Verdict::Staged(event)))
    }
}

/// Returns the reward a reward event offers the training summary: its
/// value when that is a number, ordered by the time it was recorded (the
/// appends to a rollout are timed under its lock, in order), so the
/// rollout's latest reward event with a number is its final reward.
fn event_reward(event: &Agl1Event) -> Option<RolloutReward> {
    let value = reward_value(&parse_data(&event.data).ok()?["value"])?;
    RolloutReward::new(event.timestamp.0, value)
}
