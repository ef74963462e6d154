//! Conversions between protobuf messages and domain types. Every check of
//! caller input that does not need the store happens here; a failed
//! conversion is an INVALID_ARGUMENT error and nothing is written.

use std::collections::{BTreeMap, HashMap};

use lightning_store_core::comparison::{Comparison, DEFAULT_TASKS, TaskRewards};
use lightning_store_core::distribution::Distribution;
use lightning_store_core::engine::{ComparedVersion, VersionRange};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::{
    self as m, AttemptStatus, Json, RolloutMode, RolloutStatus, WorkerStatus,
};
use lightning_store_core::model::{MaxAttempts, RetryCondition, Seconds, Statistics};
use lightning_store_core::overview::{Failure, MinuteCounts};
use lightning_store_core::query::{FilterLogic, Page, Paged, TimeRange, WithoutRowsFilter};
use lightning_store_core::training::measure::Measure;
use lightning_store_core::training::{NoRowsReason, Resolution, Timeline, VersionSummary};
use lightning_store_proto as pb;

mod namespaces;
mod spans;
mod time;

pub use self::namespaces::{namespace_to_proto, quotas_from_proto, retention_from_proto};
pub use self::time::{
    duration_from_proto, opt_time, opt_timestamp_from_proto, time_range_from_proto,
    timestamp_from_proto, timestamp_to_proto,
};
pub use spans::{span_from_proto, span_to_proto};

/// Converts a namespace's (or the store's) statistics to protobuf.
pub fn statistics_to_proto(stats: Statistics) -> pb::GetStatisticsResponse {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let counts = stats.counts;
    pb::GetStatisticsResponse {
        name: stats.name,
        total_rollouts: count(counts.rollouts),
        total_attempts: count(counts.attempts),
        total_spans: count(counts.spans),
        total_resources: count(counts.resources),
        total_workers: count(counts.workers),
        uptime_seconds: stats.uptime_seconds,
        queued_rollouts: count(counts.queued),
        total_span_bytes: count(counts.span_bytes),
        evicted_rollouts: count(counts.evicted_rollouts),
        evicted_spans: count(counts.evicted_spans),
        evicted_span_bytes: count(counts.evicted_span_bytes),
        rollouts_by_status: status_counts(RolloutStatus::ALL, &counts.rollouts_by_status),
        attempts_by_status: status_counts(AttemptStatus::ALL, &counts.attempts_by_status),
        oldest_queued_time: counts.oldest_queued_time.map(timestamp_to_proto),
        oldest_queued_rollout_id: counts.oldest_queued_rollout_id.unwrap_or_default(),
    }
}

/// Converts per-status counts to a map keyed by status name, with every
/// status of `all` present (zero when absent from `counts`).
pub fn status_counts<S: Copy + Ord + std::fmt::Display>(
    all: &[S],
    counts: &BTreeMap<S, u64>,
) -> HashMap<String, i64> {
    all.iter()
        .map(|status| {
            let count = counts.get(status).copied().unwrap_or(0);
            (status.to_string(), i64::try_from(count).unwrap_or(i64::MAX))
        })
        .collect()
}

/// Parses JSON text; an empty string yields `empty`.
pub fn json_from_text(field: &str, text: &str, empty: Json) -> StoreResult<Json> {
    if text.is_empty() {
        return Ok(empty);
    }
    serde_json::from_str(text)
        .map_err(|e| StoreError::invalid(format!("{field} is not valid JSON: {e}")))
}

/// Renders JSON text.
pub fn json_to_text(value: &Json) -> String {
    value.to_string()
}

/// A domain enum with a protobuf twin: its wire number and back. (A trait of
/// this crate, since both enums live in other crates.)
pub trait ProtoEnum: Sized {
    /// Returns the protobuf number of the value.
    fn to_proto(self) -> i32;
    /// Converts the protobuf value, rejecting UNSPECIFIED and unknown numbers.
    fn from_proto(value: i32) -> StoreResult<Self>;
}

