//! Conversions of spans between protobuf and the domain. Every field of
//! agent-lightning's span model has a place on both sides, so spans
//! round-trip exactly: ids verbatim, the trace state as ordered entries,
//! links with or without an attribute map, and unknown fields as JSON.

use super::time::{opt_time, timestamp_from_proto};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::{self as m, ExtraFields, Json, TraceState};
use lightning_store_proto as pb;

fn value_to_proto(value: &m::AttributeValue) -> pb::AttributeValue {
    use pb::attribute_value::Value;
    let value = match value {
        m::AttributeValue::Empty => None,
        m::AttributeValue::String(s) => Some(Value::StringValue(s.clone())),
        m::AttributeValue::Bool(b) => Some(Value::BoolValue(*b)),
        m::AttributeValue::Int(i) => Some(Value::IntValue(*i)),
        m::AttributeValue::Double(d) => Some(Value::DoubleValue(*d)),
        m::AttributeValue::Bytes(b) => Some(Value::BytesValue(b.clone())),
        m::AttributeValue::Array(items) => Some(Value::ArrayValue(pb::ArrayValue {
            values: items.iter().map(value_to_proto).collect(),
        })),
        m::AttributeValue::Map(entries) => Some(Value::KvlistValue(pb::KeyValueList {
            values: attributes_to_proto(entries),
        })),
    };
    pb::AttributeValue { value }
}

fn value_from_proto(value: pb::AttributeValue) -> m::AttributeValue {
    use pb::attribute_value::Value;
    match value.value {
        None => m::AttributeValue::Empty,
        Some(Value::StringValue(s)) => m::AttributeValue::String(s),
        Some(Value::BoolValue(b)) => m::AttributeValue::Bool(b),
        Some(Value::IntValue(i)) => m::AttributeValue::Int(i),
        Some(Value::DoubleValue(d)) => m::AttributeValue::Double(d),
        Some(Value::BytesValue(b)) => m::AttributeValue::Bytes(b),
        Some(Value::ArrayValue(a)) => {
            m::AttributeValue::Array(a.values.into_iter().map(value_from_proto).collect())
        }
        Some(Value::KvlistValue(kv)) => m::AttributeValue::Map(attributes_from_proto(kv.values)),
    }
}

fn attributes_to_proto(attributes: &[m::KeyValue]) -> Vec<pb::KeyValue> {
    attributes
        .iter()
        .map(|kv| pb::KeyValue {
            key: kv.key.clone(),
            value: Some(value_to_proto(&kv.value)),
        })
        .collect()
}

fn attributes_from_proto(attributes: Vec<pb::KeyValue>) -> Vec<m::KeyValue> {
    attributes
        .into_iter()
        .map(|kv| m::KeyValue {
            key: kv.key,
            value: kv.value.map_or(m::AttributeValue::Empty, value_from_proto),
        })
        .collect()
}

/// Renders extra fields as JSON text (empty when there are none).
fn extra_to_text(extra: &ExtraFields) -> String {
    extra
        .fields()
        .map(|fields| Json::Object(fields.clone()).to_string())
        .unwrap_or_default()
}

/// Parses extra fields: a JSON object, or empty for none.
fn extra_from_text(field: &str, text: &str) -> StoreResult<ExtraFields> {
    if text.is_empty() {
        return Ok(ExtraFields::default());
    }
    match serde_json::from_str(text) {
        Ok(Json::Object(fields)) => Ok(ExtraFields::new(fields)),
        Ok(_) => Err(StoreError::invalid(format!(
            "{field} must be a JSON object"
        ))),
        Err(e) => Err(StoreError::invalid(format!(
            "{field} is not valid JSON: {e}"
        ))),
    }
}

