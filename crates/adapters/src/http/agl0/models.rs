//! The JSON of agent-lightning's models (`agentlightning.types`), field for
//! field and in pydantic's order, written from domain values: `Rollout`,
//! `AttemptedRollout`, `Attempt`, `Worker`, `ResourcesUpdate`,
//! `PaginatedResult` and the statistics dict. Times are float seconds.

use serde::Serialize;

use lightning_store_core::model::Seconds;
use lightning_store_core::model::{
    Attempt, Json, ResourcesUpdate, Rollout, RolloutConfig, RolloutView, Statistics, Timestamp,
    Worker, WorkerStatus,
};
use lightning_store_core::query::Paged;

fn seconds(time: Timestamp) -> f64 {
    time.as_secs_f64()
}

fn opt_seconds(time: Option<Timestamp>) -> Option<f64> {
    time.map(seconds)
}

/// `RolloutConfig`.
#[derive(Serialize)]
pub struct ConfigJson<'a> {
    timeout_seconds: Option<f64>,
    unresponsive_seconds: Option<f64>,
    max_attempts: u32,
    retry_condition: Vec<&'a str>,
}

impl<'a> From<&'a RolloutConfig> for ConfigJson<'a> {
    fn from(config: &'a RolloutConfig) -> Self {
        Self {
            timeout_seconds: config.timeout_seconds.map(Seconds::get),
            unresponsive_seconds: config.unresponsive_seconds.map(Seconds::get),
            max_attempts: config.max_attempts.get(),
            retry_condition: config
                .retry_condition
                .statuses()
                .iter()
                .map(|s| s.as_str())
                .collect(),
        }
    }
}

/// `Rollout`, or `AttemptedRollout` when `attempt` is set.
#[derive(Serialize)]
pub struct RolloutJson<'a> {
    rollout_id: &'a str,
    input: &'a Json,
    start_time: f64,
    end_time: Option<f64>,
    mode: Option<&'static str>,
    resources_id: Option<&'a str>,
    status: &'static str,
    config: ConfigJson<'a>,
    metadata: &'a Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<AttemptJson<'a>>,
}

impl<'a> From<&'a Rollout> for RolloutJson<'a> {
    fn from(r: &'a Rollout) -> Self {
        Self {
            rollout_id: &r.rollout_id,
            input: &r.input,
            start_time: seconds(r.start_time),
            end_time: opt_seconds(r.end_time),
            mode: r.mode.map(|m| m.as_str()),
            resources_id: r.resources_id.as_deref(),
            status: r.status.as_str(),
            config: (&r.config).into(),
            metadata: &r.metadata,
            attempt: None,
        }
    }
}

impl<'a> From<&'a RolloutView> for RolloutJson<'a> {
    fn from(view: &'a RolloutView) -> Self {
        Self {
            attempt: view.attempt.as_ref().map(Into::into),
            ..(&view.rollout).into()
        }
    }
}

/// `Attempt`.
#[derive(Serialize)]
pub struct AttemptJson<'a> {
    rollout_id: &'a str,
    attempt_id: &'a str,
    sequence_id: u32,
    start_time: f64,
    end_time: Option<f64>,
    status: &'static str,
    worker_id: Option<&'a str>,
    last_heartbeat_time: Option<f64>,
    metadata: &'a Json,
}

impl<'a> From<&'a Attempt> for AttemptJson<'a> {
    fn from(a: &'a Attempt) -> Self {
        Self {
            rollout_id: &a.rollout_id,
            attempt_id: &a.attempt_id,
            sequence_id: a.sequence_id,
            start_time: seconds(a.start_time),
            end_time: opt_seconds(a.end_time),
            status: a.status.as_str(),
            worker_id: a.worker_id.as_deref(),
            last_heartbeat_time: opt_seconds(a.last_heartbeat_time),
            metadata: &a.metadata,
        }
    }
}

/// Returns the name of a worker status in agent-lightning's vocabulary,
/// which has no `lost` (a dropped worker session): such a worker is
/// `unknown` there, as one whose attempt went unresponsive.
pub fn worker_status_name(status: WorkerStatus) -> &'static str {
    match status {
        WorkerStatus::Lost => WorkerStatus::Unknown.as_str(),
        other => other.as_str(),
    }
}

/// `Worker`.
#[derive(Serialize)]
pub struct WorkerJson<'a> {
    worker_id: &'a str,
    status: &'static str,
    heartbeat_stats: &'a Json,
    last_heartbeat_time: Option<f64>,
    last_dequeue_time: Option<f64>,
    last_busy_time: Option<f64>,
    last_idle_time: Option<f64>,
    current_rollout_id: Option<&'a str>,
    current_attempt_id: Option<&'a str>,
}

impl<'a> From<&'a Worker> for WorkerJson<'a> {
    fn from(w: &'a Worker) -> Self {
        Self {
            worker_id: &w.worker_id,
            status: worker_status_name(w.status),
            heartbeat_stats: &w.heartbeat_stats,
            last_heartbeat_time: opt_seconds(w.last_heartbeat_time),
            last_dequeue_time: opt_seconds(w.last_dequeue_time),
            last_busy_time: opt_seconds(w.last_busy_time),
            last_idle_time: opt_seconds(w.last_idle_time),
            current_rollout_id: w.current_rollout_id.as_deref(),
            current_attempt_id: w.current_attempt_id.as_deref(),
        }
    }
}

