//! A span's row: its columns, and the JSON document holding everything
//! else (status, attributes, events, links, contexts, resource, scope,
//! extra fields), whose shape is defined here field by field so it stays
//! stable across versions.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

use super::cell::{corrupt, time};
use crate::sql::statement::Row;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{
    AttributeValue, ExtraFields, InstrumentationScope, Json, JsonObject, KeyValue, Span,
    SpanContext, SpanEvent, SpanKind, SpanLink, SpanResource, SpanStatus, SpanStatusCode,
    TraceState,
};

/// Decodes a span from [`span_columns`].
pub fn span(row: &impl Row) -> StoreResult<Span> {
    let body: StoredSpanBody =
        serde_json::from_str(&row.text(9)?).map_err(|e| corrupt("span", e))?;
    Ok(Span {
        rollout_id: row.text(0)?,
        attempt_id: row.text(1)?,
        sequence_id: row.int(2)?,
        trace_id: row.text(3)?,
        span_id: row.text(4)?,
        parent_id: row.opt_text(5)?,
        name: row.text(6)?,
        start_time: time(row.opt_int(7)?),
        end_time: time(row.opt_int(8)?),
        status: SpanStatus {
            code: match body.status.code.as_str() {
                "ok" => SpanStatusCode::Ok,
                "error" => SpanStatusCode::Error,
                _ => SpanStatusCode::Unset,
            },
            description: body.status.description,
            extra: ExtraFields::new(body.status.extra),
        },
        attributes: attributes(body.attributes),
        events: body
            .events
            .into_iter()
            .map(|e| SpanEvent {
                name: e.name,
                attributes: attributes(e.attributes),
                time: time(e.time),
                extra: ExtraFields::new(e.extra),
            })
            .collect(),
        links: body
            .links
            .into_iter()
            .map(|l| SpanLink {
                context: l.context.into(),
                attributes: l.attributes.map(attributes),
                extra: ExtraFields::new(l.extra),
            })
            .collect(),
        context: body.context.map(Into::into),
        parent: body.parent.map(Into::into),
        resource: body.resource.map(|r| SpanResource {
            attributes: attributes(r.attributes),
            schema_url: r.schema_url,
        }),
        kind: match body.kind.as_str() {
            "internal" => SpanKind::Internal,
            "server" => SpanKind::Server,
            "client" => SpanKind::Client,
            "producer" => SpanKind::Producer,
            "consumer" => SpanKind::Consumer,
            _ => SpanKind::Unspecified,
        },
        scope: body.scope.map(|s| InstrumentationScope {
            name: s.name,
            version: s.version,
            attributes: attributes(s.attributes),
        }),
        extra: ExtraFields::new(body.extra),
    })
}

/// How the body of every span whose status is ERROR begins: the status is
/// the body's first entry and its code the status's first ([`SpanBody`]),
/// so that a query finds such spans by a prefix of the text, without
/// parsing bodies (rows written by every earlier version begin the same).
pub const ERROR_BODY_PREFIX: &str = r#"{"status":{"code":"error""#;

/// Returns the JSON body of a span: everything but its columns. `size` is
/// the span's accounted size ([`lightning_store_core::retention::span_size`]), about
/// the body's length: the text is written into a buffer of about its size
/// instead of one that grows by copying.
pub fn span_body(span: &Span, size: u64) -> String {
    let capacity = usize::try_from(size).unwrap_or(0).saturating_add(256);
    let mut body = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut body, &SpanBody(span)).expect("a span serialises");
    String::from_utf8(body).expect("JSON is UTF-8")
}

/// Serialises the parts of a span that are not columns.
struct SpanBody<'a>(&'a Span);

