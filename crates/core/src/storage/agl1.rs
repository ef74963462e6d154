//! What the store keeps for agent-lightning 1.x beside the core's entities
//! ([`crate::agl1`]): the 1.x fields of rollouts, 1.x events with
//! their idempotency keys, the completion log, the gateway's model servers,
//! its pause and the presence of the servers running it; and the deletion
//! of a rollout with everything that hangs off it.
//!
//! The same shape as the core's entities (module docs of [`super`]): the
//! reads the 1.x rules need ([`Agl1Reads`], part of every
//! [`StoreTx`](super::StoreTx)) and one more part of the write set
//! ([`Agl1Writes`]), applied at commit before the core's entities.
//!
//! # Contract
//! * A rollout's 1.x fields and events are written only by a transaction
//!   that read the rollout (or [`Agl1Reads::has_agl1_rollout`]) with
//!   [`Access::Update`](super::Access): the rollout's lock serialises them
//!   (an event append reads and may rewrite the attempt's previous model
//!   request).
//! * 1.x rollouts list in the order their fields were first written.
//! * Event positions grow in append order, store-wide.
//! * Completion log positions are 0, 1, 2, … in commit order and gapless
//!   on every server: whoever reads position `n` can read every position
//!   before it. Deleting a rollout keeps its entries.
//! * [`Agl1Reads::pause`] with [`Access::Update`](super::Access) locks the
//!   pause until the transaction ends.

use async_trait::async_trait;
use indexmap::{IndexMap, IndexSet};

use super::rule_reads::Access;
use crate::agl1::{
    Agl1Event, Agl1Fields, Agl1Rollout, Agl1RolloutDetail, CompletionPage, IdempotencyKey,
    ModelServer, Pause, Replica, StoredEvent,
};
use crate::error::StoreResult;
use crate::model::RolloutStatus;

/// The 1.x reads of a store transaction.
#[async_trait]
pub trait Agl1Reads: Send {
    /// Returns the 1.x rollouts among `rollout_ids` (rollouts that have 1.x
    /// fields), in the order of `rollout_ids`; with [`Access::Update`]
    /// their rollouts are locked as [`super::RuleReads::rollouts`] locks them.
    async fn agl1_rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<Agl1Rollout>>;
    /// Returns whether `rollout_id` is a 1.x rollout without reading it;
    /// with [`Access::Update`] its rollout is locked as by
    /// [`Agl1Reads::agl1_rollouts`] (an event append needs the lock, not the
    /// rollout).
    async fn has_agl1_rollout(&mut self, rollout_id: &str, access: Access) -> StoreResult<bool>;
    /// Returns the 1.x rollouts whose status is one of `statuses`, in list
    /// order (see the contract), at most `limit` of them.
    async fn list_agl1_rollouts(
        &mut self,
        statuses: &[RolloutStatus],
        limit: Option<usize>,
    ) -> StoreResult<Vec<Agl1Rollout>>;
    /// Returns the completion log's entries from position `after`, at most
    /// `limit`, with the 1.x rollouts they name, and the log's length.
    async fn completions(&mut self, after: i64, limit: usize) -> StoreResult<CompletionPage>;

    /// Returns the events of one attempt of a rollout in append order,
    /// only those of `event_type` when given.
    async fn agl1_events(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: Option<&str>,
    ) -> StoreResult<Vec<StoredEvent>>;
    /// Returns the latest event of `event_type` of one attempt.
    async fn latest_agl1_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: &str,
    ) -> StoreResult<Option<StoredEvent>>;
    /// Returns a 1.x rollout (as [`Agl1Reads::agl1_rollouts`] reads it) with
    /// the attempts that have events, ordered by their first event.
    async fn agl1_rollout_detail(
        &mut self,
        rollout_id: &str,
    ) -> StoreResult<Option<Agl1RolloutDetail>>;
    /// Returns the digest and the event recorded under an idempotency key.
    async fn keyed_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, StoredEvent)>>;

    /// Returns the servers registered for `model` (`None`: for every
    /// model), in registration order.
    async fn models(&mut self, model: Option<&str>) -> StoreResult<Vec<ModelServer>>;
    /// Returns the gateway's pause.
    async fn pause(&mut self, access: Access) -> StoreResult<Pause>;
    /// Returns every server's gateway presence, in server id order.
    async fn replicas(&mut self) -> StoreResult<Vec<Replica>>;
}

/// An event to append, with the idempotency key it was posted under.
#[derive(Debug, Clone, PartialEq)]
pub struct EventWrite {
    pub event: Agl1Event,
    pub key: Option<IdempotencyKey>,
}

/// The 1.x part of a write set, applied in this order: deletions, fields,
/// event data rewrites, events, completions, models, pause, replicas.
#[derive(Debug, Default)]
pub struct Agl1Writes {
    /// Rollouts deleted with their attempts, spans, queue entry, 1.x fields,
    /// events and idempotency keys (counts kept exact).
    pub deleted: IndexSet<String>,
    /// 1.x fields inserted or replaced, keyed by rollout id.
    pub fields: IndexMap<String, Agl1Fields>,
    /// New data of stored events, keyed by (rollout id, event position).
    pub event_data: IndexMap<(String, i64), String>,
    /// Events appended, in order; the backend assigns their positions.
    pub events: Vec<EventWrite>,
    /// Rollouts appended to the completion log, in order.
    pub completions: Vec<String>,
    /// Every model server is removed before `models` are written.
    pub clear_models: bool,
    /// Model servers inserted or replaced, keyed by (model, endpoint).
    pub models: IndexMap<(String, String), ModelServer>,
    /// The gateway's new pause.
    pub pause: Option<Pause>,
    /// Server presences written (`Some`) or removed (`None`).
    pub replicas: IndexMap<String, Option<Replica>>,
}

impl Agl1Writes {
    /// Returns whether the set changes nothing.
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty()
            && self.fields.is_empty()
            && self.event_data.is_empty()
            && self.events.is_empty()
            && self.completions.is_empty()
            && !self.clear_models
            && self.models.is_empty()
            && self.pause.is_none()
            && self.replicas.is_empty()
    }

    /// Buffers a model server, replacing the one with its (model, endpoint).
    pub fn put_model(&mut self, server: &ModelServer) {
        let key = (server.model.clone(), server.endpoint.clone());
        self.models.insert(key, server.clone());
    }

    /// Buffers the removal of every model server (and of those buffered).
    pub fn clear_models(&mut self) {
        self.clear_models = true;
        self.models.clear();
    }
}