macro_rules! enum_conversions {
    ($domain:ident, $proto:path, $field:literal, { $($variant:ident),+ $(,)? }) => {
        impl ProtoEnum for $domain {
            fn to_proto(self) -> i32 {
                (match self { $($domain::$variant => <$proto>::$variant),+ }) as i32
            }

            fn from_proto(value: i32) -> StoreResult<Self> {
                match <$proto>::try_from(value) {
                    $(Ok(<$proto>::$variant) => Ok($domain::$variant),)+
                    _ => Err(StoreError::invalid(format!(concat!("invalid ", $field, ": {}"), value))),
                }
            }
        }
    };
}

enum_conversions!(RolloutStatus, pb::RolloutStatus, "rollout status", {
    Queuing, Preparing, Running, Failed, Succeeded, Cancelled, Requeuing
});
enum_conversions!(AttemptStatus, pb::AttemptStatus, "attempt status", {
    Preparing, Running, Failed, Succeeded, Unresponsive, Timeout
});
enum_conversions!(WorkerStatus, pb::WorkerStatus, "worker status", {
    Idle, Busy, Unknown, Lost
});

/// Converts a mode; UNSPECIFIED means none.
pub fn mode_from_proto(value: i32) -> StoreResult<Option<RolloutMode>> {
    match pb::RolloutMode::try_from(value) {
        Ok(pb::RolloutMode::Unspecified) => Ok(None),
        Ok(pb::RolloutMode::Train) => Ok(Some(RolloutMode::Train)),
        Ok(pb::RolloutMode::Val) => Ok(Some(RolloutMode::Val)),
        Ok(pb::RolloutMode::Test) => Ok(Some(RolloutMode::Test)),
        Err(_) => Err(StoreError::invalid(format!(
            "invalid rollout mode: {value}"
        ))),
    }
}

fn mode_to_proto(mode: Option<RolloutMode>) -> pb::RolloutMode {
    match mode {
        None => pb::RolloutMode::Unspecified,
        Some(RolloutMode::Train) => pb::RolloutMode::Train,
        Some(RolloutMode::Val) => pb::RolloutMode::Val,
        Some(RolloutMode::Test) => pb::RolloutMode::Test,
    }
}

/// Converts a filter logic.
pub fn filter_logic_from_proto(value: i32) -> StoreResult<FilterLogic> {
    match pb::FilterLogic::try_from(value) {
        Ok(pb::FilterLogic::Unspecified | pb::FilterLogic::And) => Ok(FilterLogic::And),
        Ok(pb::FilterLogic::Or) => Ok(FilterLogic::Or),
        Err(_) => Err(StoreError::invalid(format!(
            "invalid filter_logic: {value}"
        ))),
    }
}

/// Converts a page request; absent means defaults.
pub fn page_from_proto(page: Option<&pb::PageRequest>) -> StoreResult<Page> {
    let Some(page) = page else {
        return Ok(Page::default());
    };
    let descending = match pb::SortOrder::try_from(page.sort_order) {
        Ok(pb::SortOrder::Unspecified | pb::SortOrder::Asc) => false,
        Ok(pb::SortOrder::Desc) => true,
        Err(_) => {
            return Err(StoreError::invalid(format!(
                "invalid sort_order: {}",
                page.sort_order
            )));
        }
    };
    let limit = match page.limit {
        None | Some(-1) => None,
        Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        Some(n) => {
            return Err(StoreError::invalid(format!(
                "limit must be -1 or >= 0, got {n}"
            )));
        }
    };
    if page.offset < 0 {
        return Err(StoreError::invalid(format!(
            "offset must be >= 0, got {}",
            page.offset
        )));
    }
    Ok(Page {
        sort_by: (!page.sort_by.is_empty()).then(|| page.sort_by.clone()),
        descending,
        limit,
        offset: usize::try_from(page.offset).unwrap_or(usize::MAX),
    })
}

