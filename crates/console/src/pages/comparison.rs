//! The Training page's comparison of two versions
//! (`lightning_store_core::comparison`): a form choosing the mode and the
//! versions (resources versions by number, agent-lightning 1.x model
//! versions as `model-N`; by default the last two with ended rollouts, in
//! val when it has some), their reward distributions side by side, and the
//! tasks whose mean reward changed most, each linking to its latest
//! rollout under either.

use askama::Template;

use crate::charts::{self, Series};
use crate::context::Sources;
use crate::format;
use crate::rendered::{PageError, render_error};
use crate::url::{PREFIX, query_get, query_pairs};
use lightning_store_core::comparison::{Comparison, TaskRewards};
use lightning_store_core::engine::ComparedVersion;
use lightning_store_core::error::StoreError;
use lightning_store_core::model::RolloutMode;
use lightning_store_core::training::{PolicyVersion, VersionSummary};

/// Tasks the page lists.
const TASKS: usize = 10;
/// Ranges of equal width the rewards are counted in.
const RANGES: usize = 10;

/// Which versions the Training page compares, as its URL says; what is
/// unset is chosen from the summary.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CompareQuery {
    pub mode: Option<RolloutMode>,
    pub before: Option<ComparedVersion>,
    pub after: Option<ComparedVersion>,
}

/// The prefix of a model version's value in the page's URL (`model-3`).
const MODEL_VALUE: &str = "model-";

/// Returns a version's value in the page's URL: its number, or
/// [`MODEL_VALUE`] and a model version.
fn value_of(version: ComparedVersion) -> String {
    match version {
        ComparedVersion::Numbered(number) => number.to_string(),
        ComparedVersion::Model(model_version) => format!("{MODEL_VALUE}{model_version}"),
    }
}

/// Reads a version's value in the page's URL ([`value_of`]).
fn parse_value(text: &str) -> Option<ComparedVersion> {
    match text.strip_prefix(MODEL_VALUE) {
        Some(model_version) => model_version.parse().ok().map(ComparedVersion::Model),
        None => text
            .parse()
            .ok()
            .filter(|number| *number >= 1)
            .map(ComparedVersion::Numbered),
    }
}

/// Returns how the page names a version.
pub(super) fn name_of(version: ComparedVersion) -> String {
    match version {
        ComparedVersion::Numbered(number) => format!("Version {number}"),
        ComparedVersion::Model(model_version) => format!("Model version {model_version}"),
    }
}

/// Returns the version a summary is of, when a comparison can name it: a
/// resources version the store holds, or a model version.
pub(super) fn compared_version(summary: &VersionSummary) -> Option<ComparedVersion> {
    match (summary.version_number, &summary.version) {
        (Some(number), _) => Some(ComparedVersion::Numbered(number)),
        (None, PolicyVersion::Model(model_version)) => Some(ComparedVersion::Model(*model_version)),
        _ => None,
    }
}

impl CompareQuery {
    /// Parses the page's query string; bad values are refused with a
    /// message for the page.
    pub fn parse(query: &str) -> Result<Self, String> {
        let pairs = query_pairs(query);
        let mode = query_get(&pairs, "compare_mode")
            .map(|text| RolloutMode::parse(text).ok_or_else(|| format!("unknown mode {text:?}")))
            .transpose()?;
        let version = |name: &str| {
            query_get(&pairs, name)
                .map(|text| {
                    parse_value(text).ok_or_else(|| format!("{name}: {text:?} is not a version"))
                })
                .transpose()
        };
        Ok(Self {
            mode,
            before: version("before")?,
            after: version("after")?,
        })
    }
}

/// A choice of a `<select>`.
struct Choice {
    value: String,
    /// What the choice shows.
    label: String,
    selected: bool,
}

/// A task's row: its input and its rewards under each version.
struct TaskRow {
    input: String,
    before: Side,
    after: Side,
    change: String,
    /// `up`, `down` or `same`, for the style sheet.
    direction: &'static str,
}

/// A task's rewards under one version, linking to its latest rollout.
struct Side {
    mean: String,
    rollouts: i64,
    href: String,
}

/// What one version compared came to.
struct Totals {
    /// "Version 3", "Model version 3".
    name: String,
    rollouts: i64,
    rewarded: i64,
    mean: String,
}

