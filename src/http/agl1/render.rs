//! agent-lightning 1.x's response bodies, as pydantic dumps them (field
//! order, nulls, Python floats and `str()`s).

use serde::Serialize;

use crate::core::agl1::{self as agl1, Completion, Pause, V1Event, V1Rollout};
use crate::core::model::Json;
use crate::http::json::{python_repr_float, to_vec};

/// A rollout as upstream dumps it.
#[derive(Serialize)]
pub struct RolloutBody<'a> {
    rollout_id: &'a str,
    input: &'a Json,
    is_train: bool,
    config: &'a Json,
    metadata: &'a Json,
    status: StatusBody<'a>,
}

#[derive(Serialize)]
struct StatusBody<'a> {
    state: &'static str,
    k8s_job_name: Option<&'a str>,
    last_attempt_id: Option<&'a str>,
    error_message: Option<&'a str>,
    version: i64,
    created_at: f64,
    updated_at: f64,
}

impl<'a> RolloutBody<'a> {
    /// Returns the dump of a 1.x rollout.
    pub fn new(v1: &'a V1Rollout) -> Self {
        let fields = &v1.fields;
        Self {
            rollout_id: &v1.rollout.rollout_id,
            input: &v1.rollout.input,
            is_train: v1.is_train(),
            config: &fields.config,
            metadata: &v1.rollout.metadata,
            status: StatusBody {
                state: v1.state().as_str(),
                k8s_job_name: fields.k8s_job_name.as_deref(),
                last_attempt_id: fields.last_attempt_id.as_deref(),
                error_message: fields.error_message.as_deref(),
                version: fields.version,
                created_at: fields.created_at.as_secs_f64(),
                updated_at: fields.updated_at.as_secs_f64(),
            },
        }
    }
}

/// An event's fields as upstream dumps them, before its data.
#[derive(Serialize)]
struct EventHead<'a> {
    event_type: &'a str,
    rollout_id: &'a str,
    attempt_id: &'a str,
    timestamp: f64,
}

/// Writes an event as upstream dumps it. Its data is the JSON text the
/// store holds (validated when it was recorded), written as is: events
/// are large, and parsing them again only to copy them would cost more
/// than everything else an event POST does.
fn write_event(out: &mut Vec<u8>, event: &V1Event) {
    let head = EventHead {
        event_type: &event.event_type,
        rollout_id: &event.rollout_id,
        attempt_id: &event.attempt_id,
        timestamp: event.timestamp.as_secs_f64(),
    };
    let head = to_vec(&head).expect("strings and a float serialise");
    // `{...}` without its closing brace, then the data.
    out.extend_from_slice(&head[..head.len() - 1]);
    out.extend_from_slice(b",\"data\":");
    out.extend_from_slice(event.data.as_bytes());
    out.push(b'}');
}

/// Returns the JSON of one event.
pub fn event(event: &V1Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.data.len() + 160);
    write_event(&mut out, event);
    out
}

/// Returns the JSON list of events.
pub fn events(events: &[V1Event]) -> Vec<u8> {
    let size: usize = events.iter().map(|e| e.data.len() + 160).sum();
    let mut out = Vec::with_capacity(size + 2);
    out.push(b'[');
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_event(&mut out, event);
    }
    out.push(b']');
    out
}

/// One item of a terminal page (`TerminalRolloutItem`).
#[derive(Serialize)]
pub struct TerminalItem {
    pub rollout_id: String,
    pub state: &'static str,
    pub data_id: String,
    pub is_train: bool,
}

impl TerminalItem {
    /// Returns the item of a completion log entry, `None` when its rollout
    /// is gone (or is not a 1.x rollout).
    pub fn of(entry: &Completion) -> Option<Self> {
        let v1 = entry.rollout.as_ref()?;
        Some(Self {
            rollout_id: entry.rollout_id.clone(),
            state: v1.state().as_str(),
            data_id: data_id(&v1.rollout.input),
            is_train: v1.is_train(),
        })
    }
}

/// The gateway's state (`PauseStateResponse`).
#[derive(Serialize)]
pub struct PauseBody<'a> {
    paused: bool,
    retry_after_seconds: i64,
    reason: Option<&'a str>,
    inflight: i64,
}

impl<'a> PauseBody<'a> {
    /// Returns the state of a pause with `inflight` calls in flight.
    pub fn new(pause: &'a Pause, inflight: i64) -> Self {
        Self {
            paused: pause.paused,
            retry_after_seconds: pause.retry_after_seconds,
            reason: pause.reason.as_deref(),
            inflight,
        }
    }
}

/// Returns upstream's `data_id` of a rollout input: its `data_id` or
/// `instance_id` (the first Python finds truthy), as Python's `str`
/// renders it; empty when the input is not an object.
pub fn data_id(input: &Json) -> String {
    let Json::Object(object) = input else {
        return String::new();
    };
    ["data_id", "instance_id"]
        .iter()
        .filter_map(|key| object.get(*key))
        .find(|value| agl1::truthy(value))
        .map(python_str)
        .unwrap_or_default()
}

/// Python's `str()` of a JSON value: strings bare, anything else as its repr.
fn python_str(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(value: &Json) -> String {
    match value {
        Json::Null => "None".to_owned(),
        Json::Bool(true) => "True".to_owned(),
        Json::Bool(false) => "False".to_owned(),
        Json::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => python_repr_float(f),
            _ => n.to_string(),
        },
        Json::String(s) => {
            // Python quotes with ' unless the text has ' and no ".
            let quote = if s.contains('\'') && !s.contains('"') {
                '"'
            } else {
                '\''
            };
            let mut out = String::with_capacity(s.len() + 2);
            out.push(quote);
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c == quote => {
                        out.push('\\');
                        out.push(c);
                    }
                    c => out.push(c),
                }
            }
            out.push(quote);
            out
        }
        Json::Array(items) => {
            let inner: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", inner.join(", "))
        }
        Json::Object(object) => {
            let inner: Vec<String> = object
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        python_repr(&Json::String(k.clone())),
                        python_repr(v)
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::Timestamp;
    use serde_json::json;

    #[test]
    fn events_are_written_with_their_data_as_stored() {
        let event = V1Event {
            event_type: "reward".into(),
            rollout_id: "r".into(),
            attempt_id: "0".into(),
            timestamp: Timestamp(1_500_000_000),
            data: r#"{"value": 1.0e0}"#.into(),
        };
        let one = String::from_utf8(super::event(&event)).unwrap();
        assert_eq!(
            one,
            r#"{"event_type":"reward","rollout_id":"r","attempt_id":"0","timestamp":1.5,"data":{"value": 1.0e0}}"#
        );
        let list: serde_json::Value =
            serde_json::from_slice(&events(&[event.clone(), event])).unwrap();
        assert_eq!(list[1]["data"]["value"].to_string(), "1.0e+0");
        assert_eq!(super::events(&[]), b"[]");
    }

    #[test]
    fn data_ids_are_rendered_as_python_str() {
        assert_eq!(data_id(&json!({"data_id": "d1"})), "d1");
        assert_eq!(data_id(&json!({"data_id": "", "instance_id": 7})), "7");
        assert_eq!(data_id(&json!({"data_id": 0, "instance_id": null})), "");
        assert_eq!(data_id(&json!({"data_id": 1.5})), "1.5");
        assert_eq!(
            data_id(&json!({"data_id": [1, "a", true]})),
            "[1, 'a', True]"
        );
        assert_eq!(
            data_id(&json!({"data_id": {"k": "it's"}})),
            r#"{'k': "it's"}"#
        );
        assert_eq!(data_id(&json!(["data_id"])), "");
    }
}