/// Returns (limit, offset, total) of a page for a response.
pub fn page_bounds<T>(page: &Paged<T>) -> (i64, i64, i64) {
    let wide = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    (
        page.limit.map_or(-1, wide),
        wide(page.offset),
        wide(page.total),
    )
}

/// Converts a rollout configuration by the core's rules of its values
/// ([`lightning_store_core::model::RolloutConfig`]); absent means the defaults.
pub fn config_from_proto(config: Option<&pb::RolloutConfig>) -> StoreResult<m::RolloutConfig> {
    let Some(config) = config else {
        return Ok(m::RolloutConfig::default());
    };
    let seconds = |field: &str, value: Option<f64>| {
        value
            .map(|s| Seconds::new(s).map_err(|e| e.in_field(&format!("config.{field}"))))
            .transpose()
    };
    let retry_condition = config
        .retry_condition
        .iter()
        .map(|&s| AttemptStatus::from_proto(s))
        .collect::<StoreResult<_>>()?;
    Ok(m::RolloutConfig {
        timeout_seconds: seconds("timeout_seconds", config.timeout_seconds)?,
        unresponsive_seconds: seconds("unresponsive_seconds", config.unresponsive_seconds)?,
        max_attempts: MaxAttempts::parse("config.max_attempts", config.max_attempts.unwrap_or(1))?,
        retry_condition: RetryCondition::parse("config.retry_condition", retry_condition)?,
    })
}

fn config_to_proto(config: &m::RolloutConfig) -> pb::RolloutConfig {
    pb::RolloutConfig {
        timeout_seconds: config.timeout_seconds.map(Seconds::get),
        unresponsive_seconds: config.unresponsive_seconds.map(Seconds::get),
        max_attempts: Some(i64::from(config.max_attempts.get())),
        retry_condition: config
            .retry_condition
            .statuses()
            .iter()
            .map(|&s| s.to_proto())
            .collect(),
    }
}

/// Converts a rollout specification.
pub fn spec_from_proto(spec: Option<&pb::RolloutSpec>) -> StoreResult<m::RolloutSpec> {
    let default = pb::RolloutSpec::default();
    let spec = spec.unwrap_or(&default);
    Ok(m::RolloutSpec {
        input: json_from_text("input_json", &spec.input_json, Json::Null)?,
        mode: mode_from_proto(spec.mode)?,
        resources_id: spec.resources_id.clone(),
        config: config_from_proto(spec.config.as_ref())?,
        metadata: json_from_text(
            "metadata_json",
            &spec.metadata_json,
            Json::Object(Default::default()),
        )?,
    })
}

/// Converts a rollout without its attempt.
pub fn rollout_to_proto(r: &m::Rollout) -> pb::Rollout {
    pb::Rollout {
        rollout_id: r.rollout_id.clone(),
        input_json: json_to_text(&r.input),
        start_time: Some(timestamp_to_proto(r.start_time)),
        end_time: opt_time(r.end_time),
        mode: mode_to_proto(r.mode) as i32,
        resources_id: r.resources_id.clone(),
        status: r.status.to_proto(),
        config: Some(config_to_proto(&r.config)),
        metadata_json: json_to_text(&r.metadata),
        attempt: None,
    }
}

/// Converts a rollout with its latest attempt.
pub fn view_to_proto(view: &m::RolloutView) -> pb::Rollout {
    pb::Rollout {
        attempt: view.attempt.as_ref().map(attempt_to_proto),
        ..rollout_to_proto(&view.rollout)
    }
}

/// Converts one minute of rollout activity.
pub fn minute_to_proto(minute: &MinuteCounts) -> pb::RolloutMinute {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    pb::RolloutMinute {
        start: Some(timestamp_to_proto(minute.start)),
        created: count(minute.created),
        succeeded: count(minute.succeeded),
        failed: count(minute.failed),
        cancelled: count(minute.cancelled),
    }
}

