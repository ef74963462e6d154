//! Comparing two policy versions: their reward distributions side by side
//! ([`crate::training`]'s summary of each), and the tasks whose reward
//! changed most between them. A *task* is the rollouts with the same input
//! (its JSON text): the same question asked of both versions, so the
//! difference of its mean rewards says what the new version does better
//! or worse, task by task.

use std::collections::BTreeMap;

use super::model::Json;
use super::training::VersionSummary;

/// Rollouts read per version for the task comparison, at most: a version
/// with more compares its first ones (in creation order) and says so.
pub const MAX_COMPARED_ROLLOUTS: usize = 10_000;

/// Tasks listed when the caller does not say, and at most.
pub const DEFAULT_TASKS: usize = 20;
pub const MAX_TASKS: usize = 1_000;

/// An ended rollout of a compared version, as the comparison reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRollout {
    pub rollout_id: String,
    pub input: Json,
    /// Its final reward.
    pub reward: Option<f64>,
}

/// A task's rollouts under one version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskRewards {
    /// Ended rollouts of the task.
    pub rollouts: i64,
    /// Of them, those with a reward.
    pub rewarded: i64,
    /// The mean of their rewards.
    pub reward_mean: Option<f64>,
    /// The last created of them, to open.
    pub latest_rollout_id: String,
}

/// How one task's reward changed between the versions.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChange {
    pub input: Json,
    pub before: TaskRewards,
    pub after: TaskRewards,
    /// The mean reward after, less the mean before.
    pub change: f64,
}

/// Two versions side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The earlier (or baseline) version's summary, with its distribution.
    pub before: VersionSummary,
    pub after: VersionSummary,
    /// The tasks rewarded under both versions, the greatest change (either
    /// way) first.
    pub tasks: Vec<TaskChange>,
    /// Whether a version had more ended rollouts than
    /// [`MAX_COMPARED_ROLLOUTS`], so that the tasks cover its first ones.
    pub tasks_cut: bool,
}

/// Groups each version's rollouts by task and returns the `limit` tasks
/// rewarded under both whose mean reward changed most, ties in the order
/// of the inputs' JSON text. `before` and `after` are in creation order.
pub fn task_changes(
    before: &[TaskRollout],
    after: &[TaskRollout],
    limit: usize,
) -> Vec<TaskChange> {
    let before = by_task(before);
    let mut after = by_task(after);
    let mut changes: Vec<(String, TaskChange)> = before
        .into_iter()
        .filter_map(|(key, (input, before))| {
            let (_, after) = after.remove(&key)?;
            let change = after.reward_mean? - before.reward_mean?;
            Some((
                key,
                TaskChange {
                    input,
                    before,
                    after,
                    change,
                },
            ))
        })
        .collect();
    changes.sort_by(|(a_key, a), (b_key, b)| {
        b.change
            .abs()
            .total_cmp(&a.change.abs())
            .then_with(|| a_key.cmp(b_key))
    });
    changes.truncate(limit);
    changes.into_iter().map(|(_, change)| change).collect()
}

/// The rollouts of each task (by the input's JSON text), summed.
fn by_task(rollouts: &[TaskRollout]) -> BTreeMap<String, (Json, TaskRewards)> {
    let mut tasks: BTreeMap<String, (Json, TaskRewards, f64)> = BTreeMap::new();
    for rollout in rollouts {
        let (_, task, sum) = tasks
            .entry(rollout.input.to_string())
            .or_insert_with(|| (rollout.input.clone(), TaskRewards::default(), 0.0));
        task.rollouts += 1;
        task.latest_rollout_id = rollout.rollout_id.clone();
        if let Some(reward) = rollout.reward {
            task.rewarded += 1;
            *sum += reward;
        }
    }
    tasks
        .into_iter()
        .map(|(key, (input, mut task, sum))| {
            task.reward_mean = (task.rewarded > 0).then(|| sum / task.rewarded as f64);
            (key, (input, task))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(id: &str, input: Json, reward: Option<f64>) -> TaskRollout {
        TaskRollout {
            rollout_id: id.into(),
            input,
            reward,
        }
    }

    #[test]
    fn tasks_compare_their_mean_rewards_the_greatest_change_first() {
        let (q1, q2, q3, q4) = (
            json!({"q": 1}),
            json!({"q": 2}),
            json!({"q": 3}),
            json!({"q": 4}),
        );
        let before = [
            rollout("a1", q1.clone(), Some(0.0)),
            rollout("a2", q1.clone(), Some(1.0)),
            rollout("a3", q2.clone(), Some(1.0)),
            rollout("a4", q3.clone(), Some(0.5)),
            // Rewarded before only: not compared.
            rollout("a5", q4.clone(), Some(0.0)),
        ];
        let after = [
            rollout("b1", q1.clone(), Some(1.0)),
            rollout("b2", q2.clone(), Some(0.0)),
            rollout("b3", q2.clone(), None),
            rollout("b4", q3.clone(), Some(0.5)),
            rollout("b5", q4.clone(), None),
        ];
        let changes = task_changes(&before, &after, 10);
        let summary: Vec<(Json, f64)> = changes
            .iter()
            .map(|change| (change.input.clone(), change.change))
            .collect();
        assert_eq!(summary, [(q2.clone(), -1.0), (q1, 0.5), (q3, 0.0)]);
        let fallen = &changes[0];
        assert_eq!(
            fallen.after,
            TaskRewards {
                rollouts: 2,
                rewarded: 1,
                reward_mean: Some(0.0),
                latest_rollout_id: "b3".into(),
            }
        );
        assert_eq!(fallen.before.latest_rollout_id, "a3");
        assert_eq!(task_changes(&before, &after, 1).len(), 1);
    }
}
