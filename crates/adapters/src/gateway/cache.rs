//! What the gateway remembers of the store between calls: the 1.x
//! rollouts it has seen exist, and the servers of each model. Entries are
//! forgotten on the change events that alter them; a read that raced with
//! a change (the generation moved while it ran) is not remembered, so a
//! forgotten entry never comes back stale.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use lightning_store_core::agl1::ModelServer;

/// Rollouts remembered at most; the set starts over when full.
const MAX_ROLLOUTS: usize = 65_536;

/// The cache (see the module docs).
#[derive(Debug, Default)]
pub struct RouteCache {
    state: parking_lot::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Bumped by every change forgotten.
    generation: u64,
    rollouts: HashSet<String>,
    models: HashMap<String, Arc<Vec<ModelServer>>>,
}

impl RouteCache {
    /// Returns the current generation, to hand back with a read's result.
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// Returns whether `rollout_id` is known to exist.
    pub fn knows(&self, rollout_id: &str) -> bool {
        self.state.lock().rollouts.contains(rollout_id)
    }

    /// Returns the remembered servers of `model`.
    pub fn models(&self, model: &str) -> Option<Arc<Vec<ModelServer>>> {
        self.state.lock().models.get(model).cloned()
    }

    /// Remembers that `rollout_id` exists, as read at `generation`.
    pub fn remember_rollout(&self, generation: u64, rollout_id: &str) {
        let mut state = self.state.lock();
        if state.generation != generation {
            return;
        }
        if state.rollouts.len() >= MAX_ROLLOUTS {
            state.rollouts.clear();
        }
        state.rollouts.insert(rollout_id.to_owned());
    }

    /// Remembers the servers of `model`, as read at `generation`.
    pub fn remember_models(&self, generation: u64, model: &str, servers: Arc<Vec<ModelServer>>) {
        let mut state = self.state.lock();
        if state.generation == generation {
            state.models.insert(model.to_owned(), servers);
        }
    }

    /// Forgets a deleted rollout.
    pub fn forget_rollout(&self, rollout_id: &str) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.rollouts.remove(rollout_id);
    }

    /// Forgets every model's servers.
    pub fn forget_models(&self) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.models.clear();
    }

    /// Forgets everything (change events were missed).
    pub fn forget_all(&self) {
        let mut state = self.state.lock();
        state.generation += 1;
        state.rollouts.clear();
        state.models.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_that_race_with_a_change_are_not_remembered() {
        let cache = RouteCache::default();
        let before = cache.generation();
        cache.forget_rollout("r");
        cache.remember_rollout(before, "r");
        assert!(!cache.knows("r"), "deleted while it was read");
        cache.remember_rollout(cache.generation(), "r");
        assert!(cache.knows("r"));
        let servers = Arc::new(Vec::new());
        let generation = cache.generation();
        cache.forget_models();
        cache.remember_models(generation, "m", servers.clone());
        assert!(cache.models("m").is_none());
        cache.remember_models(cache.generation(), "m", servers);
        assert!(cache.models("m").is_some());
        cache.forget_all();
        assert!(!cache.knows("r") && cache.models("m").is_none());
    }
}