/// Reads what a summary request chooses: its mode (`None`: every mode) and
/// its versions.
pub fn training_request_from_proto(
    request: &pb::GetTrainingSummaryRequest,
) -> StoreResult<(Option<RolloutMode>, VersionRange)> {
    let mode = mode_from_proto(request.mode)?;
    let versions = VersionRange {
        from: request.version_from,
        to: request.version_to,
    };
    if let (Some(from), Some(to)) = (versions.from, versions.to)
        && from > to
    {
        return Err(StoreError::invalid(format!(
            "version_from ({from}) is after version_to ({to})"
        )));
    }
    Ok((mode, versions))
}

/// Converts one version's summary.
pub fn version_summary_to_proto(summary: &VersionSummary) -> pb::VersionSummary {
    pb::VersionSummary {
        resources_id: summary.version.resources_id().to_owned(),
        model_version: summary.version.model_version(),
        version: summary.version_number,
        mode: mode_to_proto(RolloutMode::parse(&summary.mode)) as i32,
        rollouts: summary.stats.rollouts,
        succeeded: summary.stats.succeeded,
        rewarded: summary.stats.rewarded,
        reward_mean: summary.stats.reward_mean,
        reward_p10: summary.stats.reward_p10,
        reward_p50: summary.stats.reward_p50,
        reward_p90: summary.stats.reward_p90,
        training_rows: summary.stats.training_rows,
        rollouts_without_rows: summary.without_rows.rollouts,
        without_rows_by_reason: summary
            .without_rows
            .by_reason
            .iter()
            .map(|&(reason, rollouts)| pb::NoRowsCount {
                reason: no_rows_reason_to_proto(reason) as i32,
                rollouts,
            })
            .collect(),
        duration_seconds: Some(distribution_to_proto(
            &summary.measure(Measure::Duration),
            1000.0,
        )),
        prompt_tokens: Some(distribution_to_proto(
            &summary.measure(Measure::PromptTokens),
            1.0,
        )),
        response_tokens: Some(distribution_to_proto(
            &summary.measure(Measure::ResponseTokens),
            1.0,
        )),
        model_call_latency_seconds: Some(distribution_to_proto(
            &summary.measure(Measure::CallLatency),
            1000.0,
        )),
    }
}

/// Converts a measure's distribution, its values divided by `units` (the
/// measure's units in one of the API's: a division, so that a bin reads as
/// the shortest decimal it is, 0.045 rather than 0.045000000000000005).
fn distribution_to_proto(distribution: &Distribution, units: f64) -> pb::Distribution {
    let scaled = |value: Option<f64>| value.map(|value| value / units);
    pb::Distribution {
        count: distribution.values,
        mean: scaled(distribution.mean),
        p10: scaled(distribution.p10),
        p50: scaled(distribution.p50),
        p90: scaled(distribution.p90),
    }
}

/// Each reason a 1.x rollout gives no training row, with its protobuf value.
const NO_ROWS_REASONS: [(NoRowsReason, pb::NoTrainingRowsReason); 6] = [
    (
        NoRowsReason::NoModelCalls,
        pb::NoTrainingRowsReason::NoModelCalls,
    ),
    (
        NoRowsReason::FailedCalls,
        pb::NoTrainingRowsReason::FailedCalls,
    ),
    (
        NoRowsReason::NoTokenIds,
        pb::NoTrainingRowsReason::NoTokenIds,
    ),
    (NoRowsReason::NoReward, pb::NoTrainingRowsReason::NoReward),
    (
        NoRowsReason::RewardNotANumber,
        pb::NoTrainingRowsReason::RewardNotANumber,
    ),
    (
        NoRowsReason::RolloutFailed,
        pb::NoTrainingRowsReason::RolloutFailed,
    ),
];

fn no_rows_reason_to_proto(reason: NoRowsReason) -> pb::NoTrainingRowsReason {
    NO_ROWS_REASONS
        .iter()
        .find(|(core, _)| *core == reason)
        .map_or(pb::NoTrainingRowsReason::Unspecified, |&(_, proto)| proto)
}

