//! The Training page: is the agent learning? Reward by policy version (an
//! agent-lightning 0.x resources version, a 1.x model version) for each
//! mode, as a chart (the 10th to 90th percentile band and the mean of each
//! version, train beside val) and as a table whose rows link to their
//! rollouts (the Rollouts page's own URL); the same over time (by the
//! minute or hour rollouts ended in); how long the rollouts took; read
//! from the training summary and
//! timeline the store keeps in the commit of every change
//! (`lightning_store_core::training`).

use askama::Template;

use super::comparison::{self, CompareQuery};
use super::rollouts::RolloutsQuery;
use crate::charts::{self, BandSeries, RewardBand};
use crate::context::Sources;
use crate::format;
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use lightning_store_core::distribution::Distribution;
use lightning_store_core::engine::VersionRange;
use lightning_store_core::model::{RolloutMode, RolloutStatus, Timestamp};
use lightning_store_core::query::{TimeRange, WithoutRowsFilter};
use lightning_store_core::training::measure::Measure;
use lightning_store_core::training::{
    PeriodSummary, PolicyVersion, Resolution, RewardStats, Timeline, VersionSummary,
};

/// The modes the chart draws, with their bands' classes.
const CHARTED: [(&str, &str); 2] = [("train", "ok"), ("val", "run")];

/// One row of the table: a version's rollouts of one mode.
struct Row {
    version: String,
    resources_id: String,
    mode: String,
    rollouts: i64,
    /// The Rollouts page listing them.
    rollouts_link: String,
    success: String,
    rewarded: i64,
    mean: String,
    p10: String,
    p50: String,
    p90: String,
}

/// A count that links to the rollouts it counts.
struct Linked {
    label: String,
    count: i64,
    href: String,
}

/// One row of the training rows table: what a version's 1.x rollouts of
/// one mode gave their trainer.
struct RowsRow {
    version: String,
    mode: String,
    rollouts: i64,
    training_rows: i64,
    /// The rollouts that gave none.
    without: Linked,
    /// Of them, by reason.
    reasons: Vec<Linked>,
}

/// One row of a measure's table: what a version's rollouts of one mode
/// measured.
struct MeasureRow {
    version: String,
    mode: String,
    /// The values counted (rollouts, or model calls).
    measured: i64,
    mean: String,
    p10: String,
    p50: String,
    p90: String,
}

/// A table of one measure, by version and mode.
struct MeasureTable {
    /// The table's element id.
    id: &'static str,
    heading: &'static str,
    /// What the values are and where they come from.
    note: &'static str,
    /// The header of the values counted.
    counted: &'static str,
    rows: Vec<MeasureRow>,
}

impl MeasureTable {
    /// Returns the table of `measure` over `summaries`, `None` when no
    /// version has a value of it.
    fn of(measure: Measure, summaries: &[VersionSummary]) -> Option<Self> {
        let (id, heading, note, counted) = match measure {
            Measure::Duration => (
                "training-durations",
                "How long rollouts took",
                "From each rollout's creation to its end: the time the algorithm waited for it, \
                 its time in the queue and its retries included.",
                "Rollouts",
            ),
            Measure::PromptTokens => (
                "training-prompt-tokens",
                "Prompt tokens per rollout",
                "The prompt tokens of each rollout's model calls, summed: the calls through the \
                 gateway whose model server reported its usage (agent-lightning 1.x), and the \
                 spans named like openai.chat.completion with gen_ai.usage attributes (0.x). \
                 Rollouts none of whose calls reported tokens are not counted.",
                "Rollouts",
            ),
            Measure::ResponseTokens => (
                "training-response-tokens",
                "Response tokens per rollout",
                "The response tokens of the same calls, summed per rollout.",
                "Rollouts",
            ),
            Measure::CallLatency => (
                "training-call-latency",
                "Model call latency",
                "Each model call's time, from the gateway's request to its answer (1.x) or the \
                 call span's start to its end (0.x). The mean is exact; for the percentiles each \
                 call is placed at its rollout's mean.",
                "Calls",
            ),
        };
        let shown = |value: Option<f64>| match (measure, value) {
            (_, None) => "-".to_owned(),
            (Measure::Duration | Measure::CallLatency, Some(millis)) => {
                format::duration(std::time::Duration::from_secs_f64(millis / 1000.0))
            }
            (Measure::PromptTokens | Measure::ResponseTokens, Some(tokens)) => {
                format::quantity(tokens)
            }
        };
        let rows: Vec<MeasureRow> = summaries
            .iter()
            .filter_map(|summary| {
                let Distribution {
                    values,
                    mean,
                    p10,
                    p50,
                    p90,
                } = summary.measure(measure);
                (values > 0).then(|| MeasureRow {
                    version: version_label(summary),
                    mode: mode_label(summary).to_owned(),
                    measured: values,
                    mean: shown(mean),
                    p10: shown(p10),
                    p50: shown(p50),
                    p90: shown(p90),
                })
            })
            .collect();
        (!rows.is_empty()).then_some(Self {
            id,
            heading,
            note,
            counted,
            rows,
        })
    }
}

