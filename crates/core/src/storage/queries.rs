//! The queries clients page through: filtered, sorted and windowed reads of
//! the entities and the event history. They decide nothing: the engine
//! answers them as read, in a transaction that may only read
//! ([`Store::begin_read`](super::Store::begin_read)).

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::events::EventPage;
use crate::model::{ResourcesUpdate, RolloutView, Span, Worker};
use crate::query::{Page, Paged, ResourcesFilter, RolloutFilter, SpanFilter, WorkerFilter};

/// The paged queries and the event history. Every query applies its
/// [`crate::query`] filter and page exactly as the in-memory reference does
/// (same default order, same tie order).
#[async_trait]
pub trait Queries: Send {
    /// Returns matching rollouts with their latest attempts; default order is creation order.
    async fn query_rollouts(
        &mut self,
        filter: &RolloutFilter,
        page: &Page,
    ) -> StoreResult<Paged<RolloutView>>;
    /// Returns the matching spans of the filter's rollout. The filter's
    /// attempt is `All` or `Id` (the engine resolves `Latest`); default order
    /// is sequence id, then arrival.
    async fn query_spans(
        &mut self,
        filter: &SpanFilter,
        page: &Page,
    ) -> StoreResult<Paged<Arc<Span>>>;
    /// Returns the ids of up to `limit` ended rollouts (`end_time` set)
    /// matching `filter`, in id (byte) order; with the filter's
    /// `rollout_id_after`, the next keyset page of an export. Nothing is
    /// counted, and a page costs about its own rollouts, whatever the
    /// store's size.
    async fn ended_rollout_ids(
        &mut self,
        filter: &RolloutFilter,
        limit: usize,
    ) -> StoreResult<Vec<String>>;
    /// Returns matching snapshots; default order is creation order.
    async fn query_resources(
        &mut self,
        filter: &ResourcesFilter,
        page: &Page,
    ) -> StoreResult<Paged<ResourcesUpdate>>;
    /// Returns matching workers; default order is first-seen order.
    async fn query_workers(
        &mut self,
        filter: &WorkerFilter,
        page: &Page,
    ) -> StoreResult<Paged<Worker>>;

    /// Returns up to `limit` retained events with a sequence number above
    /// `after`, with the bounds of the retained history.
    async fn events_after(&mut self, after: u64, limit: usize) -> StoreResult<EventPage>;
}
