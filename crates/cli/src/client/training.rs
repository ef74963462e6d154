//! `lightning-store training`: is the training learning? Reward by policy
//! version (`GetTrainingSummary`): for each resources version and mode,
//! the rollouts that ended, how many succeeded, and their reward's mean and
//! percentiles, and the training rows the 1.x trainer builds from them
//! (with the rollouts that give none, by reason), how long the rollouts
//! took, their tokens and their model calls' latency; with `--over-time`, the
//! reward by the minute or hour the rollouts ended in (`GetRewardTimeline`).

use serde_json::{Value, json};

use super::args::TrainingArgs;
use super::error::ClientResult;
use super::json::{mode_name, print_json};
use super::session::Session;
use super::text::{list_table, or_dash, render, time_cell};
use crate::connection::ShortName;
use lightning_store_proto as pb;

/// The numbers of a set of counted rollouts, as a version's summary and a
/// period's both give them.
struct Stats {
    rollouts: i64,
    succeeded: i64,
    rewarded: i64,
    /// Mean, 10th, 50th and 90th percentiles.
    rewards: [Option<f64>; 4],
}

/// The columns of [`Stats`], after the columns naming the row.
const STATS_HEADERS: [&str; 7] = [
    "ROLLOUTS", "SUCCESS", "REWARDED", "MEAN", "P10", "P50", "P90",
];

impl Stats {
    fn json(&self, mut named: serde_json::Map<String, Value>) -> Value {
        let [mean, p10, p50, p90] = self.rewards;
        named.extend([
            ("rollouts".to_owned(), json!(self.rollouts)),
            ("succeeded".to_owned(), json!(self.succeeded)),
            ("rewarded".to_owned(), json!(self.rewarded)),
            ("reward_mean".to_owned(), json!(mean)),
            ("reward_p10".to_owned(), json!(p10)),
            ("reward_p50".to_owned(), json!(p50)),
            ("reward_p90".to_owned(), json!(p90)),
        ]);
        Value::Object(named)
    }

    fn cells(&self, mut named: Vec<String>) -> Vec<String> {
        named.extend([
            self.rollouts.to_string(),
            format!(
                "{:.1}%",
                100.0 * self.succeeded as f64 / self.rollouts.max(1) as f64
            ),
            self.rewarded.to_string(),
        ]);
        named.extend(
            self.rewards
                .iter()
                .map(|value| value.map_or_else(|| "-".to_owned(), |r| format!("{r:.4}"))),
        );
        named
    }
}

impl From<&pb::VersionSummary> for Stats {
    fn from(v: &pb::VersionSummary) -> Self {
        Self {
            rollouts: v.rollouts,
            succeeded: v.succeeded,
            rewarded: v.rewarded,
            rewards: [v.reward_mean, v.reward_p10, v.reward_p50, v.reward_p90],
        }
    }
}

impl From<&pb::PeriodSummary> for Stats {
    fn from(p: &pb::PeriodSummary) -> Self {
        Self {
            rollouts: p.rollouts,
            succeeded: p.succeeded,
            rewarded: p.rewarded,
            rewards: [p.reward_mean, p.reward_p10, p.reward_p50, p.reward_p90],
        }
    }
}

/// Returns a JSON object of `fields`, in their order.
fn object<const N: usize>(fields: [(&str, Value); N]) -> serde_json::Map<String, Value> {
    fields
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
}

/// What follows a row's numbers: a JSON field, and its cell (`None` for a
/// field shown in the cell of another).
type After = (&'static str, Value, Option<String>);

/// One row to print: its naming fields as JSON and as cells, its numbers,
/// and what follows them.
struct Line {
    named: serde_json::Map<String, Value>,
    cells: Vec<String>,
    stats: Stats,
    after: Vec<After>,
}

/// Prints `rows` as JSON or as a table headed by `headers`, the numbers'
/// and `after`.
fn print(json: bool, headers: &[&str], after: &[&str], rows: Vec<Line>) -> ClientResult {
    if json {
        let rows = rows
            .into_iter()
            .map(|line| {
                let mut object = line.stats.json(line.named);
                if let Value::Object(fields) = &mut object {
                    fields.extend(line.after.into_iter().map(|(k, v, _)| (k.to_owned(), v)));
                }
                object
            })
            .collect();
        return print_json(&Value::Array(rows));
    }
    if rows.is_empty() {
        out!("no rollouts ended as succeeded or failed");
        return Ok(());
    }
    let headers: Vec<&str> = headers
        .iter()
        .chain(&STATS_HEADERS)
        .chain(after)
        .copied()
        .collect();
    let mut table = list_table(&headers);
    for line in rows {
        let mut cells = line.stats.cells(line.cells);
        cells.extend(line.after.into_iter().filter_map(|(_, _, cell)| cell));
        table.add_row(cells);
    }
    out!("{}", render(table));
    Ok(())
}

/// What a version's 1.x rollouts gave their trainer: the training rows,
/// the rollouts without any, and those by reason (`reason: n`), as JSON
/// fields and cells.
fn rows_given(v: &pb::VersionSummary) -> Vec<After> {
    let reasons: Vec<(String, i64)> = v
        .without_rows_by_reason
        .iter()
        .map(|count| {
            let reason = pb::NoTrainingRowsReason::name_of(count.reason);
            (reason, count.rollouts)
        })
        .collect();
    let why = reasons
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let by_reason: serde_json::Map<String, Value> = reasons
        .into_iter()
        .map(|(reason, n)| (reason, json!(n)))
        .collect();
    vec![
        (
            "training_rows",
            json!(v.training_rows),
            Some(v.training_rows.to_string()),
        ),
        (
            "rollouts_without_rows",
            json!(v.rollouts_without_rows),
            Some(v.rollouts_without_rows.to_string()),
        ),
        (
            "without_rows_by_reason",
            Value::Object(by_reason),
            Some(or_dash(Some(why.as_str()).filter(|why| !why.is_empty()))),
        ),
    ]
}

/// A distribution as JSON.
fn distribution_json(d: &pb::Distribution) -> Value {
    json!({
        "count": d.count,
        "mean": d.mean,
        "p10": d.p10,
        "p50": d.p50,
        "p90": d.p90,
    })
}

/// A number of seconds as a cell: whole milliseconds under a second.
fn seconds(value: Option<f64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(s) if s < 1.0 => format!("{}ms", (s * 1000.0).round()),
        Some(s) => format!("{s}s"),
    }
}

