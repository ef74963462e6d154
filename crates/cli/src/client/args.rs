//! The command line of the client subcommands: their arguments, and the
//! parsers that turn text into the protocol's values.

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::connection::ShortName;
use lightning_store_proto as pb;

/// Sorting and pagination of a list.
#[derive(Debug, clap::Args)]
pub struct PageArgs {
    /// Maximum number of items to show (default: all).
    #[arg(long)]
    pub limit: Option<i64>,
    /// Number of matching items to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: i64,
    /// Field to sort by (default: the server's order).
    #[arg(long)]
    pub sort_by: Option<String>,
    /// Sorts in descending order.
    #[arg(long)]
    pub desc: bool,
}

/// Arguments of `rollouts`.
#[derive(Debug, clap::Args)]
pub struct RolloutsArgs {
    /// Keeps rollouts with one of these statuses (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = rollout_status_arg())]
    pub status: Vec<pb::RolloutStatus>,
    /// Keeps rollouts whose id contains this text.
    #[arg(long)]
    pub id_contains: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// The file format `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// JSON Lines: one record per line.
    Jsonl,
    /// JSON Lines compressed with gzip.
    #[value(name = "jsonl.gz")]
    JsonlGz,
    /// Apache Parquet, the layout's schema (docs/export.md#parquet).
    Parquet,
}

impl From<ExportFormat> for lightning_store_formats::Format {
    fn from(format: ExportFormat) -> Self {
        match format {
            ExportFormat::Jsonl => Self::Jsonl,
            ExportFormat::JsonlGz => Self::JsonlGz,
            ExportFormat::Parquet => Self::Parquet,
        }
    }
}

/// The records' layout `export` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportLayoutArg {
    /// One record per rollout, its attempts and spans or events nested.
    Rollouts,
    /// Training rows, skipped model calls, or why a rollout gives none.
    Triplets,
    /// Each rollout as one conversation (none without an answered call).
    Messages,
}

/// Arguments of `export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Writes the records to this file (default: standard output), with a
    /// progress line on standard error.
    #[arg(long, short)]
    pub output: Option<std::path::PathBuf>,
    /// The file format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: ExportFormat,
    /// The records' layout.
    #[arg(long, value_enum, default_value = "rollouts")]
    pub layout: ExportLayoutArg,
    /// Keeps rollouts with one of these statuses (terminal ones only;
    /// repeatable or comma-separated; default: every terminal status).
    #[arg(long, value_delimiter = ',', value_parser = rollout_status_arg())]
    pub status: Vec<pb::RolloutStatus>,
    /// Keeps rollouts with one of these modes (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = mode_arg())]
    pub mode: Vec<pb::RolloutMode>,
    /// Keeps rollouts created at or after this time (RFC 3339, e.g. `2026-01-31T12:00:00Z`).
    #[arg(long, value_parser = timestamp_arg)]
    pub from: Option<prost_types::Timestamp>,
    /// Keeps rollouts created before this time (RFC 3339).
    #[arg(long, value_parser = timestamp_arg)]
    pub until: Option<prost_types::Timestamp>,
    /// Keeps rollouts that ended at or after this time (RFC 3339).
    #[arg(long, value_parser = timestamp_arg)]
    pub ended_from: Option<prost_types::Timestamp>,
    /// Keeps rollouts that ended before this time (RFC 3339).
    #[arg(long, value_parser = timestamp_arg)]
    pub ended_until: Option<prost_types::Timestamp>,
    /// Keeps rollouts of this resources version.
    #[arg(long)]
    pub resources_id: Option<String>,
    /// Keeps rollouts with an attempt on this worker.
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Keeps rollouts whose id contains this text.
    #[arg(long)]
    pub id_contains: Option<String>,
    /// Continues an interrupted export into `--output`: after the file's
    /// last complete record (a torn last line is cut off), with the same
    /// selection. Give the same filters.
    #[arg(long, requires = "output")]
    pub resume: bool,
}

fn timestamp_arg(text: &str) -> Result<prost_types::Timestamp, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not an RFC 3339 time (like 2026-01-31T12:00:00Z)"))
}

/// Arguments of `rollout`.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// The rollout id.
    pub rollout_id: String,
}

