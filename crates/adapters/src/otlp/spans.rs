//! How OTLP spans become store spans, as agent-lightning's
//! `spans_from_proto` maps them: rollout, attempt and sequence ids come
//! from the `agentlightning.*` resource attributes, overridden by the
//! span's own attributes; ids are the bytes as lowercase hex, left-padded.
//! Unlike upstream we keep span kind, scope, trace state and the parent
//! context (upstream drops them), and attributes keep their OTLP types.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue as OtlpKeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1 as otlp;

use crate::pyjson::python_repr_float;
use lightning_store_core::ids;
use lightning_store_core::model::{
    AttributeValue, ExtraFields, InstrumentationScope, KeyValue, NewSpan, Span, SpanContext,
    SpanEvent, SpanKind, SpanLink, SpanResource, SpanStatus, SpanStatusCode, Timestamp, TraceState,
};
use lightning_store_proto::{ATTEMPT_ID_KEY, ROLLOUT_ID_KEY, SEQUENCE_ID_KEY};

/// Ids that route a span to an attempt.
#[derive(Debug, Clone, Default)]
struct Routing {
    rollout_id: Option<String>,
    attempt_id: Option<String>,
    sequence_id: Option<i64>,
}

impl Routing {
    /// Returns this routing overridden by the routing attributes in `attributes`.
    fn overridden_by(&self, attributes: &[OtlpKeyValue]) -> Self {
        let mut routing = self.clone();
        for kv in attributes {
            let Some(value) = kv.value.as_ref().and_then(|v| v.value.as_ref()) else {
                continue;
            };
            match kv.key.as_str() {
                ROLLOUT_ID_KEY => routing.rollout_id = Some(stringify(value)),
                ATTEMPT_ID_KEY => routing.attempt_id = Some(stringify(value)),
                SEQUENCE_ID_KEY => routing.sequence_id = parse_sequence_id(value),
                _ => {}
            }
        }
        routing
    }
}

/// Renders an id attribute as upstream's `str(value)` does.
fn stringify(value: &any_value::Value) -> String {
    match value {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::DoubleValue(d) => python_repr_float(*d),
        any_value::Value::BoolValue(b) => if *b { "True" } else { "False" }.to_owned(),
        any_value::Value::BytesValue(b) => hex::encode(b),
        other => format!("{other:?}"),
    }
}

/// Parses a sequence id; unparsable or negative ids are dropped (a fresh id
/// is allocated instead), as upstream does.
fn parse_sequence_id(value: &any_value::Value) -> Option<i64> {
    let parsed = match value {
        any_value::Value::IntValue(i) => Some(*i),
        any_value::Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    };
    match parsed {
        Some(id) if id >= 0 => Some(id),
        Some(id) => {
            tracing::warn!(
                sequence_id = id,
                "negative otlp sequence id, allocating a new one"
            );
            None
        }
        None => {
            tracing::warn!(?value, "unparsable otlp sequence id, allocating a new one");
            None
        }
    }
}

/// Renders an OTLP id as lowercase hex left-padded to `digits` (empty: all
/// zeros), as upstream's `hex().rjust()` does; longer ids stay whole.
fn hex_id(bytes: &[u8], digits: usize) -> String {
    format!("{:0>digits$}", hex::encode(bytes))
}

fn time(nanos: u64) -> Option<Timestamp> {
    (nanos != 0).then(|| Timestamp(i64::try_from(nanos).unwrap_or(i64::MAX)))
}

/// Converts an OTLP attribute value (lossless).
fn attribute_value(value: Option<AnyValue>) -> AttributeValue {
    match value.and_then(|v| v.value) {
        None => AttributeValue::Empty,
        Some(any_value::Value::StringValue(s)) => AttributeValue::String(s),
        Some(any_value::Value::BoolValue(b)) => AttributeValue::Bool(b),
        Some(any_value::Value::IntValue(i)) => AttributeValue::Int(i),
        Some(any_value::Value::DoubleValue(d)) => AttributeValue::Double(d),
        Some(any_value::Value::BytesValue(b)) => AttributeValue::Bytes(b),
        Some(any_value::Value::ArrayValue(a)) => AttributeValue::Array(
            a.values
                .into_iter()
                .map(|v| attribute_value(Some(v)))
                .collect(),
        ),
        Some(any_value::Value::KvlistValue(kv)) => AttributeValue::Map(attributes(kv.values)),
        // String-table references are defined only for profiles; a trace
        // has no table to resolve them against.
        Some(any_value::Value::StringValueStrindex(_)) => AttributeValue::Empty,
    }
}

fn attributes(values: Vec<OtlpKeyValue>) -> Vec<KeyValue> {
    values
        .into_iter()
        .map(|kv| KeyValue {
            key: kv.key,
            value: attribute_value(kv.value),
        })
        .collect()
}

fn span_kind(kind: i32) -> SpanKind {
    match otlp::span::SpanKind::try_from(kind) {
        Ok(otlp::span::SpanKind::Internal) => SpanKind::Internal,
        Ok(otlp::span::SpanKind::Server) => SpanKind::Server,
        Ok(otlp::span::SpanKind::Client) => SpanKind::Client,
        Ok(otlp::span::SpanKind::Producer) => SpanKind::Producer,
        Ok(otlp::span::SpanKind::Consumer) => SpanKind::Consumer,
        _ => SpanKind::Unspecified,
    }
}

fn status(status: Option<otlp::Status>) -> SpanStatus {
    let status = status.unwrap_or_default();
    SpanStatus {
        code: match otlp::status::StatusCode::try_from(status.code) {
            Ok(otlp::status::StatusCode::Ok) => SpanStatusCode::Ok,
            Ok(otlp::status::StatusCode::Error) => SpanStatusCode::Error,
            _ => SpanStatusCode::Unset,
        },
        description: (!status.message.is_empty()).then_some(status.message),
        extra: ExtraFields::default(),
    }
}

