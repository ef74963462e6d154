//! Domain types of the store: plain Rust, no protobuf or database types.

use std::collections::BTreeMap;

mod config;
mod status;

pub use self::config::{MaxAttempts, RetryCondition, RolloutConfig, Seconds, SecondsError};
pub use self::status::{
    AttemptStatus, Named, RolloutMode, RolloutStatus, SessionState, WorkerStatus,
};

/// Arbitrary JSON payload (rollout input, metadata, heartbeat stats, resources).
pub type Json = serde_json::Value;

/// A point in time as nanoseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

/// The present is read from the engine's clock ([`super::clock`]), never
/// from here.
impl Timestamp {
    /// Returns this time shifted by `seconds` (saturating).
    pub fn plus_seconds(self, seconds: f64) -> Self {
        let nanos = (seconds * 1e9).clamp(i64::MIN as f64, i64::MAX as f64) as i64;
        Self(self.0.saturating_add(nanos))
    }

    /// Returns seconds since the epoch as a float, the unit agent-lightning
    /// uses: the nearest float, so that [`Timestamp::from_secs_f64`] of any
    /// float with at most nanosecond digits comes back to the same float.
    pub fn as_secs_f64(self) -> f64 {
        let seconds = self.0.div_euclid(1_000_000_000);
        let nanos = self.0.rem_euclid(1_000_000_000);
        seconds as f64 + nanos as f64 / 1e9
    }

    /// Returns the time `seconds` after the epoch, to the nearest
    /// nanosecond; `None` when it is not finite or beyond the year 2262.
    pub fn from_secs_f64(seconds: f64) -> Option<Self> {
        if !seconds.is_finite() || seconds.abs() >= 9.2e9 {
            return None;
        }
        // The fractional part of a float is exact; only its scaling rounds.
        let whole = seconds.floor();
        let nanos = ((seconds - whole) * 1e9).round() as i64;
        (whole as i64)
            .checked_mul(1_000_000_000)?
            .checked_add(nanos)
            .map(Self)
    }
}

/// One task: input plus lifecycle state.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    pub rollout_id: String,
    pub input: Json,
    pub start_time: Timestamp,
    pub end_time: Option<Timestamp>,
    pub mode: Option<RolloutMode>,
    pub resources_id: Option<String>,
    pub status: RolloutStatus,
    pub config: RolloutConfig,
    pub metadata: Json,
}

/// A rollout with its latest attempt, if any (upstream's `AttemptedRollout`).
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutView {
    pub rollout: Rollout,
    pub attempt: Option<Attempt>,
}

/// The fields of a rollout chosen by its creator.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RolloutSpec {
    pub input: Json,
    pub mode: Option<RolloutMode>,
    /// `None` resolves to the latest resources at creation time.
    pub resources_id: Option<String>,
    pub config: RolloutConfig,
    pub metadata: Json,
}

/// One execution of a rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub rollout_id: String,
    pub attempt_id: String,
    /// 1-based position among the rollout's attempts.
    pub sequence_id: u32,
    pub start_time: Timestamp,
    pub end_time: Option<Timestamp>,
    pub status: AttemptStatus,
    pub worker_id: Option<String>,
    pub last_heartbeat_time: Option<Timestamp>,
    pub metadata: Json,
}

/// A runner process known to the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Worker {
    pub worker_id: String,
    pub status: WorkerStatus,
    pub heartbeat_stats: Json,
    pub last_heartbeat_time: Option<Timestamp>,
    pub last_dequeue_time: Option<Timestamp>,
    pub last_busy_time: Option<Timestamp>,
    pub last_idle_time: Option<Timestamp>,
    pub current_rollout_id: Option<String>,
    pub current_attempt_id: Option<String>,
}

impl Worker {
    /// Returns a worker seen for the first time: status `unknown`, nothing recorded.
    pub fn new(worker_id: &str) -> Self {
        Self {
            worker_id: worker_id.to_owned(),
            status: WorkerStatus::Unknown,
            heartbeat_stats: Json::Null,
            last_heartbeat_time: None,
            last_dequeue_time: None,
            last_busy_time: None,
            last_idle_time: None,
            current_rollout_id: None,
            current_attempt_id: None,
        }
    }
}