#[derive(Template)]
#[template(path = "training.html")]
struct TrainingPage {
    rows: Vec<Row>,
    /// The versions whose rollouts were judged (1.x).
    rows_given: Vec<RowsRow>,
    /// A table per measure some version's rollouts have values of, in the
    /// order of [`Measure::ALL`].
    measures: Vec<MeasureTable>,
    /// The chart by version, when a train or val rollout has a reward.
    chart: Option<String>,
    /// The chart over time, likewise.
    timeline_chart: Option<String>,
    /// Whether the timeline is by minute (by hour otherwise).
    timeline_minutes: bool,
    /// The comparison of two versions, when a version has ended rollouts.
    comparison: Option<String>,
}

/// Returns a version's label: its number, "model" and a 1.x model
/// version, its resources id when the store does not hold it, or "none".
fn version_label(summary: &VersionSummary) -> String {
    match (summary.version_number, &summary.version) {
        (Some(number), _) => number.to_string(),
        (None, PolicyVersion::Model(version)) => format!("model {version}"),
        (None, PolicyVersion::Resources(id)) => id.clone(),
        (None, PolicyVersion::None) => "none".to_owned(),
    }
}

/// Returns a row's mode as the table shows it.
fn mode_label(summary: &VersionSummary) -> &str {
    if summary.mode.is_empty() {
        "none"
    } else {
        &summary.mode
    }
}

/// Returns the Rollouts page's query of the rollouts a summary counts:
/// those of its version and mode that ended as succeeded or failed.
fn counted_rollouts(summary: &VersionSummary) -> RolloutsQuery {
    RolloutsQuery {
        statuses: vec![RolloutStatus::Succeeded, RolloutStatus::Failed],
        modes: vec![RolloutMode::parse(&summary.mode)],
        resources: Some(summary.version.resources_id())
            .filter(|id| !id.is_empty())
            .map(str::to_owned),
        model_version: summary.version.model_version(),
        sort: ("start_time".to_owned(), true),
        page: 1,
        ..RolloutsQuery::default()
    }
}

/// Most periods the chart over time draws: the latest.
const MAX_PERIODS: usize = 240;

/// Returns one series of bands per charted mode from `entries`: each a
/// slot, a mode, its numbers and what its slot is named in the band's
/// title ("Version 2", "14:05").
fn band_series<'s>(
    entries: impl IntoIterator<Item = (usize, &'s str, &'s RewardStats, String)>,
) -> Vec<BandSeries> {
    let mut series: Vec<BandSeries> = CHARTED
        .iter()
        .map(|&(name, class)| BandSeries {
            name,
            class,
            bands: Vec::new(),
        })
        .collect();
    for (slot, mode, stats, named) in entries {
        let Some(place) = CHARTED.iter().position(|(charted, _)| *charted == mode) else {
            continue;
        };
        if let (Some(low), Some(mean), Some(high)) =
            (stats.reward_p10, stats.reward_mean, stats.reward_p90)
        {
            series[place].bands.push(RewardBand {
                slot,
                low,
                mean,
                high,
                title: format!(
                    "{named}, {mode}: mean {mean:.3}, 10th-90th percentile {low:.3} to \
                     {high:.3}, {} rewarded of {} rollouts",
                    stats.rewarded, stats.rollouts
                ),
            });
        }
    }
    series
}

