//! How domain values are laid out in SQL rows, the same for every SQL
//! dialect: times as integer nanoseconds since the Unix epoch, enums as
//! agent-lightning's lowercase names, JSON payloads as JSON text, and the
//! nested parts of spans and events as JSON documents whose shape is
//! defined here (not derived from Rust type names), so it stays stable.

use serde::{Deserialize, Serialize};

use self::cell::time;
use super::statement::Row;
use lightning_store_core::error::StoreResult;
use lightning_store_core::events::{Change, Event};
use lightning_store_core::model::{
    Attempt, AttemptStatus, Json, ResourcesUpdate, Rollout, RolloutConfig, RolloutMode,
    RolloutStatus, Timestamp, Worker, WorkerStatus,
};
use lightning_store_core::model::{MaxAttempts, RetryCondition, Seconds};

mod cell;
mod span;
pub use self::cell::corrupt;
pub use self::span::{ERROR_BODY_PREFIX, span, span_body};

/// Column list of [`rollout`], in order.
macro_rules! rollout_columns {
    ($p:literal) => {
        concat!(
            $p,
            "rollout_id, ",
            $p,
            "input, ",
            $p,
            "start_time, ",
            $p,
            "end_time, ",
            $p,
            "mode, ",
            $p,
            "resources_id, ",
            $p,
            "status, ",
            $p,
            "config, ",
            $p,
            "metadata"
        )
    };
}

/// Column list of [`attempt`], in order.
macro_rules! attempt_columns {
    ($p:literal) => {
        concat!(
            $p,
            "rollout_id, ",
            $p,
            "attempt_id, ",
            $p,
            "sequence_id, ",
            $p,
            "start_time, ",
            $p,
            "end_time, ",
            $p,
            "status, ",
            $p,
            "worker_id, ",
            $p,
            "last_heartbeat_time, ",
            $p,
            "metadata"
        )
    };
}

/// Column list of [`span`], in order.
macro_rules! span_columns {
    () => {
        "rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, \
         start_time, end_time, body"
    };
}

/// Column list of [`resources`], in order.
macro_rules! resources_columns {
    () => {
        "resources_id, create_time, update_time, version, resources"
    };
}

/// Column list of [`worker`], in order.
macro_rules! worker_columns {
    () => {
        "worker_id, status, heartbeat_stats, last_heartbeat_time, last_dequeue_time, \
         last_busy_time, last_idle_time, current_rollout_id, current_attempt_id"
    };
}

pub(super) use {
    attempt_columns, resources_columns, rollout_columns, span_columns, worker_columns,
};

/// Number of columns of [`rollout`], counted from [`rollout_columns`].
pub const ROLLOUT_COLUMNS: usize = super::batch::column_count(rollout_columns!(""));

/// Parses a stored enum value, reporting an unknown one as corruption.
pub fn parse_enum<T>(what: &str, text: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
    parse(text).ok_or_else(|| corrupt(what, format_args!("unknown value {text:?}")))
}

/// Decodes a rollout's stored mode column.
pub fn rollout_mode(text: Option<String>) -> StoreResult<Option<RolloutMode>> {
    text.map(|m| parse_enum("rollout mode", &m, RolloutMode::parse))
        .transpose()
}

/// Decodes a rollout's stored status.
pub fn rollout_status(text: &str) -> StoreResult<RolloutStatus> {
    parse_enum("rollout status", text, RolloutStatus::parse)
}

/// Returns the JSON text of a payload.
pub fn json_text(value: &Json) -> String {
    value.to_string()
}

fn json_value(what: &str, text: &str) -> StoreResult<Json> {
    serde_json::from_str(text).map_err(|e| corrupt(what, e))
}

/// Stored form of a [`RolloutConfig`].
#[derive(Serialize, Deserialize)]
struct StoredConfig {
    timeout_seconds: Option<f64>,
    unresponsive_seconds: Option<f64>,
    max_attempts: u32,
    retry_condition: Vec<String>,
}

