//! How domain values are laid out in SQL rows, the same for every SQL
//! dialect: times as integer nanoseconds since the Unix epoch, enums as
//! agent-lightning's lowercase names, JSON payloads as JSON text, and the
//! nested parts of spans and events as JSON documents whose shape is
//! defined here (not derived from Rust type names), so it stays stable.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

use super::Row;
use crate::core::error::{StoreError, StoreResult};
use crate::core::events::{Change, Event};
use crate::core::model::{
    Attempt, AttemptStatus, AttributeValue, ExtraFields, InstrumentationScope, Json, JsonObject,
    KeyValue, ResourcesUpdate, Rollout, RolloutConfig, RolloutMode, RolloutStatus, Span,
    SpanContext, SpanEvent, SpanKind, SpanLink, SpanResource, SpanStatus, SpanStatusCode,
    Timestamp, TraceState, Worker, WorkerStatus,
};

/// Column list of [`rollout`], in order.
macro_rules! rollout_columns {
    ($p:literal) => {
        concat!(
            $p,
            "rollout_id, ",
            $p,
            "input, ",
            $p,
            "start_time, ",
            $p,
            "end_time, ",
            $p,
            "mode, ",
            $p,
            "resources_id, ",
            $p,
            "status, ",
            $p,
            "config, ",
            $p,
            "metadata"
        )
    };
}

/// Column list of [`attempt`], in order.
macro_rules! attempt_columns {
    ($p:literal) => {
        concat!(
            $p,
            "rollout_id, ",
            $p,
            "attempt_id, ",
            $p,
            "sequence_id, ",
            $p,
            "start_time, ",
            $p,
            "end_time, ",
            $p,
            "status, ",
            $p,
            "worker_id, ",
            $p,
            "last_heartbeat_time, ",
            $p,
            "metadata"
        )
    };
}

/// Column list of [`span`], in order.
macro_rules! span_columns {
    () => {
        "rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, \
         start_time, end_time, body"
    };
}

/// Column list of [`resources`], in order.
macro_rules! resources_columns {
    () => {
        "resources_id, create_time, update_time, version, resources"
    };
}

/// Column list of [`worker`], in order.
macro_rules! worker_columns {
    () => {
        "worker_id, status, heartbeat_stats, last_heartbeat_time, last_dequeue_time, \
         last_busy_time, last_idle_time, current_rollout_id, current_attempt_id"
    };
}

pub(super) use {
    attempt_columns, resources_columns, rollout_columns, span_columns, worker_columns,
};

/// Number of columns of [`rollout`].
pub const ROLLOUT_COLUMNS: usize = 9;

/// Returns an error for a stored value that does not decode.
pub fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} does not decode: {detail}"))
}

/// Parses a stored enum value, reporting an unknown one as corruption.
pub fn parse_enum<T>(what: &str, text: &str, parse: fn(&str) -> Option<T>) -> StoreResult<T> {
    parse(text).ok_or_else(|| corrupt(what, format_args!("unknown value {text:?}")))
}

/// Returns the JSON text of a payload.
pub fn json_text(value: &Json) -> String {
    value.to_string()
}

fn json_value(what: &str, text: &str) -> StoreResult<Json> {
    serde_json::from_str(text).map_err(|e| corrupt(what, e))
}

fn time(value: Option<i64>) -> Option<Timestamp> {
    value.map(Timestamp)
}

/// Stored form of a [`RolloutConfig`].
#[derive(Serialize, Deserialize)]
struct StoredConfig {
    timeout_seconds: Option<f64>,
    unresponsive_seconds: Option<f64>,
    max_attempts: u32,
    retry_condition: Vec<String>,
}

/// Returns the JSON text of a rollout config.
pub fn config_text(config: &RolloutConfig) -> String {
    let stored = StoredConfig {
        timeout_seconds: config.timeout_seconds,
        unresponsive_seconds: config.unresponsive_seconds,
        max_attempts: config.max_attempts,
        retry_condition: config
            .retry_condition
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
    };
    serde_json::to_string(&stored).expect("a config serialises")
}

fn config(text: &str) -> StoreResult<RolloutConfig> {
    let stored: StoredConfig = serde_json::from_str(text).map_err(|e| corrupt("config", e))?;
    Ok(RolloutConfig {
        timeout_seconds: stored.timeout_seconds,
        unresponsive_seconds: stored.unresponsive_seconds,
        max_attempts: stored.max_attempts,
        retry_condition: stored
            .retry_condition
            .iter()
            .map(|s| parse_enum("attempt status", s, AttemptStatus::parse))
            .collect::<StoreResult<_>>()?,
    })
}

