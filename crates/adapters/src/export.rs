//! The records of an export ([`lightning_store_core::export`]) as JSON,
//! written once for the `ExportRollouts` stream and the HTTP download: one
//! compact JSON object per record, with no raw newline inside (a JSON
//! Lines file holds one per line). A rollout gives one line in the
//! `rollouts` layout, one or more in `triplets`, none or one in `messages`
//! (docs/trajectories.md's schemas); only its last line carries the cursor
//! after it, so that an export resumed from a cursor repeats no line and
//! misses none. Attempts and spans are written as agent-lightning's models
//! (`crate::http::agl0`), so a span reads back with
//! `agentlightning.Span.model_validate`. The gRPC service is given
//! [`record_lines`] where it is built (`api::streams::RecordJson`): `api`
//! never imports `http`, whose call log reads `api`'s statuses.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::http::agl0::models::{AttemptJson, ConfigJson};
use crate::http::agl0::span_json::SpanJson;
use crate::pyjson;
use lightning_store_core::agl1::Agl1Event;
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::export::{Layout, RolloutRecord};
use lightning_store_core::model::Json;

/// One dimension of a reward.
#[derive(Serialize)]
struct DimensionJson<'a> {
    name: &'a str,
    value: f64,
}

/// One 1.x event, its data as recorded (compacted onto one line).
#[derive(Serialize)]
struct EventJson<'a> {
    event_type: &'a str,
    attempt_id: &'a str,
    timestamp: f64,
    data: Box<RawValue>,
}

/// The `rollouts` layout's record (docs/export.md#the-rollouts-layout).
#[derive(Serialize)]
struct RolloutRecordJson<'a> {
    cursor: String,
    rollout_id: &'a str,
    input: &'a Json,
    start_time: f64,
    end_time: Option<f64>,
    mode: Option<&'static str>,
    resources_id: Option<&'a str>,
    status: &'static str,
    config: ConfigJson<'a>,
    metadata: &'a Json,
    reward: Option<f64>,
    reward_dimensions: Vec<DimensionJson<'a>>,
    attempts: Vec<AttemptJson<'a>>,
    spans: Vec<SpanJson<'a>>,
    spans_evicted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<EventJson<'a>>>,
}

/// Returns a 1.x event's JSON text compacted onto one line.
fn compact(text: &str) -> Box<RawValue> {
    let mut out = Vec::with_capacity(text.len());
    pyjson::write_json_text(&mut out, text);
    String::from_utf8(out)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or_else(|| RawValue::from_string("null".to_owned()).expect("valid JSON"))
}

fn event_json(event: &Agl1Event) -> EventJson<'_> {
    EventJson {
        event_type: &event.event_type,
        attempt_id: &event.attempt_id,
        timestamp: event.timestamp.as_secs_f64(),
        data: compact(&event.data),
    }
}

/// A record of a training layout with the cursor before its fields.
#[derive(Serialize)]
struct WithCursor<'a, T> {
    /// The cursor after the rollout on its last line, `null` on the others.
    cursor: Option<&'a str>,
    #[serde(flatten)]
    record: &'a T,
}

/// Writes a rollout's records in `layout` as lines of JSON (without their
/// ends), in order; only the last carries the cursor (`"cursor": null` on
/// the others).
pub fn record_lines(layout: Layout, record: &RolloutRecord) -> StoreResult<Vec<String>> {
    match layout {
        Layout::Rollouts => Ok(vec![rollout_record_json(record)?]),
        Layout::Triplets => with_cursors(&record.triplets()?, record),
        Layout::Messages => with_cursors(record.conversation()?.as_slice(), record),
    }
}

/// Writes `records` of one rollout, the last with the rollout's cursor.
fn with_cursors<T: Serialize>(records: &[T], record: &RolloutRecord) -> StoreResult<Vec<String>> {
    let cursor = record.cursor.encode();
    let last = records.len().saturating_sub(1);
    records
        .iter()
        .enumerate()
        .map(|(index, line)| {
            to_line(&WithCursor {
                cursor: (index == last).then_some(cursor.as_str()),
                record: line,
            })
        })
        .collect()
}

/// Writes `value` as one line of JSON (serde_json escapes every newline
/// inside a string).
fn to_line<T: Serialize>(value: &T) -> StoreResult<String> {
    let bytes = pyjson::to_vec(value).map_err(|error| {
        StoreError::Internal(format!("cannot write the export's record: {error}"))
    })?;
    String::from_utf8(bytes)
        .map_err(|_| StoreError::Internal("the export's record is not UTF-8".to_owned()))
}

/// Writes a record of the `rollouts` layout as one line of JSON (without
/// the line's end).
fn rollout_record_json(record: &RolloutRecord) -> StoreResult<String> {
    let rollout = &record.view.rollout;
    let json = RolloutRecordJson {
        cursor: record.cursor.encode(),
        rollout_id: &rollout.rollout_id,
        input: &rollout.input,
        start_time: rollout.start_time.as_secs_f64(),
        end_time: rollout.end_time.map(|t| t.as_secs_f64()),
        mode: rollout.mode.map(|m| m.as_str()),
        resources_id: rollout.resources_id.as_deref(),
        status: rollout.status.as_str(),
        config: (&rollout.config).into(),
        metadata: &rollout.metadata,
        reward: record.reward,
        reward_dimensions: record
            .reward_dimensions
            .iter()
            .map(|d| DimensionJson {
                name: &d.name,
                value: d.value,
            })
            .collect(),
        attempts: record.attempts.iter().map(Into::into).collect(),
        spans: record.spans.iter().map(|span| SpanJson(span)).collect(),
        spans_evicted: record.spans_evicted,
        events: record
            .events
            .as_ref()
            .map(|events| events.iter().map(event_json).collect()),
    };
    to_line(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_data_is_compacted_onto_one_line() {
        let data = compact("{\n  \"a\": [1,\n 2.5],\n \"b\": \"x\\ny\"\n}");
        assert_eq!(data.get(), r#"{"a":[1,2.5],"b":"x\ny"}"#);
        assert_eq!(compact("not json {").get(), "null");
    }
}
