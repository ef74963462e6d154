//! A transaction as the engine sees it: the backend's reads, the write set
//! it buffers (and reads back: read-your-writes), and the changes it will
//! record; plus the rule steps several operations share.

use std::collections::{HashMap, HashSet};

use super::super::error::{StoreError, StoreResult};
use super::super::events::{Change, Changes};
use super::super::idempotency::RememberedRequest;
use super::super::ids;
use super::super::lifecycle;
use super::super::model::{
    Attempt, AttemptStatus, Json, Rollout, RolloutStatus, RolloutView, Timestamp, Worker,
    WorkerSession,
};
use super::super::overview;
use super::super::ownership;
use super::super::storage::agl1::Agl1Writes;
use super::super::storage::{Access, Held, StoreTx, WriteSet};
use super::super::training::usage::{ModelCall, RolloutUsage};
use super::super::training::{self, Facts, RolloutReward, RowsVerdict};

/// One engine transaction.
pub(super) struct Tx<'a> {
    /// The backend's transaction: reads, and immediate work whose result
    /// the operation needs (claims, sequence ids, span inserts).
    pub store: Box<dyn StoreTx + 'a>,
    /// The time the operation runs at.
    pub now: Timestamp,
    writes: WriteSet,
    changes: Changes,
    /// Rollouts whose queue entry this transaction claimed.
    claimed: HashSet<String>,
    /// The rollouts this transaction read locked, as the backend returned
    /// them: no other transaction can change them before this one ends, so
    /// they are read once (a batch reads all its rollouts at once, then
    /// each of its items finds its own here).
    locked: HashMap<String, RolloutView>,
    /// The session records this transaction read from the backend, with
    /// how: each is read once (a batch's updates of one worker's attempts
    /// read its session once), again only to lock one read unlocked.
    sessions: HashMap<String, (Option<WorkerSession>, Access)>,
    /// Rollouts this transaction created: none counted in the training
    /// summary before it.
    created: HashSet<String>,
    /// The latest reward each rollout's new spans carry, not yet weighed
    /// against the stored one ([`Tx::settle_training`]).
    offered_rewards: HashMap<String, RolloutReward>,
    /// The model version of the first model call each rollout's new 1.x
    /// events record, not yet weighed against the stored one.
    offered_versions: HashMap<String, i64>,
    /// What each 1.x rollout that ended in this transaction gave its
    /// trainer.
    judged: HashMap<String, RowsVerdict>,
    /// What the model calls each rollout's new spans or events record
    /// used, added to the stored usage at commit.
    offered_usage: HashMap<String, RolloutUsage>,
}

impl<'a> Tx<'a> {
    pub fn new(store: Box<dyn StoreTx + 'a>, now: Timestamp) -> Self {
        Self {
            store,
            now,
            writes: WriteSet::default(),
            changes: Changes::default(),
            claimed: HashSet::new(),
            locked: HashMap::new(),
            sessions: HashMap::new(),
            created: HashSet::new(),
            offered_rewards: HashMap::new(),
            offered_versions: HashMap::new(),
            judged: HashMap::new(),
            offered_usage: HashMap::new(),
        }
    }

    /// Offers a reward a new span of the rollout carries: it becomes the
    /// rollout's final reward at commit unless a later one is offered or
    /// stored (see [`crate::training`]).
    pub fn offer_reward(&mut self, rollout_id: &str, reward: RolloutReward) {
        match self.offered_rewards.get_mut(rollout_id) {
            Some(offered) if !reward.supersedes(offered) => {}
            Some(offered) => *offered = reward,
            None => {
                self.offered_rewards.insert(rollout_id.to_owned(), reward);
            }
        }
    }

    /// Offers the model version that served a model call the rollout's new
    /// events record: it becomes the rollout's policy version at commit
    /// unless an earlier call's is offered or stored (see
    /// [`crate::training::PolicyVersion`]).
    pub fn offer_model_version(&mut self, rollout_id: &str, model_version: i64) {
        self.offered_versions
            .entry(rollout_id.to_owned())
            .or_insert(model_version);
    }