/// Decodes a rollout from [`rollout_columns`] starting at column `at`.
pub fn rollout(row: &impl Row, at: usize) -> StoreResult<Rollout> {
    Ok(Rollout {
        rollout_id: row.text(at)?,
        input: json_value("rollout input", &row.text(at + 1)?)?,
        start_time: Timestamp(row.int(at + 2)?),
        end_time: time(row.opt_int(at + 3)?),
        mode: row
            .opt_text(at + 4)?
            .map(|m| parse_enum("rollout mode", &m, RolloutMode::parse))
            .transpose()?,
        resources_id: row.opt_text(at + 5)?,
        status: parse_enum("rollout status", &row.text(at + 6)?, RolloutStatus::parse)?,
        config: config(&row.text(at + 7)?)?,
        metadata: json_value("rollout metadata", &row.text(at + 8)?)?,
    })
}

/// Decodes an attempt from [`attempt_columns`] starting at column `at`.
pub fn attempt(row: &impl Row, at: usize) -> StoreResult<Attempt> {
    Ok(Attempt {
        rollout_id: row.text(at)?,
        attempt_id: row.text(at + 1)?,
        sequence_id: u32::try_from(row.int(at + 2)?).map_err(|e| corrupt("attempt", e))?,
        start_time: Timestamp(row.int(at + 3)?),
        end_time: time(row.opt_int(at + 4)?),
        status: parse_enum("attempt status", &row.text(at + 5)?, AttemptStatus::parse)?,
        worker_id: row.opt_text(at + 6)?,
        last_heartbeat_time: time(row.opt_int(at + 7)?),
        metadata: json_value("attempt metadata", &row.text(at + 8)?)?,
    })
}

/// Decodes a resources snapshot from [`resources_columns`].
pub fn resources(row: &impl Row) -> StoreResult<ResourcesUpdate> {
    Ok(ResourcesUpdate {
        resources_id: row.text(0)?,
        create_time: Timestamp(row.int(1)?),
        update_time: Timestamp(row.int(2)?),
        version: row.int(3)?,
        resources: json_value("resources", &row.text(4)?)?,
    })
}

/// Decodes a worker from [`worker_columns`].
pub fn worker(row: &impl Row) -> StoreResult<Worker> {
    Ok(Worker {
        worker_id: row.text(0)?,
        status: parse_enum("worker status", &row.text(1)?, WorkerStatus::parse)?,
        heartbeat_stats: json_value("heartbeat stats", &row.text(2)?)?,
        last_heartbeat_time: time(row.opt_int(3)?),
        last_dequeue_time: time(row.opt_int(4)?),
        last_busy_time: time(row.opt_int(5)?),
        last_idle_time: time(row.opt_int(6)?),
        current_rollout_id: row.opt_text(7)?,
        current_attempt_id: row.opt_text(8)?,
    })
}

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

/// Returns the JSON body of a span: everything but its columns.
pub fn span_body(span: &Span) -> String {
    serde_json::to_string(&SpanBody(span)).expect("a span serialises")
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
    Double(StoredDouble),
    Bytes(#[serde(deserialize_with = "deserialize_hex")] Vec<u8>),
    Array(Vec<Option<StoredValue>>),
    Map(Vec<StoredKeyValue>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StoredDouble {
    Finite(f64),
    Special(String),
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
        Some(StoredValue::Double(StoredDouble::Finite(d))) => AttributeValue::Double(d),
        Some(StoredValue::Double(StoredDouble::Special(s))) => {
            AttributeValue::Double(match s.as_str() {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => f64::NAN,
            })
        }
        Some(StoredValue::Bytes(b)) => AttributeValue::Bytes(b),
        Some(StoredValue::Array(items)) => {
            AttributeValue::Array(items.into_iter().map(value).collect())
        }
        Some(StoredValue::Map(entries)) => AttributeValue::Map(attributes(entries)),
    }
}

/// Stored form of a [`Change`].
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StoredChange {
    RolloutCreated {
        rollout_id: String,
        status: String,
    },
    RolloutChanged {
        rollout_id: String,
        status: String,
    },
    AttemptCreated {
        rollout_id: String,
        attempt_id: String,
        sequence_id: u32,
        worker_id: Option<String>,
    },
    AttemptChanged {
        rollout_id: String,
        attempt_id: String,
        status: String,
    },
    SpansAdded {
        rollout_id: String,
        attempt_id: String,
        count: u64,
    },
    ResourcesChanged {
        resources_id: String,
        version: i64,
    },
    WorkerChanged {
        worker_id: String,
        status: String,
    },
    RolloutDeleted {
        rollout_id: String,
    },
    GatewayChanged {
        paused: bool,
        generation: i64,
    },
    ModelsChanged,
}

/// Returns the JSON text of a change.
pub fn change_text(change: &Change) -> String {
    let stored = match change.clone() {
        Change::RolloutCreated { rollout_id, status } => StoredChange::RolloutCreated {
            rollout_id,
            status: status.as_str().to_owned(),
        },
        Change::RolloutChanged { rollout_id, status } => StoredChange::RolloutChanged {
            rollout_id,
            status: status.as_str().to_owned(),
        },
        Change::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        } => StoredChange::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        },
        Change::AttemptChanged {
            rollout_id,
            attempt_id,
            status,
        } => StoredChange::AttemptChanged {
            rollout_id,
            attempt_id,
            status: status.as_str().to_owned(),
        },
        Change::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        } => StoredChange::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        },
        Change::ResourcesChanged {
            resources_id,
            version,
        } => StoredChange::ResourcesChanged {
            resources_id,
            version,
        },
        Change::WorkerChanged { worker_id, status } => StoredChange::WorkerChanged {
            worker_id,
            status: status.as_str().to_owned(),
        },
        Change::RolloutDeleted { rollout_id } => StoredChange::RolloutDeleted { rollout_id },
        Change::GatewayChanged { paused, generation } => {
            StoredChange::GatewayChanged { paused, generation }
        }
        Change::ModelsChanged => StoredChange::ModelsChanged,
    };
    serde_json::to_string(&stored).expect("a change serialises")
}