/// Reads a rollout query's `without_training_rows`: unset, no condition;
/// unspecified, any reason.
pub fn without_rows_from_proto(value: Option<i32>) -> StoreResult<Option<WithoutRowsFilter>> {
    let Some(value) = value else {
        return Ok(None);
    };
    match pb::NoTrainingRowsReason::try_from(value) {
        Ok(pb::NoTrainingRowsReason::Unspecified) => Ok(Some(WithoutRowsFilter::AnyReason)),
        Ok(proto) => Ok(NO_ROWS_REASONS
            .iter()
            .find(|(_, known)| *known == proto)
            .map(|&(reason, _)| WithoutRowsFilter::Reason(reason))),
        Err(_) => Err(StoreError::invalid(format!(
            "invalid no training rows reason: {value}"
        ))),
    }
}

/// Reads what a timeline request chooses: its mode (`None`: every mode),
/// its resolution (`None`: the server's choice) and the starts of the
/// periods it covers.
pub fn timeline_request_from_proto(
    request: &pb::GetRewardTimelineRequest,
) -> StoreResult<(Option<RolloutMode>, Option<Resolution>, TimeRange)> {
    let mode = mode_from_proto(request.mode)?;
    let resolution = match pb::TimelineResolution::try_from(request.resolution) {
        Ok(pb::TimelineResolution::Unspecified) => None,
        Ok(pb::TimelineResolution::Minute) => Some(Resolution::Minute),
        Ok(pb::TimelineResolution::Hour) => Some(Resolution::Hour),
        Err(_) => {
            return Err(StoreError::invalid(format!(
                "invalid timeline resolution: {}",
                request.resolution
            )));
        }
    };
    let starts = TimeRange {
        from: opt_timestamp_from_proto("start_time", request.start_time)?,
        until: opt_timestamp_from_proto("end_time", request.end_time)?,
    };
    Ok((mode, resolution, starts))
}

/// Converts a reward timeline.
pub fn timeline_to_proto(timeline: &Timeline) -> pb::GetRewardTimelineResponse {
    let resolution = match timeline.resolution {
        Resolution::Minute => pb::TimelineResolution::Minute,
        Resolution::Hour => pb::TimelineResolution::Hour,
    };
    pb::GetRewardTimelineResponse {
        resolution: resolution as i32,
        periods: timeline
            .periods
            .iter()
            .map(|period| {
                let stats = &period.stats;
                pb::PeriodSummary {
                    start: Some(timestamp_to_proto(period.start)),
                    mode: mode_to_proto(RolloutMode::parse(&period.mode)) as i32,
                    rollouts: stats.rollouts,
                    succeeded: stats.succeeded,
                    rewarded: stats.rewarded,
                    reward_mean: stats.reward_mean,
                    reward_p10: stats.reward_p10,
                    reward_p50: stats.reward_p50,
                    reward_p90: stats.reward_p90,
                }
            })
            .collect(),
    }
}

/// What a comparison request chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComparisonRequest {
    /// The mode compared (one must be named).
    pub mode: RolloutMode,
    pub before: ComparedVersion,
    pub after: ComparedVersion,
    /// The tasks listed, at most.
    pub tasks: usize,
}

/// Reads what a comparison request chooses.
pub fn comparison_request_from_proto(
    request: &pb::CompareVersionsRequest,
) -> StoreResult<ComparisonRequest> {
    let mode = mode_from_proto(request.mode)?
        .ok_or_else(|| StoreError::invalid("mode: name the mode compared (train, val or test)"))?;
    let tasks = match request.max_tasks {
        None => DEFAULT_TASKS,
        Some(max) => usize::try_from(max)
            .map_err(|_| StoreError::invalid(format!("max_tasks ({max}) is negative")))?,
    };
    let side = |name: &str, number: i64, model_version: Option<i64>| match model_version {
        None => Ok(ComparedVersion::Numbered(number)),
        Some(model_version) if number == 0 => Ok(ComparedVersion::Model(model_version)),
        Some(_) => Err(StoreError::invalid(format!(
            "version_{name} and model_version_{name} are both set: name one version"
        ))),
    };
    Ok(ComparisonRequest {
        mode,
        before: side(
            "before",
            request.version_before,
            request.model_version_before,
        )?,
        after: side("after", request.version_after, request.model_version_after)?,
        tasks,
    })
}

