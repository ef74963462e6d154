//! agent-lightning's `Span` model as JSON: read with pydantic's rules (its
//! attribute union, its nested models, extra fields kept in order) and
//! written back field for field, so that a span round-trips exactly.
//!
//! Over 600 lines only with its tests: reading and writing the one model
//! stay together so that the round trip is checked in one place.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::super::validate::{Loc, Object, Validator, lax_bool, lax_float, lax_int};
use lightning_store_core::model::{
    AttributeValue, ExtraFields, Json, JsonObject, KeyValue, Named, NewSpan, Span, SpanContext,
    SpanEvent, SpanKind, SpanLink, SpanResource, SpanStatus, SpanStatusCode, Timestamp, TraceState,
};

/// Returns the fields of `object` that are not `named`, in order.
fn extra_fields(object: &Object, named: &[&str]) -> ExtraFields {
    ExtraFields::new(
        object
            .iter()
            .filter(|(key, _)| !named.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    )
}

/// One member of upstream's `AttributeValue` union, as pydantic names it in
/// error locations.
#[derive(Clone, Copy)]
enum Scalar {
    Str,
    Bool,
    Int,
    Float,
}

impl Scalar {
    const ALL: [Scalar; 4] = [Scalar::Str, Scalar::Bool, Scalar::Int, Scalar::Float];

    fn name(self) -> &'static str {
        match self {
            Scalar::Str => "str",
            Scalar::Bool => "bool",
            Scalar::Int => "int",
            Scalar::Float => "float",
        }
    }

    /// The strict match: the JSON type itself.
    fn strict(self, value: &Json) -> Option<AttributeValue> {
        match (self, value) {
            (Scalar::Str, Json::String(s)) => Some(AttributeValue::String(s.clone())),
            (Scalar::Bool, Json::Bool(b)) => Some(AttributeValue::Bool(*b)),
            (Scalar::Int, Json::Number(n)) => n.as_i64().map(AttributeValue::Int),
            (Scalar::Float, Json::Number(n)) => n.as_f64().map(AttributeValue::Double),
            _ => None,
        }
    }

    /// The lax conversion, with pydantic's error when it fails.
    fn lax(self, value: &Json) -> Result<AttributeValue, (&'static str, &'static str)> {
        match self {
            Scalar::Str => match value {
                Json::String(s) => Ok(AttributeValue::String(s.clone())),
                _ => Err(("string_type", "Input should be a valid string")),
            },
            Scalar::Bool => lax_bool(value).map(AttributeValue::Bool),
            Scalar::Int => lax_int(value).map(AttributeValue::Int),
            Scalar::Float => lax_float(value).map(AttributeValue::Double),
        }
    }
}

/// Reads an attribute value as pydantic validates upstream's union
/// `str | bool | int | float | Sequence[str] | Sequence[bool] |
/// Sequence[int] | Sequence[float]`: an exact JSON type wins (a list whose
/// elements all share one, integers and floats together as floats), else
/// the first member that converts in lax mode.
fn attribute_value(v: &mut Validator, loc: &Loc, value: &Json) -> Option<AttributeValue> {
    if let Json::Array(items) = value {
        for member in Scalar::ALL {
            let strict: Option<Vec<_>> = items.iter().map(|i| member.strict(i)).collect();
            if let Some(values) = strict {
                return Some(AttributeValue::Array(values));
            }
        }
        for member in Scalar::ALL {
            let lax: Result<Vec<_>, _> = items.iter().map(|i| member.lax(i)).collect();
            if let Ok(values) = lax {
                return Some(AttributeValue::Array(values));
            }
        }
    } else {
        for member in Scalar::ALL {
            if let Some(converted) = member.strict(value) {
                return Some(converted);
            }
        }
    }
    // No member took it: pydantic reports each member's failure.
    for member in Scalar::ALL {
        let (kind, msg) = match member.lax(value) {
            Err(error) => error,
            Ok(_) => continue,
        };
        v.issue(kind, &loc.key(member.name()), msg, value, None);
    }
    for member in Scalar::ALL {
        let sequence = format!(
            "json-or-python[json=list[{0}],python=chain[is-instance[Sequence],function-wrap[sequence_validator()]]]",
            member.name()
        );
        match value {
            Json::Array(items) => {
                if let Some((index, (kind, msg))) = items
                    .iter()
                    .enumerate()
                    .find_map(|(i, item)| member.lax(item).err().map(|e| (i, e)))
                {
                    v.issue(
                        kind,
                        &loc.key(&sequence).index(index),
                        msg,
                        &items[index],
                        None,
                    );
                }
            }
            other => v.issue(
                "is_instance_of",
                &loc.key(&sequence),
                "Input should be an instance of Sequence",
                other,
                Some(serde_json::json!({"class": "Sequence"})),
            ),
        }
    }
    None
}

