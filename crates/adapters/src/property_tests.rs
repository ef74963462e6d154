//! Property tests of the request decoding and conversion layer, run as a
//! fuzz target with a fixed case count: arbitrary bytes decoded as the store's requests and OTLP exports,
//! arbitrary well-typed messages through the gRPC converters
//! ([`crate::api::convert`], [`crate::otlp`]), and arbitrary JSON bodies
//! through the HTTP adapters' validation (agent-lightning 0.x and 1.x).
//! Every input must be answered, accepted or refused with a bounded
//! message; a panic fails the test. The case count is fixed (the
//! `PROPTEST_CASES` variable overrides it), so CI spends seconds on it.

use proptest::collection::vec;
use proptest::prelude::*;
use prost::Message;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use crate::api::convert::{self as c, ProtoEnum as _};
use crate::api::status::status_of;
use crate::http::agl0::requests;
use crate::http::agl0::span_json;
use crate::http::agl1::schema;
use crate::http::error::HttpError;
use crate::http::validate::{Loc, Validator};
use lightning_store_core::error::{MESSAGE_LIMIT, StoreError};
use lightning_store_core::ids::{RolloutId, WorkerId};
use lightning_store_core::model::{AttemptStatus, Json, RolloutStatus};
use lightning_store_proto as pb;

/// Cases per property: enough to reach the converters' corners, few enough
/// for CI (a few seconds in a debug build).
const CASES: u32 = 2048;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
            .unwrap_or(CASES),
        // A failure is reported as found: no regression files in the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Asserts that a refusal is a client's error with a bounded message, as
/// the client would see it over gRPC.
fn refused_clearly(error: StoreError) {
    assert!(
        !matches!(error, StoreError::Internal(_)),
        "bad input answered as internal: {error:?}"
    );
    let status = status_of(error);
    assert!(status.message().len() <= MESSAGE_LIMIT + 32, "{status:?}");
}

fn answered<T>(result: Result<T, StoreError>) {
    if let Err(error) = result {
        refused_clearly(error);
    }
}

/// Asserts that an HTTP refusal renders (with its bounded detail).
fn answered_http<T, E: Into<HttpError>>(result: Result<T, E>) {
    if let Err(error) = result {
        let response = axum::response::IntoResponse::into_response(error.into());
        assert!(response.status().is_client_error(), "{response:?}");
    }
}

/// Text with the characters that trip validators: controls, non-ASCII,
/// quotes, and JSON-looking fragments.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        vec(any::<char>(), 0..12).prop_map(String::from_iter),
        vec(
            prop::sample::select(vec![
                "{", "}", "[", "]", "\"", ":", ",", "1e999", "-0", "null", "true", "\n", "\u{0}",
                "é", "ro-1", "latest", " ",
            ]),
            0..12
        )
        .prop_map(|parts| parts.concat()),
        Just(String::new()),
    ]
}

/// Numbers at the edges: huge integers, long decimals, exponents.
fn number() -> impl Strategy<Value = Json> {
    prop_oneof![
        any::<i64>().prop_map(Json::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)),
        prop::sample::select(vec![
            "123456789012345678901234567890",
            "-98765432109876543210",
            "0.1000000000000000055511151231257827",
            "-1e-400",
            "1e400",
            "1E+99999999999",
            "2.50E-7",
            "9007199254740993",
            "-0",
        ])
        .prop_map(|text| serde_json::from_str(text).expect("a JSON number")),
    ]
}

