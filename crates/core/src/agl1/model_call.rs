//! The JSON of one call through the LLM gateway, as agent-lightning 1.x's
//! server handles it (`agentlightning/server/proxy.py`): the request body
//! rewritten, the model server's answer read (its routing tensor taken out
//! of the choices, its usage and finish reason), and the `model_request`
//! event's data.
//!
//! Everything works on JSON text: a body is split into its top-level
//! members, each kept as its text ([`RawValue`], borrowed from the body),
//! so that the token-id arrays that make up most of a call are skimmed,
//! never built as values, and are copied once into the event. The texts
//! are expected compact, as serde_json writes them (the gateway makes
//! them so, see [`crate::pyjson::is_canonical`]): what is written here
//! is then byte for byte what writing the parsed values would give, and
//! exact numbers keep every digit.

use std::borrow::Cow;
use std::fmt::Write as _;

use indexmap::IndexMap;
use serde_json::value::RawValue;

use super::events::ROUTED_EXPERTS;
use super::gateway::{GatewayMode, GatewaySettings, status_of};
use super::records::ModelServer;
use crate::model::Json;

/// A JSON object's members, each value as its JSON text.
type Members<'a> = IndexMap<String, &'a RawValue>;

/// Why a body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// Not JSON at all.
    NotJson,
    /// JSON, but not an object.
    NotAnObject,
}

/// Deserialises a JSON object as its [`Members`]: a repeated key keeps its
/// first place and its last value, as a parsed object does; anything but
/// an object is a data error.
struct Object<'a>(Members<'a>);

impl<'de> serde::Deserialize<'de> for Object<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Object<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Members::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.insert(key, value);
                }
                Ok(Object(members))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// Splits a JSON object's text into its members.
fn members(text: &[u8]) -> Result<Members<'_>, BodyError> {
    match serde_json::from_slice::<Object<'_>>(text) {
        Ok(object) => Ok(object.0),
        Err(error) if error.classify() == serde_json::error::Category::Data => {
            Err(BodyError::NotAnObject)
        }
        Err(_) => Err(BodyError::NotJson),
    }
}

/// Appends `"key":value` to an object being written (`out` holds its `{`
/// and the members before).
fn write_member(out: &mut Vec<u8>, key: &str, value: &str) {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    serde_json::to_writer(&mut *out, key).expect("a string serialises");
    out.push(b':');
    out.extend_from_slice(value.as_bytes());
}

/// Appends `members`, a member's value replaced by its `replaced` text
/// when listed there, to an object being written.
fn write_members(out: &mut Vec<u8>, members: &Members<'_>, replaced: &[(&str, &str)]) {
    for (key, value) in members {
        let text = replaced
            .iter()
            .find(|(name, _)| name == key)
            .map_or(value.get(), |(_, text)| *text);
        write_member(out, key, text);
    }
}

/// Writes an object of `members`, with `replaced` as [`write_members`].
fn write_object(out: &mut Vec<u8>, members: &Members<'_>, replaced: &[(&str, &str)]) {
    out.push(b'{');
    write_members(out, members, replaced);
    out.push(b'}');
}

/// A request body rewritten for the model server.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRequest {
    /// The JSON text sent upstream and recorded in the event.
    pub body: Vec<u8>,
    /// Whether the caller asked for a streamed answer (refused).
    pub stream: bool,
}

/// Rewrites a request body (JSON text; empty is `{}`): the configured
/// model and the mode's temperature replace the caller's, token ids are
/// always asked for, and training calls also ask for log-probabilities and
/// routing when enabled. Keys keep their place; new ones are appended in
/// this order. Every other member is passed on as its text.
pub fn prepare_request(
    settings: &GatewaySettings,
    body: &[u8],
    mode: GatewayMode,
) -> Result<PreparedRequest, BodyError> {
    let members = match body.is_empty() {
        true => Members::new(),
        false => members(body)?,
    };
    let stream = members
        .get("stream")
        .and_then(|raw| serde_json::from_str::<Json>(raw.get()).ok())
        .is_some_and(|value| super::records::truthy(&value));
    let temperature = match mode {
        GatewayMode::Train => settings.train_temperature,
        GatewayMode::Val => settings.val_temperature,
    };
    let model = serde_json::to_string(&settings.model).expect("a string serialises");
    let temperature = serde_json::to_string(&temperature).expect("a float serialises");
    let mut set: Vec<(&str, &str)> = vec![
        ("model", &model),
        ("temperature", &temperature),
        ("return_token_ids", "true"),
    ];
    if mode == GatewayMode::Train {
        if settings.include_log_probs {
            set.push(("logprobs", "true"));
        }
        if settings.include_routed_experts {
            set.push(("return_routed_experts", "true"));
        }
    }
    let mut out = Vec::with_capacity(body.len() + 128);
    out.push(b'{');
    write_members(&mut out, &members, &set);
    for (key, text) in &set {
        if !members.contains_key(*key) {
            write_member(&mut out, key, text);
        }
    }
    out.push(b'}');
    Ok(PreparedRequest { body: out, stream })
}