/// Returns the JSON text of a rollout config.
pub fn config_text(config: &RolloutConfig) -> String {
    let stored = StoredConfig {
        timeout_seconds: config.timeout_seconds.map(Seconds::get),
        unresponsive_seconds: config.unresponsive_seconds.map(Seconds::get),
        max_attempts: config.max_attempts.get(),
        retry_condition: config
            .retry_condition
            .statuses()
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
    };
    serde_json::to_string(&stored).expect("a config serialises")
}

/// Decodes a stored config. A config stored before every API read configs
/// with the rules of [`lightning_store_core::model::RolloutConfig`] may break them; it decodes to
/// the valid config that behaves the same: a negative duration is 0 (both
/// are due at once), a status that cannot retry is dropped (it never
/// retried), zero attempts are one.
fn config(text: &str) -> StoreResult<RolloutConfig> {
    let stored: StoredConfig = serde_json::from_str(text).map_err(|e| corrupt("config", e))?;
    let seconds = |value: Option<f64>| value.map(|s| Seconds::new(s).unwrap_or_default());
    let statuses = stored
        .retry_condition
        .iter()
        .map(|s| parse_enum("attempt status", s, AttemptStatus::parse))
        .collect::<StoreResult<Vec<_>>>()?;
    let retryable = statuses
        .into_iter()
        .filter(|s| s.can_be_retried())
        .collect();
    Ok(RolloutConfig {
        timeout_seconds: seconds(stored.timeout_seconds),
        unresponsive_seconds: seconds(stored.unresponsive_seconds),
        max_attempts: MaxAttempts::new(i64::from(stored.max_attempts)).unwrap_or(MaxAttempts::ONE),
        retry_condition: RetryCondition::new(retryable).expect("only retryable statuses kept"),
    })
}

/// Decodes a rollout from [`rollout_columns`] starting at column `at`.
pub fn rollout(row: &impl Row, at: usize) -> StoreResult<Rollout> {
    Ok(Rollout {
        rollout_id: row.text(at)?,
        input: json_value("rollout input", &row.text(at + 1)?)?,
        start_time: Timestamp(row.int(at + 2)?),
        end_time: time(row.opt_int(at + 3)?),
        mode: rollout_mode(row.opt_text(at + 4)?)?,
        resources_id: row.opt_text(at + 5)?,
        status: rollout_status(&row.text(at + 6)?)?,
        config: config(&row.text(at + 7)?)?,
        metadata: json_value("rollout metadata", &row.text(at + 8)?)?,
    })
}

/// Decodes an attempt from [`attempt_columns`] starting at column `at`.
pub fn attempt(row: &impl Row, at: usize) -> StoreResult<Attempt> {
    Ok(Attempt {
        rollout_id: row.text(at)?,
        attempt_id: row.text(at + 1)?,
        sequence_id: u32::try_from(row.int(at + 2)?).map_err(|e| corrupt("attempt", e))?,
        start_time: Timestamp(row.int(at + 3)?),
        end_time: time(row.opt_int(at + 4)?),
        status: parse_enum("attempt status", &row.text(at + 5)?, AttemptStatus::parse)?,
        worker_id: row.opt_text(at + 6)?,
        last_heartbeat_time: time(row.opt_int(at + 7)?),
        metadata: json_value("attempt metadata", &row.text(at + 8)?)?,
    })
}

/// Decodes a resources snapshot from [`resources_columns`].
pub fn resources(row: &impl Row) -> StoreResult<ResourcesUpdate> {
    Ok(ResourcesUpdate {
        resources_id: row.text(0)?,
        create_time: Timestamp(row.int(1)?),
        update_time: Timestamp(row.int(2)?),
        version: row.int(3)?,
        resources: json_value("resources", &row.text(4)?)?,
    })
}

/// Decodes a worker from [`worker_columns`].
pub fn worker(row: &impl Row) -> StoreResult<Worker> {
    Ok(Worker {
        worker_id: row.text(0)?,
        status: parse_enum("worker status", &row.text(1)?, WorkerStatus::parse)?,
        heartbeat_stats: json_value("heartbeat stats", &row.text(2)?)?,
        last_heartbeat_time: time(row.opt_int(3)?),
        last_dequeue_time: time(row.opt_int(4)?),
        last_busy_time: time(row.opt_int(5)?),
        last_idle_time: time(row.opt_int(6)?),
        current_rollout_id: row.opt_text(7)?,
        current_attempt_id: row.opt_text(8)?,
    })
}