/// The field names the adapters read, and some they do not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "input",
            "mode",
            "resources_id",
            "config",
            "metadata",
            "status",
            "max_attempts",
            "retry_condition",
            "timeout_seconds",
            "unresponsive_seconds",
            "name",
            "attributes",
            "context",
            "parent",
            "start_time",
            "end_time",
            "rollout_id",
            "attempt_id",
            "sequence_id",
            "span_id",
            "trace_id",
            "parent_id",
            "worker_id",
            "events",
            "links",
            "last_heartbeat_time",
            "event_type",
            "data",
            "is_train",
            "state",
            "model",
            "endpoint",
            "generation",
            "rollouts",
            "limit",
            "resource",
            "trace_state",
            "is_remote",
            "description",
            "status_code",
            // OTLP/JSON's names.
            "resourceSpans",
            "scopeSpans",
            "spans",
            "value",
            "values",
            "intValue",
            "doubleValue",
            "arrayValue",
            "kvlistValue",
            // The gateway's.
            "choices",
            "routed_experts",
            "finish_reason",
            "usage",
        ])
        .prop_map(str::to_owned),
        text(),
    ]
}

/// Arbitrary JSON, nested a few levels.
fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        text().prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Json::Array),
            vec((key(), inner), 0..8).prop_map(|fields| Json::Object(fields.into_iter().collect())),
        ]
    })
}

fn timestamp() -> impl Strategy<Value = prost_types::Timestamp> {
    (any::<i64>(), any::<i32>())
        .prop_map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos })
}

fn duration() -> impl Strategy<Value = prost_types::Duration> {
    (any::<i64>(), any::<i32>())
        .prop_map(|(seconds, nanos)| prost_types::Duration { seconds, nanos })
}

fn attribute_value() -> impl Strategy<Value = pb::AttributeValue> {
    use pb::attribute_value::Value;
    let leaf = prop_oneof![
        Just(None),
        text().prop_map(|s| Some(Value::StringValue(s))),
        any::<bool>().prop_map(|b| Some(Value::BoolValue(b))),
        any::<i64>().prop_map(|i| Some(Value::IntValue(i))),
        any::<f64>().prop_map(|f| Some(Value::DoubleValue(f))),
        vec(any::<u8>(), 0..8).prop_map(|b| Some(Value::BytesValue(b))),
    ]
    .prop_map(|value| pb::AttributeValue { value });
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|values| pb::AttributeValue {
                value: Some(Value::ArrayValue(pb::ArrayValue { values })),
            }),
            vec((text(), inner), 0..4).prop_map(|pairs| pb::AttributeValue {
                value: Some(Value::KvlistValue(pb::KeyValueList {
                    values: pairs
                        .into_iter()
                        .map(|(key, value)| pb::KeyValue {
                            key,
                            value: Some(value)
                        })
                        .collect(),
                })),
            }),
        ]
    })
}

fn attributes() -> impl Strategy<Value = Vec<pb::KeyValue>> {
    vec((text(), proptest::option::of(attribute_value())), 0..4).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(key, value)| pb::KeyValue { key, value })
            .collect()
    })
}

fn context() -> impl Strategy<Value = pb::SpanContext> {
    (text(), text(), any::<bool>(), text(), text()).prop_map(
        |(trace_id, span_id, is_remote, trace_state, extra_json)| pb::SpanContext {
            trace_id,
            span_id,
            is_remote,
            trace_state,
            trace_state_entries: Vec::new(),
            extra_json,
        },
    )
}

fn span() -> impl Strategy<Value = pb::Span> {
    (
        (
            text(),
            text(),
            proptest::option::of(any::<i64>()),
            text(),
            text(),
        ),
        (proptest::option::of(text()), text(), attributes()),
        (
            proptest::option::of(timestamp()),
            proptest::option::of(timestamp()),
        ),
        (
            proptest::option::of(context()),
            any::<i32>(),
            text(),
            text(),
        ),
    )
        .prop_map(
            |(
                (rollout_id, attempt_id, sequence_id, trace_id, span_id),
                (parent_id, name, attributes),
                (start_time, end_time),
                (context, code, description, extra_json),
            )| pb::Span {
                rollout_id,
                attempt_id,
                sequence_id,
                trace_id,
                span_id,
                parent_id,
                name,
                status: Some(pb::SpanStatus {
                    code,
                    description: Some(description),
                    extra_json: extra_json.clone(),
                }),
                attributes,
                start_time,
                end_time,
                context,
                extra_json,
                ..Default::default()
            },
        )
}