impl Serialize for SpanBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let span = self.0;
        let mut map = serializer.serialize_map(None)?;
        let code = match span.status.code {
            SpanStatusCode::Unset => "unset",
            SpanStatusCode::Ok => "ok",
            SpanStatusCode::Error => "error",
        };
        map.serialize_entry(
            "status",
            &StatusRef {
                code,
                description: span.status.description.as_deref(),
                extra: span.status.extra.fields(),
            },
        )?;
        map.serialize_entry("attributes", &Attributes(&span.attributes))?;
        if !span.events.is_empty() {
            let events: Vec<_> = span
                .events
                .iter()
                .map(|e| EventRef {
                    name: &e.name,
                    attributes: Attributes(&e.attributes),
                    time: e.time.map(|t| t.0),
                    extra: e.extra.fields(),
                })
                .collect();
            map.serialize_entry("events", &events)?;
        }
        if !span.links.is_empty() {
            let links: Vec<_> = span
                .links
                .iter()
                .map(|l| LinkRef {
                    context: ContextRef(&l.context),
                    attributes: l.attributes.as_deref().map(Attributes),
                    extra: l.extra.fields(),
                })
                .collect();
            map.serialize_entry("links", &links)?;
        }
        if let Some(context) = &span.context {
            map.serialize_entry("context", &ContextRef(context))?;
        }
        if let Some(parent) = &span.parent {
            map.serialize_entry("parent", &ContextRef(parent))?;
        }
        if let Some(resource) = &span.resource {
            map.serialize_entry(
                "resource",
                &ResourceRef {
                    attributes: Attributes(&resource.attributes),
                    schema_url: &resource.schema_url,
                },
            )?;
        }
        let kind = match span.kind {
            SpanKind::Unspecified => "unspecified",
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        };
        map.serialize_entry("kind", kind)?;
        if let Some(scope) = &span.scope {
            map.serialize_entry(
                "scope",
                &ScopeRef {
                    name: &scope.name,
                    version: &scope.version,
                    attributes: Attributes(&scope.attributes),
                },
            )?;
        }
        if let Some(extra) = span.extra.fields() {
            map.serialize_entry("extra", extra)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct StatusRef<'a> {
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<&'a JsonObject>,
}

#[derive(Deserialize, Default)]
struct StoredStatus {
    code: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    extra: JsonObject,
}

#[derive(Serialize)]
struct EventRef<'a> {
    name: &'a str,
    attributes: Attributes<'a>,
    time: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<&'a JsonObject>,
}

/// A link; `attributes` is `null` when the link has no attribute map.
#[derive(Serialize)]
struct LinkRef<'a> {
    context: ContextRef<'a>,
    attributes: Option<Attributes<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<&'a JsonObject>,
}

#[derive(Serialize)]
struct ResourceRef<'a> {
    attributes: Attributes<'a>,
    schema_url: &'a str,
}

#[derive(Serialize)]
struct ScopeRef<'a> {
    name: &'a str,
    version: &'a str,
    attributes: Attributes<'a>,
}

struct ContextRef<'a>(&'a SpanContext);

/// A context; its trace state is a list of `[key, value]` pairs (rows
/// written before it kept entries hold a W3C header string instead).
impl Serialize for ContextRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("trace_id", &self.0.trace_id)?;
        map.serialize_entry("span_id", &self.0.span_id)?;
        map.serialize_entry("is_remote", &self.0.is_remote)?;
        map.serialize_entry("trace_state", &self.0.trace_state.0)?;
        if let Some(extra) = self.0.extra.fields() {
            map.serialize_entry("extra", extra)?;
        }
        map.end()
    }
}

struct Attributes<'a>(&'a [KeyValue]);

impl Serialize for Attributes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for kv in self.0 {
            seq.serialize_element(&KeyValueRef(kv))?;
        }
        seq.end()
    }
}

struct KeyValueRef<'a>(&'a KeyValue);

impl Serialize for KeyValueRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("key", &self.0.key)?;
        map.serialize_entry("value", &ValueRef(&self.0.value))?;
        map.end()
    }
}

/// An attribute value as a one-entry object naming its type (`null` when
/// empty). Non-finite doubles are the strings `NaN`, `inf` and `-inf`;
/// bytes are lowercase hex.
struct ValueRef<'a>(&'a AttributeValue);

impl Serialize for ValueRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if matches!(self.0, AttributeValue::Empty) {
            return serializer.serialize_unit();
        }
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            AttributeValue::Empty => {}
            AttributeValue::String(s) => map.serialize_entry("string", s)?,
            AttributeValue::Bool(b) => map.serialize_entry("bool", b)?,
            AttributeValue::Int(i) => map.serialize_entry("int", i)?,
            AttributeValue::Double(d) if d.is_finite() => map.serialize_entry("double", d)?,
            AttributeValue::Double(d) => {
                let special = if d.is_nan() {
                    "NaN"
                } else if *d > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                map.serialize_entry("double", special)?
            }
            AttributeValue::Bytes(b) => map.serialize_entry("bytes", &hex::encode(b))?,
            AttributeValue::Array(items) => {
                let items: Vec<_> = items.iter().map(ValueRef).collect();
                map.serialize_entry("array", &items)?
            }
            AttributeValue::Map(entries) => map.serialize_entry("map", &Attributes(entries))?,
        }
        map.end()
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StoredSpanBody {
    status: StoredStatus,
    attributes: Vec<StoredKeyValue>,
    events: Vec<StoredEvent>,
    links: Vec<StoredLink>,
    context: Option<StoredContext>,
    parent: Option<StoredContext>,
    resource: Option<StoredResource>,
    kind: String,
    scope: Option<StoredScope>,
    extra: JsonObject,
}