/// Renders a chart of `series` over `labels`, `None` when no band is drawn.
fn band_chart(
    caption: &str,
    labels: &[String],
    series: &[BandSeries],
) -> Result<Option<String>, PageError> {
    if series.iter().all(|s| s.bands.is_empty()) {
        return Ok(None);
    }
    let chart = charts::reward_bands(caption, labels, series);
    Ok(Some(chart.render().map_err(render_error)?))
}

/// Returns the slots of the chart of the reward over time, one per
/// period from the first with a train or val reward to the last (the
/// latest [`MAX_PERIODS`]), and their bands; `None` without any.
fn timeline_bands(timeline: &Timeline) -> Option<(Vec<String>, Vec<BandSeries>)> {
    let step = timeline.resolution.seconds() * 1_000_000_000;
    let charted = |period: &&PeriodSummary| {
        CHARTED.iter().any(|(mode, _)| *mode == period.mode) && period.stats.rewarded > 0
    };
    let first = timeline.periods.iter().find(charted)?;
    let last = timeline.periods.iter().rev().find(charted)?;
    let slots = usize::try_from((last.start.0 - first.start.0) / step)
        .unwrap_or(0)
        .saturating_add(1)
        .min(MAX_PERIODS);
    let first_start = Timestamp(last.start.0 - (slots as i64 - 1) * step);
    let label = |start: Timestamp| match timeline.resolution {
        Resolution::Minute => format::clock(start),
        Resolution::Hour => format::time(start).text[5..16].to_owned(),
    };
    let labels = (0..slots)
        .map(|slot| label(Timestamp(first_start.0 + slot as i64 * step)))
        .collect();
    let series = band_series(
        timeline
            .periods
            .iter()
            .filter(|period| (first_start..=last.start).contains(&period.start))
            .map(|period| {
                let slot = ((period.start.0 - first_start.0) / step) as usize;
                let named = format!("{} UTC", label(period.start));
                (slot, period.mode.as_str(), &period.stats, named)
            }),
    );
    Some((labels, series))
}

/// Renders the chart of the reward over time ([`timeline_bands`]).
fn timeline_chart(timeline: &Timeline) -> Result<Option<String>, PageError> {
    let Some((labels, series)) = timeline_bands(timeline) else {
        return Ok(None);
    };
    let unit = match timeline.resolution {
        Resolution::Minute => "minute",
        Resolution::Hour => "hour",
    };
    band_chart(
        &format!(
            "Reward over time: for train and val, by the {unit} the rollouts ended in, the band \
             from the 10th to the 90th percentile and the mean"
        ),
        &labels,
        &series,
    )
}

