//! The in-memory backend: every transaction holds one lock over the whole
//! state, so transactions are trivially serialised. Nothing survives a restart.
//!
//! The write set is applied at commit, under the lock, in one go. The
//! immediate writes that change the state at once (claims, sequence ids,
//! span inserts, session epochs) keep an undo log, which a transaction
//! dropped without committing replays: a dropped transaction leaves the
//! state exactly as it found it. An eviction is chosen at once and applied
//! at the commit (no other transaction can tell the difference); name locks
//! do nothing, the state's lock serialising every transaction.
//!
//! By role: the state, its transaction and undo log are in [`state`] (made
//! of the structures in [`records`]), the rule reads and queries in
//! [`reads`], the immediate writes in [`immediate_writes`], the read model
//! in [`overview`], agent-lightning 1.x's records in [`agl1`], the training
//! summary in [`training`]; the commit
//! is here; the store in [`store`], its namespaces in [`catalogue`].

use async_trait::async_trait;

use self::state::{MemoryTx, Undo};
use lightning_store_core::error::StoreResult;
use lightning_store_core::storage::{StoreTx, WriteSet};

pub use lightning_store_core::storage::DEFAULT_EVENT_RETENTION;

/// agent-lightning 1.x's records.
mod agl1;
/// The namespaces, a store each.
mod catalogue;
/// The immediate writes and their undo.
mod immediate_writes;
/// The read model's aggregate reads.
mod overview;
/// The rule reads and the queries.
mod reads;
/// The structures the state is made of.
mod records;
/// The state, its transaction and the apply step.
mod state;
/// The store: its state under one lock.
mod store;
/// The rollouts' final rewards and the training summary.
mod training;

pub use self::catalogue::MemoryCatalogue;
pub use self::store::MemoryStore;

#[async_trait]
impl StoreTx for MemoryTx<'_> {
    async fn commit(mut self: Box<Self>, writes: &mut WriteSet) -> StoreResult<()> {
        let evict = std::mem::take(&mut self.evict);
        self.state.evict(evict);
        self.state.apply(writes);
        // Committed: nothing is undone.
        self.undo = Undo::default();
        Ok(())
    }
}