#[derive(Deserialize)]
struct StoredEvent {
    name: String,
    #[serde(default)]
    attributes: Vec<StoredKeyValue>,
    time: Option<i64>,
    #[serde(default)]
    extra: JsonObject,
}

#[derive(Deserialize)]
struct StoredLink {
    context: StoredContext,
    #[serde(default)]
    attributes: Option<Vec<StoredKeyValue>>,
    #[serde(default)]
    extra: JsonObject,
}

#[derive(Deserialize)]
struct StoredResource {
    #[serde(default)]
    attributes: Vec<StoredKeyValue>,
    #[serde(default)]
    schema_url: String,
}

#[derive(Deserialize)]
struct StoredScope {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    attributes: Vec<StoredKeyValue>,
}

#[derive(Deserialize)]
struct StoredContext {
    trace_id: String,
    span_id: String,
    #[serde(default)]
    is_remote: bool,
    #[serde(default)]
    trace_state: StoredTraceState,
    #[serde(default)]
    extra: JsonObject,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StoredTraceState {
    Entries(Vec<(String, String)>),
    Header(String),
}

impl Default for StoredTraceState {
    fn default() -> Self {
        Self::Entries(Vec::new())
    }
}

impl From<StoredContext> for SpanContext {
    fn from(c: StoredContext) -> Self {
        SpanContext {
            trace_id: c.trace_id,
            span_id: c.span_id,
            is_remote: c.is_remote,
            trace_state: match c.trace_state {
                StoredTraceState::Entries(entries) => TraceState(entries),
                StoredTraceState::Header(header) => TraceState::from_header(&header),
            },
            extra: ExtraFields::new(c.extra),
        }
    }
}

#[derive(Deserialize)]
struct StoredKeyValue {
    key: String,
    value: Option<StoredValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredValue {
    String(String),
    Bool(bool),
    Int(i64),
    Double(#[serde(deserialize_with = "deserialize_double")] f64),
    Bytes(#[serde(deserialize_with = "deserialize_hex")] Vec<u8>),
    Array(Vec<Option<StoredValue>>),
    Map(Vec<StoredKeyValue>),
}

/// Reads a stored double: a number, or the name of a non-finite one. Read
/// through a JSON value rather than an untagged enum, which would buffer the
/// number and, under `arbitrary_precision`, no longer see a float in it.
fn deserialize_double<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    match Json::deserialize(deserializer)? {
        Json::Number(n) => n
            .as_f64()
            .ok_or_else(|| serde::de::Error::custom("double out of range")),
        Json::String(name) => Ok(match name.as_str() {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => f64::NAN,
        }),
        other => Err(serde::de::Error::custom(format!(
            "expected a double, got {other}"
        ))),
    }
}

fn deserialize_hex<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(deserializer)?;
    hex::decode(&text).map_err(serde::de::Error::custom)
}

fn attributes(stored: Vec<StoredKeyValue>) -> Vec<KeyValue> {
    stored
        .into_iter()
        .map(|kv| KeyValue {
            key: kv.key,
            value: value(kv.value),
        })
        .collect()
}

fn value(stored: Option<StoredValue>) -> AttributeValue {
    match stored {
        None => AttributeValue::Empty,
        Some(StoredValue::String(s)) => AttributeValue::String(s),
        Some(StoredValue::Bool(b)) => AttributeValue::Bool(b),
        Some(StoredValue::Int(i)) => AttributeValue::Int(i),
        Some(StoredValue::Double(d)) => AttributeValue::Double(d),
        Some(StoredValue::Bytes(b)) => AttributeValue::Bytes(b),
        Some(StoredValue::Array(items)) => {
            AttributeValue::Array(items.into_iter().map(value).collect())
        }
        Some(StoredValue::Map(entries)) => AttributeValue::Map(attributes(entries)),
    }
}
