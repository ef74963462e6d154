//! The Training page: is the agent learning? Reward by policy version
//! (resources version) for each mode, as a chart (the 10th to 90th
//! percentile band and the mean of each version, train beside val) and as
//! a table whose rows link to their rollouts; read from the training
//! summary the store keeps in the commit of every change
//! (`lightning_store_core::training`).

use askama::Template;

use super::comparison::{self, CompareQuery};
use crate::charts::{self, BandSeries, RewardBand};
use crate::context::Sources;
use crate::format;
use crate::rendered::render_error;
use crate::rendered::{PageError, Rendered};
use crate::url::{PREFIX, query_value};
use lightning_store_core::engine::VersionRange;
use lightning_store_core::training::VersionSummary;

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

#[derive(Template)]
#[template(path = "training.html")]
struct TrainingPage {
    rows: Vec<Row>,
    /// The chart, when a train or val rollout has a reward.
    chart: Option<String>,
    /// The comparison of two versions, when a version has ended rollouts.
    comparison: Option<String>,
}

/// Returns a version's label: its number, or its resources id when the
/// store does not hold it, or "none".
fn version_label(summary: &VersionSummary) -> String {
    match (summary.version_number, summary.version.as_str()) {
        (Some(number), _) => number.to_string(),
        (None, "") => "none".to_owned(),
        (None, id) => id.to_owned(),
    }
}

/// Renders the Training page from one read of the summary, and the
/// comparison of two versions `compare` chooses.
pub async fn render(sources: &Sources, compare: &CompareQuery) -> Result<Rendered, PageError> {
    let summaries = sources
        .engine
        .training_summary(None, VersionRange::default())
        .await?;
    let mut labels: Vec<String> = Vec::new();
    let mut series: Vec<BandSeries> = CHARTED
        .iter()
        .map(|&(name, class)| BandSeries {
            name,
            class,
            bands: Vec::new(),
        })
        .collect();
    for summary in &summaries {
        let label = version_label(summary);
        if labels.last() != Some(&label) {
            labels.push(label.clone());
        }
        let Some(place) = CHARTED.iter().position(|(mode, _)| *mode == summary.mode) else {
            continue;
        };
        if let (Some(low), Some(mean), Some(high)) =
            (summary.reward_p10, summary.reward_mean, summary.reward_p90)
        {
            series[place].bands.push(RewardBand {
                slot: labels.len() - 1,
                low,
                mean,
                high,
                title: format!(
                    "Version {label}, {}: mean {mean:.3}, 10th-90th percentile {low:.3} to \
                     {high:.3}, {} rewarded of {} rollouts",
                    summary.mode, summary.rewarded, summary.rollouts
                ),
            });
        }
    }
    let chart = if series.iter().any(|s| !s.bands.is_empty()) {
        let chart = charts::reward_bands(
            "Reward by policy version: for train and val, the band from the 10th to the 90th \
             percentile and the mean",
            &labels,
            &series,
        );
        Some(chart.render().map_err(render_error)?)
    } else {
        None
    };
    let rows = summaries
        .iter()
        .map(|summary| {
            let mode = if summary.mode.is_empty() {
                "none"
            } else {
                summary.mode.as_str()
            };
            // The best rewarded first.
            let mut link = format!(
                "{PREFIX}/rollouts?status=succeeded&status=failed&mode={mode}&sort=-reward"
            );
            if !summary.version.is_empty() {
                link.push_str(&format!("&resources={}", query_value(&summary.version)));
            }
            Row {
                version: version_label(summary),
                resources_id: summary.version.clone(),
                mode: mode.to_owned(),
                rollouts: summary.rollouts,
                rollouts_link: sources.links.to(&link),
                success: format!(
                    "{:.1}%",
                    100.0 * summary.succeeded as f64 / summary.rollouts.max(1) as f64
                ),
                rewarded: summary.rewarded,
                mean: format::reward(summary.reward_mean),
                p10: format::reward(summary.reward_p10),
                p50: format::reward(summary.reward_p50),
                p90: format::reward(summary.reward_p90),
            }
        })
        .collect();
    let comparison = comparison::render(sources, compare, &summaries).await?;
    let page = TrainingPage {
        rows,
        chart,
        comparison,
    };
    Ok(Rendered {
        title: "Training".to_owned(),
        html: page.render().map_err(render_error)?,
        ..Rendered::default()
    })
}