/// Stored form of a [`Change`].
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StoredChange {
    RolloutCreated {
        rollout_id: String,
        status: String,
    },
    RolloutChanged {
        rollout_id: String,
        status: String,
    },
    AttemptCreated {
        rollout_id: String,
        attempt_id: String,
        sequence_id: u32,
        worker_id: Option<String>,
    },
    AttemptChanged {
        rollout_id: String,
        attempt_id: String,
        status: String,
    },
    SpansAdded {
        rollout_id: String,
        attempt_id: String,
        count: u64,
    },
    ResourcesChanged {
        resources_id: String,
        version: i64,
    },
    WorkerChanged {
        worker_id: String,
        status: String,
    },
    RolloutDeleted {
        rollout_id: String,
    },
    GatewayChanged {
        paused: bool,
        generation: i64,
    },
    ModelsChanged,
}

/// Returns the JSON text of a change.
pub fn change_text(change: &Change) -> String {
    let stored = match change.clone() {
        Change::RolloutCreated { rollout_id, status } => StoredChange::RolloutCreated {
            rollout_id,
            status: status.as_str().to_owned(),
        },
        Change::RolloutChanged { rollout_id, status } => StoredChange::RolloutChanged {
            rollout_id,
            status: status.as_str().to_owned(),
        },
        Change::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        } => StoredChange::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        },
        Change::AttemptChanged {
            rollout_id,
            attempt_id,
            status,
        } => StoredChange::AttemptChanged {
            rollout_id,
            attempt_id,
            status: status.as_str().to_owned(),
        },
        Change::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        } => StoredChange::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        },
        Change::ResourcesChanged {
            resources_id,
            version,
        } => StoredChange::ResourcesChanged {
            resources_id,
            version,
        },
        Change::WorkerChanged { worker_id, status } => StoredChange::WorkerChanged {
            worker_id,
            status: status.as_str().to_owned(),
        },
        Change::RolloutDeleted { rollout_id } => StoredChange::RolloutDeleted { rollout_id },
        Change::GatewayChanged { paused, generation } => {
            StoredChange::GatewayChanged { paused, generation }
        }
        Change::ModelsChanged => StoredChange::ModelsChanged,
    };
    serde_json::to_string(&stored).expect("a change serialises")
}

/// Decodes an event from `seq, time, change` columns.
pub fn event(row: &impl Row) -> StoreResult<Event> {
    let seq = u64::try_from(row.int(0)?).map_err(|e| corrupt("event", e))?;
    let stored: StoredChange =
        serde_json::from_str(&row.text(2)?).map_err(|e| corrupt("event", e))?;
    let change = match stored {
        StoredChange::RolloutCreated { rollout_id, status } => Change::RolloutCreated {
            rollout_id,
            status: rollout_status(&status)?,
        },
        StoredChange::RolloutChanged { rollout_id, status } => Change::RolloutChanged {
            rollout_id,
            status: rollout_status(&status)?,
        },
        StoredChange::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        } => Change::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        },
        StoredChange::AttemptChanged {
            rollout_id,
            attempt_id,
            status,
        } => Change::AttemptChanged {
            rollout_id,
            attempt_id,
            status: parse_enum("attempt status", &status, AttemptStatus::parse)?,
        },
        StoredChange::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        } => Change::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        },
        StoredChange::ResourcesChanged {
            resources_id,
            version,
        } => Change::ResourcesChanged {
            resources_id,
            version,
        },
        StoredChange::WorkerChanged { worker_id, status } => Change::WorkerChanged {
            worker_id,
            status: parse_enum("worker status", &status, WorkerStatus::parse)?,
        },
        StoredChange::RolloutDeleted { rollout_id } => Change::RolloutDeleted { rollout_id },
        StoredChange::GatewayChanged { paused, generation } => {
            Change::GatewayChanged { paused, generation }
        }
        StoredChange::ModelsChanged => Change::ModelsChanged,
    };
    Ok(Event {
        seq,
        time: Timestamp(row.int(1)?),
        change,
    })
}

#[cfg(test)]
mod tests;