/// Converts a comparison of two versions.
pub fn comparison_to_proto(comparison: &Comparison) -> pb::CompareVersionsResponse {
    let distribution = |summary: &VersionSummary| pb::VersionDistribution {
        summary: Some(version_summary_to_proto(summary)),
        bins: summary
            .stats
            .bins
            .iter()
            .map(|&(reward, rollouts)| pb::RewardBin { reward, rollouts })
            .collect(),
    };
    let rewards = |task: &TaskRewards| pb::TaskRewards {
        rollouts: task.rollouts,
        rewarded: task.rewarded,
        reward_mean: task.reward_mean.unwrap_or_default(),
        latest_rollout_id: task.latest_rollout_id.clone(),
    };
    pb::CompareVersionsResponse {
        before: Some(distribution(&comparison.before)),
        after: Some(distribution(&comparison.after)),
        tasks: comparison
            .tasks
            .iter()
            .map(|task| pb::TaskChange {
                input_json: task.input.to_string(),
                before: Some(rewards(&task.before)),
                after: Some(rewards(&task.after)),
                change: task.change,
            })
            .collect(),
        tasks_cut: comparison.tasks_cut,
    }
}

/// Converts a failed rollout with why it failed.
pub fn failure_to_proto(failure: &Failure) -> pb::RolloutFailure {
    pb::RolloutFailure {
        rollout: Some(view_to_proto(&failure.rollout)),
        error_span: failure.error_span.as_deref().map(span_to_proto),
        agl1_error: failure.agl1_error.clone(),
    }
}

/// Converts an attempt.
pub fn attempt_to_proto(a: &m::Attempt) -> pb::Attempt {
    pb::Attempt {
        rollout_id: a.rollout_id.clone(),
        attempt_id: a.attempt_id.clone(),
        sequence_id: i64::from(a.sequence_id),
        start_time: Some(timestamp_to_proto(a.start_time)),
        end_time: opt_time(a.end_time),
        status: a.status.to_proto(),
        worker_id: a.worker_id.clone(),
        last_heartbeat_time: opt_time(a.last_heartbeat_time),
        metadata_json: json_to_text(&a.metadata),
    }
}

/// Converts a worker.
pub fn worker_to_proto(w: &m::Worker) -> pb::Worker {
    pb::Worker {
        worker_id: w.worker_id.clone(),
        status: w.status.to_proto(),
        heartbeat_stats_json: json_to_text(&w.heartbeat_stats),
        last_heartbeat_time: opt_time(w.last_heartbeat_time),
        last_dequeue_time: opt_time(w.last_dequeue_time),
        last_busy_time: opt_time(w.last_busy_time),
        last_idle_time: opt_time(w.last_idle_time),
        current_rollout_id: w.current_rollout_id.clone(),
        current_attempt_id: w.current_attempt_id.clone(),
    }
}

/// Converts a resources snapshot.
pub fn resources_to_proto(r: &m::ResourcesUpdate) -> pb::ResourcesUpdate {
    pb::ResourcesUpdate {
        resources_id: r.resources_id.clone(),
        create_time: Some(timestamp_to_proto(r.create_time)),
        update_time: Some(timestamp_to_proto(r.update_time)),
        version: r.version,
        resources_json: json_to_text(&r.resources),
    }
}

