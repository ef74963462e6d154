//! The training summary ([`crate::training`]): reward by policy version
//! and over time, read from the rows the backends keep in the commit of
//! every change; two
//! versions compared ([`crate::comparison`]); the final rewards of listed
//! rollouts.

use std::collections::HashMap;

use super::super::comparison::{self, Comparison, MAX_COMPARED_ROLLOUTS, MAX_TASKS, TaskRollout};
use super::super::error::{StoreError, StoreResult};
use super::super::model::{ResourcesUpdate, RolloutMode, RolloutStatus};
use super::super::query::{Page, ResourcesFilter, RolloutFilter, TimeRange};
use super::super::storage::StoreTx;
use super::super::training::{self, PeriodSummary, Resolution, Timeline, VersionSummary};
use super::runner::Engine;

/// Which versions a summary covers, by number (a resources snapshot's place
/// in creation order, from 1, or a 1.x model version), both bounds
/// included (`None`: unbounded). Rollouts of a version the store does not
/// hold, or of none, are only in an unbounded range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VersionRange {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl VersionRange {
    fn contains(&self, number: Option<i64>) -> bool {
        match number {
            Some(n) => self.from.is_none_or(|from| n >= from) && self.to.is_none_or(|to| n <= to),
            None => self.from.is_none() && self.to.is_none(),
        }
    }
}

impl Engine {
    /// Returns, for each version and mode (of `mode` only, when given), the
    /// rollouts that ended as succeeded or failed and their rewards, in
    /// version order. Costs the summary's rows, not the rollouts counted.
    pub async fn training_summary(
        &self,
        mode: Option<RolloutMode>,
        versions: VersionRange,
    ) -> StoreResult<Vec<VersionSummary>> {
        let mode = mode.map(|mode| mode.as_str());
        let rows = self
            .read(|store| Box::pin(store.training_rows(mode)))
            .await?;
        let mut summaries = training::summarise(rows);
        summaries.retain(|summary| versions.contains(summary.number()));
        Ok(summaries)
    }

    /// Returns the reward timeline of `mode` (every mode, when `None`) over
    /// the periods starting in `starts`, at
    /// `resolution`, or when `None` at the one the timeline's length asks
    /// ([`training::resolution_for`]). Costs the timeline's rows, not the
    /// rollouts counted.
    pub async fn reward_timeline(
        &self,
        mode: Option<RolloutMode>,
        resolution: Option<Resolution>,
        starts: TimeRange,
    ) -> StoreResult<Timeline> {
        if let (Some(from), Some(until)) = (starts.from, starts.until)
            && from > until
        {
            return Err(StoreError::invalid("start_time is after end_time"));
        }
        let mode = mode.map(|mode| mode.as_str());
        self.read(|store| {
            Box::pin(async move {
                let window = Window { mode, starts };
                let (resolution, periods) = match resolution {
                    Some(resolution) => (resolution, window.read(store, resolution).await?),
                    None => {
                        let hours = window.read(store, Resolution::Hour).await?;
                        match training::resolution_for(&hours) {
                            Resolution::Hour => (Resolution::Hour, hours),
                            Resolution::Minute => (
                                Resolution::Minute,
                                window.read(store, Resolution::Minute).await?,
                            ),
                        }
                    }
                };
                Ok(Timeline {
                    resolution,
                    periods,
                })
            })
        })
        .await
    }

