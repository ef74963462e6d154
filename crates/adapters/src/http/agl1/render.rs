//! agent-lightning 1.x's response bodies, as pydantic dumps them (field
//! order, nulls, Python floats and `str()`s).

use serde::Serialize;

use crate::pyjson::{self as json, pydantic_float, python_repr_float, to_vec};
use lightning_store_core::agl1::{
    self as agl1, Agl1Event, Agl1Rollout, Agl1RolloutDetail, Agl1State, Completion, JsonText, Pause,
};
use lightning_store_core::model::{Json, Timestamp};

/// A rollout's JSON payload: a value, or the text the store holds.
#[derive(Clone, Copy)]
enum Payload<'a> {
    Value(&'a Json),
    Text(&'a JsonText),
}

/// The fields of a rollout that upstream's dump prints, in its order.
struct RolloutFields<'a> {
    rollout_id: &'a str,
    input: Payload<'a>,
    is_train: bool,
    config: Payload<'a>,
    metadata: Payload<'a>,
    state: Agl1State,
    k8s_job_name: Option<&'a str>,
    last_attempt_id: Option<&'a str>,
    error_message: Option<&'a str>,
    version: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl<'a> From<&'a Agl1Rollout> for RolloutFields<'a> {
    fn from(agl1: &'a Agl1Rollout) -> Self {
        let fields = &agl1.fields;
        Self {
            rollout_id: &agl1.rollout.rollout_id,
            input: Payload::Value(&agl1.rollout.input),
            is_train: agl1.is_train(),
            config: Payload::Value(&fields.config),
            metadata: Payload::Value(&agl1.rollout.metadata),
            state: agl1.state(),
            k8s_job_name: fields.k8s_job_name.as_deref(),
            last_attempt_id: fields.last_attempt_id.as_deref(),
            error_message: fields.error_message.as_deref(),
            version: fields.version,
            created_at: fields.created_at,
            updated_at: fields.updated_at,
        }
    }
}

impl<'a> From<&'a Agl1RolloutDetail> for RolloutFields<'a> {
    fn from(detail: &'a Agl1RolloutDetail) -> Self {
        Self {
            rollout_id: &detail.rollout_id,
            input: Payload::Text(&detail.input),
            is_train: detail.is_train(),
            config: Payload::Text(&detail.config),
            metadata: Payload::Text(&detail.metadata),
            state: detail.state(),
            k8s_job_name: detail.k8s_job_name.as_deref(),
            last_attempt_id: detail.last_attempt_id.as_deref(),
            error_message: detail.error_message.as_deref(),
            version: detail.version,
            created_at: detail.created_at,
            updated_at: detail.updated_at,
        }
    }
}

fn write_payload(out: &mut Vec<u8>, payload: Payload<'_>) {
    match payload {
        Payload::Value(value) => json::write(out, value).expect("a JSON value serialises"),
        Payload::Text(text) => json::write_json_text(out, text.as_str()),
    }
}

fn write_opt_str(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => json::write_str(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

fn write_time(out: &mut Vec<u8>, time: Timestamp) {
    out.extend_from_slice(pydantic_float(time.as_secs_f64()).as_bytes());
}

/// Writes a rollout as upstream dumps it (`Rollout`).
fn write_rollout(out: &mut Vec<u8>, rollout: &RolloutFields<'_>) {
    out.extend_from_slice(b"{\"rollout_id\":");
    json::write_str(out, rollout.rollout_id);
    out.extend_from_slice(b",\"input\":");
    write_payload(out, rollout.input);
    out.extend_from_slice(if rollout.is_train {
        b",\"is_train\":true,\"config\":"
    } else {
        b",\"is_train\":false,\"config\":"
    });
    write_payload(out, rollout.config);
    out.extend_from_slice(b",\"metadata\":");
    write_payload(out, rollout.metadata);
    out.extend_from_slice(b",\"status\":{\"state\":\"");
    out.extend_from_slice(rollout.state.as_str().as_bytes());
    out.extend_from_slice(b"\",\"k8s_job_name\":");
    write_opt_str(out, rollout.k8s_job_name);
    out.extend_from_slice(b",\"last_attempt_id\":");
    write_opt_str(out, rollout.last_attempt_id);
    out.extend_from_slice(b",\"error_message\":");
    write_opt_str(out, rollout.error_message);
    out.extend_from_slice(b",\"version\":");
    out.extend_from_slice(rollout.version.to_string().as_bytes());
    out.extend_from_slice(b",\"created_at\":");
    write_time(out, rollout.created_at);
    out.extend_from_slice(b",\"updated_at\":");
    write_time(out, rollout.updated_at);
    out.extend_from_slice(b"}}");
}

/// Returns the JSON of one rollout.
pub fn rollout(agl1: &Agl1Rollout) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_rollout(&mut out, &RolloutFields::from(agl1));
    out
}

/// Returns the JSON list of rollouts.
pub fn rollouts(rollouts: &[Agl1Rollout]) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 * rollouts.len() + 2);
    out.push(b'[');
    for (index, agl1) in rollouts.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_rollout(&mut out, &RolloutFields::from(agl1));
    }
    out.push(b']');
    out
}