    /// Offers a model call a new span or event of the rollout records: at
    /// commit, what it used adds to the rollout's usage (see
    /// [`crate::training::usage`]).
    pub fn offer_call(&mut self, rollout_id: &str, call: ModelCall) {
        match self.offered_usage.get_mut(rollout_id) {
            Some(usage) => usage.add_call(call),
            None => {
                let mut usage = RolloutUsage::default();
                usage.add_call(call);
                self.offered_usage.insert(rollout_id.to_owned(), usage);
            }
        }
    }

    /// Records what a 1.x rollout ending in this transaction gave its
    /// trainer (see [`crate::training::RowsVerdict`]): it counts under it
    /// at commit.
    pub fn judge_rows(&mut self, rollout_id: &str, verdict: RowsVerdict) {
        self.judged.insert(rollout_id.to_owned(), verdict);
    }

    /// Adds to the write set what the transaction changes in the training
    /// summary ([`crate::training`]): for each rollout it wrote, deleted or
    /// offered a reward, a model version or a model call for, what it
    /// counted for before against what it counts for now, the rewards that
    /// became final, the model versions and the usage offered and the
    /// rollouts judged. Reads what the store holds of the rollouts that
    /// counted or count (a rollout that ends, or one ended whose reward or
    /// call arrives: their reward, model version, verdict and usage, in one
    /// read), and the rollouts the transaction wrote without having read
    /// them locked (a rare path). A rollout that stops counting loses its
    /// verdict.
    pub async fn settle_training(&mut self) -> StoreResult<()> {
        let deleted = &self.writes.agl1.deleted;
        let mut touched: Vec<&str> = self
            .writes
            .rollouts
            .keys()
            .chain(deleted.iter())
            .chain(self.offered_rewards.keys())
            .chain(self.offered_versions.keys())
            .chain(self.offered_usage.keys())
            .chain(self.judged.keys())
            .map(String::as_str)
            .collect();
        if touched.is_empty() {
            return Ok(());
        }
        touched.sort_unstable();
        touched.dedup();
        let unread: Vec<&str> = touched
            .iter()
            .copied()
            .filter(|id| {
                !self.locked.contains_key(*id)
                    && !self.created.contains(*id)
                    && !self.claimed.contains(*id)
            })
            .collect();
        let mut before: HashMap<String, Rollout> = HashMap::new();
        if !unread.is_empty() {
            for view in self.store.rollouts(&unread, Access::Read).await? {
                before.insert(view.rollout.rollout_id.clone(), view.rollout);
            }
        }
        let mut changes: Vec<(&str, Option<&Rollout>, Option<&Rollout>)> = Vec::new();
        for &rollout_id in &touched {
            // Created and claimed rollouts did not count: they were new, or queued.
            let was = self
                .locked
                .get(rollout_id)
                .map(|view| &view.rollout)
                .or_else(|| before.get(rollout_id));
            let is = match self.writes.rollouts.get(rollout_id) {
                _ if deleted.contains(rollout_id) => None,
                Some(write) => Some(&write.rollout),
                None => was,
            };
            changes.push((rollout_id, was, is));
        }
        let counts = |r: &Option<&Rollout>| r.is_some_and(training::counts);
        let counting: Vec<&str> = changes
            .iter()
            .filter(|(_, was, is)| counts(was) || counts(is))
            .map(|&(rollout_id, _, _)| rollout_id)
            .collect();
        let stored = match counting.is_empty() {
            true => HashMap::new(),
            false => self.store.facts(&counting).await?,
        };
        let mut deltas = std::mem::take(&mut self.writes.training);
        let mut rewards = std::mem::take(&mut self.writes.rewards);
        let model_versions = &mut self.writes.model_versions;
        let verdicts = &mut self.writes.rows_verdicts;
        let usages = &mut self.writes.usage;
        for (rollout_id, was, is) in changes {
            let before = stored.get(rollout_id).copied().unwrap_or_default();
            let offered_usage = self.offered_usage.get(rollout_id).copied();
            let offered_version = self.offered_versions.get(rollout_id).copied();
            let offered = self
                .offered_rewards
                .get(rollout_id)
                .filter(|offered| before.reward.is_none_or(|old| offered.supersedes(&old)));
            let judged = self.judged.get(rollout_id).copied();
            // A deleted rollout's facts are deleted with it.
            if !deleted.contains(rollout_id) {
                if let Some(offered) = offered_usage {
                    usages.insert(rollout_id.to_owned(), offered);
                }
                if let Some(offered) = offered_version {
                    model_versions
                        .entry(rollout_id.to_owned())
                        .or_insert(offered);
                }
                if let Some(offered) = offered {
                    rewards.insert(rollout_id.to_owned(), *offered);
                }
                let stops_counting = !is.is_some_and(training::counts);
                match judged {
                    Some(verdict) => {
                        verdicts.insert(rollout_id.to_owned(), Some(verdict));
                    }
                    None if stops_counting && before.verdict.is_some() => {
                        verdicts.insert(rollout_id.to_owned(), None);
                    }
                    None => {}
                }
            }
            let after = Facts {
                reward: offered.copied().or(before.reward),
                model_version: before.model_version.or(offered_version),
                verdict: judged.or(before.verdict),
                usage: before.usage.plus(offered_usage.unwrap_or_default()),
            };
            deltas.moved(
                was.and_then(|r| training::contribution(r, before)),
                is.and_then(|r| training::contribution(r, after)),
            );
        }
        self.writes.training = deltas;
        self.writes.rewards = rewards;
        Ok(())
    }