fn context_to_proto(c: &m::SpanContext) -> pb::SpanContext {
    pb::SpanContext {
        trace_id: c.trace_id.clone(),
        span_id: c.span_id.clone(),
        is_remote: c.is_remote,
        trace_state: c.trace_state.to_header(),
        trace_state_entries: c
            .trace_state
            .0
            .iter()
            .map(|(key, value)| pb::TraceStateEntry {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        extra_json: extra_to_text(&c.extra),
    }
}

fn context_from_proto(field: &str, c: pb::SpanContext) -> StoreResult<m::SpanContext> {
    let trace_state = if c.trace_state_entries.is_empty() {
        TraceState::from_header(&c.trace_state)
    } else {
        TraceState(
            c.trace_state_entries
                .into_iter()
                .map(|entry| (entry.key, entry.value))
                .collect(),
        )
    };
    Ok(m::SpanContext {
        trace_id: c.trace_id,
        span_id: c.span_id,
        is_remote: c.is_remote,
        trace_state,
        extra: extra_from_text(&format!("{field}.extra_json"), &c.extra_json)?,
    })
}

fn span_kind_to_proto(kind: m::SpanKind) -> pb::SpanKind {
    match kind {
        m::SpanKind::Unspecified => pb::SpanKind::Unspecified,
        m::SpanKind::Internal => pb::SpanKind::Internal,
        m::SpanKind::Server => pb::SpanKind::Server,
        m::SpanKind::Client => pb::SpanKind::Client,
        m::SpanKind::Producer => pb::SpanKind::Producer,
        m::SpanKind::Consumer => pb::SpanKind::Consumer,
    }
}

fn span_kind_from_proto(value: i32) -> StoreResult<m::SpanKind> {
    Ok(match pb::SpanKind::try_from(value) {
        Ok(pb::SpanKind::Unspecified) => m::SpanKind::Unspecified,
        Ok(pb::SpanKind::Internal) => m::SpanKind::Internal,
        Ok(pb::SpanKind::Server) => m::SpanKind::Server,
        Ok(pb::SpanKind::Client) => m::SpanKind::Client,
        Ok(pb::SpanKind::Producer) => m::SpanKind::Producer,
        Ok(pb::SpanKind::Consumer) => m::SpanKind::Consumer,
        Err(_) => return Err(StoreError::invalid(format!("invalid span kind: {value}"))),
    })
}

fn status_code_from_proto(value: i32) -> StoreResult<m::SpanStatusCode> {
    Ok(match pb::SpanStatusCode::try_from(value) {
        Ok(pb::SpanStatusCode::Unspecified) => m::SpanStatusCode::Unset,
        Ok(pb::SpanStatusCode::Ok) => m::SpanStatusCode::Ok,
        Ok(pb::SpanStatusCode::Error) => m::SpanStatusCode::Error,
        Err(_) => {
            return Err(StoreError::invalid(format!(
                "invalid span status code: {value}"
            )));
        }
    })
}

fn status_code_to_proto(code: m::SpanStatusCode) -> pb::SpanStatusCode {
    match code {
        m::SpanStatusCode::Unset => pb::SpanStatusCode::Unspecified,
        m::SpanStatusCode::Ok => pb::SpanStatusCode::Ok,
        m::SpanStatusCode::Error => pb::SpanStatusCode::Error,
    }
}

/// Converts a span.
pub fn span_to_proto(s: &m::Span) -> pb::Span {
    pb::Span {
        rollout_id: s.rollout_id.clone(),
        attempt_id: s.attempt_id.clone(),
        sequence_id: Some(s.sequence_id),
        trace_id: s.trace_id.clone(),
        span_id: s.span_id.clone(),
        parent_id: s.parent_id.clone(),
        name: s.name.clone(),
        status: Some(pb::SpanStatus {
            code: status_code_to_proto(s.status.code) as i32,
            description: s.status.description.clone(),
            extra_json: extra_to_text(&s.status.extra),
        }),
        attributes: attributes_to_proto(&s.attributes),
        events: s
            .events
            .iter()
            .map(|e| pb::SpanEvent {
                name: e.name.clone(),
                attributes: attributes_to_proto(&e.attributes),
                time: opt_time(e.time),
                extra_json: extra_to_text(&e.extra),
            })
            .collect(),
        links: s
            .links
            .iter()
            .map(|l| pb::SpanLink {
                context: Some(context_to_proto(&l.context)),
                attributes: l
                    .attributes
                    .as_deref()
                    .map(attributes_to_proto)
                    .unwrap_or_default(),
                has_attributes: l.attributes.is_some(),
                extra_json: extra_to_text(&l.extra),
            })
            .collect(),
        start_time: opt_time(s.start_time),
        end_time: opt_time(s.end_time),
        context: s.context.as_ref().map(context_to_proto),
        parent: s.parent.as_ref().map(context_to_proto),
        resource: s.resource.as_ref().map(|r| pb::SpanResource {
            attributes: attributes_to_proto(&r.attributes),
            schema_url: r.schema_url.clone(),
        }),
        kind: span_kind_to_proto(s.kind) as i32,
        scope: s.scope.as_ref().map(|sc| pb::InstrumentationScope {
            name: sc.name.clone(),
            version: sc.version.clone(),
            attributes: attributes_to_proto(&sc.attributes),
        }),
        extra_json: extra_to_text(&s.extra),
    }
}

/// Converts and checks a span submitted by a client. Its trace, span and
/// parent ids are opaque text, kept verbatim; any explicit sequence id is
/// accepted, as upstream does.
pub fn span_from_proto(s: pb::Span) -> StoreResult<m::NewSpan> {
    let time = |field: &str, t: Option<prost_types::Timestamp>| {
        t.map(|t| timestamp_from_proto(field, &t)).transpose()
    };
    let status = s.status.unwrap_or_default();
    let span = m::Span {
        rollout_id: s.rollout_id,
        attempt_id: s.attempt_id,
        sequence_id: s.sequence_id.unwrap_or_default(),
        trace_id: s.trace_id,
        span_id: s.span_id,
        parent_id: s.parent_id,
        name: s.name,
        status: m::SpanStatus {
            code: status_code_from_proto(status.code)?,
            description: status.description,
            extra: extra_from_text("span.status.extra_json", &status.extra_json)?,
        },
        attributes: attributes_from_proto(s.attributes),
        events: s
            .events
            .into_iter()
            .map(|e| {
                Ok(m::SpanEvent {
                    name: e.name,
                    attributes: attributes_from_proto(e.attributes),
                    time: time("span.events.time", e.time)?,
                    extra: extra_from_text("span.events.extra_json", &e.extra_json)?,
                })
            })
            .collect::<StoreResult<_>>()?,
        links: s
            .links
            .into_iter()
            .map(|l| {
                let attributes = (l.has_attributes || !l.attributes.is_empty())
                    .then(|| attributes_from_proto(l.attributes));
                Ok(m::SpanLink {
                    context: context_from_proto(
                        "span.links.context",
                        l.context.unwrap_or_default(),
                    )?,
                    attributes,
                    extra: extra_from_text("span.links.extra_json", &l.extra_json)?,
                })
            })
            .collect::<StoreResult<_>>()?,
        start_time: time("span.start_time", s.start_time)?,
        end_time: time("span.end_time", s.end_time)?,
        context: s
            .context
            .map(|c| context_from_proto("span.context", c))
            .transpose()?,
        parent: s
            .parent
            .map(|c| context_from_proto("span.parent", c))
            .transpose()?,
        resource: s.resource.map(|r| m::SpanResource {
            attributes: attributes_from_proto(r.attributes),
            schema_url: r.schema_url,
        }),
        kind: span_kind_from_proto(s.kind)?,
        scope: s.scope.map(|sc| m::InstrumentationScope {
            name: sc.name,
            version: sc.version,
            attributes: attributes_from_proto(sc.attributes),
        }),
        extra: extra_from_text("span.extra_json", &s.extra_json)?,
    };
    Ok(m::NewSpan {
        sequence_id: s.sequence_id,
        span,
    })
}