/// Arguments of `attempts`.
#[derive(Debug, clap::Args)]
pub struct AttemptsArgs {
    /// The rollout id.
    pub rollout_id: String,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Arguments of `spans`.
#[derive(Debug, clap::Args)]
pub struct SpansArgs {
    /// The rollout id.
    pub rollout_id: String,
    /// Keeps the spans of this attempt id, or of the latest attempt with `latest`.
    #[arg(long, value_name = "ATTEMPT_ID|latest")]
    pub attempt: Option<String>,
    /// Keeps spans whose name contains this text.
    #[arg(long)]
    pub name_contains: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Arguments of `resources`.
#[derive(Debug, clap::Args)]
pub struct ResourcesArgs {
    /// Shows this snapshot instead of listing all of them.
    #[arg(conflicts_with = "latest")]
    pub resources_id: Option<String>,
    /// Shows the latest snapshot.
    #[arg(long)]
    pub latest: bool,
}

/// Arguments of `workers`.
#[derive(Debug, clap::Args)]
pub struct WorkersArgs {
    /// Shows this worker instead of listing all of them.
    pub worker_id: Option<String>,
}

/// Arguments of `training`.
#[derive(Debug, clap::Args)]
pub struct TrainingArgs {
    /// Only rollouts of this mode (default: every mode, each on its own rows).
    #[arg(long, value_parser = mode_arg())]
    pub mode: Option<pb::RolloutMode>,
    /// Only versions numbered at least this (a version's number is its
    /// resources snapshot's place in creation order, from 1, or a 1.x
    /// model version).
    #[arg(long)]
    pub from_version: Option<i64>,
    /// Only versions numbered at most this.
    #[arg(long)]
    pub to_version: Option<i64>,
    /// The same numbers over time (`GetRewardTimeline`): one row per
    /// period (by when the rollouts ended) and mode, instead of per version.
    #[arg(long, conflicts_with_all = ["from_version", "to_version"])]
    pub over_time: bool,
    /// With `--over-time`: the periods' length (default: minutes when the
    /// rollouts ended less than three hours apart, hours otherwise).
    #[arg(long, requires = "over_time", value_enum)]
    pub resolution: Option<ResolutionArg>,
}

/// The length of a period of `training --over-time`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ResolutionArg {
    Minute,
    Hour,
}

impl From<ResolutionArg> for pb::TimelineResolution {
    fn from(resolution: ResolutionArg) -> Self {
        match resolution {
            ResolutionArg::Minute => pb::TimelineResolution::Minute,
            ResolutionArg::Hour => pb::TimelineResolution::Hour,
        }
    }
}

/// Arguments of `enqueue`.
#[derive(Debug, clap::Args)]
pub struct EnqueueArgs {
    /// Task input as JSON text.
    #[arg(long)]
    pub input: String,
    /// Split of the rollout.
    #[arg(long, value_parser = mode_arg())]
    pub mode: Option<pb::RolloutMode>,
    /// Metadata as a JSON object.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Maximum number of attempts (default 1).
    #[arg(long)]
    pub max_attempts: Option<i64>,
    /// Attempt statuses that requeue the rollout for another attempt (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = retry_status_arg())]
    pub retry_on: Vec<pb::AttemptStatus>,
    /// Maximum run time of one attempt in seconds.
    #[arg(long)]
    pub timeout_secs: Option<f64>,
    /// Maximum time without a heartbeat in seconds.
    #[arg(long)]
    pub unresponsive_secs: Option<f64>,
    /// Resources snapshot to run with (default: the latest at creation time).
    #[arg(long)]
    pub resources_id: Option<String>,
}

/// Arguments of `start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The rollout to create.
    #[command(flatten)]
    pub rollout: EnqueueArgs,
    /// Worker that runs the attempt.
    #[arg(long)]
    pub worker_id: Option<String>,
}

/// Arguments of `dequeue`.
#[derive(Debug, clap::Args)]
pub struct DequeueArgs {
    /// Worker claiming the rollout.
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Seconds to wait for a rollout while the queue is empty.
    #[arg(long, default_value_t = 0.0)]
    pub wait_secs: f64,
}

/// Arguments of `add-span`.
#[derive(Debug, clap::Args)]
pub struct AddSpanArgs {
    /// The rollout id.
    pub rollout_id: String,
    /// The attempt id, or `latest` for the rollout's latest attempt.
    #[arg(value_name = "ATTEMPT_ID|latest")]
    pub attempt_id: String,
    /// Span name.
    #[arg(long)]
    pub name: String,
    /// Attribute as key=value; the value is read as an integer, a float, a
    /// boolean or else a string (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_attribute)]
    pub attributes: Vec<pb::KeyValue>,
}

/// Arguments of `complete`.
#[derive(Debug, clap::Args)]
pub struct CompleteArgs {
    /// The rollout ids; several are completed in one UpdateAttempts call
    /// (all or none).
    #[arg(required = true, num_args = 1..)]
    pub rollout_ids: Vec<String>,
    /// The attempt to complete (default: the latest one); with one rollout id only.
    #[arg(long, default_value = "latest")]
    pub attempt_id: String,
    /// Final status of the attempt.
    #[arg(long, default_value = "succeeded", value_parser = final_status_arg())]
    pub status: pb::AttemptStatus,
}

/// Parses one of `values` by its short name (`queuing`, `train`), listing
/// them in the help and in the error for any other text.
fn choice<T: ShortName + Send + Sync>(values: Vec<T>) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(values.into_iter().map(T::short_name))
        .try_map(|text| T::from_short_name(&text).ok_or("unexpected value"))
}

fn rollout_status_arg() -> impl TypedValueParser<Value = pb::RolloutStatus> {
    choice(pb::RolloutStatus::specified())
}