    /// Splits the transaction for its commit.
    pub fn into_parts(self) -> (Box<dyn StoreTx + 'a>, WriteSet, Changes) {
        (self.store, self.writes, self.changes)
    }

    /// Records a change.
    pub fn record(&mut self, change: Change) {
        self.changes.push(change);
    }

    /// Notes that an attempt expired (reported once committed).
    pub fn expired(&mut self, status: AttemptStatus) {
        self.changes.expired.push(status);
    }

    /// Returns the rollouts among `rollout_ids` as this transaction sees
    /// them (its own writes over the backend's rows), keyed by id.
    pub async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<HashMap<String, RolloutView>> {
        let mut found = HashMap::with_capacity(rollout_ids.len());
        let mut missing = Vec::new();
        for &rollout_id in rollout_ids {
            match self.locked.get(rollout_id) {
                Some(view) => {
                    found.insert(rollout_id.to_owned(), self.overlay(view.clone()));
                }
                None => missing.push(rollout_id),
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        for view in self.store.rollouts(&missing, access).await? {
            if access == Access::Update {
                self.locked
                    .insert(view.rollout.rollout_id.clone(), view.clone());
            }
            let view = self.overlay(view);
            found.insert(view.rollout.rollout_id.clone(), view);
        }
        Ok(found)
    }

    /// Claims up to `limit` entries from the queue's head (see
    /// [`crate::storage::ImmediateWrites::claim_queued`]).
    pub async fn claim_queued(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        let claimed = self.store.claim_queued(limit).await?;
        self.claimed
            .extend(claimed.iter().map(|view| view.rollout.rollout_id.clone()));
        Ok(claimed)
    }

    /// Returns a rollout with its latest attempt, as this transaction sees it.
    pub async fn rollout(
        &mut self,
        rollout_id: &str,
        access: Access,
    ) -> StoreResult<Option<RolloutView>> {
        Ok(self
            .rollouts(&[rollout_id], access)
            .await?
            .remove(rollout_id))
    }

    /// Returns a rollout with its latest attempt, or upstream's "not found".
    pub async fn require_rollout(
        &mut self,
        rollout_id: &str,
        access: Access,
    ) -> StoreResult<RolloutView> {
        self.rollout(rollout_id, access)
            .await?
            .ok_or_else(|| StoreError::rollout_not_found(rollout_id))
    }

    /// Lays this transaction's writes over a view read from the backend.
    fn overlay(&self, mut view: RolloutView) -> RolloutView {
        let rollout_id = view.rollout.rollout_id.as_str();
        if let Some(write) = self.writes.rollouts.get(rollout_id) {
            view.rollout = write.rollout.clone();
        }
        for ((owner, _), attempt) in &self.writes.attempts {
            if owner == &view.rollout.rollout_id
                && view
                    .attempt
                    .as_ref()
                    .is_none_or(|latest| attempt.sequence_id >= latest.sequence_id)
            {
                view.attempt = Some(attempt.clone());
            }
        }
        view
    }

    /// Returns an attempt of a rollout, as this transaction sees it.
    pub async fn attempt(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
    ) -> StoreResult<Option<Attempt>> {
        let key = (rollout_id.to_owned(), attempt_id.to_owned());
        if let Some(attempt) = self.writes.attempts.get(&key) {
            return Ok(Some(attempt.clone()));
        }
        self.store.attempt(rollout_id, attempt_id).await
    }

    /// Returns a worker as this transaction sees it (locked), a new one
    /// when it is unknown.
    pub async fn worker(&mut self, worker_id: &str) -> StoreResult<Worker> {
        if let Some(worker) = self.writes.worker(worker_id) {
            return Ok(worker.clone());
        }
        let stored = self.store.workers(&[worker_id], Access::Update).await?;
        Ok(stored
            .into_iter()
            .next()
            .unwrap_or_else(|| Worker::new(worker_id)))
    }

    /// Returns a worker's session record as this transaction sees it.
    pub async fn session(
        &mut self,
        worker_id: &str,
        access: Access,
    ) -> StoreResult<Option<WorkerSession>> {
        if let Some(session) = self.writes.session(worker_id) {
            return Ok(Some(session.clone()));
        }
        if let Some((session, read)) = self.sessions.get(worker_id)
            && (access == Access::Read || *read == Access::Update)
        {
            return Ok(session.clone());
        }
        let session = self
            .store
            .sessions(&[worker_id], access)
            .await?
            .into_iter()
            .next();
        self.sessions
            .insert(worker_id.to_owned(), (session.clone(), access));
        Ok(session)
    }

    /// Buffers a session record.
    pub fn save_session(&mut self, session: &WorkerSession) {
        self.writes.put_session(session);
    }

    /// Returns the latest resources snapshot as this transaction sees it.
    pub async fn latest_resources_id(&mut self) -> StoreResult<Option<String>> {
        if let Some(update) = self.writes.latest_resources() {
            return Ok(Some(update.resources_id.clone()));
        }
        Ok(self.store.latest_resources().await?.map(|r| r.resources_id))
    }

    /// Buffers a resources snapshot (the latest) and records the change.
    pub fn save_resources(&mut self, update: &super::super::model::ResourcesUpdate) {
        self.writes.put_resources(update);
        self.record(Change::ResourcesChanged {
            resources_id: update.resources_id.clone(),
            version: update.version,
        });
    }

    /// Returns a resources snapshot as this transaction sees it.
    pub async fn resources(
        &mut self,
        resources_id: &str,
    ) -> StoreResult<Option<super::super::model::ResourcesUpdate>> {
        if let Some(update) = self.writes.resources.get(resources_id) {
            return Ok(Some(update.clone()));
        }
        self.store.resources(resources_id).await
    }

    /// Buffers a rollout with its refreshed watchdog deadline.
    pub fn save_rollout(&mut self, rollout: &Rollout, latest: Option<&Attempt>) {
        let deadline = lifecycle::watchdog_deadline(rollout, latest);
        self.writes.put_rollout(rollout, deadline);
    }

    /// Buffers a rollout this transaction created, with its watchdog deadline.
    pub fn save_new_rollout(&mut self, rollout: &Rollout, latest: Option<&Attempt>) {
        self.save_rollout(rollout, latest);
        self.created.insert(rollout.rollout_id.clone());
    }

    /// Buffers a rollout whose mode or resources version this transaction
    /// set, with its refreshed watchdog deadline.
    pub fn save_relabelled_rollout(&mut self, rollout: &Rollout, latest: Option<&Attempt>) {
        self.save_rollout(rollout, latest);
        self.writes.relabel_rollout(&rollout.rollout_id);
    }

    /// Takes a rollout that left the queuing statuses (`before` is its
    /// status when read) out of the queue, unless this transaction claimed
    /// its entry: the queue holds only rollouts that can be dequeued.
    pub fn leave_queue(&mut self, rollout: &Rollout, before: RolloutStatus) {
        if before.is_queuing()
            && !rollout.status.is_queuing()
            && !self.claimed.contains(&rollout.rollout_id)
        {
            self.writes.unqueue(&rollout.rollout_id);
        }
    }

    /// Buffers a rollout whose status was `before` (`None`: a new rollout)
    /// and records the change, if any.
    pub fn save_rollout_change(
        &mut self,
        rollout: &Rollout,
        latest: Option<&Attempt>,
        before: Option<RolloutStatus>,
    ) {
        self.save_rollout(rollout, latest);
        match before {
            Some(before) => self.leave_queue(rollout, before),
            None => {
                self.created.insert(rollout.rollout_id.clone());
            }
        }
        self.note_completion(rollout, before);
        let rollout_id = rollout.rollout_id.clone();
        let status = rollout.status;
        match before {
            None => self.record(Change::RolloutCreated { rollout_id, status }),
            Some(before) if before != status => {
                self.record(Change::RolloutChanged { rollout_id, status })
            }
            Some(_) => {}
        }
    }

    /// Appends a rollout to the completion log when it enters a terminal
    /// status (from a live one, or at creation).
    pub fn note_completion(&mut self, rollout: &Rollout, before: Option<RolloutStatus>) {
        if lifecycle::completes(before, rollout.status) {
            let rollout_id = rollout.rollout_id.clone();
            self.writes.agl1.completions.push(rollout_id);
        }
    }

    /// Returns the 1.x part of the write set.
    pub fn agl1(&mut self) -> &mut Agl1Writes {
        &mut self.writes.agl1
    }

    /// Buffers a remembered request id.
    pub fn remember_request(&mut self, request: RememberedRequest) {
        self.writes.remember_request(request);
    }

    /// Buffers forgetting the request ids expired by now.
    pub fn forget_expired_requests(&mut self) {
        self.writes.forget_requests = Some(self.now);
    }

    /// Buffers forgetting the activity counts of the minutes older than
    /// the store keeps ([`overview::KEPT_MINUTES`]).
    pub fn forget_old_activity(&mut self) {
        let kept = overview::MINUTE.saturating_mul(overview::KEPT_MINUTES);
        let before = overview::minute_of(Timestamp(self.now.0.saturating_sub(kept)));
        self.writes.forget_activity = Some(before);
    }

    /// Buffers the folding of the training summary's shards
    /// ([`WriteSet::fold_training_shards`]).
    pub fn fold_training_shards(&mut self) {
        self.writes.fold_training_shards = true;
    }

    /// Buffers a rollout's entry at the queue's tail, queued since now.
    pub fn enqueue(&mut self, rollout_id: &str) {
        self.enqueue_since(rollout_id, self.now);
    }

    /// Buffers a rollout's entry at the queue's tail, queued since `since`
    /// (a batch's rollouts each keep their own creation time).
    pub fn enqueue_since(&mut self, rollout_id: &str, since: Timestamp) {
        self.writes.enqueue(rollout_id, since);
        self.changes.enqueued = true;
    }

    /// Buffers an attempt.
    pub fn save_attempt(&mut self, attempt: &Attempt) {
        self.writes.put_attempt(attempt);
    }

    /// Buffers a worker and records the change.
    pub fn save_worker(&mut self, worker: &Worker) {
        self.writes.put_worker(worker);
        self.record(Change::WorkerChanged {
            worker_id: worker.worker_id.clone(),
            status: worker.status,
        });
    }
}

/// Who an attempt is created for, and under which id.
#[derive(Debug, Clone, Default)]
pub(super) struct NewAttempt {
    /// The worker that runs it, if known.
    pub worker_id: Option<String>,
    /// The caller's id for it (agent-lightning 1.x names its attempts);
    /// `None` draws a new one.
    pub attempt_id: Option<String>,
}

impl NewAttempt {
    /// An attempt under a new id, for `worker_id`.
    pub fn for_worker(worker_id: Option<String>) -> Self {
        Self {
            worker_id,
            attempt_id: None,
        }
    }
}

/// Creates the rollout's next attempt (`preparing`) after `latest` and
/// moves the rollout to `preparing`; `is_new` tells that the rollout itself
/// is being created.
pub(super) fn create_attempt(
    tx: &mut Tx<'_>,
    rollout: &mut Rollout,
    latest: Option<&Attempt>,
    is_new: bool,
    new: NewAttempt,
) -> Attempt {
    let now = tx.now;
    let attempt = Attempt {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: new.attempt_id.unwrap_or_else(ids::new_attempt_id),
        sequence_id: latest.map_or(0, |a| a.sequence_id) + 1,
        start_time: now,
        end_time: None,
        status: AttemptStatus::Preparing,
        worker_id: new.worker_id,
        last_heartbeat_time: None,
        metadata: Json::Null,
    };
    let before = (!is_new).then_some(rollout.status);
    let _ = lifecycle::set_rollout_status(rollout, RolloutStatus::Preparing, now);
    tx.save_rollout_change(rollout, Some(&attempt), before);
    tx.save_attempt(&attempt);
    tx.record(Change::AttemptCreated {
        rollout_id: attempt.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        sequence_id: attempt.sequence_id,
        worker_id: attempt.worker_id.clone(),
    });
    attempt
}

/// How [`write_attempt`] treats the attempt it writes.
#[derive(Debug, Clone, Copy)]
pub(super) struct AttemptWrite {
    /// The attempt is the rollout's latest: its status drives the rollout.
    pub is_latest: bool,
    /// The attempt's worker (if any) is synchronised with it (`docs/semantics.md#workers`).
    pub sync_worker: bool,
}

/// Writes an attempt changed by a client, the watchdog or a session expiry: when it is the latest,
/// propagates its status to the rollout (`docs/semantics.md#propagation`), and synchronises its
/// worker when asked to.
pub(super) async fn write_attempt(
    tx: &mut Tx<'_>,
    rollout: &mut Rollout,
    attempt: &Attempt,
    how: AttemptWrite,
) -> StoreResult<()> {
    let now = tx.now;
    tx.save_attempt(attempt);
    tx.record(Change::AttemptChanged {
        rollout_id: attempt.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        status: attempt.status,
    });
    if how.is_latest {
        let before = rollout.status;
        if let Some(status) = lifecycle::propagated_status(rollout, attempt)
            && lifecycle::set_rollout_status(rollout, status, now)
        {
            tx.enqueue(&rollout.rollout_id);
        }
        tx.save_rollout_change(rollout, Some(attempt), Some(before));
    }
    if how.sync_worker
        && let Some(worker_id) = &attempt.worker_id
    {
        sync_worker(tx, worker_id, attempt, false).await?;
    }
    Ok(())
}

/// Applies a heartbeat (spans arrived) to an attempt and, when it is the
/// latest, to its rollout (`docs/semantics.md#span-heartbeat`).
pub(super) fn heartbeat(
    tx: &mut Tx<'_>,
    rollout: &mut Rollout,
    attempt: &mut Attempt,
    is_latest: bool,
) {
    let now = tx.now;
    let attempt_before = attempt.status;
    lifecycle::record_heartbeat(attempt, now);
    tx.save_attempt(attempt);
    if attempt.status != attempt_before {
        tx.record(Change::AttemptChanged {
            rollout_id: attempt.rollout_id.clone(),
            attempt_id: attempt.attempt_id.clone(),
            status: attempt.status,
        });
    }
    if !is_latest {
        return;
    }
    let before = rollout.status;
    if lifecycle::heartbeat_promotes(rollout.status) {
        let _ = lifecycle::set_rollout_status(rollout, RolloutStatus::Running, now);
    }
    tx.save_rollout_change(rollout, Some(attempt), Some(before));
}

/// Applies the watchdog's verdicts to up to `limit` due rollouts (`docs/semantics.md#watchdog`);
/// each verdict takes the normal attempt-update path (propagation, worker sync). Returns how many
/// due rollouts it handled. `held` says what it does with the due rollouts concurrent transactions
/// hold; a verdict is decided on what it read, after any wait.
pub(super) async fn watchdog(
    tx: &mut Tx<'_>,
    now: Timestamp,
    limit: usize,
    held: Held,
) -> StoreResult<usize> {
    let due = tx.store.due_rollouts(now, limit, held).await?;
    let handled = due.len();
    for view in due {
        let RolloutView {
            mut rollout,
            attempt: latest,
        } = tx.overlay(view);
        let verdict = latest
            .as_ref()
            .filter(|_| rollout.status.is_running())
            .and_then(|attempt| lifecycle::watchdog_verdict(&rollout.config, attempt, now));
        let (Some(status), Some(mut attempt)) = (verdict, latest.clone()) else {
            tx.save_rollout(&rollout, latest.as_ref());
            continue;
        };
        let rollout_id = rollout.rollout_id.as_str();
        tracing::info!(rollout_id, attempt_id = attempt.attempt_id, %status, "watchdog verdict");
        lifecycle::set_attempt_status(&mut attempt, status, now);
        tx.expired(status);
        let how = AttemptWrite {
            is_latest: true,
            sync_worker: true,
        };
        write_attempt(tx, &mut rollout, &attempt, how).await?;
    }
    Ok(handled)
}

/// Marks a worker's live attempt `unresponsive` (its session's grace period
/// is over) through the normal update path: propagation, retry, worker
/// sync.
pub(super) async fn expire_attempt(tx: &mut Tx<'_>, view: RolloutView) -> StoreResult<()> {
    let RolloutView {
        mut rollout,
        attempt,
    } = view;
    let Some(mut attempt) = attempt else {
        return Ok(());
    };
    let (rollout_id, attempt_id) = (rollout.rollout_id.as_str(), attempt.attempt_id.as_str());
    tracing::info!(
        rollout_id,
        attempt_id,
        worker_id = attempt.worker_id,
        "attempt of a lost worker is unresponsive"
    );
    lifecycle::set_attempt_status(&mut attempt, AttemptStatus::Unresponsive, tx.now);
    tx.expired(AttemptStatus::Unresponsive);
    let how = AttemptWrite {
        is_latest: true,
        sync_worker: true,
    };
    write_attempt(tx, &mut rollout, &attempt, how).await
}

/// Refuses a write for `attempt` that presents `owner_epoch` unless the
/// session with that epoch still owns it (see [`ownership::check_owner`]).
pub(super) async fn check_owner(
    tx: &mut Tx<'_>,
    attempt: &Attempt,
    latest: &Attempt,
    owner_epoch: Option<u64>,
) -> StoreResult<()> {
    let Some(epoch) = owner_epoch else {
        return Ok(());
    };
    let owner = match &attempt.worker_id {
        Some(worker_id) => tx.session(worker_id, Access::Read).await?,
        None => None,
    };
    ownership::check_owner(attempt, latest, owner.as_ref(), epoch)
}

/// Synchronises a worker (created if unknown) with an attempt (`docs/semantics.md#workers`).
pub(super) async fn sync_worker(
    tx: &mut Tx<'_>,
    worker_id: &str,
    attempt: &Attempt,
    dequeued: bool,
) -> StoreResult<()> {
    // Upstream stores an empty worker id on attempts but never syncs a
    // worker for it.
    if worker_id.is_empty() {
        return Ok(());
    }
    let mut worker = tx.worker(worker_id).await?;
    lifecycle::sync_worker(&mut worker, attempt, tx.now);
    if dequeued {
        worker.last_dequeue_time = Some(tx.now);
    }
    tx.save_worker(&worker);
    Ok(())
}
