//! The training summary ([`crate::training`]): reward by policy version
//! and over time, read from the rows the backends keep in the commit of
//! every change; two
//! versions compared ([`crate::comparison`]); the final rewards of listed
//! rollouts.

use std::collections::HashMap;

use super::super::comparison::{self, Comparison, MAX_COMPARED_ROLLOUTS, MAX_TASKS, TaskRollout};
use super::super::error::{StoreError, StoreResult};
use super::super::model::{RolloutMode, RolloutStatus};
use super::super::query::{Page, ResourcesFilter, RolloutFilter, TimeRange};
use super::super::storage::StoreTx;
use super::super::training::{
    self, PeriodSummary, PolicyVersion, Resolution, Timeline, VersionSummary,
};
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

/// A version a comparison names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComparedVersion {
    /// A resources version, by number (its place in creation order, from 1).
    Numbered(i64),
    /// An agent-lightning 1.x model version.
    Model(i64),
}

impl Engine {
    /// Returns, for each version and mode (of `mode` only, when given), the
    /// rollouts that ended as succeeded or failed and their rewards, in
    /// version order. Costs the summary's rows, not the rollouts counted.
    /// The summary's rows and the measures' are read in one transaction, or
    /// side by side where the backend's [parallel
    /// reads](crate::storage::Store::parallel_reads) are faster (there each
    /// statement is a snapshot of its own anyway).
    pub async fn training_summary(
        &self,
        mode: Option<RolloutMode>,
        versions: VersionRange,
    ) -> StoreResult<Vec<VersionSummary>> {
        let mode = mode.map(|mode| mode.as_str());
        let (rows, measured) = if self.store.parallel_reads() {
            tokio::try_join!(
                self.read(|store| store.training_rows(mode)),
                self.read(|store| store.measure_rows(mode)),
            )?
        } else {
            self.read(|store| {
                Box::pin(async move {
                    Ok((
                        store.training_rows(mode).await?,
                        store.measure_rows(mode).await?,
                    ))
                })
            })
            .await?
        };
        let mut summaries = training::summarise(rows, measured);
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

    /// Compares versions `before` and `after` in `mode`: each one's summary
    /// with its reward distribution, and the `tasks` tasks rewarded under
    /// both whose mean reward changed most ([`crate::comparison`]). Reads
    /// the summary's rows of `mode` and each version's ended rollouts (at
    /// most [`MAX_COMPARED_ROLLOUTS`]), in one transaction. Refuses a
    /// version the store does not hold: a resources version, or a model
    /// version no rollout made its first call with.
    pub async fn compare_versions(
        &self,
        mode: RolloutMode,
        before: ComparedVersion,
        after: ComparedVersion,
        tasks: usize,
    ) -> StoreResult<Comparison> {
        if tasks > MAX_TASKS {
            return Err(StoreError::invalid(format!(
                "max_tasks ({tasks}) is above {MAX_TASKS}"
            )));
        }
        self.read(|store| {
            Box::pin(async move {
                let before = resolve(store, before).await?;
                let after = resolve(store, after).await?;
                let summaries = training::summarise(
                    store.training_rows(Some(mode.as_str())).await?,
                    store.measure_rows(Some(mode.as_str())).await?,
                );
                let summary_of = |(version, number): &(PolicyVersion, Option<i64>)| {
                    let found = summaries.iter().find(|s| s.version == *version).cloned();
                    VersionSummary {
                        version_number: *number,
                        ..found.unwrap_or_else(|| VersionSummary::empty(version.clone(), mode))
                    }
                };
                let (before_summary, after_summary) = (summary_of(&before), summary_of(&after));
                let (before_rollouts, before_cut) = ended_rollouts(store, &before.0, mode).await?;
                let (after_rollouts, after_cut) = ended_rollouts(store, &after.0, mode).await?;
                Ok(Comparison {
                    before: before_summary,
                    after: after_summary,
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

/// Returns the policy version a comparison names, with its number when it
/// is a resources version; refuses a version the store does not hold.
async fn resolve(
    store: &mut (dyn StoreTx + '_),
    version: ComparedVersion,
) -> StoreResult<(PolicyVersion, Option<i64>)> {
    let first = Page {
        limit: Some(1),
        ..Page::default()
    };
    match version {
        ComparedVersion::Numbered(number) => {
            let missing = || StoreError::NotFound(format!("no resources version {number}"));
            let offset = usize::try_from(number - 1).map_err(|_| missing())?;
            let page = Page { offset, ..first };
            let found = store
                .query_resources(&ResourcesFilter::default(), &page)
                .await?;
            let resources = found.items.into_iter().next().ok_or_else(missing)?;
            Ok((
                PolicyVersion::Resources(resources.resources_id),
                Some(number),
            ))
        }
        ComparedVersion::Model(model_version) => {
            let served = store
                .query_rollouts(&of_version(&PolicyVersion::Model(model_version)), &first)
                .await?;
            if served.total == 0 {
                return Err(StoreError::NotFound(format!(
                    "no rollout made its first model call with model version {model_version}"
                )));
            }
            Ok((PolicyVersion::Model(model_version), None))
        }
    }
}

/// Returns the filter of the rollouts that count under `version`.
fn of_version(version: &PolicyVersion) -> RolloutFilter {
    match version {
        PolicyVersion::Resources(id) => RolloutFilter {
            resources_id: Some(id.clone()),
            ..RolloutFilter::default()
        },
        PolicyVersion::Model(model_version) => RolloutFilter {
            model_version: Some(*model_version),
            ..RolloutFilter::default()
        },
        PolicyVersion::None => RolloutFilter::default(),
    }
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

/// Returns the rollouts of `version` in `mode` that ended as succeeded or
/// failed, with their final rewards, in creation order (the first
/// [`MAX_COMPARED_ROLLOUTS`]), and whether there were more.
async fn ended_rollouts(
    store: &mut (dyn StoreTx + '_),
    version: &PolicyVersion,
    mode: RolloutMode,
) -> StoreResult<(Vec<TaskRollout>, bool)> {
    let filter = RolloutFilter {
        status_in: Some(vec![RolloutStatus::Succeeded, RolloutStatus::Failed]),
        mode_in: Some(vec![Some(mode)]),
        ..of_version(version)
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