/// Reads an `Attributes` dict.
fn attributes(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Vec<KeyValue>> {
    let object = v.dict(loc, value)?;
    let mut out = Vec::with_capacity(object.len());
    let mut ok = true;
    for (key, value) in object {
        match attribute_value(v, &loc.key(key), value) {
            Some(value) => out.push(KeyValue {
                key: key.clone(),
                value,
            }),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn opt_time(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Option<Timestamp>> {
    let seconds = v.opt_float(loc, value)?;
    match seconds {
        None => Some(None),
        Some(seconds) => match Timestamp::from_secs_f64(seconds) {
            Some(time) => Some(Some(time)),
            None => {
                v.issue(
                    "finite_number",
                    loc,
                    "Input should be a finite number within the years 1678 to 2262",
                    value,
                    None,
                );
                None
            }
        },
    }
}

/// Reads a `SpanContext` (every field required; extra fields kept).
fn context(v: &mut Validator, loc: &Loc, value: &Json) -> Option<SpanContext> {
    let object = v.model(loc, value)?;
    let trace_id = v
        .required(object, loc, "trace_id")
        .and_then(|x| v.string(&loc.key("trace_id"), x));
    let span_id = v
        .required(object, loc, "span_id")
        .and_then(|x| v.string(&loc.key("span_id"), x));
    let is_remote = v
        .required(object, loc, "is_remote")
        .and_then(|x| v.boolean(&loc.key("is_remote"), x));
    let trace_state = v.required(object, loc, "trace_state").and_then(|x| {
        let entries = v.dict(&loc.key("trace_state"), x)?;
        let mut state = Vec::with_capacity(entries.len());
        let mut ok = true;
        for (key, value) in entries {
            match v.string(&loc.key("trace_state").key(key), value) {
                Some(value) => state.push((key.clone(), value)),
                None => ok = false,
            }
        }
        ok.then_some(TraceState(state))
    });
    Some(SpanContext {
        trace_id: trace_id?,
        span_id: span_id?,
        is_remote: is_remote?,
        trace_state: trace_state?,
        extra: extra_fields(object, &["trace_id", "span_id", "is_remote", "trace_state"]),
    })
}

fn opt_context(v: &mut Validator, loc: &Loc, value: &Json) -> Option<Option<SpanContext>> {
    match value {
        Json::Null => Some(None),
        other => context(v, loc, other).map(Some),
    }
}

fn status(v: &mut Validator, loc: &Loc, value: &Json) -> Option<SpanStatus> {
    let object = v.model(loc, value)?;
    let code = v
        .required(object, loc, "status_code")
        .and_then(|x| v.choice(&loc.key("status_code"), x, SpanStatusCode::ALL));
    let description = match object.get("description") {
        None => Some(None),
        Some(x) => v.opt_string(&loc.key("description"), x),
    };
    Some(SpanStatus {
        code: code?,
        description: description?,
        extra: extra_fields(object, &["status_code", "description"]),
    })
}

fn event(v: &mut Validator, loc: &Loc, value: &Json) -> Option<SpanEvent> {
    let object = v.model(loc, value)?;
    let name = v
        .required(object, loc, "name")
        .and_then(|x| v.string(&loc.key("name"), x));
    let attributes = v
        .required(object, loc, "attributes")
        .and_then(|x| attributes(v, &loc.key("attributes"), x));
    let time = match object.get("timestamp") {
        None => Some(None),
        Some(x) => opt_time(v, &loc.key("timestamp"), x),
    };
    Some(SpanEvent {
        name: name?,
        attributes: attributes?,
        time: time?,
        extra: extra_fields(object, &["name", "attributes", "timestamp"]),
    })
}

fn link(v: &mut Validator, loc: &Loc, value: &Json) -> Option<SpanLink> {
    let object = v.model(loc, value)?;
    let context = v
        .required(object, loc, "context")
        .and_then(|x| context(v, &loc.key("context"), x));
    let link_attributes = match object.get("attributes") {
        None | Some(Json::Null) => Some(None),
        Some(x) => attributes(v, &loc.key("attributes"), x).map(Some),
    };
    Some(SpanLink {
        context: context?,
        attributes: link_attributes?,
        extra: extra_fields(object, &["context", "attributes"]),
    })
}

fn resource(v: &mut Validator, loc: &Loc, value: &Json) -> Option<SpanResource> {
    // `OtelResource` ignores unknown fields.
    let object = v.model(loc, value)?;
    let resource_attributes = v
        .required(object, loc, "attributes")
        .and_then(|x| attributes(v, &loc.key("attributes"), x));
    let schema_url = v
        .required(object, loc, "schema_url")
        .and_then(|x| v.string(&loc.key("schema_url"), x));
    Some(SpanResource {
        attributes: resource_attributes?,
        schema_url: schema_url?,
    })
}

/// The fields `Span` names; any other is kept as an extra field.
const SPAN_NAMED: &[&str] = super::requests::SPAN_FIELDS;

/// Reads a `Span` posted to `/spans`. Its explicit sequence id is kept.
pub fn read_span(v: &mut Validator, loc: &Loc, value: &Json) -> Option<NewSpan> {
    let object = v.model(loc, value)?;
    let required = |v: &mut Validator, field: &str| {
        v.required(object, loc, field).map(|x| (loc.key(field), x))
    };
    let rollout_id = required(v, "rollout_id").and_then(|(l, x)| v.string(&l, x));
    let attempt_id = required(v, "attempt_id").and_then(|(l, x)| v.string(&l, x));
    let sequence_id = required(v, "sequence_id").and_then(|(l, x)| v.int(&l, x));
    let trace_id = required(v, "trace_id").and_then(|(l, x)| v.string(&l, x));
    let span_id = required(v, "span_id").and_then(|(l, x)| v.string(&l, x));
    let parent_id = required(v, "parent_id").and_then(|(l, x)| v.opt_string(&l, x));
    let name = required(v, "name").and_then(|(l, x)| v.string(&l, x));
    let span_status = required(v, "status").and_then(|(l, x)| status(v, &l, x));
    let span_attributes = required(v, "attributes").and_then(|(l, x)| attributes(v, &l, x));
    let events = required(v, "events").and_then(|(l, x)| v.each(&l, x, event));
    let links = required(v, "links").and_then(|(l, x)| v.each(&l, x, link));
    let start_time = required(v, "start_time").and_then(|(l, x)| opt_time(v, &l, x));
    let end_time = required(v, "end_time").and_then(|(l, x)| opt_time(v, &l, x));
    let span_context = required(v, "context").and_then(|(l, x)| opt_context(v, &l, x));
    let parent = required(v, "parent").and_then(|(l, x)| opt_context(v, &l, x));
    let span_resource = required(v, "resource").and_then(|(l, x)| resource(v, &l, x));
    let sequence_id = sequence_id?;
    Some(NewSpan {
        sequence_id: Some(sequence_id),
        span: Span {
            rollout_id: rollout_id?,
            attempt_id: attempt_id?,
            sequence_id,
            trace_id: trace_id?,
            span_id: span_id?,
            parent_id: parent_id?,
            name: name?,
            status: span_status?,
            attributes: span_attributes?,
            events: events?,
            links: links?,
            start_time: start_time?,
            end_time: end_time?,
            context: span_context?,
            parent: parent?,
            resource: Some(span_resource?),
            kind: SpanKind::Unspecified,
            scope: None,
            extra: extra_fields(object, SPAN_NAMED),
        },
    })
}

/// A span written as agent-lightning's `Span` model dumps it. Span kind and
/// scope, which the model lacks, are left out (gRPC shows them).
pub struct SpanJson<'a>(pub &'a Span);

fn serialize_extra<M: SerializeMap>(map: &mut M, extra: &ExtraFields) -> Result<(), M::Error> {
    if let Some(fields) = extra.fields() {
        for (key, value) in fields {
            map.serialize_entry(key, value)?;
        }
    }
    Ok(())
}

impl Serialize for SpanJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("rollout_id", &s.rollout_id)?;
        map.serialize_entry("attempt_id", &s.attempt_id)?;
        map.serialize_entry("sequence_id", &s.sequence_id)?;
        map.serialize_entry("trace_id", &s.trace_id)?;
        map.serialize_entry("span_id", &s.span_id)?;
        map.serialize_entry("parent_id", &s.parent_id)?;
        map.serialize_entry("name", &s.name)?;
        map.serialize_entry("status", &StatusJson(&s.status))?;
        map.serialize_entry("attributes", &AttributesJson(&s.attributes))?;
        let events: Vec<_> = s.events.iter().map(EventJson).collect();
        map.serialize_entry("events", &events)?;
        let links: Vec<_> = s.links.iter().map(LinkJson).collect();
        map.serialize_entry("links", &links)?;
        map.serialize_entry("start_time", &s.start_time.map(|t| t.as_secs_f64()))?;
        map.serialize_entry("end_time", &s.end_time.map(|t| t.as_secs_f64()))?;
        map.serialize_entry("context", &s.context.as_ref().map(ContextJson))?;
        map.serialize_entry("parent", &s.parent.as_ref().map(ContextJson))?;
        let empty = SpanResource::default();
        map.serialize_entry(
            "resource",
            &ResourceJson(s.resource.as_ref().unwrap_or(&empty)),
        )?;
        serialize_extra(&mut map, &s.extra)?;
        map.end()
    }
}

struct StatusJson<'a>(&'a SpanStatus);

impl Serialize for StatusJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("status_code", Named::name(self.0.code))?;
        map.serialize_entry("description", &self.0.description)?;
        serialize_extra(&mut map, &self.0.extra)?;
        map.end()
    }
}