/// A model server's JSON answer, read as the gateway records and returns it.
#[derive(Debug, Clone)]
pub struct ReadAnswer<'a> {
    /// The answer without the routing tensors taken out of its choices:
    /// the answer's own text when nothing was taken out.
    pub response: Cow<'a, [u8]>,
    /// The first non-null routing tensor of the choices.
    pub routed_experts: Option<&'a RawValue>,
    /// The answer's `usage` when it is an object.
    pub usage: Option<&'a RawValue>,
    /// The first choice's `finish_reason` when it is a non-empty string.
    pub finish_reason: Option<String>,
}

/// Reads a model server's answer (JSON text of an object): takes
/// `routed_experts` out of each choice up to the first non-null one (that
/// one is recorded beside the response, the choices after it keep
/// theirs, as upstream's `_pop_routed_experts`), and reads `usage` and the
/// first choice's `finish_reason`.
pub fn read_answer(text: &[u8]) -> Result<ReadAnswer<'_>, BodyError> {
    let answer = members(text)?;
    let usage = answer
        .get("usage")
        .copied()
        .filter(|usage| usage.get().starts_with('{'));
    let mut read = ReadAnswer {
        response: Cow::Borrowed(text),
        routed_experts: None,
        usage,
        finish_reason: None,
    };
    let Some(choices) = answer
        .get("choices")
        .filter(|choices| choices.get().starts_with('['))
        .and_then(|choices| serde_json::from_str::<Vec<&RawValue>>(choices.get()).ok())
    else {
        return Ok(read);
    };
    // The choices a routing tensor was taken out of, as their members.
    let mut changed: Vec<Option<Members<'_>>> = Vec::with_capacity(choices.len());
    for (index, choice) in choices.iter().copied().enumerate() {
        let members = match read.routed_experts.is_none() && choice.get().starts_with('{') {
            true => members(choice.get().as_bytes()).ok(),
            false => None,
        };
        let Some(mut members) = members else {
            changed.push(None);
            continue;
        };
        if index == 0 {
            read.finish_reason = members
                .get("finish_reason")
                .and_then(|reason| serde_json::from_str::<String>(reason.get()).ok())
                .filter(|reason| !reason.is_empty());
        }
        let routed = members.shift_remove(ROUTED_EXPERTS);
        read.routed_experts = routed.filter(|routed| routed.get() != "null");
        changed.push(routed.map(|_| members));
    }
    if changed.iter().any(Option::is_some) {
        let mut choices_text = Vec::with_capacity(text.len());
        choices_text.push(b'[');
        for (index, (choice, members)) in choices.iter().zip(&changed).enumerate() {
            if index > 0 {
                choices_text.push(b',');
            }
            match members {
                Some(members) => write_object(&mut choices_text, members, &[]),
                None => choices_text.extend_from_slice(choice.get().as_bytes()),
            }
        }
        choices_text.push(b']');
        let mut response = Vec::with_capacity(text.len());
        write_object(&mut response, &answer, &[("choices", utf8(&choices_text))]);
        read.response = Cow::Owned(response);
    }
    Ok(read)
}

/// One upstream answer, as the `model_request` event records it.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamAnswer<'a> {
    /// The rewritten request body sent upstream (JSON text).
    pub request: &'a [u8],
    /// The answer as read (`{}` when it was not JSON).
    pub answer: &'a ReadAnswer<'a>,
    pub http_status: u16,
    pub latency_ms: f64,
    /// Upstream calls made before this answer.
    pub retry_count: u32,
}