/// Parses a resources payload: a JSON object of named resources.
pub fn resources_from_text(text: &str) -> StoreResult<Json> {
    let value = json_from_text("resources_json", text, Json::Null)?;
    if !value.is_object() {
        return Err(StoreError::invalid(
            "resources_json must be a JSON object mapping names to resources",
        ));
    }
    Ok(value)
}

/// Converts a committed event.
pub fn event_to_proto(event: &lightning_store_core::events::Event) -> pb::Event {
    use lightning_store_core::events::Change;
    let mut out = pb::Event {
        seq: event.seq,
        time: Some(timestamp_to_proto(event.time)),
        ..Default::default()
    };
    match &event.change {
        Change::RolloutCreated { rollout_id, status } => {
            out.kind = pb::EventKind::RolloutCreated as i32;
            out.rollout_id = rollout_id.clone();
            out.rollout_status = status.to_proto();
        }
        Change::RolloutChanged { rollout_id, status } => {
            out.kind = pb::EventKind::RolloutChanged as i32;
            out.rollout_id = rollout_id.clone();
            out.rollout_status = status.to_proto();
        }
        Change::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        } => {
            out.kind = pb::EventKind::AttemptCreated as i32;
            out.rollout_id = rollout_id.clone();
            out.attempt_id = attempt_id.clone();
            out.attempt_sequence_id = i64::from(*sequence_id);
            out.worker_id = worker_id.clone().unwrap_or_default();
        }
        Change::AttemptChanged {
            rollout_id,
            attempt_id,
            status,
        } => {
            out.kind = pb::EventKind::AttemptChanged as i32;
            out.rollout_id = rollout_id.clone();
            out.attempt_id = attempt_id.clone();
            out.attempt_status = status.to_proto();
        }
        Change::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        } => {
            out.kind = pb::EventKind::SpansAdded as i32;
            out.rollout_id = rollout_id.clone();
            out.attempt_id = attempt_id.clone();
            out.span_count = *count as i64;
        }
        Change::ResourcesChanged {
            resources_id,
            version,
        } => {
            out.kind = pb::EventKind::ResourcesChanged as i32;
            out.resources_id = resources_id.clone();
            out.resources_version = *version;
        }
        Change::WorkerChanged { worker_id, status } => {
            out.kind = pb::EventKind::WorkerChanged as i32;
            out.worker_id = worker_id.clone();
            out.worker_status = status.to_proto();
        }
        Change::RolloutDeleted { rollout_id } => {
            out.kind = pb::EventKind::RolloutDeleted as i32;
            out.rollout_id = rollout_id.clone();
        }
        Change::GatewayChanged { paused, generation } => {
            out.kind = pb::EventKind::GatewayChanged as i32;
            out.gateway_paused = *paused;
            out.gateway_generation = *generation;
        }
        Change::ModelsChanged => out.kind = pb::EventKind::ModelsChanged as i32,
    }
    out
}

/// Converts an event kind of a filter.
pub fn event_kind_from_proto(value: i32) -> StoreResult<lightning_store_core::events::ChangeKind> {
    use lightning_store_core::events::ChangeKind as K;
    Ok(match pb::EventKind::try_from(value) {
        Ok(pb::EventKind::RolloutCreated) => K::RolloutCreated,
        Ok(pb::EventKind::RolloutChanged) => K::RolloutChanged,
        Ok(pb::EventKind::AttemptCreated) => K::AttemptCreated,
        Ok(pb::EventKind::AttemptChanged) => K::AttemptChanged,
        Ok(pb::EventKind::SpansAdded) => K::SpansAdded,
        Ok(pb::EventKind::ResourcesChanged) => K::ResourcesChanged,
        Ok(pb::EventKind::WorkerChanged) => K::WorkerChanged,
        Ok(pb::EventKind::RolloutDeleted) => K::RolloutDeleted,
        Ok(pb::EventKind::GatewayChanged) => K::GatewayChanged,
        Ok(pb::EventKind::ModelsChanged) => K::ModelsChanged,
        _ => return Err(StoreError::invalid(format!("invalid event kind: {value}"))),
    })
}