    /// Compares versions `before` and `after` (by number) in `mode`: each
    /// one's summary with its reward distribution, and the `tasks` tasks
    /// rewarded under both whose mean reward changed most
    /// ([`crate::comparison`]). Reads the summary's rows of `mode` and each
    /// version's ended rollouts (at most [`MAX_COMPARED_ROLLOUTS`]), in one
    /// transaction.
    pub async fn compare_versions(
        &self,
        mode: RolloutMode,
        before: i64,
        after: i64,
        tasks: usize,
    ) -> StoreResult<Comparison> {
        if tasks > MAX_TASKS {
            return Err(StoreError::invalid(format!(
                "max_tasks ({tasks}) is above {MAX_TASKS}"
            )));
        }
        self.read(|store| {
            Box::pin(async move {
                let before_resources = version(store, before).await?;
                let after_resources = version(store, after).await?;
                let summaries =
                    training::summarise(store.training_rows(Some(mode.as_str())).await?);
                let summary_of = |resources: &ResourcesUpdate| {
                    summaries
                        .iter()
                        .find(|s| s.version.resources_id() == resources.resources_id)
                        .cloned()
                        .unwrap_or_else(|| VersionSummary::empty(&resources.resources_id, mode))
                };
                let (before_summary, after_summary) =
                    (summary_of(&before_resources), summary_of(&after_resources));
                let (before_rollouts, before_cut) =
                    ended_rollouts(store, &before_resources, mode).await?;
                let (after_rollouts, after_cut) =
                    ended_rollouts(store, &after_resources, mode).await?;
                Ok(Comparison {
                    before: VersionSummary {
                        version_number: Some(before),
                        ..before_summary
                    },
                    after: VersionSummary {
                        version_number: Some(after),
                        ..after_summary
                    },
                    tasks: comparison::task_changes(&before_rollouts, &after_rollouts, tasks),
                    tasks_cut: before_cut || after_cut,
                })
            })
        })
        .await
    }
}

/// The rows of the reward timeline a read covers.
struct Window<'a> {
    mode: Option<&'a str>,
    starts: TimeRange,
}

impl Window<'_> {
    /// Returns the timeline's periods at `resolution`, summarised.
    async fn read(
        &self,
        store: &mut (dyn StoreTx + '_),
        resolution: Resolution,
    ) -> StoreResult<Vec<PeriodSummary>> {
        let rows = store
            .timeline_rows(resolution, self.mode, self.starts)
            .await?;
        Ok(training::summarise_periods(rows))
    }
}

/// Returns the resources version numbered `number` (its place in creation
/// order, from 1); refuses a number the store does not hold.
async fn version(store: &mut (dyn StoreTx + '_), number: i64) -> StoreResult<ResourcesUpdate> {
    let missing = || StoreError::NotFound(format!("no resources version {number}"));
    let offset = usize::try_from(number - 1).map_err(|_| missing())?;
    let page = Page {
        limit: Some(1),
        offset,
        ..Page::default()
    };
    let found = store
        .query_resources(&ResourcesFilter::default(), &page)
        .await?;
    found.items.into_iter().next().ok_or_else(missing)
}

/// Returns the final rewards of those of `rollout_ids` that have one, by
/// rollout id.
pub(super) async fn final_rewards(
    store: &mut (dyn StoreTx + '_),
    rollout_ids: &[&str],
) -> StoreResult<HashMap<String, f64>> {
    if rollout_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let stored = store.rewards(rollout_ids).await?;
    Ok(stored
        .into_iter()
        .map(|(rollout_id, reward)| (rollout_id, reward.value))
        .collect())
}

/// Returns the rollouts of `resources`'s version in `mode` that ended as
/// succeeded or failed, with their final rewards, in creation order (the
/// first [`MAX_COMPARED_ROLLOUTS`]), and whether there were more.
async fn ended_rollouts(
    store: &mut (dyn StoreTx + '_),
    resources: &ResourcesUpdate,
    mode: RolloutMode,
) -> StoreResult<(Vec<TaskRollout>, bool)> {
    let filter = RolloutFilter {
        status_in: Some(vec![RolloutStatus::Succeeded, RolloutStatus::Failed]),
        mode_in: Some(vec![Some(mode)]),
        resources_id: Some(resources.resources_id.clone()),
        ..RolloutFilter::default()
    };
    let page = Page {
        limit: Some(MAX_COMPARED_ROLLOUTS),
        ..Page::default()
    };
    let found = store.query_rollouts(&filter, &page).await?;
    let ids: Vec<&str> = found
        .items
        .iter()
        .map(|view| view.rollout.rollout_id.as_str())
        .collect();
    let rewards = final_rewards(store, &ids).await?;
    let cut = found.total > found.items.len();
    let rollouts = found
        .items
        .into_iter()
        .map(|view| TaskRollout {
            reward: rewards.get(&view.rollout.rollout_id).copied(),
            rollout_id: view.rollout.rollout_id,
            input: view.rollout.input,
        })
        .collect();
    Ok((rollouts, cut))
}
