//! The read model: the aggregates that statistics and the console's pages
//! read ([`crate::overview`]), never a rule. Each costs what it returns, not
//! what the store holds: an index or an ordered structure finds it
//! (counting the entries ahead of a queued rollout reads those entries),
//! except the searches a person makes ([`ReadModel::attempts_with_trace`],
//! [`ReadModel::attempts_with_id`]), which scan.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::{Attempt, Counts, RolloutStatus, RolloutView, Span, Timestamp};
use crate::overview::ActivityCount;

/// The read model's aggregate reads.
#[async_trait]
pub trait ReadModel: Send {
    /// Returns entity counts, the counts per status and the time the queue's
    /// head entered the queue.
    async fn counts(&mut self) -> StoreResult<Counts>;

    /// Returns the per-minute activity counts of the minutes in
    /// `from..until` (see [`ActivityCount`]), minutes and activities
    /// without one left out.
    async fn activity(
        &mut self,
        from: Timestamp,
        until: Timestamp,
    ) -> StoreResult<Vec<ActivityCount>>;
    /// Returns up to `limit` rollouts of `status` that have an end time,
    /// with their latest attempts: the latest end time first, ties by
    /// rollout id, greatest first.
    async fn latest_ended(
        &mut self,
        status: RolloutStatus,
        limit: usize,
    ) -> StoreResult<Vec<RolloutView>>;
    /// Returns, for each of the (rollout id, attempt id) pairs, its last
    /// span with status ERROR (greatest sequence id, ties by arrival),
    /// in the order of `attempts`; attempts without one are left out.
    async fn error_spans(&mut self, attempts: &[(&str, &str)]) -> StoreResult<Vec<Arc<Span>>>;
    /// Returns up to `limit` attempts whose id is `attempt_id`, of any
    /// rollout, in (rollout id, attempt id) order.
    async fn attempts_with_id(
        &mut self,
        attempt_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<Attempt>>;
    /// Returns up to `limit` (rollout id, attempt id) pairs with a span of
    /// trace `trace_id`, in that order. No index serves it: a scan of the
    /// spans, for a person's search, never a rule's read.
    async fn attempts_with_trace(
        &mut self,
        trace_id: &str,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>>;
    /// Returns how many queue entries are ahead of the rollout's and when it
    /// entered the queue; `None` when it is not queued.
    async fn queue_place(&mut self, rollout_id: &str) -> StoreResult<Option<(u64, Timestamp)>>;
}
