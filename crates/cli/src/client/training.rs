//! `lightning-store training`: is the training learning? Reward by policy
//! version (`GetTrainingSummary`): for each resources version and mode,
//! the rollouts that ended, how many succeeded, and their reward's mean and
//! percentiles.

use serde_json::json;

use super::args::TrainingArgs;
use super::error::ClientResult;
use super::json::{mode_name, print_json};
use super::session::Session;
use super::text::{list_table, or_dash, render};
use lightning_store_proto as pb;

pub(super) async fn training(mut s: Session, args: TrainingArgs) -> ClientResult {
    let versions = s
        .client
        .get_training_summary(pb::GetTrainingSummaryRequest {
            mode: args.mode.unwrap_or(pb::RolloutMode::Unspecified) as i32,
            version_from: args.from_version,
            version_to: args.to_version,
        })
        .await?
        .into_inner()
        .versions;
    if s.json {
        let rows = versions
            .iter()
            .map(|v| {
                json!({
                    "version": v.version,
                    "resources_id": v.resources_id,
                    "mode": mode_name(v.mode),
                    "rollouts": v.rollouts,
                    "succeeded": v.succeeded,
                    "rewarded": v.rewarded,
                    "reward_mean": v.reward_mean,
                    "reward_p10": v.reward_p10,
                    "reward_p50": v.reward_p50,
                    "reward_p90": v.reward_p90,
                })
            })
            .collect();
        return print_json(&serde_json::Value::Array(rows));
    }
    if versions.is_empty() {
        out!("no rollouts ended as succeeded or failed");
        return Ok(());
    }
    let mut table = list_table(&[
        "VERSION",
        "RESOURCES",
        "MODE",
        "ROLLOUTS",
        "SUCCESS",
        "REWARDED",
        "MEAN",
        "P10",
        "P50",
        "P90",
    ]);
    for v in &versions {
        let reward =
            |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |r| format!("{r:.4}"));
        table.add_row(vec![
            v.version.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            or_dash(Some(v.resources_id.as_str()).filter(|id| !id.is_empty())),
            or_dash(mode_name(v.mode).as_deref()),
            v.rollouts.to_string(),
            format!(
                "{:.1}%",
                100.0 * v.succeeded as f64 / v.rollouts.max(1) as f64
            ),
            v.rewarded.to_string(),
            reward(v.reward_mean),
            reward(v.reward_p10),
            reward(v.reward_p50),
            reward(v.reward_p90),
        ]);
    }
    out!("{}", render(table));
    Ok(())
}