/// A (rollout id, attempt id) pair naming one attempt.
pub type AttemptRef = (String, String);

/// A worker's session as the store records it: which server holds its
/// stream, the lease that proves it, and the attempts it owns. Each worker
/// has one record, kept after its session ends so that epochs only grow.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSession {
    pub worker_id: String,
    /// The session's fencing token: store-wide unique, and new each time a
    /// session of the worker opens, which moves the ownership of its
    /// attempts to the new session.
    pub epoch: u64,
    /// The server that holds (or last held) the session's stream.
    pub server_id: String,
    pub state: SessionState,
    /// `open`: when the lease expires unless the server renews it;
    /// `dropped`: when the grace period ends; `closed`: none.
    pub deadline: Option<Timestamp>,
    /// The attempts the session owns (pushed or adopted, not released), in
    /// the order it got them.
    pub attempts: Vec<AttemptRef>,
}

/// A versioned snapshot of named resources.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcesUpdate {
    pub resources_id: String,
    pub create_time: Timestamp,
    pub update_time: Timestamp,
    pub version: i64,
    /// JSON object: resource name to definition.
    pub resources: Json,
}

/// An OpenTelemetry attribute value (lossless for every OTLP `AnyValue`).
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    Empty,
    String(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    Bytes(Vec<u8>),
    Array(Vec<AttributeValue>),
    Map(Vec<KeyValue>),
}

/// One named attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue {
    pub key: String,
    pub value: AttributeValue,
}

/// OpenTelemetry span status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanStatusCode {
    #[default]
    Unset,
    Ok,
    Error,
}

impl SpanStatusCode {
    /// Every code, in OTLP's order.
    pub const ALL: &'static [SpanStatusCode] = &[Self::Unset, Self::Ok, Self::Error];
}

/// agent-lightning's names of the codes (OpenTelemetry's `StatusCode` names).
impl Named for SpanStatusCode {
    fn name(self) -> &'static str {
        match self {
            Self::Unset => "UNSET",
            Self::Ok => "OK",
            Self::Error => "ERROR",
        }
    }
}

/// OpenTelemetry span kind (OTLP numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanKind {
    #[default]
    Unspecified,
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
}

/// A JSON object, its keys in order.
pub type JsonObject = serde_json::Map<String, Json>;

/// Fields a part of a span carries beyond those the model names:
/// agent-lightning's span models keep them (`extra="allow"`), so they
/// round-trip verbatim, in order. Empty for most spans, and then free.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExtraFields(Option<Box<JsonObject>>);

impl ExtraFields {
    /// Wraps the extra fields of a part (none when `fields` is empty).
    pub fn new(fields: JsonObject) -> Self {
        Self((!fields.is_empty()).then(|| Box::new(fields)))
    }

    /// Returns the fields, `None` when there are none.
    pub fn fields(&self) -> Option<&JsonObject> {
        self.0.as_deref()
    }

    /// Returns true when there are no extra fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// A trace state as ordered key/value entries: agent-lightning keeps it as
/// a dict, OTLP and W3C as a `key=value,key=value` header.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TraceState(pub Vec<(String, String)>);

impl TraceState {
    /// Parses a W3C `tracestate` header: comma-separated `key=value`
    /// members, blanks around them ignored, empty members skipped; a member
    /// without `=` is a key with an empty value.
    pub fn from_header(header: &str) -> Self {
        Self(
            header
                .split(',')
                .map(str::trim)
                .filter(|member| !member.is_empty())
                .map(|member| match member.split_once('=') {
                    Some((key, value)) => (key.to_owned(), value.to_owned()),
                    None => (member.to_owned(), String::new()),
                })
                .collect(),
        )
    }

    /// Renders the entries as a W3C `tracestate` header.
    pub fn to_header(&self) -> String {
        let members: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        members.join(",")
    }