fn rollout_config() -> impl Strategy<Value = pb::RolloutConfig> {
    (
        proptest::option::of(any::<f64>()),
        proptest::option::of(any::<f64>()),
        proptest::option::of(any::<i64>()),
        vec(any::<i32>(), 0..4),
    )
        .prop_map(
            |(timeout_seconds, unresponsive_seconds, max_attempts, retry_condition)| {
                pb::RolloutConfig {
                    timeout_seconds,
                    unresponsive_seconds,
                    max_attempts,
                    retry_condition,
                }
            },
        )
}

fn spec() -> impl Strategy<Value = pb::RolloutSpec> {
    (
        prop_oneof![json().prop_map(|j| j.to_string()), text()],
        any::<i32>(),
        proptest::option::of(text()),
        proptest::option::of(rollout_config()),
        prop_oneof![json().prop_map(|j| j.to_string()), text()],
    )
        .prop_map(
            |(input_json, mode, resources_id, config, metadata_json)| pb::RolloutSpec {
                input_json,
                mode,
                resources_id,
                config,
                metadata_json,
            },
        )
}

/// Runs the converters a handler runs on whatever `bytes` decode as.
fn decode_and_convert(bytes: &[u8]) {
    if let Ok(request) = pb::EnqueueRolloutsRequest::decode(bytes) {
        for spec in &request.rollouts {
            answered(c::spec_from_proto(Some(spec)));
        }
    }
    if let Ok(request) = pb::AddSpansRequest::decode(bytes) {
        for span in request.spans {
            answered(c::span_from_proto(span));
        }
    }
    if let Ok(request) = pb::UpdateRolloutRequest::decode(bytes) {
        answered(c::json_from_text(
            "input_json",
            &request.input_json,
            Json::Null,
        ));
        answered(c::mode_from_proto(request.mode));
        answered(c::config_from_proto(request.config.as_ref()));
        answered(RolloutStatus::from_proto(request.status));
    }
    if let Ok(request) = pb::UpdateAttemptRequest::decode(bytes) {
        answered(AttemptStatus::from_proto(request.status));
        if let Some(time) = &request.last_heartbeat_time {
            answered(c::timestamp_from_proto("last_heartbeat_time", time));
        }
        answered(WorkerId::parse("worker_id", request.worker_id));
    }
    if let Ok(request) = pb::QueryRolloutsRequest::decode(bytes) {
        answered(c::page_from_proto(request.page.as_ref()));
        answered(c::filter_logic_from_proto(request.filter_logic));
        for rollout_id in &request.rollout_id_in {
            answered(RolloutId::parse("rollout_id_in", rollout_id.clone()));
        }
    }
    if let Ok(request) = pb::DequeueRolloutsRequest::decode(bytes) {
        answered(c::duration_from_proto("wait", request.wait.as_ref()));
        if let Some(worker_id) = request.worker_id {
            answered(WorkerId::parse("worker_id", worker_id));
        }
    }
    if let Ok(request) = pb::WatchEventsRequest::decode(bytes) {
        for &kind in &request.kinds {
            answered(c::event_kind_from_proto(kind));
        }
    }
    if let Ok(request) = pb::AddResourcesRequest::decode(bytes) {
        answered(c::resources_from_text(&request.resources_json));
    }
    if let Ok(request) = ExportTraceServiceRequest::decode(bytes) {
        let (spans, rejected) = crate::otlp::spans::spans_from_request(request);
        assert!(spans.len() + rejected.len() < bytes.len().max(1) * 8);
    }
}