fn mode_arg() -> impl TypedValueParser<Value = pb::RolloutMode> {
    choice(pb::RolloutMode::specified())
}

/// The statuses that can requeue a rollout.
fn retry_status_arg() -> impl TypedValueParser<Value = pb::AttemptStatus> {
    use pb::AttemptStatus as A;
    choice(vec![A::Failed, A::Timeout, A::Unresponsive])
}

/// The statuses a client may finish an attempt with.
fn final_status_arg() -> impl TypedValueParser<Value = pb::AttemptStatus> {
    use pb::AttemptStatus as A;
    choice(vec![A::Succeeded, A::Failed])
}

/// Parses `key=value`; the value becomes an integer, a finite float, a
/// boolean or else a string.
pub(super) fn parse_attribute(text: &str) -> Result<pb::KeyValue, String> {
    use pb::attribute_value::Value as V;
    let (key, raw) = text
        .split_once('=')
        .filter(|(key, _)| !key.is_empty())
        .ok_or_else(|| format!("expected key=value, got `{text}`"))?;
    let value = if let Ok(i) = raw.parse::<i64>() {
        V::IntValue(i)
    } else if let Some(f) = raw.parse::<f64>().ok().filter(|f| f.is_finite()) {
        V::DoubleValue(f)
    } else if let Ok(b) = raw.parse::<bool>() {
        V::BoolValue(b)
    } else {
        V::StringValue(raw.to_owned())
    };
    Ok(pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue { value: Some(value) }),
    })
}

pub(super) fn page_request(page: PageArgs) -> pb::PageRequest {
    pb::PageRequest {
        sort_by: page.sort_by.unwrap_or_default(),
        sort_order: if page.desc {
            pb::SortOrder::Desc
        } else {
            pb::SortOrder::Asc
        } as i32,
        limit: page.limit,
        offset: page.offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_modes_parse_by_short_name_only() {
        let status = |text: &str| {
            rollout_status_arg().parse_ref(
                &clap::Command::new("t"),
                None,
                std::ffi::OsStr::new(text),
            )
        };
        assert_eq!(status("requeuing").unwrap(), pb::RolloutStatus::Requeuing);
        assert!(status("unspecified").is_err());
        assert!(status("ROLLOUT_STATUS_QUEUING").is_err());
        let retry = |text: &str| {
            retry_status_arg().parse_ref(&clap::Command::new("t"), None, std::ffi::OsStr::new(text))
        };
        assert_eq!(retry("timeout").unwrap(), pb::AttemptStatus::Timeout);
        assert!(retry("succeeded").is_err());
        let mode =
            mode_arg().parse_ref(&clap::Command::new("t"), None, std::ffi::OsStr::new("val"));
        assert_eq!(mode.unwrap(), pb::RolloutMode::Val);
    }

    #[test]
    fn attributes_parse_as_int_float_bool_or_string() {
        use pb::attribute_value::Value as V;
        let value = |text: &str| parse_attribute(text).unwrap().value.unwrap().value.unwrap();
        assert_eq!(value("n=3"), V::IntValue(3));
        assert_eq!(value("r=1.5"), V::DoubleValue(1.5));
        assert_eq!(value("ok=true"), V::BoolValue(true));
        assert_eq!(value("s=hi=there"), V::StringValue("hi=there".to_owned()));
        assert_eq!(value("s=inf"), V::StringValue("inf".to_owned()));
        assert!(parse_attribute("novalue").is_err());
        assert!(parse_attribute("=1").is_err());
    }
}

/// The arguments of `namespaces create`.
#[derive(Debug, clap::Args)]
pub struct NamespaceCreateArgs {
    /// Its name: 1 to 63 lowercase letters, digits and hyphens, beginning
    /// and ending with a letter or digit.
    pub name: String,
    /// Deletes the spans of its rollouts that finished longer ago than this
    /// (`7d`, `12h`; default: the server's retention).
    #[arg(long, value_parser = crate::duration::parse_positive)]
    pub span_retention_age: Option<Duration>,
    /// Deletes the spans of the rollouts that finished first while its
    /// spans take more than this many bytes (default: the server's
    /// retention).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub span_retention_max_bytes: Option<i64>,
    /// Refuses (RESOURCE_EXHAUSTED) an enqueue that would leave more than
    /// this many rollouts waiting in its queue (default: no limit).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub max_queued_rollouts: Option<i64>,
    /// Refuses (RESOURCE_EXHAUSTED) a write of spans that would leave more
    /// than this many spans stored (default: no limit).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub max_spans: Option<i64>,
    /// Refuses (RESOURCE_EXHAUSTED) a write of spans that would leave more
    /// than this many bytes of spans stored, as span retention measures
    /// them (default: no limit).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub max_span_bytes: Option<i64>,
}

/// The arguments of `namespaces delete`.
#[derive(Debug, clap::Args)]
pub struct NamespaceDeleteArgs {
    /// The namespace to delete.
    pub name: String,
}