/// Returns the JSON of a rollout's GET (`RolloutDetail`), written into one
/// buffer sized for it, the payloads copied from the store's text.
pub fn rollout_detail(detail: &Agl1RolloutDetail) -> Vec<u8> {
    let payloads =
        detail.input.as_str().len() + detail.config.as_str().len() + detail.metadata.as_str().len();
    let names: usize = detail.attempts.iter().map(|a| a.len() + 3).sum();
    let mut out = Vec::with_capacity(payloads + names + 2 * detail.rollout_id.len() + 400);
    out.extend_from_slice(b"{\"rollout\":");
    write_rollout(&mut out, &RolloutFields::from(detail));
    out.extend_from_slice(b",\"attempts\":[");
    for (index, attempt_id) in detail.attempts.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        json::write_str(&mut out, attempt_id);
    }
    out.extend_from_slice(b"]}");
    out
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
fn write_event(out: &mut Vec<u8>, event: &Agl1Event) {
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
pub fn event(event: &Agl1Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.data.len() + 160);
    write_event(&mut out, event);
    out
}

/// Returns the JSON list of events.
pub fn events(events: &[Agl1Event]) -> Vec<u8> {
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
        let agl1 = entry.rollout.as_ref()?;
        Some(Self {
            rollout_id: entry.rollout_id.clone(),
            state: agl1.state().as_str(),
            data_id: data_id(&agl1.rollout.input),
            is_train: agl1.is_train(),
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
    use lightning_store_core::model::Timestamp;
    use serde_json::json;

    #[test]
    fn events_are_written_with_their_data_as_stored() {
        let event = Agl1Event {
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

    fn sample_rollout() -> Agl1Rollout {
        use lightning_store_core::agl1::Agl1Fields;
        use lightning_store_core::model::{Rollout, RolloutConfig, RolloutMode, RolloutStatus};
        Agl1Rollout {
            rollout: Rollout {
                rollout_id: "r\"1".into(),
                input: serde_json::from_str(
                    r#"{"data_id":"d","x":1.50,"big":12345678901234567890123}"#,
                )
                .unwrap(),
                start_time: Timestamp(1),
                end_time: None,
                mode: Some(RolloutMode::Val),
                resources_id: None,
                status: RolloutStatus::Preparing,
                config: RolloutConfig::default(),
                metadata: json!({"é": [1e16]}),
            },
            fields: Agl1Fields {
                config: json!({"timeout_seconds": 1800.0, "local": {}, "k8s": null}),
                k8s_job_name: None,
                last_attempt_id: Some("a\n2".into()),
                error_message: None,
                version: 3,
                created_at: Timestamp(1_500_000_000),
                updated_at: Timestamp(1_795_437_032_057_042_100),
            },
        }
    }

    #[test]
    fn rollouts_are_written_as_upstream_dumps_them() {
        let agl1 = sample_rollout();
        let one = String::from_utf8(rollout(&agl1)).unwrap();
        assert_eq!(
            one,
            concat!(
                r#"{"rollout_id":"r\"1","input":{"data_id":"d","x":1.5,"big":12345678901234567890123},"#,
                r#""is_train":false,"config":{"timeout_seconds":1800.0,"local":{},"k8s":null},"#,
                r#""metadata":{"é":[1e+16]},"status":{"state":"running","k8s_job_name":null,"#,
                r#""last_attempt_id":"a\n2","error_message":null,"version":3,"created_at":1.5,"#,
                r#""updated_at":1795437032.0570421}}"#
            )
        );
        assert_eq!(
            String::from_utf8(rollouts(&[agl1.clone(), agl1.clone()])).unwrap(),
            format!("[{one},{one}]")
        );
        assert_eq!(rollouts(&[]), b"[]");
        // The GET's detail, its payloads from the store's text (spaces and
        // all), writes the same rollout.
        let mut detail = Agl1RolloutDetail::of(
            &agl1.rollout,
            &agl1.fields,
            None,
            vec!["0".into(), "x\"".into()],
        );
        detail.input = JsonText::parse(
            r#"{ "data_id" : "d", "x" : 1.50, "big" : 12345678901234567890123 }"#.into(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(rollout_detail(&detail)).unwrap(),
            format!(r#"{{"rollout":{one},"attempts":["0","x\""]}}"#)
        );
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