/// What a version's rollouts measured, each as a JSON field (the
/// distribution) and a cell: how long they took and their model calls'
/// latency (median and 90th percentile), and their tokens (the means of
/// the prompt's and the response's, to the token).
fn measures(v: &pb::VersionSummary) -> Vec<After> {
    let of = |d: Option<pb::Distribution>| d.unwrap_or_default();
    let (durations, latency) = (of(v.duration_seconds), of(v.model_call_latency_seconds));
    let (prompt, response) = (of(v.prompt_tokens), of(v.response_tokens));
    let timed = |d: &pb::Distribution| {
        Some(match d.count {
            0 => "-".to_owned(),
            _ => format!("{}/{}", seconds(d.p50), seconds(d.p90)),
        })
    };
    let tokens = |d: &pb::Distribution| {
        d.mean
            .map_or_else(|| "-".to_owned(), |n| n.round().to_string())
    };
    let tokens_cell = match prompt.count + response.count {
        0 => "-".to_owned(),
        _ => format!("{}/{}", tokens(&prompt), tokens(&response)),
    };
    vec![
        (
            "duration_seconds",
            distribution_json(&durations),
            timed(&durations),
        ),
        (
            "prompt_tokens",
            distribution_json(&prompt),
            Some(tokens_cell),
        ),
        ("response_tokens", distribution_json(&response), None),
        (
            "model_call_latency_seconds",
            distribution_json(&latency),
            timed(&latency),
        ),
    ]
}

pub(super) async fn training(mut s: Session, args: TrainingArgs) -> ClientResult {
    let mode = args.mode.unwrap_or(pb::RolloutMode::Unspecified) as i32;
    if args.over_time {
        let timeline = s
            .client
            .get_reward_timeline(pb::GetRewardTimelineRequest {
                mode,
                resolution: args
                    .resolution
                    .map_or(pb::TimelineResolution::Unspecified, Into::into)
                    as i32,
                ..Default::default()
            })
            .await?
            .into_inner();
        let (resolution, period) = match pb::TimelineResolution::try_from(timeline.resolution) {
            Ok(pb::TimelineResolution::Hour) => ("hour", "HOUR"),
            _ => ("minute", "MINUTE"),
        };
        let rows = timeline
            .periods
            .iter()
            .map(|p| {
                let start = time_cell(p.start.as_ref());
                let named = object([
                    ("start", json!(start)),
                    ("resolution", json!(resolution)),
                    ("mode", json!(mode_name(p.mode))),
                ]);
                let cells = vec![start, or_dash(mode_name(p.mode).as_deref())];
                Line {
                    named,
                    cells,
                    stats: Stats::from(p),
                    after: Vec::new(),
                }
            })
            .collect();
        return print(s.json, &[period, "MODE"], &[], rows);
    }
    let versions = s
        .client
        .get_training_summary(pb::GetTrainingSummaryRequest {
            mode,
            version_from: args.from_version,
            version_to: args.to_version,
        })
        .await?
        .into_inner()
        .versions;
    let rows = versions
        .iter()
        .map(|v| {
            let named = object([
                ("version", json!(v.version)),
                ("resources_id", json!(v.resources_id)),
                ("model_version", json!(v.model_version)),
                ("mode", json!(mode_name(v.mode))),
            ]);
            let number = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
            let cells = vec![
                number(v.version),
                or_dash(Some(v.resources_id.as_str()).filter(|id| !id.is_empty())),
                number(v.model_version),
                or_dash(mode_name(v.mode).as_deref()),
            ];
            Line {
                named,
                cells,
                stats: Stats::from(v),
                after: [rows_given(v), measures(v)].concat(),
            }
        })
        .collect();
    let after = [
        "ROWS",
        "NO ROWS",
        "WHY NONE",
        "DURATION P50/P90",
        "MEAN TOKENS IN/OUT",
        "CALL P50/P90",
    ];
    print(
        s.json,
        &["VERSION", "RESOURCES", "MODEL", "MODE"],
        &after,
        rows,
    )
}