/// Runs agent-lightning's HTTP validation of every body kind on `body`.
fn validate_bodies(body: &Json) {
    let loc = Loc::body();
    if let Json::Object(object) = body {
        let mut v = Validator::new();
        let spec = requests::read_spec(&mut v, &loc, object);
        answered_http(v.finish(spec));
    }
    answered_http(requests::read_rollout_patch(body));
    answered_http(requests::read_attempt_patch(body));
    let mut v = Validator::new();
    let span = span_json::read_span(&mut v, &loc, body);
    answered_http(v.finish(span));
    let mut v = Validator::new();
    let created = v.each(&loc, body, schema::rollout_create);
    answered_http(v.finish(created));
    let mut v = Validator::new();
    let patch = schema::rollout_patch(&mut v, &loc, body);
    answered_http(v.finish(patch));
    let mut v = Validator::new();
    let model = schema::model(&mut v, &loc, body);
    answered_http(v.finish(model));
    let mut v = Validator::new();
    let pause = schema::pause_request(&mut v, &loc, body);
    answered_http(v.finish(pause));
    // Answers render whatever the numbers they hold.
    crate::pyjson::to_vec(body).expect("any JSON value renders");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_decode_and_convert_without_panicking(bytes in vec(any::<u8>(), 0..256)) {
        decode_and_convert(&bytes);
    }

    #[test]
    fn well_typed_requests_convert_without_panicking(
        specs in vec(spec(), 0..3),
        spans in vec(span(), 0..3),
        wait in proptest::option::of(duration()),
        flip in any::<prop::sample::Index>(),
    ) {
        for spec in &specs {
            answered(c::spec_from_proto(Some(spec)));
        }
        for span in &spans {
            answered(c::span_from_proto(span.clone()));
        }
        answered(c::duration_from_proto("wait", wait.as_ref()));
        // The same requests as bytes, one byte damaged: the decoder's
        // corners with realistic shapes.
        let mut bytes = pb::AddSpansRequest { spans, ..Default::default() }.encode_to_vec();
        bytes.extend(pb::EnqueueRolloutsRequest { rollouts: specs, ..Default::default() }.encode_to_vec());
        if !bytes.is_empty() {
            let at = flip.index(bytes.len());
            bytes[at] ^= 0x5a;
        }
        decode_and_convert(&bytes);
    }

    #[test]
    fn gateway_bodies_as_text_agree_with_their_values(body in json(), choices in vec(json(), 0..4)) {
        use crate::pyjson::{is_canonical, to_vec};
        // What serde_json writes passes as it is; with Python's numbers, what the replies write.
        prop_assert!(is_canonical(&serde_json::to_vec(&body).unwrap(), false));
        prop_assert!(is_canonical(&to_vec(&body).unwrap(), true));
        // An answer read as text loses what upstream's `_pop_routed_experts` takes, nothing else.
        let answer = serde_json::json!({"choices": choices, "usage": body});
        let text = serde_json::to_vec(&answer).unwrap();
        let read = lightning_store_core::agl1::model_call::read_answer(&text).unwrap();
        let mut expected = answer;
        let mut routed = Json::Null;
        for choice in expected["choices"].as_array_mut().unwrap().iter_mut().filter_map(Json::as_object_mut) {
            if let Some(popped) = choice.shift_remove("routed_experts") && !popped.is_null() {
                routed = popped;
                break;
            }
        }
        prop_assert_eq!(std::str::from_utf8(&read.response).unwrap(), expected.to_string());
        let read_routed = read.routed_experts.map_or(Json::Null, |raw| serde_json::from_str(raw.get()).unwrap());
        prop_assert_eq!(read_routed, routed);
    }

    #[test]
    fn json_bodies_validate_without_panicking(body in json()) {
        validate_bodies(&body);
        // The same JSON as the text of a gRPC `*_json` field.
        answered(c::json_from_text("input_json", &body.to_string(), Json::Null));
        answered(c::resources_from_text(&body.to_string()));
        // The same JSON as an OTLP/JSON export: decoded or refused.
        let _ = crate::otlp::json::decode_export(body.to_string().as_bytes());
    }
}
