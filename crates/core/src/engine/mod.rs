//! The LightningStore operations, written once over any
//! [`Store`](crate::storage::Store) backend.
//!
//! Each public method is one transaction run by the [`Engine`]'s transaction
//! runner ([`runner`]): it runs the on-demand watchdog scan where upstream
//! does (its "healthcheck" methods), reads the aggregates it needs, applies
//! the rules of [`super::lifecycle`] in memory into the transaction's write
//! set, and commits; the committed changes are then published on the
//! [`EventBus`](crate::events::EventBus). A failed check anywhere drops the
//! transaction, which every backend rolls back whole.
//!
//! The operations are grouped by what they act on: [`rollouts`],
//! [`attempts`], [`spans`], [`resources_workers`], worker [`sessions`] and
//! agent-lightning 1.x's ([`agl1`], with its event appends in [`appends`]);
//! exports page through a selection in [`export`];
//! the read model's aggregates are in [`overview`], the training summary in
//! [`training`], and the console's pages,
//! each one bounded read, in [`pages`]. [`patches`] holds the
//! partial updates they take, [`runner`] the engine itself and its
//! transaction runner, and [`tx`] the transaction with its write set and the
//! rule steps the groups share.

mod agl1;
mod append_queue;
mod appends;
mod attempts;
mod export;
mod overview;
mod pages;
mod patches;
mod resources_workers;
mod rollouts;
mod runner;
mod sessions;
mod spans;
mod training;
mod tx;

pub use self::export::Export;
pub use self::patches::{AttemptPatch, AttemptUpdate, RolloutPatch};
pub use self::rollouts::{Enqueued, RewardedRollouts};
pub use self::runner::{Engine, EngineConfig};
pub use self::sessions::{OpenedSession, SessionPolicy, StreamEnd};
pub use self::spans::AddedSpans;
pub use self::training::{ComparedVersion, VersionRange};