/// `ResourcesUpdate`.
#[derive(Serialize)]
pub struct ResourcesJson<'a> {
    resources_id: &'a str,
    create_time: f64,
    update_time: f64,
    version: i64,
    resources: &'a Json,
}

impl<'a> From<&'a ResourcesUpdate> for ResourcesJson<'a> {
    fn from(r: &'a ResourcesUpdate) -> Self {
        Self {
            resources_id: &r.resources_id,
            create_time: seconds(r.create_time),
            update_time: seconds(r.update_time),
            version: r.version,
            resources: &r.resources,
        }
    }
}

/// `PaginatedResult[T]`: the page and its bounds (`limit` -1: none).
#[derive(Serialize)]
pub struct PageJson<T> {
    items: Vec<T>,
    limit: i64,
    offset: usize,
    total: usize,
}

impl<T> PageJson<T> {
    /// Returns the JSON of a page whose items are converted by `item`.
    pub fn new<'a, D>(page: &'a Paged<D>, item: impl FnMut(&'a D) -> T) -> Self {
        Self {
            items: page.items.iter().map(item).collect(),
            limit: page.limit.map_or(-1, |l| l as i64),
            offset: page.offset,
            total: page.total,
        }
    }

    /// Returns an empty page, as upstream answers for an unknown rollout.
    pub fn empty(limit: Option<usize>, offset: usize) -> Self {
        Self {
            items: Vec::new(),
            limit: limit.map_or(-1, |l| l as i64),
            offset,
            total: 0,
        }
    }
}

/// The statistics dict: upstream's collection counts and uptime, then this
/// store's own counts.
#[derive(Serialize)]
pub struct StatisticsJson<'a> {
    name: &'a str,
    total_rollouts: u64,
    total_attempts: u64,
    total_spans: u64,
    total_resources: u64,
    total_workers: u64,
    uptime: f64,
    total_span_bytes: u64,
    queued_rollouts: u64,
    evicted_rollouts: u64,
    evicted_spans: u64,
    evicted_span_bytes: u64,
}

impl<'a> From<&'a Statistics> for StatisticsJson<'a> {
    fn from(s: &'a Statistics) -> Self {
        let c = &s.counts;
        Self {
            name: &s.name,
            total_rollouts: c.rollouts,
            total_attempts: c.attempts,
            total_spans: c.spans,
            total_resources: c.resources,
            total_workers: c.workers,
            uptime: s.uptime_seconds,
            total_span_bytes: c.span_bytes,
            queued_rollouts: c.queued,
            evicted_rollouts: c.evicted_rollouts,
            evicted_spans: c.evicted_spans,
            evicted_span_bytes: c.evicted_span_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::to_vec;
    use lightning_store_core::model::RetryCondition;
    use lightning_store_core::model::{AttemptStatus, RolloutMode, RolloutStatus};

    #[test]
    fn rollouts_are_written_in_pydantic_field_order() {
        let rollout = Rollout {
            rollout_id: "ro-1".into(),
            input: serde_json::json!({"q": 1.0}),
            start_time: Timestamp(1_700_000_000_500_000_000),
            end_time: None,
            mode: Some(RolloutMode::Train),
            resources_id: None,
            status: RolloutStatus::Preparing,
            config: RolloutConfig {
                timeout_seconds: Some(Seconds::new(3.0).unwrap()),
                retry_condition: RetryCondition::new(vec![AttemptStatus::Timeout]).unwrap(),
                ..RolloutConfig::default()
            },
            metadata: serde_json::json!({}),
        };
        let attempt = Attempt {
            rollout_id: "ro-1".into(),
            attempt_id: "at-1".into(),
            sequence_id: 1,
            start_time: Timestamp(1_700_000_000_500_000_000),
            end_time: None,
            status: AttemptStatus::Preparing,
            worker_id: Some(String::new()),
            last_heartbeat_time: None,
            metadata: Json::Null,
        };
        let view = RolloutView {
            rollout,
            attempt: Some(attempt),
        };
        let text = String::from_utf8(to_vec(&RolloutJson::from(&view)).unwrap()).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"rollout_id":"ro-1","input":{"q":1.0},"start_time":1700000000.5,"end_time":null,"#,
                r#""mode":"train","resources_id":null,"status":"preparing","config":{"timeout_seconds":3.0,"#,
                r#""unresponsive_seconds":null,"max_attempts":1,"retry_condition":["timeout"]},"metadata":{},"#,
                r#""attempt":{"rollout_id":"ro-1","attempt_id":"at-1","sequence_id":1,"start_time":1700000000.5,"#,
                r#""end_time":null,"status":"preparing","worker_id":"","last_heartbeat_time":null,"metadata":null}}"#
            )
        );
    }

    #[test]
    fn lost_workers_are_unknown_to_agent_lightning() {
        assert_eq!(worker_status_name(WorkerStatus::Lost), "unknown");
        assert_eq!(worker_status_name(WorkerStatus::Busy), "busy");
    }
}