impl Totals {
    fn of(summary: &VersionSummary) -> Self {
        Self {
            name: compared_version(summary).map(name_of).unwrap_or_default(),
            rollouts: summary.stats.rollouts,
            rewarded: summary.stats.rewarded,
            mean: format::reward(summary.stats.reward_mean),
        }
    }
}

/// What the two versions compared came to.
struct Compared {
    chart: Option<String>,
    before: Totals,
    after: Totals,
    tasks: Vec<TaskRow>,
    tasks_cut: bool,
}

#[derive(Template)]
#[template(path = "comparison.html")]
struct Section {
    action: String,
    modes: Vec<Choice>,
    befores: Vec<Choice>,
    afters: Vec<Choice>,
    mode: String,
    compared: Option<Compared>,
    /// Why the versions the URL names cannot be compared (one the store
    /// does not hold).
    refused: Option<String>,
}

/// Renders the comparison section from the page's `summaries` (for the
/// choices) and one comparison read; `None` when no version has ended
/// rollouts.
pub async fn render(
    sources: &Sources,
    query: &CompareQuery,
    summaries: &[VersionSummary],
) -> Result<Option<String>, PageError> {
    let versions = |mode: Option<RolloutMode>| -> Vec<ComparedVersion> {
        let mut versions: Vec<ComparedVersion> = summaries
            .iter()
            .filter(|s| mode.is_none_or(|mode| s.mode == mode.as_str()))
            .filter_map(compared_version)
            .collect();
        versions.dedup();
        versions
    };
    let every = versions(None);
    if every.is_empty() {
        return Ok(None);
    }
    let has = |mode: RolloutMode| summaries.iter().any(|s| s.mode == mode.as_str());
    let mode = query.mode.unwrap_or(if has(RolloutMode::Val) {
        RolloutMode::Val
    } else {
        RolloutMode::Train
    });
    let in_mode = versions(Some(mode));
    let last_two = match in_mode.as_slice() {
        [.., before, after] => Some((*before, *after)),
        _ => None,
    };
    let before = query.before.or(last_two.map(|(before, _)| before));
    let after = query.after.or(last_two.map(|(_, after)| after));
    let (compared, refused) = match (before, after) {
        (Some(before), Some(after)) => match sources
            .engine
            .compare_versions(mode, before, after, TASKS)
            .await
        {
            Ok(comparison) => (Some(compared(sources, comparison)?), None),
            Err(StoreError::NotFound(message)) => (None, Some(message)),
            Err(error) => return Err(error.into()),
        },
        _ => (None, None),
    };
    let choices = |chosen: Option<ComparedVersion>| -> Vec<Choice> {
        every
            .iter()
            .map(|&version| Choice {
                value: value_of(version),
                label: name_of(version),
                selected: chosen == Some(version),
            })
            .collect()
    };
    let section = Section {
        action: sources.links.to(&format!("{PREFIX}/training")),
        modes: [RolloutMode::Train, RolloutMode::Val, RolloutMode::Test]
            .into_iter()
            .map(|m| Choice {
                value: m.as_str().to_owned(),
                label: m.as_str().to_owned(),
                selected: m == mode,
            })
            .collect(),
        befores: choices(before),
        afters: choices(after),
        mode: mode.as_str().to_owned(),
        compared,
        refused,
    };
    Ok(Some(section.render().map_err(render_error)?))
}

fn compared(sources: &Sources, comparison: Comparison) -> Result<Compared, PageError> {
    let Comparison {
        before,
        after,
        tasks,
        tasks_cut,
    } = comparison;
    let chart = distribution_chart(&before, &after)
        .map(|chart| chart.render().map_err(render_error))
        .transpose()?;
    let side = |rewards: &TaskRewards| Side {
        mean: format::reward(rewards.reward_mean),
        rollouts: rewards.rollouts,
        href: sources.links.rollout(&rewards.latest_rollout_id),
    };
    let tasks = tasks
        .iter()
        .map(|task| TaskRow {
            input: format::cut(task.input.to_string()),
            before: side(&task.before),
            after: side(&task.after),
            change: format!("{:+.3}", task.change),
            direction: match task.change {
                change if change > 0.0 => "up",
                change if change < 0.0 => "down",
                _ => "same",
            },
        })
        .collect();
    Ok(Compared {
        chart,
        before: Totals::of(&before),
        after: Totals::of(&after),
        tasks,
        tasks_cut,
    })
}

