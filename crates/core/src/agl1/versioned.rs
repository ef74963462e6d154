//! The 1.x rollouts known to have a stored model version
//! ([`VersionedRollouts`]), so that a rollout's later model requests are
//! not read for the version of its first one, on a backend that only this
//! server writes (memory, SQLite; never PostgreSQL, where another replica
//! may delete a rollout unseen).
//!
//! Finding a model request's version reads its data (~17 KB for a call
//! with 2,000 prompt tokens): done for every model request, it cost about
//! 15% of the event POSTs/s (docs/performance.md). Only the first model
//! request of a rollout gives its version ([`crate::training`]), so once a
//! commit stored one, the rollout is remembered here and its later model
//! requests offer none. A commit that deletes rollouts forgets them (an id
//! may be used again), and a commit that began before a deletion was
//! committed remembers nothing (its rollout may be the one deleted, its
//! note arriving last). Bounded: past [`MAX_ROLLOUTS`] the set empties
//! itself, and a forgotten rollout's next model request is read again
//! (the store keeps the first version it was given).

use std::collections::HashSet;

use parking_lot::Mutex;

/// Most rollouts remembered.
pub const MAX_ROLLOUTS: usize = 65_536;

/// The rollouts whose model version the store holds, as far as this
/// server's commits tell.
#[derive(Default)]
pub struct VersionedRollouts {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    rollouts: HashSet<String>,
    /// Bumped by every commit that deletes rollouts.
    deletions: u64,
}

/// What a commit's outcome is weighed against: the deletions committed
/// before it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(u64);

impl VersionedRollouts {
    /// Returns whether the store holds the rollout's model version.
    pub fn contains(&self, rollout_id: &str) -> bool {
        self.state.lock().rollouts.contains(rollout_id)
    }

    /// Returns the generation a commit takes before the backend's commit.
    pub fn generation(&self) -> Generation {
        Generation(self.state.lock().deletions)
    }

    /// Notes that a commit (which took `generation`) stored the model
    /// versions of `rollout_ids`. Ignored when a deletion was committed
    /// since: a rollout it deleted may be created again, without a version.
    pub fn stored<'a>(
        &self,
        generation: Generation,
        rollout_ids: impl IntoIterator<Item = &'a String>,
    ) {
        let mut state = self.state.lock();
        if state.deletions != generation.0 {
            return;
        }
        for rollout_id in rollout_ids {
            if state.rollouts.len() >= MAX_ROLLOUTS {
                state.rollouts.clear();
            }
            state.rollouts.insert(rollout_id.clone());
        }
    }

    /// Notes that a commit deleted `rollout_ids` (or may have: a failed
    /// commit may still become visible).
    pub fn deleted<'a>(&self, rollout_ids: impl IntoIterator<Item = &'a String>) {
        let mut state = self.state.lock();
        state.deletions += 1;
        for rollout_id in rollout_ids {
            state.rollouts.remove(rollout_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn a_commit_remembers_versions_and_forgets_deletions_within_the_bound() {
        let versioned = VersionedRollouts::default();
        versioned.stored(versioned.generation(), &ids(&["a", "b"]));
        assert!(versioned.contains("a") && versioned.contains("b"));
        versioned.deleted(&ids(&["a"]));
        assert!(!versioned.contains("a"), "a deleted id may be used again");
        let many: Vec<String> = (0..MAX_ROLLOUTS + 1).map(|i| i.to_string()).collect();
        versioned.stored(versioned.generation(), &many);
        assert!(versioned.state.lock().rollouts.len() <= MAX_ROLLOUTS);
        assert!(
            versioned.contains(&MAX_ROLLOUTS.to_string()),
            "the latest is kept"
        );
    }

    #[test]
    fn a_commit_that_began_before_a_deletion_remembers_nothing() {
        let versioned = VersionedRollouts::default();
        let before = versioned.generation();
        versioned.deleted(&ids(&["a"]));
        versioned.stored(before, &ids(&["a"]));
        assert!(!versioned.contains("a"));
    }
}