struct EventJson<'a>(&'a SpanEvent);

impl Serialize for EventJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("attributes", &AttributesJson(&self.0.attributes))?;
        map.serialize_entry("timestamp", &self.0.time.map(|t| t.as_secs_f64()))?;
        serialize_extra(&mut map, &self.0.extra)?;
        map.end()
    }
}

struct LinkJson<'a>(&'a SpanLink);

impl Serialize for LinkJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("context", &ContextJson(&self.0.context))?;
        map.serialize_entry(
            "attributes",
            &self.0.attributes.as_deref().map(AttributesJson),
        )?;
        serialize_extra(&mut map, &self.0.extra)?;
        map.end()
    }
}

struct ContextJson<'a>(&'a SpanContext);

impl Serialize for ContextJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("trace_id", &c.trace_id)?;
        map.serialize_entry("span_id", &c.span_id)?;
        map.serialize_entry("is_remote", &c.is_remote)?;
        let state: JsonObject = c
            .trace_state
            .0
            .iter()
            .map(|(key, value)| (key.clone(), Json::String(value.clone())))
            .collect();
        map.serialize_entry("trace_state", &state)?;
        serialize_extra(&mut map, &c.extra)?;
        map.end()
    }
}

struct ResourceJson<'a>(&'a SpanResource);

