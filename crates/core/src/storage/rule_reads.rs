//! The reads the rules need: what the engine reads before it decides a
//! lifecycle step, each an aggregate shaped after what the rules consume
//! (a rollout *with* its latest attempt, workers by id, the due deadlines).
//! A read with [`Access::Update`] locks what it returns until the
//! transaction ends, so that the write set the engine then computes from it
//! is applied to what it read (see the contract in [`super`]).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::idempotency::RememberedRequest;
use crate::model::{Attempt, ResourcesUpdate, RolloutView, Timestamp, Worker, WorkerSession};

/// Whether a read locks what it returns until the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A plain read: the rows may change before the transaction ends.
    Read,
    /// The rows are locked against concurrent changes: the transaction may
    /// write them back.
    Update,
}

/// What a due scan ([`RuleReads::due_rollouts`]) does with the due rollouts
/// that concurrent transactions hold (backends that serialise every
/// transaction never see one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Passes over them (they are due again on the next scan): the
    /// background timer, which must not queue behind other work.
    Skip,
    /// Waits for them, in rollout id order, and returns those still due
    /// once their holders are done: the scan of an operation, which must
    /// answer with every verdict due by its `now`.
    Wait,
}

/// The reads the lifecycle rules decide on. None of them writes; the locked
/// ones ([`Access::Update`], the due scans) serialise the transactions that
/// change what they return.
#[async_trait]
pub trait RuleReads: Send {
    /// Returns the existing rollouts among `rollout_ids`, each with its
    /// latest attempt, in the order of `rollout_ids` (duplicates once).
    async fn rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<RolloutView>>;
    /// Returns, locked, up to `limit` rollouts whose watchdog deadline is
    /// before `now`, earliest deadline first, with their latest attempts;
    /// rollouts concurrent transactions hold are passed over or waited for,
    /// as `held` says. With [`Held::Wait`], an empty answer means that no
    /// rollout is due at `now` in what is committed once the holders are
    /// done.
    async fn due_rollouts(
        &mut self,
        now: Timestamp,
        limit: usize,
        held: Held,
    ) -> StoreResult<Vec<RolloutView>>;

    /// Returns a rollout's attempts in sequence order.
    async fn attempts(&mut self, rollout_id: &str) -> StoreResult<Vec<Attempt>>;
    /// Returns one attempt of a rollout.
    async fn attempt(&mut self, rollout_id: &str, attempt_id: &str)
    -> StoreResult<Option<Attempt>>;
    /// Returns whether retention has deleted spans of a rollout.
    async fn spans_evicted(&mut self, rollout_id: &str) -> StoreResult<bool>;

    /// Returns a resources snapshot.
    async fn resources(&mut self, resources_id: &str) -> StoreResult<Option<ResourcesUpdate>>;
    /// Returns the most recently written resources snapshot.
    async fn latest_resources(&mut self) -> StoreResult<Option<ResourcesUpdate>>;

    /// Returns the existing workers among `worker_ids` (duplicates once).
    async fn workers(&mut self, worker_ids: &[&str], access: Access) -> StoreResult<Vec<Worker>>;
    /// Returns the session records of the existing workers among
    /// `worker_ids`, in id order (duplicates once).
    async fn sessions(
        &mut self,
        worker_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<WorkerSession>>;
    /// Returns, locked, up to `limit` session records whose deadline is
    /// before `now`, earliest deadline first (ties in worker id order);
    /// records concurrent transactions hold are passed over.
    async fn due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>>;
    /// Returns, locked, the `open` session records in worker id order: all
    /// of them, or only those `server_id` holds.
    async fn open_sessions(&mut self, server_id: Option<&str>) -> StoreResult<Vec<WorkerSession>>;

    /// Returns what is remembered of a client's request id.
    async fn remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>>;
}