/// OTLP span flag bits telling whether the parent context is remote.
const HAS_REMOTE_PARENT_FLAG: u32 = 0x100;
const REMOTE_PARENT_FLAG: u32 = 0x200;

fn context(trace_id: String, span_id: String, is_remote: bool, state: &str) -> SpanContext {
    SpanContext {
        trace_id,
        span_id,
        is_remote,
        trace_state: TraceState::from_header(state),
        extra: ExtraFields::default(),
    }
}

/// Converts one OTLP span; `Err` names why it cannot be stored.
fn convert_span(
    span: otlp::Span,
    routing: &Routing,
    resource: &SpanResource,
    scope: &InstrumentationScope,
) -> Result<NewSpan, String> {
    let name = span.name;
    let routing = routing.overridden_by(&span.attributes);
    let (Some(rollout_id), Some(attempt_id)) = (routing.rollout_id, routing.attempt_id) else {
        return Err(format!(
            "span {name:?} has no {ROLLOUT_ID_KEY} or {ATTEMPT_ID_KEY} attribute"
        ));
    };
    ids::validate_id("rollout id", &rollout_id).map_err(|e| e.to_string())?;
    ids::validate_id("attempt id", &attempt_id).map_err(|e| e.to_string())?;
    let trace_id = hex_id(&span.trace_id, 32);
    let span_id = hex_id(&span.span_id, 16);
    let parent_id = (!span.parent_span_id.is_empty()).then(|| hex_id(&span.parent_span_id, 16));
    let links = span
        .links
        .into_iter()
        .map(|link| SpanLink {
            context: context(
                hex_id(&link.trace_id, 32),
                hex_id(&link.span_id, 16),
                link.flags & REMOTE_PARENT_FLAG != 0,
                &link.trace_state,
            ),
            // Upstream: `_kv_list_to_dict(link.attributes) or None`.
            attributes: (!link.attributes.is_empty()).then(|| attributes(link.attributes)),
            extra: ExtraFields::default(),
        })
        .collect();
    let parent = parent_id.as_ref().map(|parent_id| {
        let remote =
            span.flags & HAS_REMOTE_PARENT_FLAG != 0 && span.flags & REMOTE_PARENT_FLAG != 0;
        context(trace_id.clone(), parent_id.clone(), remote, "")
    });
    Ok(NewSpan {
        sequence_id: routing.sequence_id,
        span: Span {
            rollout_id,
            attempt_id,
            sequence_id: 0,
            context: Some(context(
                trace_id.clone(),
                span_id.clone(),
                false,
                &span.trace_state,
            )),
            trace_id,
            span_id,
            parent_id,
            name,
            status: status(span.status),
            attributes: attributes(span.attributes),
            events: span
                .events
                .into_iter()
                .map(|event| SpanEvent {
                    name: event.name,
                    attributes: attributes(event.attributes),
                    time: time(event.time_unix_nano),
                    extra: ExtraFields::default(),
                })
                .collect(),
            links,
            start_time: time(span.start_time_unix_nano),
            end_time: time(span.end_time_unix_nano),
            parent,
            resource: Some(resource.clone()),
            kind: span_kind(span.kind),
            scope: Some(scope.clone()),
            extra: ExtraFields::default(),
        },
    })
}

/// Converts every span of a request, in order; returns the storable spans
/// and the reasons of those that cannot be stored.
pub fn spans_from_request(request: ExportTraceServiceRequest) -> (Vec<NewSpan>, Vec<String>) {
    let mut spans = Vec::new();
    let mut rejected = Vec::new();
    for resource_spans in request.resource_spans {
        let resource_attributes = resource_spans
            .resource
            .map(|r| r.attributes)
            .unwrap_or_default();
        let routing = Routing::default().overridden_by(&resource_attributes);
        let resource = SpanResource {
            attributes: attributes(resource_attributes),
            schema_url: resource_spans.schema_url,
        };
        for scope_spans in resource_spans.scope_spans {
            let scope = scope_spans
                .scope
                .map(|scope| InstrumentationScope {
                    name: scope.name,
                    version: scope.version,
                    attributes: attributes(scope.attributes),
                })
                .unwrap_or_default();
            for span in scope_spans.spans {
                match convert_span(span, &routing, &resource, &scope) {
                    Ok(span) => spans.push(span),
                    Err(reason) => rejected.push(reason),
                }
            }
        }
    }
    (spans, rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_left_padded_and_routing_values_stringified() {
        assert_eq!(hex_id(&[0xab, 0x01], 16), "000000000000ab01");
        assert_eq!(hex_id(&[], 32), "0".repeat(32));
        assert_eq!(hex_id(&[0xff; 9], 16), "ff".repeat(9));
        assert_eq!(stringify(&any_value::Value::IntValue(42)), "42");
        assert_eq!(stringify(&any_value::Value::DoubleValue(1.0)), "1.0");
        assert_eq!(stringify(&any_value::Value::BoolValue(true)), "True");
        assert_eq!(
            parse_sequence_id(&any_value::Value::StringValue(" 12 ".into())),
            Some(12)
        );
        assert_eq!(
            parse_sequence_id(&any_value::Value::StringValue("x".into())),
            None
        );
        assert_eq!(parse_sequence_id(&any_value::Value::IntValue(-1)), None);
        assert_eq!(parse_sequence_id(&any_value::Value::IntValue(0)), Some(0));
    }
}