/// Returns the data of the `model_request` event of an answer as JSON
/// text, keyed as upstream keys it.
pub fn model_request_data(server: &ModelServer, call: UpstreamAnswer<'_>) -> String {
    let answer = call.answer;
    let pieces =
        [answer.routed_experts, answer.usage].map(|raw| raw.map_or(0, |raw| raw.get().len()));
    let mut out = String::with_capacity(
        call.request.len() + answer.response.len() + pieces.iter().sum::<usize>() + 512,
    );
    let model = json_string(&server.model);
    let version = server.version;
    let _ = write!(
        out,
        "{{\"model\":{model},\"model_version\":{version},\"request\":"
    );
    out.push_str(utf8(call.request));
    out.push_str(",\"response\":");
    out.push_str(utf8(&answer.response));
    let _ = write!(
        out,
        ",\"server\":{{\"model\":{model},\"endpoint\":{endpoint},\"version\":{version}}}\
         ,\"latency_ms\":{latency},\"http_status\":{status},\"status\":\"{ok}\"\
         ,\"retry_count\":{retries},\"routed_experts\":{routed},\"usage\":{usage}\
         ,\"finish_reason\":{reason}}}",
        endpoint = json_string(&server.endpoint),
        latency = serde_json::to_string(&call.latency_ms).expect("a float serialises"),
        status = call.http_status,
        ok = status_of(call.http_status),
        retries = call.retry_count,
        routed = answer.routed_experts.map_or("null", RawValue::get),
        usage = answer.usage.map_or("null", RawValue::get),
        reason = answer
            .finish_reason
            .as_deref()
            .map_or_else(|| "null".to_owned(), json_string),
    );
    out
}