impl Serialize for ResourceJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("attributes", &AttributesJson(&self.0.attributes))?;
        map.serialize_entry("schema_url", &self.0.schema_url)?;
        map.end()
    }
}

/// Attributes as a dict; values as upstream writes them (bytes as hex,
/// nested maps as objects, as its OTLP conversion does).
struct AttributesJson<'a>(&'a [KeyValue]);

impl Serialize for AttributesJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for kv in self.0 {
            map.serialize_entry(&kv.key, &ValueJson(&kv.value))?;
        }
        map.end()
    }
}

struct ValueJson<'a>(&'a AttributeValue);

impl Serialize for ValueJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AttributeValue::Empty => serializer.serialize_unit(),
            AttributeValue::String(s) => serializer.serialize_str(s),
            AttributeValue::Bool(b) => serializer.serialize_bool(*b),
            AttributeValue::Int(i) => serializer.serialize_i64(*i),
            AttributeValue::Double(d) if d.is_finite() => serializer.serialize_f64(*d),
            // JSON has no NaN or infinities (upstream's server fails on
            // them); a string keeps the value and still validates as an
            // attribute on agent-lightning's side.
            AttributeValue::Double(d) => serializer.serialize_str(non_finite_text(*d)),
            AttributeValue::Bytes(b) => {
                let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
                serializer.serialize_str(&hex)
            }
            AttributeValue::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&ValueJson(item))?;
                }
                seq.end()
            }
            AttributeValue::Map(entries) => AttributesJson(entries).serialize(serializer),
        }
    }
}

