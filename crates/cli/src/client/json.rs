//! JSON output in agent-lightning's shapes (`--json`): what its Python
//! store returns for the same objects.

use serde_json::{Map, Value, json};

use super::error::{ClientError, ClientResult};
use crate::connection::ShortName;
use lightning_store_proto as pb;

/// Returns agent-lightning's name of a rollout mode (`train`), none when
/// unspecified.
pub(super) fn mode_name(value: i32) -> Option<String> {
    pb::RolloutMode::try_from(value)
        .ok()
        .filter(|mode| *mode != pb::RolloutMode::Unspecified)
        .map(ShortName::short_name)
}

/// Returns OpenTelemetry's name of a span status code (`UNSET`, `OK`, `ERROR`).
fn span_status_code(value: i32) -> &'static str {
    match pb::SpanStatusCode::try_from(value) {
        Ok(pb::SpanStatusCode::Ok) => "OK",
        Ok(pb::SpanStatusCode::Error) => "ERROR",
        Ok(pb::SpanStatusCode::Unspecified) | Err(_) => "UNSET",
    }
}

/// Parses JSON text from the server; empty text is `null` and text that is
/// not JSON is kept as a string.
pub(super) fn json_text(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn seconds(t: Option<&prost_types::Timestamp>) -> Value {
    t.map_or(Value::Null, |t| {
        json!(t.seconds as f64 + f64::from(t.nanos) / 1e9)
    })
}

pub(super) fn print_json(value: &Value) -> ClientResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ClientError::Other(format!("cannot render json: {e}")))?;
    out!("{text}");
    Ok(())
}

/// One page as JSON, its list named by what it holds (`noun`), as in the
/// proto's Query* responses.
pub(super) fn page_json(
    noun: &str,
    items: Vec<Value>,
    limit: i64,
    offset: i64,
    total: i64,
) -> Value {
    json!({ noun: items, "limit": limit, "offset": offset, "total": total })
}

pub(super) fn rollout_json(r: &pb::Rollout) -> Value {
    let config = r.config.clone().unwrap_or_default();
    let mut value = json!({
        "rollout_id": r.rollout_id,
        "input": json_text(&r.input_json),
        "start_time": seconds(r.start_time.as_ref()),
        "end_time": seconds(r.end_time.as_ref()),
        "mode": mode_name(r.mode),
        "resources_id": r.resources_id,
        "status": pb::RolloutStatus::name_of(r.status),
        "config": {
            "timeout_seconds": config.timeout_seconds,
            "unresponsive_seconds": config.unresponsive_seconds,
            "max_attempts": config.max_attempts,
            "retry_condition": config
                .retry_condition
                .iter()
                .map(|&s| pb::AttemptStatus::name_of(s))
                .collect::<Vec<_>>(),
        },
        "metadata": json_text(&r.metadata_json),
    });
    if let Some(attempt) = &r.attempt {
        value["attempt"] = attempt_json(attempt);
    }
    value
}

pub(super) fn attempt_json(a: &pb::Attempt) -> Value {
    json!({
        "rollout_id": a.rollout_id,
        "attempt_id": a.attempt_id,
        "sequence_id": a.sequence_id,
        "start_time": seconds(a.start_time.as_ref()),
        "end_time": seconds(a.end_time.as_ref()),
        "status": pb::AttemptStatus::name_of(a.status),
        "worker_id": a.worker_id,
        "last_heartbeat_time": seconds(a.last_heartbeat_time.as_ref()),
        "metadata": json_text(&a.metadata_json),
    })
}

pub(super) fn worker_json(w: &pb::Worker) -> Value {
    json!({
        "worker_id": w.worker_id,
        "status": pb::WorkerStatus::name_of(w.status),
        "heartbeat_stats": json_text(&w.heartbeat_stats_json),
        "last_heartbeat_time": seconds(w.last_heartbeat_time.as_ref()),
        "last_dequeue_time": seconds(w.last_dequeue_time.as_ref()),
        "last_busy_time": seconds(w.last_busy_time.as_ref()),
        "last_idle_time": seconds(w.last_idle_time.as_ref()),
        "current_rollout_id": w.current_rollout_id,
        "current_attempt_id": w.current_attempt_id,
    })
}

pub(super) fn resources_json(r: &pb::ResourcesUpdate) -> Value {
    json!({
        "resources_id": r.resources_id,
        "create_time": seconds(r.create_time.as_ref()),
        "update_time": seconds(r.update_time.as_ref()),
        "version": r.version,
        "resources": json_text(&r.resources_json),
    })
}

pub(super) fn span_json(s: &pb::Span) -> Value {
    let status = s.status.clone().unwrap_or_default();
    let resource = s.resource.clone().unwrap_or_default();
    json!({
        "rollout_id": s.rollout_id,
        "attempt_id": s.attempt_id,
        "sequence_id": s.sequence_id,
        "trace_id": s.trace_id,
        "span_id": s.span_id,
        "parent_id": s.parent_id,
        "name": s.name,
        "status": {
            "status_code": span_status_code(status.code),
            "description": status.description,
        },
        "attributes": attributes_json(&s.attributes),
        "events": s.events.iter().map(|e| json!({
            "name": e.name,
            "attributes": attributes_json(&e.attributes),
            "timestamp": seconds(e.time.as_ref()),
        })).collect::<Vec<_>>(),
        "links": s.links.iter().map(|l| json!({
            "context": context_json(l.context.as_ref()),
            "attributes": attributes_json(&l.attributes),
        })).collect::<Vec<_>>(),
        "start_time": seconds(s.start_time.as_ref()),
        "end_time": seconds(s.end_time.as_ref()),
        "context": context_json(s.context.as_ref()),
        "parent": context_json(s.parent.as_ref()),
        "resource": {
            "attributes": attributes_json(&resource.attributes),
            "schema_url": resource.schema_url,
        },
    })
}

/// Renders a span context; the W3C trace state becomes an object.
fn context_json(c: Option<&pb::SpanContext>) -> Value {
    let Some(c) = c else { return Value::Null };
    let trace_state: Map<String, Value> = c
        .trace_state
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            (key.to_owned(), Value::from(value))
        })
        .collect();
    json!({
        "trace_id": c.trace_id,
        "span_id": c.span_id,
        "is_remote": c.is_remote,
        "trace_state": trace_state,
    })
}

fn attributes_json(attributes: &[pb::KeyValue]) -> Value {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), attribute_json(kv.value.as_ref())))
        .collect::<Map<_, _>>()
        .into()
}

/// Renders an attribute value as JSON; bytes become a hex string.
pub(super) fn attribute_json(value: Option<&pb::AttributeValue>) -> Value {
    use pb::attribute_value::Value as V;
    match value.and_then(|v| v.value.as_ref()) {
        None => Value::Null,
        Some(V::StringValue(s)) => Value::from(s.as_str()),
        Some(V::BoolValue(b)) => Value::from(*b),
        Some(V::IntValue(i)) => Value::from(*i),
        Some(V::DoubleValue(d)) => Value::from(*d),
        Some(V::BytesValue(bytes)) => Value::from(hex::encode(bytes)),
        Some(V::ArrayValue(array)) => array.values.iter().map(Some).map(attribute_json).collect(),
        Some(V::KvlistValue(list)) => attributes_json(&list.values),
    }
}