/// Returns a chart of both versions' rewards counted in [`RANGES`] ranges
/// of equal width over the rewards of both, side by side; `None` when
/// neither has a reward.
fn distribution_chart(before: &VersionSummary, after: &VersionSummary) -> Option<charts::Chart> {
    let rewards = before
        .stats
        .bins
        .iter()
        .chain(&after.stats.bins)
        .map(|&(reward, _)| reward);
    let (low, high) = rewards.fold(None, |range: Option<(f64, f64)>, reward| {
        Some(range.map_or((reward, reward), |(low, high)| {
            (low.min(reward), high.max(reward))
        }))
    })?;
    let ranges = if high > low { RANGES } else { 1 };
    let width = (high - low) / ranges as f64;
    let place = |reward: f64| {
        if width > 0.0 {
            (((reward - low) / width) as usize).min(ranges - 1)
        } else {
            0
        }
    };
    let counts = |summary: &VersionSummary| {
        let mut counts = vec![0_u64; ranges];
        for &(reward, rollouts) in &summary.stats.bins {
            counts[place(reward)] += u64::try_from(rollouts).unwrap_or(0);
        }
        counts
    };
    let slots: Vec<String> = (0..ranges)
        .map(|index| {
            let start = low + index as f64 * width;
            format!("{start:.2}–{:.2}", start + width)
        })
        .collect();
    let before_series = [Series {
        name: "before",
        class: "wait",
        values: counts(before),
        summed: true,
    }];
    let after_series = [Series {
        name: "after",
        class: "ok",
        values: counts(after),
        summed: true,
    }];
    Some(charts::labelled(
        "Rewards of the two versions compared, counted in ranges of equal width, side by side",
        &slots,
        &[&before_series, &after_series],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_a_mode_and_two_versions() {
        let query = CompareQuery::parse("compare_mode=val&before=2&after=5").unwrap();
        assert_eq!(
            query,
            CompareQuery {
                mode: Some(RolloutMode::Val),
                before: Some(ComparedVersion::Numbered(2)),
                after: Some(ComparedVersion::Numbered(5)),
            }
        );
        let models = CompareQuery::parse("before=model-0&after=model-7").unwrap();
        assert_eq!(
            (models.before, models.after),
            (
                Some(ComparedVersion::Model(0)),
                Some(ComparedVersion::Model(7))
            )
        );
        for version in [ComparedVersion::Numbered(3), ComparedVersion::Model(-1)] {
            assert_eq!(parse_value(&value_of(version)), Some(version));
        }
        assert!(CompareQuery::parse("before=model-x").is_err());
        assert_eq!(CompareQuery::parse("").unwrap(), CompareQuery::default());
        assert!(CompareQuery::parse("before=0").is_err());
        assert!(CompareQuery::parse("after=last").is_err());
        assert!(CompareQuery::parse("compare_mode=eval").is_err());
    }

    #[test]
    fn the_distributions_share_ranges_of_equal_width() {
        let summary = |bins: Vec<(f64, i64)>| {
            let resources = PolicyVersion::Resources("rs-1".into());
            let mut summary = VersionSummary::empty(resources, RolloutMode::Val);
            summary.stats.bins = bins;
            summary
        };
        let before = summary(vec![(0.0, 2), (0.5, 1)]);
        let after = summary(vec![(0.5, 1), (1.0, 3)]);
        let chart = distribution_chart(&before, &after).unwrap();
        // Ten ranges over [0, 1]: 0 in the first, 0.5 in the sixth, 1 in
        // the last; a bar per version and range with rewards in it.
        let bars: Vec<(&str, &str)> = chart
            .bars
            .iter()
            .map(|bar| (bar.class, bar.title.as_str()))
            .collect();
        assert_eq!(
            bars,
            [
                ("wait", "0.00–0.10: 2 before, 0 after"),
                ("wait", "0.50–0.60: 1 before, 1 after"),
                ("ok", "0.50–0.60: 1 before, 1 after"),
                ("ok", "0.90–1.00: 0 before, 3 after"),
            ]
        );
        assert!(distribution_chart(&summary(Vec::new()), &summary(Vec::new())).is_none());
    }
}