/// Renders the Training page from one read of the summary and one of the
/// timeline, and the comparison of two versions `compare` chooses.
pub async fn render(sources: &Sources, compare: &CompareQuery) -> Result<Rendered, PageError> {
    let summaries = sources
        .engine
        .training_summary(None, VersionRange::default())
        .await?;
    let timeline = sources
        .engine
        .reward_timeline(None, None, TimeRange::default())
        .await?;
    let mut labels: Vec<String> = Vec::new();
    let mut entries = Vec::new();
    for summary in &summaries {
        let label = version_label(summary);
        if labels.last() != Some(&label) {
            labels.push(label.clone());
        }
        let named = comparison::compared_version(summary)
            .map_or_else(|| format!("Version {label}"), comparison::name_of);
        entries.push((
            labels.len() - 1,
            summary.mode.as_str(),
            &summary.stats,
            named,
        ));
    }
    let chart = band_chart(
        "Reward by policy version: for train and val, the band from the 10th to the 90th \
         percentile and the mean",
        &labels,
        &band_series(entries),
    )?;
    let timeline_chart = timeline_chart(&timeline)?;
    let rows = summaries
        .iter()
        .map(|summary| {
            let stats = &summary.stats;
            // The best rewarded first.
            let listed = RolloutsQuery {
                sort: ("reward".to_owned(), true),
                ..counted_rollouts(summary)
            };
            Row {
                version: version_label(summary),
                resources_id: summary.version.resources_id().to_owned(),
                mode: mode_label(summary).to_owned(),
                rollouts: stats.rollouts,
                rollouts_link: listed.url(&sources.links, None, None),
                success: format!(
                    "{:.1}%",
                    100.0 * stats.succeeded as f64 / stats.rollouts.max(1) as f64
                ),
                rewarded: stats.rewarded,
                mean: format::reward(stats.reward_mean),
                p10: format::reward(stats.reward_p10),
                p50: format::reward(stats.reward_p50),
                p90: format::reward(stats.reward_p90),
            }
        })
        .collect();
    let rows_given = summaries
        .iter()
        .filter(|summary| summary.stats.training_rows > 0 || summary.without_rows.rollouts > 0)
        .map(|summary| {
            let linked = |label: String, count: i64, without: WithoutRowsFilter| {
                let listed = RolloutsQuery {
                    without_rows: Some(without),
                    ..counted_rollouts(summary)
                };
                Linked {
                    label,
                    count,
                    href: listed.url(&sources.links, None, None),
                }
            };
            let without = &summary.without_rows;
            RowsRow {
                version: version_label(summary),
                mode: mode_label(summary).to_owned(),
                rollouts: summary.stats.rollouts,
                training_rows: summary.stats.training_rows,
                without: linked(
                    "no training row".to_owned(),
                    without.rollouts,
                    WithoutRowsFilter::AnyReason,
                ),
                reasons: without
                    .by_reason
                    .iter()
                    .map(|&(reason, count)| {
                        let label = format::no_rows_reason(reason).to_owned();
                        linked(label, count, WithoutRowsFilter::Reason(reason))
                    })
                    .collect(),
            }
        })
        .collect();
    let measures = Measure::ALL
        .into_iter()
        .filter_map(|measure| MeasureTable::of(measure, &summaries))
        .collect();
    let comparison = comparison::render(sources, compare, &summaries).await?;
    let page = TrainingPage {
        rows,
        rows_given,
        measures,
        chart,
        timeline_chart,
        timeline_minutes: timeline.resolution == Resolution::Minute,
        comparison,
    };
    Ok(Rendered {
        title: "Training".to_owned(),
        html: page.render().map_err(render_error)?,
        ..Rendered::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(minute: i64, mode: &str) -> PeriodSummary {
        PeriodSummary {
            start: Timestamp(minute * 60_000_000_000),
            mode: mode.to_owned(),
            stats: RewardStats {
                rollouts: 2,
                rewarded: 1,
                reward_mean: Some(0.5),
                reward_p10: Some(0.5),
                reward_p90: Some(0.5),
                ..RewardStats::default()
            },
        }
    }

    fn slots(series: &[BandSeries]) -> Vec<(&str, Vec<usize>)> {
        series
            .iter()
            .map(|s| (s.name, s.bands.iter().map(|band| band.slot).collect()))
            .collect()
    }

    #[test]
    fn periods_take_their_place_on_a_contiguous_axis() {
        let timeline = Timeline {
            resolution: Resolution::Minute,
            periods: vec![period(0, "train"), period(3, "val"), period(5, "test")],
        };
        let (labels, series) = timeline_bands(&timeline).unwrap();
        assert_eq!(labels, ["00:00", "00:01", "00:02", "00:03"]);
        assert_eq!(slots(&series), [("train", vec![0]), ("val", vec![3])]);
    }

    #[test]
    fn a_long_run_keeps_its_latest_periods() {
        let timeline = Timeline {
            resolution: Resolution::Minute,
            periods: vec![period(0, "train"), period(299, "train"), period(300, "val")],
        };
        let (labels, series) = timeline_bands(&timeline).unwrap();
        assert_eq!(labels.len(), MAX_PERIODS);
        assert_eq!(labels.last().unwrap(), "05:00");
        assert_eq!(
            slots(&series),
            [
                ("train", vec![MAX_PERIODS - 2]),
                ("val", vec![MAX_PERIODS - 1])
            ]
        );
        let unrewarded = Timeline {
            resolution: Resolution::Hour,
            periods: vec![period(0, "test")],
        };
        assert!(timeline_bands(&unrewarded).is_none());
    }
}
