//! The console's live pages as values: what a page shows (its [`View`],
//! parsed from its URL), how it is rendered, and which store changes make
//! it stale. The live hub ([`super::live`]) keys its shared renders by
//! [`ViewKey`]: the same page for viewers who may do the same actions is
//! rendered once for all of them.

use lightning_store_core::events::Change;
use lightning_store_core::ids::RolloutId;

use super::viewer::Actions;
use super::{comparison, models, overview, resources, rollout, rollouts, training, workers};
use crate::context::Sources;
use crate::rendered::{PageError, Rendered};

/// A page that updates live.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum View {
    Overview,
    /// Boxed: the filters are the largest of the views by far.
    Rollouts(Box<rollouts::RolloutsQuery>),
    Rollout(RolloutId),
    Workers(workers::WorkersQuery),
    Resources(resources::ResourcesQuery),
    Training(comparison::CompareQuery),
    Models,
}

/// A view as rendered for viewers who may do `actions`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    pub view: View,
    pub actions: Actions,
}

impl View {
    /// Renders the view's main region.
    pub async fn render(&self, sources: &Sources, actions: Actions) -> Result<Rendered, PageError> {
        match self {
            View::Overview => overview::render(sources, actions).await,
            View::Rollouts(query) => rollouts::render(sources, query).await,
            View::Rollout(rollout_id) => rollout::render(sources, rollout_id, actions).await,
            View::Workers(query) => workers::render(sources, query).await,
            View::Resources(query) => resources::render(sources, query).await,
            View::Training(compare) => training::render(sources, compare).await,
            View::Models => models::render(sources, actions).await,
        }
    }

    /// Returns whether a committed change makes the view stale (`waiting`:
    /// its last render showed a waiting rollout).
    pub fn affected_by(&self, change: &Change, waiting: bool) -> bool {
        use Change as C;
        match self {
            View::Overview => true,
            View::Rollouts(_) => matches!(
                change,
                C::RolloutCreated { .. }
                    | C::RolloutChanged { .. }
                    | C::RolloutDeleted { .. }
                    | C::AttemptCreated { .. }
                    | C::AttemptChanged { .. }
            ),
            View::Rollout(rollout_id) => {
                change.rollout_id() == Some(rollout_id.as_str())
                    || (waiting
                        && matches!(
                            change,
                            C::RolloutCreated { .. }
                                | C::RolloutChanged { .. }
                                | C::RolloutDeleted { .. }
                                | C::WorkerChanged { .. }
                                | C::GatewayChanged { .. }
                        ))
            }
            View::Workers(_) => matches!(
                change,
                C::WorkerChanged { .. } | C::AttemptCreated { .. } | C::AttemptChanged { .. }
            ),
            View::Resources(_) => matches!(change, C::ResourcesChanged { .. }),
            // A rollout that ends, a late reward, a deletion, a new version.
            View::Training(_) => matches!(
                change,
                C::RolloutChanged { .. }
                    | C::RolloutDeleted { .. }
                    | C::SpansAdded { .. }
                    | C::ResourcesChanged { .. }
            ),
            View::Models => matches!(change, C::ModelsChanged | C::GatewayChanged { .. }),
        }
    }

    /// Returns whether 1.x events appended to `rollout_id` on this server
    /// make the view stale (its conversation, the gateway's calls).
    pub fn affected_by_append(&self, rollout_id: &str) -> bool {
        match self {
            View::Overview | View::Models => true,
            View::Rollout(id) => id.as_str() == rollout_id,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightning_store_core::model::{RolloutStatus, WorkerStatus};

    #[test]
    fn a_rollout_page_follows_its_rollout_and_the_queue_while_it_waits() {
        let view = View::Rollout(RolloutId::parse("rollout_id", "r1").unwrap());
        let own = Change::RolloutChanged {
            rollout_id: "r1".into(),
            status: RolloutStatus::Running,
        };
        let other = Change::RolloutChanged {
            rollout_id: "r2".into(),
            status: RolloutStatus::Running,
        };
        let worker = Change::WorkerChanged {
            worker_id: "w".into(),
            status: WorkerStatus::Busy,
        };
        assert!(view.affected_by(&own, false));
        assert!(!view.affected_by(&other, false));
        assert!(view.affected_by(&other, true), "the queue moved");
        assert!(view.affected_by(&worker, true) && !view.affected_by(&worker, false));
        assert!(View::Overview.affected_by(&worker, false));
        assert!(!View::Models.affected_by(&own, false));
        assert!(view.affected_by_append("r1") && !view.affected_by_append("r2"));
    }
}