/// Decodes an event from `seq, time, change` columns.
pub fn event(row: &impl Row) -> StoreResult<Event> {
    let seq = u64::try_from(row.int(0)?).map_err(|e| corrupt("event", e))?;
    let stored: StoredChange =
        serde_json::from_str(&row.text(2)?).map_err(|e| corrupt("event", e))?;
    let rollout_status = |s: &str| parse_enum("rollout status", s, RolloutStatus::parse);
    let change = match stored {
        StoredChange::RolloutCreated { rollout_id, status } => Change::RolloutCreated {
            rollout_id,
            status: rollout_status(&status)?,
        },
        StoredChange::RolloutChanged { rollout_id, status } => Change::RolloutChanged {
            rollout_id,
            status: rollout_status(&status)?,
        },
        StoredChange::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        } => Change::AttemptCreated {
            rollout_id,
            attempt_id,
            sequence_id,
            worker_id,
        },
        StoredChange::AttemptChanged {
            rollout_id,
            attempt_id,
            status,
        } => Change::AttemptChanged {
            rollout_id,
            attempt_id,
            status: parse_enum("attempt status", &status, AttemptStatus::parse)?,
        },
        StoredChange::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        } => Change::SpansAdded {
            rollout_id,
            attempt_id,
            count,
        },
        StoredChange::ResourcesChanged {
            resources_id,
            version,
        } => Change::ResourcesChanged {
            resources_id,
            version,
        },
        StoredChange::WorkerChanged { worker_id, status } => Change::WorkerChanged {
            worker_id,
            status: parse_enum("worker status", &status, WorkerStatus::parse)?,
        },
        StoredChange::RolloutDeleted { rollout_id } => Change::RolloutDeleted { rollout_id },
        StoredChange::GatewayChanged { paused, generation } => {
            Change::GatewayChanged { paused, generation }
        }
        StoredChange::ModelsChanged => Change::ModelsChanged,
    };
    Ok(Event {
        seq,
        time: Timestamp(row.int(1)?),
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of text and integer cells, for decoding without a database.
    struct Cells(Vec<Option<String>>);

    impl Row for Cells {
        fn opt_int(&self, i: usize) -> StoreResult<Option<i64>> {
            Ok(self.0[i].as_ref().map(|v| v.parse().unwrap()))
        }
        fn opt_text(&self, i: usize) -> StoreResult<Option<String>> {
            Ok(self.0[i].clone())
        }
    }

    fn extra(pairs: &[(&str, Json)]) -> ExtraFields {
        ExtraFields::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    fn sample_span() -> Span {
        let context = SpanContext {
            trace_id: "Opaque Trace 1".into(),
            span_id: "b7ad6b7169203331".into(),
            is_remote: true,
            trace_state: TraceState(vec![("k".into(), "v".into()), ("a,b".into(), "c=d".into())]),
            extra: extra(&[("ctx", Json::from(1))]),
        };
        let kv = |key: &str, value| KeyValue {
            key: key.into(),
            value,
        };
        Span {
            rollout_id: "ro-1".into(),
            attempt_id: "at-1".into(),
            sequence_id: 7,
            trace_id: context.trace_id.clone(),
            span_id: context.span_id.clone(),
            parent_id: None,
            name: "llm".into(),
            status: SpanStatus {
                code: SpanStatusCode::Error,
                description: Some("boom".into()),
                extra: extra(&[("zz", Json::from("s"))]),
            },
            attributes: vec![
                kv("empty", AttributeValue::Empty),
                kv("s", AttributeValue::String("x".into())),
                kv("b", AttributeValue::Bool(true)),
                kv("i", AttributeValue::Int(i64::MIN)),
                kv("d", AttributeValue::Double(0.1 + 0.2)),
                kv("nan", AttributeValue::Double(f64::NAN)),
                kv("inf", AttributeValue::Double(f64::NEG_INFINITY)),
                kv("bytes", AttributeValue::Bytes(vec![0, 255, 16])),
                kv(
                    "array",
                    AttributeValue::Array(vec![AttributeValue::Int(1), AttributeValue::Empty]),
                ),
                kv(
                    "map",
                    AttributeValue::Map(vec![kv("inner", AttributeValue::Double(-0.0))]),
                ),
            ],
            events: vec![SpanEvent {
                name: "e".into(),
                attributes: vec![],
                time: Some(Timestamp(5)),
                extra: extra(&[("ev", Json::Null)]),
            }],
            links: vec![
                SpanLink {
                    context: context.clone(),
                    attributes: Some(vec![kv("l", AttributeValue::Int(2))]),
                    extra: ExtraFields::default(),
                },
                SpanLink {
                    context: context.clone(),
                    attributes: Some(vec![]),
                    extra: extra(&[("lk", serde_json::json!([1, {"x": 2.5}]))]),
                },
                SpanLink {
                    context: context.clone(),
                    attributes: None,
                    extra: ExtraFields::default(),
                },
            ],
            start_time: Some(Timestamp(1)),
            end_time: None,
            context: Some(context),
            parent: None,
            resource: Some(SpanResource {
                attributes: vec![kv("service.name", AttributeValue::String("svc".into()))],
                schema_url: "https://schema".into(),
            }),
            kind: SpanKind::Client,
            scope: Some(InstrumentationScope {
                name: "scope".into(),
                version: "1".into(),
                attributes: vec![],
            }),
            extra: extra(&[("top", serde_json::json!({"b": [1], "a": true}))]),
        }
    }

    #[test]
    fn spans_round_trip_losslessly() {
        let span = sample_span();
        let row = Cells(vec![
            Some(span.rollout_id.clone()),
            Some(span.attempt_id.clone()),
            Some(span.sequence_id.to_string()),
            Some(span.trace_id.clone()),
            Some(span.span_id.clone()),
            None,
            Some(span.name.clone()),
            Some("1".into()),
            None,
            Some(span_body(&span)),
        ]);
        let decoded = super::span(&row).unwrap();
        // NaN never equals itself: compare its bits, then the rest.
        let nan = |s: &Span| match &s.attributes[5].value {
            AttributeValue::Double(d) => d.to_bits(),
            _ => 0,
        };
        assert_eq!(nan(&decoded), nan(&span));
        let mut expected = span.clone();
        let mut actual = decoded;
        expected.attributes.remove(5);
        actual.attributes.remove(5);
        assert_eq!(actual, expected);
        match &actual.attributes[8].value {
            AttributeValue::Map(entries) => match entries[0].value {
                AttributeValue::Double(d) => assert!(d == 0.0 && d.is_sign_negative()),
                _ => panic!("not a double"),
            },
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn legacy_span_bodies_still_decode() {
        // Written before trace states kept entries and links kept the
        // absence of attributes.
        let body = r#"{"status":{"code":"ok"},"attributes":[],"links":[{"context":{"trace_id":"t","span_id":"s","is_remote":false,"trace_state":"a=1,b=2"},"attributes":[]}],"kind":"internal"}"#;
        let row = Cells(vec![
            Some("ro".into()),
            Some("at".into()),
            Some("1".into()),
            Some("t".into()),
            Some("s".into()),
            None,
            Some("n".into()),
            None,
            None,
            Some(body.into()),
        ]);
        let span = super::span(&row).unwrap();
        assert_eq!(span.links[0].context.trace_state.to_header(), "a=1,b=2");
        assert_eq!(span.links[0].attributes, Some(vec![]));
        assert!(span.extra.is_empty());
    }

    #[test]
    fn every_change_round_trips() {
        let changes = [
            Change::RolloutCreated {
                rollout_id: "r".into(),
                status: RolloutStatus::Queuing,
            },
            Change::AttemptCreated {
                rollout_id: "r".into(),
                attempt_id: "a".into(),
                sequence_id: 2,
                worker_id: None,
            },
            Change::WorkerChanged {
                worker_id: "w".into(),
                status: WorkerStatus::Busy,
            },
            Change::RolloutDeleted {
                rollout_id: "r".into(),
            },
            Change::GatewayChanged {
                paused: true,
                generation: 4,
            },
            Change::ModelsChanged,
        ];
        for change in changes {
            let row = Cells(vec![
                Some("3".into()),
                Some("9".into()),
                Some(change_text(&change)),
            ]);
            let event = event(&row).unwrap();
            assert_eq!(
                (event.seq, event.time, event.change),
                (3, Timestamp(9), change)
            );
        }
    }
}