/// Returns `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Returns JSON text as the `str` it is.
fn utf8(text: &[u8]) -> &str {
    std::str::from_utf8(text).expect("JSON text is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes).unwrap()
    }

    fn settings() -> GatewaySettings {
        let mut settings = GatewaySettings::for_model("M");
        settings.include_routed_experts = true;
        settings
    }

    #[test]
    fn requests_are_rewritten_per_mode_in_place_and_appended() {
        let body = br#"{"temperature":0.1,"messages":[],"model":"x"}"#;
        let train = prepare_request(&settings(), body, GatewayMode::Train).unwrap();
        assert_eq!(
            text(&train.body),
            r#"{"temperature":1.0,"messages":[],"model":"M","return_token_ids":true,"logprobs":true,"return_routed_experts":true}"#
        );
        let val = prepare_request(&settings(), body, GatewayMode::Val).unwrap();
        assert_eq!(
            text(&val.body),
            r#"{"temperature":0.7,"messages":[],"model":"M","return_token_ids":true}"#
        );
        let empty = prepare_request(&GatewaySettings::for_model("M"), b"", GatewayMode::Train);
        assert_eq!(
            text(&empty.unwrap().body),
            r#"{"model":"M","temperature":1.0,"return_token_ids":true,"logprobs":true}"#
        );
        // A repeated key keeps its first place and its last value; escaped
        // keys are written as serde_json writes them.
        let repeated = prepare_request(&settings(), br#"{"a":1,"b\n":2,"a":3}"#, GatewayMode::Val);
        assert_eq!(
            text(&repeated.unwrap().body),
            r#"{"a":3,"b\n":2,"model":"M","temperature":0.7,"return_token_ids":true}"#
        );
    }

    #[test]
    fn requests_keep_every_digit_and_refuse_what_is_not_an_object() {
        let body = br#"{"seed":123456789012345678901234567890,"top_p":0.1000000000000000055511151231257827,"n":1e400,"stop":["\u0001"]}"#;
        let prepared = prepare_request(&settings(), body, GatewayMode::Val).unwrap();
        let passed = &prepared.body[..body.len() - 1];
        assert_eq!(text(passed), text(&body[..body.len() - 1]));
        assert!(!prepared.stream);
        assert_eq!(
            prepare_request(&settings(), b"[1]", GatewayMode::Val).unwrap_err(),
            BodyError::NotAnObject
        );
        assert_eq!(
            prepare_request(&settings(), b"{oops", GatewayMode::Val).unwrap_err(),
            BodyError::NotJson
        );
        assert_eq!(
            prepare_request(&settings(), br#"{"a":1}x"#, GatewayMode::Val).unwrap_err(),
            BodyError::NotJson
        );
        for (stream, asked) in [("true", true), ("1", true), ("\"x\"", true), ("0", false)] {
            let body = format!(r#"{{"stream":{stream}}}"#);
            let prepared = prepare_request(&settings(), body.as_bytes(), GatewayMode::Val);
            assert_eq!(prepared.unwrap().stream, asked, "{stream}");
        }
    }

    /// Upstream's `_pop_routed_experts` on a parsed answer, written again.
    fn reference(answer: &str) -> (String, Json) {
        let mut value: Json = serde_json::from_str(answer).unwrap();
        let mut routed = Json::Null;
        if let Some(choices) = value.get_mut("choices").and_then(Json::as_array_mut) {
            for choice in choices.iter_mut().filter_map(Json::as_object_mut) {
                if let Some(popped) = choice.shift_remove(ROUTED_EXPERTS)
                    && !popped.is_null()
                {
                    routed = popped;
                    break;
                }
            }
        }
        (value.to_string(), routed)
    }

    #[test]
    fn answers_lose_routing_tensors_as_upstream_pops_them_and_keep_every_digit() {
        for answer in [
            r#"{"id":"a","choices":[{"index":0,"finish_reason":"stop","token_ids":[1,2]}],"usage":{"total_tokens":3}}"#,
            r#"{"id":"b","choices":[{"routed_experts":null,"finish_reason":"stop"},{"routed_experts":[[1,2]],"index":1},{"routed_experts":[3]}],"usage":{"n":1}}"#,
            r#"{"choices":[7,{"logprobs":{"content":[{"logprob":-0.1000000000000000055511151231257827}]},"routed_experts":[1e400]}],"x":12345678901234567890123}"#,
            r#"{"choices":[{"routed_experts":null}],"usage":[1]}"#,
            r#"{"choices":{"routed_experts":[1]}}"#,
            r#"{"choices":[]}"#,
            r#"{}"#,
        ] {
            let read = read_answer(answer.as_bytes()).unwrap();
            let (expected, routed) = reference(answer);
            assert_eq!(text(&read.response), expected, "{answer}");
            let read_routed = read
                .routed_experts
                .map_or(Json::Null, |raw| serde_json::from_str(raw.get()).unwrap());
            assert_eq!(read_routed, routed, "{answer}");
            if routed.is_null() && !answer.contains(ROUTED_EXPERTS) {
                assert!(matches!(read.response, Cow::Borrowed(_)), "not copied");
            }
        }
        let read = read_answer(br#"{"choices":[{"routed_experts":[1e400],"token_ids":[1]}]}"#);
        assert_eq!(read.unwrap().routed_experts.unwrap().get(), "[1e400]");
    }

    #[test]
    fn answers_give_usage_objects_and_non_empty_finish_reasons() {
        let read = read_answer(br#"{"choices":[{"finish_reason":"length"}],"usage":{"a":1}}"#);
        let read = read.unwrap();
        assert_eq!(read.finish_reason.as_deref(), Some("length"));
        assert_eq!(read.usage.unwrap().get(), r#"{"a":1}"#);
        for answer in [
            r#"{"choices":[{"finish_reason":""}],"usage":null}"#,
            r#"{"choices":[{"finish_reason":1}],"usage":"x"}"#,
            r#"{"choices":[1,{"finish_reason":"stop"}]}"#,
            r#"{"choices":"stop"}"#,
        ] {
            let read = read_answer(answer.as_bytes()).unwrap();
            assert_eq!(read.finish_reason, None, "{answer}");
            assert!(read.usage.is_none(), "{answer}");
        }
        assert_eq!(read_answer(b"[1]").unwrap_err(), BodyError::NotAnObject);
        assert_eq!(read_answer(b"{oops").unwrap_err(), BodyError::NotJson);
    }

    #[test]
    fn events_record_the_call_with_routing_beside_the_response() {
        let answer = br#"{"choices":[{"routed_experts":[[1,2]],"finish_reason":"stop","token_ids":[0.10]}],"usage":{"total_tokens":3}}"#;
        let read = read_answer(answer).unwrap();
        let server = ModelServer {
            model: "m\"1".into(),
            endpoint: "http://a/v1".into(),
            version: 4,
        };
        let data = model_request_data(
            &server,
            UpstreamAnswer {
                request: br#"{"model":"m\"1","seed":1e400}"#,
                answer: &read,
                http_status: 503,
                latency_ms: 1.5,
                retry_count: 5,
            },
        );
        assert_eq!(
            data,
            r#"{"model":"m\"1","model_version":4,"request":{"model":"m\"1","seed":1e400},"response":{"choices":[{"finish_reason":"stop","token_ids":[0.10]}],"usage":{"total_tokens":3}},"server":{"model":"m\"1","endpoint":"http://a/v1","version":4},"latency_ms":1.5,"http_status":503,"status":"error","retry_count":5,"routed_experts":[[1,2]],"usage":{"total_tokens":3},"finish_reason":"stop"}"#
        );
        let parsed: Json = serde_json::from_str(&data).unwrap();
        assert_eq!(parsed["routed_experts"], json!([[1, 2]]));
        let plain = read_answer(b"{}").unwrap();
        let data = model_request_data(
            &server,
            UpstreamAnswer {
                request: b"{}",
                answer: &plain,
                http_status: 200,
                latency_ms: 2.0,
                retry_count: 0,
            },
        );
        assert!(
            data.ends_with(r#""latency_ms":2.0,"http_status":200,"status":"ok","retry_count":0,"routed_experts":null,"usage":null,"finish_reason":null}"#),
            "{data}"
        );
    }
}