/// Python's text of a non-finite float: `nan`, `inf` or `-inf`.
fn non_finite_text(value: f64) -> &'static str {
    if value.is_nan() {
        "nan"
    } else if value > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::validate::Invalid;
    use crate::pyjson::to_vec;
    use serde_json::json;

    fn read_value(value: Json) -> Result<Json, Vec<String>> {
        let mut v = Validator::new();
        let read = attribute_value(&mut v, &Loc::body(), &value);
        match v.finish(read) {
            Ok(value) => {
                let text = to_vec(&ValueJson(&value)).unwrap();
                Ok(serde_json::from_slice(&text).unwrap())
            }
            Err(Invalid(issues)) => Err(issues.iter().map(|i| i.kind.to_owned()).collect()),
        }
    }

    #[test]
    fn attribute_values_follow_pydantic_union_rules() {
        // Pairs checked against pydantic 2.14 validating upstream's Attributes.
        for (input, output) in [
            (json!(1), json!(1)),
            (json!(1.0), json!(1.0)),
            (json!("1"), json!("1")),
            (json!(true), json!(true)),
            (json!([1, 2]), json!([1, 2])),
            (json!([1, 2.5]), json!([1.0, 2.5])),
            (json!([true, 1]), json!([true, true])),
            (json!(["1", 2]), json!([1, 2])),
            (json!([1.5, true]), json!([1.5, 1.0])),
            (json!([2, true]), json!([2, 1])),
            (json!([1, "1"]), json!([true, true])),
            (json!([0.0, 1.0, true]), json!([false, true, true])),
            (json!([]), json!([])),
            (json!(["0", "1"]), json!(["0", "1"])),
        ] {
            assert_eq!(read_value(input.clone()), Ok(output), "{input}");
        }
        assert_eq!(read_value(json!(null)).unwrap_err().len(), 8);
        assert_eq!(read_value(json!([1, "a"])).unwrap_err().len(), 8);
        assert!(read_value(json!({"a": 1})).is_err());
    }

    #[test]
    fn spans_round_trip_with_extra_fields_and_trace_state() {
        let body = json!({
            "rollout_id": "ro-1", "attempt_id": "at-1", "sequence_id": -3,
            "trace_id": "T X", "span_id": "S", "parent_id": null, "name": "n",
            "status": {"status_code": "OK", "zz": 1},
            "attributes": {"a": [1, 2.5], "b": "x"},
            "events": [{"name": "e", "attributes": {}, "timestamp": 2, "ev": [1]}],
            "links": [
                {"context": {"trace_id": "t", "span_id": "s", "is_remote": false,
                             "trace_state": {"k": "v", "a,b": "c=d"}}, "attributes": {}},
                {"context": {"trace_id": "t", "span_id": "s", "is_remote": "yes",
                             "trace_state": {}, "cx": 1}}
            ],
            "start_time": 1, "end_time": null, "context": null, "parent": null,
            "resource": {"attributes": {}, "schema_url": "", "dropped": 1},
            "extra_top": {"x": [1]}
        });
        let mut v = Validator::new();
        let read = read_span(&mut v, &Loc::body(), &body);
        let span = v.finish(read).unwrap();
        assert_eq!(span.sequence_id, Some(-3));
        let text = String::from_utf8(to_vec(&SpanJson(&span.span)).unwrap()).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"rollout_id":"ro-1","attempt_id":"at-1","sequence_id":-3,"trace_id":"T X","span_id":"S","#,
                r#""parent_id":null,"name":"n","status":{"status_code":"OK","description":null,"zz":1},"#,
                r#""attributes":{"a":[1.0,2.5],"b":"x"},"events":[{"name":"e","attributes":{},"timestamp":2.0,"ev":[1]}],"#,
                r#""links":[{"context":{"trace_id":"t","span_id":"s","is_remote":false,"trace_state":{"k":"v","a,b":"c=d"}},"attributes":{}},"#,
                r#"{"context":{"trace_id":"t","span_id":"s","is_remote":true,"trace_state":{},"cx":1},"attributes":null}],"#,
                r#""start_time":1.0,"end_time":null,"context":null,"parent":null,"resource":{"attributes":{},"schema_url":""},"#,
                r#""extra_top":{"x":[1]}}"#
            )
        );
    }

    #[test]
    fn a_span_missing_fields_gets_every_issue_in_field_order() {
        let mut v = Validator::new();
        let read = read_span(&mut v, &Loc::body(), &json!({"rollout_id": "ro"}));
        let Err(Invalid(issues)) = v.finish(read) else {
            panic!("expected a 422");
        };
        let missing: Vec<String> = issues
            .iter()
            .map(|i| {
                serde_json::to_value(&i.loc).unwrap()[1]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(missing, &SPAN_NAMED[1..]);
    }
}