    /// Returns true when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Outcome of a span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpanStatus {
    pub code: SpanStatusCode,
    pub description: Option<String>,
    pub extra: ExtraFields,
}

/// Identity of a span within a trace. The ids are opaque text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpanContext {
    pub trace_id: String,
    pub span_id: String,
    pub is_remote: bool,
    pub trace_state: TraceState,
    pub extra: ExtraFields,
}

/// A timestamped event inside a span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: String,
    pub attributes: Vec<KeyValue>,
    pub time: Option<Timestamp>,
    pub extra: ExtraFields,
}

/// A link to another span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanLink {
    pub context: SpanContext,
    /// `None`: the link has no attribute map at all (agent-lightning's
    /// `attributes: None`, what OTLP links without attributes become).
    pub attributes: Option<Vec<KeyValue>>,
    pub extra: ExtraFields,
}

/// The entity that produced a span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpanResource {
    pub attributes: Vec<KeyValue>,
    pub schema_url: String,
}

/// The library that recorded a span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InstrumentationScope {
    pub name: String,
    pub version: String,
    pub attributes: Vec<KeyValue>,
}

/// One recorded span of an attempt. Its trace, span and parent ids are
/// opaque text, stored and matched verbatim (OTLP's bytes become lowercase
/// hex on ingest).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub rollout_id: String,
    pub attempt_id: String,
    pub sequence_id: i64,
    pub trace_id: String,
    pub span_id: String,
    pub parent_id: Option<String>,
    pub name: String,
    pub status: SpanStatus,
    pub attributes: Vec<KeyValue>,
    pub events: Vec<SpanEvent>,
    pub links: Vec<SpanLink>,
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    pub context: Option<SpanContext>,
    pub parent: Option<SpanContext>,
    pub resource: Option<SpanResource>,
    pub kind: SpanKind,
    pub scope: Option<InstrumentationScope>,
    pub extra: ExtraFields,
}

impl Span {
    /// Returns an estimate of the bytes the span holds: its texts and
    /// attribute values, and a fixed amount for the rest (extra fields are
    /// not counted). For bounding what a read holds, not exact.
    pub fn weight(&self) -> usize {
        const FIXED: usize = 256;
        let texts = [
            &self.rollout_id,
            &self.attempt_id,
            &self.trace_id,
            &self.span_id,
            &self.name,
        ]
        .iter()
        .map(|text| text.len())
        .sum::<usize>();
        let events = self
            .events
            .iter()
            .map(|e| FIXED + e.name.len() + attributes_weight(&e.attributes))
            .sum::<usize>();
        let links = self
            .links
            .iter()
            .map(|l| FIXED + l.attributes.as_deref().map_or(0, attributes_weight))
            .sum::<usize>();
        let resource = self
            .resource
            .as_ref()
            .map_or(0, |r| r.schema_url.len() + attributes_weight(&r.attributes));
        let scope = self.scope.as_ref().map_or(0, |s| {
            s.name.len() + s.version.len() + attributes_weight(&s.attributes)
        });
        FIXED + texts + attributes_weight(&self.attributes) + events + links + resource + scope
    }
}

/// Returns the bytes of the attributes' keys and values, as [`Span::weight`]
/// counts them.
fn attributes_weight(attributes: &[KeyValue]) -> usize {
    attributes
        .iter()
        .map(|kv| kv.key.len() + value_weight(&kv.value))
        .sum()
}

fn value_weight(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::String(text) => text.len(),
        AttributeValue::Bytes(bytes) => bytes.len(),
        AttributeValue::Array(items) => items.iter().map(value_weight).sum(),
        AttributeValue::Map(entries) => attributes_weight(entries),
        AttributeValue::Empty
        | AttributeValue::Bool(_)
        | AttributeValue::Int(_)
        | AttributeValue::Double(_) => 8,
    }
}

/// A span submitted for storage: its sequence id may still have to be allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSpan {
    /// `None` asks the store to allocate the next sequence id of the rollout.
    pub sequence_id: Option<i64>,
    /// The span; its `sequence_id` is overwritten when one is allocated.
    pub span: Span,
}

/// Entity counts reported by `statistics`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    pub rollouts: u64,
    pub attempts: u64,
    /// Rollouts per status; statuses without rollouts may be absent.
    pub rollouts_by_status: BTreeMap<RolloutStatus, u64>,
    /// Attempts per status; statuses without attempts may be absent.
    pub attempts_by_status: BTreeMap<AttemptStatus, u64>,
    /// When the rollout at the queue's head entered the queue.
    pub oldest_queued_time: Option<Timestamp>,
    /// The rollout at the queue's head.
    pub oldest_queued_rollout_id: Option<String>,
    pub spans: u64,
    pub resources: u64,
    pub workers: u64,
    pub queued: u64,
    /// Bytes of the stored spans, as measured by [`crate::retention::span_size`].
    pub span_bytes: u64,
    /// Rollouts whose spans retention deleted (each counted once per deletion).
    pub evicted_rollouts: u64,
    /// Spans deleted by retention.
    pub evicted_spans: u64,
    /// Bytes of the spans deleted by retention.
    pub evicted_span_bytes: u64,
}

/// Store statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Statistics {
    /// Name of the backend.
    pub name: String,
    pub counts: Counts,
    pub uptime_seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spans_weight_counts_its_attribute_values_nested() {
        let bare = Span {
            rollout_id: "ro-1".into(),
            attempt_id: "at-1".into(),
            sequence_id: 1,
            trace_id: "t".into(),
            span_id: "s".into(),
            parent_id: None,
            name: "llm".into(),
            status: SpanStatus::default(),
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            start_time: None,
            end_time: None,
            context: None,
            parent: None,
            resource: None,
            kind: SpanKind::Internal,
            scope: None,
            extra: Default::default(),
        };
        let text = |n: usize| AttributeValue::String("x".repeat(n));
        let attribute = |key: &str, value| KeyValue {
            key: key.into(),
            value,
        };
        let nested = Span {
            attributes: vec![attribute(
                "gen_ai.prompt",
                AttributeValue::Map(vec![
                    attribute("a", text(10_000)),
                    attribute("b", AttributeValue::Array(vec![text(5_000), text(5_000)])),
                ]),
            )],
            events: vec![SpanEvent {
                name: "e".into(),
                attributes: vec![attribute("c", text(3_000))],
                time: None,
                extra: Default::default(),
            }],
            ..bare.clone()
        };
        let added = nested.weight() - bare.weight();
        assert!((23_000..24_000).contains(&added), "{added}");
    }

    #[test]
    fn trace_state_headers_parse_into_entries_and_back() {
        let state = TraceState::from_header(" congo=t61rcWkgMzE , rojo=00f067aa0ba902b7,,flag");
        assert_eq!(
            state.0,
            [
                ("congo".to_owned(), "t61rcWkgMzE".to_owned()),
                ("rojo".to_owned(), "00f067aa0ba902b7".to_owned()),
                ("flag".to_owned(), String::new()),
            ]
        );
        assert_eq!(
            state.to_header(),
            "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,flag="
        );
        assert!(TraceState::from_header("").is_empty());
    }

    #[test]
    fn float_seconds_round_trip_through_nanoseconds() {
        for seconds in [
            1795437044.1672018,
            1795437044.0,
            1700000000.123456,
            12345.678,
            1.0,
            0.5,
            -2.25,
            0.0,
        ] {
            let time = Timestamp::from_secs_f64(seconds).unwrap();
            assert_eq!(time.as_secs_f64(), seconds, "{seconds}");
        }
        assert_eq!(
            Timestamp::from_secs_f64(1.5).unwrap(),
            Timestamp(1_500_000_000)
        );
        assert_eq!(Timestamp::from_secs_f64(f64::NAN), None);
        assert_eq!(Timestamp::from_secs_f64(1e20), None);
    }

    #[test]
    fn empty_extra_fields_take_no_room() {
        assert!(ExtraFields::new(JsonObject::new()).is_empty());
        let mut fields = JsonObject::new();
        fields.insert("kept".into(), Json::Bool(true));
        assert_eq!(ExtraFields::new(fields.clone()).fields(), Some(&fields));
        assert_eq!(std::mem::size_of::<ExtraFields>(), 8);
    }
}
