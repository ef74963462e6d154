//! Spans the scenarios write: LLM-call spans of a chosen encoded size, for
//! the store API and for OTLP, built once as templates and cloned with
//! fresh span ids so the server never sees a duplicate.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue as OtlpKeyValue, any_value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1 as otlp;
use prost::Message;
use prost::bytes::Bytes;

use super::wire::Template;
use lightning_store_proto as pb;

/// The attribute that carries the filler text making a span its chosen size.
const FILLER_KEY: &str = "gen_ai.prompt.0.content";
/// High bits of the placeholder span ids that request templates carry
/// until each copy gets fresh ones.
const STORE_MARKER: u64 = 0xfeed_face_0000_0000;
const OTLP_MARKER: u64 = 0xdead_beef_0000_0000;

/// Hands out span ids unique within the process run: a random per-task
/// prefix and a counter.
pub struct SpanIds {
    prefix: u32,
    next: u32,
}

impl SpanIds {
    /// Returns a generator with a random prefix.
    pub fn new() -> Self {
        let random = uuid::Uuid::new_v4().as_u128();
        Self {
            prefix: random as u32,
            next: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.reserve(1)
    }

    /// Reserves `n` consecutive ids; returns the first.
    fn reserve(&mut self, n: u32) -> u64 {
        let first = self.next.wrapping_add(1);
        self.next = self.next.wrapping_add(n);
        (u64::from(self.prefix) << 32) | u64::from(first)
    }
}

/// A store-API span template of about `span_bytes` encoded bytes.
#[derive(Clone)]
pub struct StoreSpan {
    template: pb::Span,
}

impl StoreSpan {
    /// Builds a template whose encoded size is about `span_bytes` (never
    /// smaller than the span without filler).
    pub fn new(span_bytes: usize) -> Self {
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        let span_id = format!("{:016x}", 0u64);
        let (start, end) = times();
        let mut template = pb::Span {
            trace_id: trace_id.clone(),
            span_id: span_id.clone(),
            name: "openai.chat.completion".to_owned(),
            status: Some(pb::SpanStatus {
                code: pb::SpanStatusCode::Ok as i32,
                ..Default::default()
            }),
            attributes: vec![
                store_text("gen_ai.system", "openai"),
                store_text("gen_ai.request.model", "gpt-4o-mini"),
                store_int("gen_ai.usage.prompt_tokens", 412),
                store_int("gen_ai.usage.completion_tokens", 96),
                store_text(FILLER_KEY, ""),
            ],
            start_time: Some(timestamp(start)),
            end_time: Some(timestamp(end)),
            context: Some(pb::SpanContext {
                trace_id,
                span_id,
                ..Default::default()
            }),
            kind: pb::SpanKind::Client as i32,
            ..Default::default()
        };
        let base = template.encoded_len();
        if let Some(pb::attribute_value::Value::StringValue(text)) = template
            .attributes
            .last_mut()
            .and_then(|kv| kv.value.as_mut())
            .and_then(|v| v.value.as_mut())
        {
            *text = filler(span_bytes.saturating_sub(base));
        }
        Self { template }
    }

    /// Returns the encoded size of one span (rollout and attempt ids empty).
    pub fn encoded_len(&self) -> usize {
        self.template.encoded_len()
    }

    /// Returns `count` spans of one attempt with fresh span ids.
    pub fn spans(
        &self,
        rollout_id: &str,
        attempt_id: &str,
        count: usize,
        ids: &mut SpanIds,
    ) -> Vec<pb::Span> {
        (0..count)
            .map(|_| {
                let mut span = self.template.clone();
                rollout_id.clone_into(&mut span.rollout_id);
                attempt_id.clone_into(&mut span.attempt_id);
                let id = ids.next();
                span.span_id.clear();
                let _ = write!(span.span_id, "{id:016x}");
                if let Some(context) = &mut span.context {
                    context.span_id.clone_from(&span.span_id);
                }
                span
            })
            .collect()
    }
}

/// A rollout's spans as an agent-lightning 0.x agent writes them, so that
/// every layout of an export has something to produce: the agent's root
/// span, LLM calls (`openai.chat.completion`, each about `span_bytes`, with
/// token ids, a prompt and an answer) and a reward span last.
pub struct TrainingSpans {
    root: pb::Span,
    call: pb::Span,
    reward: pb::Span,
}

impl TrainingSpans {
    /// Builds the templates; each LLM call is about `span_bytes` encoded.
    pub fn new(span_bytes: usize) -> Self {
        let span = |name: &str, attributes: Vec<pb::KeyValue>| pb::Span {
            name: name.to_owned(),
            status: Some(pb::SpanStatus {
                code: pb::SpanStatusCode::Ok as i32,
                ..Default::default()
            }),
            attributes,
            ..Default::default()
        };
        let ids = |range: std::ops::Range<i64>| {
            pb::attribute_value::Value::ArrayValue(pb::ArrayValue {
                values: range
                    .map(|id| pb::AttributeValue {
                        value: Some(pb::attribute_value::Value::IntValue(id)),
                    })
                    .collect(),
            })
        };
        let mut call = span(
            "openai.chat.completion",
            vec![
                store_text("gen_ai.response.model", "gpt-4o-mini"),
                store_text("gen_ai.completion.0.role", "assistant"),
                store_text("gen_ai.completion.0.content", "the next step is done"),
                store_value("prompt_token_ids", ids(1..33)),
                store_value("response_token_ids", ids(33..41)),
                store_text("gen_ai.prompt.0.role", "user"),
                store_text(FILLER_KEY, ""),
            ],
        );
        let base = call.encoded_len();
        if let Some(pb::attribute_value::Value::StringValue(text)) = call
            .attributes
            .last_mut()
            .and_then(|kv| kv.value.as_mut())
            .and_then(|v| v.value.as_mut())
        {
            *text = filler(span_bytes.saturating_sub(base));
        }
        Self {
            root: span("agent run", vec![store_text("agent.name", "bench-agent")]),
            call,
            reward: span(
                "agentlightning.annotation",
                vec![
                    store_text("agentlightning.reward.0.name", "primary"),
                    store_value(
                        "agentlightning.reward.0.value",
                        pb::attribute_value::Value::DoubleValue(1.0),
                    ),
                ],
            ),
        }
    }

    /// Returns `count` spans (at least 3: the root, calls, the reward) of
    /// one attempt in one trace, with fresh span ids, one second apart.
    pub fn spans(
        &self,
        rollout_id: &str,
        attempt_id: &str,
        count: usize,
        ids: &mut SpanIds,
    ) -> Vec<pb::Span> {
        let count = count.max(3);
        let first = ids.reserve(u32::try_from(count).unwrap_or(u32::MAX));
        let trace_id = format!("{first:032x}");
        let root_id = format!("{first:016x}");
        let (start, _) = times();
        (0..count)
            .map(|k| {
                let template = match k {
                    0 => &self.root,
                    k if k + 1 == count => &self.reward,
                    _ => &self.call,
                };
                let mut span = template.clone();
                rollout_id.clone_into(&mut span.rollout_id);
                attempt_id.clone_into(&mut span.attempt_id);
                span.trace_id.clone_from(&trace_id);
                span.span_id = format!("{:016x}", first + k as u64);
                if k > 0 {
                    span.parent_id = Some(root_id.clone());
                }
                let at = start + k as u64 * 1_000_000_000;
                let end = if k == 0 {
                    start + count as u64 * 1_000_000_000
                } else {
                    at + 500_000_000
                };
                span.start_time = Some(timestamp(at));
                span.end_time = Some(timestamp(end));
                span.context = Some(pb::SpanContext {
                    trace_id: trace_id.clone(),
                    span_id: span.span_id.clone(),
                    ..Default::default()
                });
                span
            })
            .collect()
    }
}

/// An encoded AddSpans request: `batch` spans of one attempt whose span
/// ids are rewritten for each request.
pub struct StoreBatch {
    template: Template,
    batch: usize,
}

impl StoreBatch {
    /// Builds the request template; `None` if its span ids cannot be located.
    pub fn new(span: &StoreSpan, rollout_id: &str, attempt_id: &str, batch: usize) -> Option<Self> {
        let mut spans = span.spans(rollout_id, attempt_id, batch, &mut SpanIds::new());
        let mut markers = Vec::with_capacity(batch);
        for (index, span) in spans.iter_mut().enumerate() {
            let marker = format!("{:016x}", STORE_MARKER | index as u64);
            span.span_id.clone_from(&marker);
            if let Some(context) = &mut span.context {
                context.span_id.clone_from(&marker);
            }
            markers.push(marker.into_bytes());
        }
        // Each span id appears twice: in the span and in its context.
        let template = Template::new(
            &pb::AddSpansRequest {
                spans,
                owner_epoch: None,
                ..Default::default()
            },
            &markers,
            2,
        )?;
        Some(Self { template, batch })
    }

    /// Returns the encoded request with fresh span ids.
    pub fn request(&self, ids: &mut SpanIds) -> Bytes {
        let first = ids.reserve(self.batch as u32);
        self.template
            .render(|index, slot| write_hex(first + index as u64, slot))
    }
}

/// An encoded OTLP Export request: `batch` spans routed to one attempt by
/// resource attributes, whose span ids are rewritten for each request.
pub struct OtlpBatch {
    template: Template,
    batch: usize,
}

impl OtlpBatch {
    /// Builds the request template; `None` if its span ids cannot be located.
    pub fn new(
        rollout_id: &str,
        attempt_id: &str,
        batch: usize,
        span_bytes: usize,
    ) -> Option<Self> {
        let trace_id = uuid::Uuid::new_v4().as_bytes().to_vec();
        let (start, end) = times();
        let mut span = otlp::Span {
            trace_id,
            span_id: vec![0; 8],
            name: "openai.chat.completion".to_owned(),
            kind: otlp::span::SpanKind::Client as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: vec![
                otlp_text("gen_ai.system", "openai"),
                otlp_text("gen_ai.request.model", "gpt-4o-mini"),
                otlp_int("gen_ai.usage.prompt_tokens", 412),
                otlp_int("gen_ai.usage.completion_tokens", 96),
                otlp_text(FILLER_KEY, ""),
            ],
            status: Some(otlp::Status {
                code: otlp::status::StatusCode::Ok as i32,
                message: String::new(),
            }),
            ..Default::default()
        };
        let base = span.encoded_len();
        if let Some(any_value::Value::StringValue(text)) = span
            .attributes
            .last_mut()
            .and_then(|kv| kv.value.as_mut())
            .and_then(|v| v.value.as_mut())
        {
            *text = filler(span_bytes.saturating_sub(base));
        }
        let markers: Vec<Vec<u8>> = (0..batch)
            .map(|index| (OTLP_MARKER | index as u64).to_be_bytes().to_vec())
            .collect();
        let spans = markers
            .iter()
            .map(|marker| otlp::Span {
                span_id: marker.clone(),
                ..span.clone()
            })
            .collect();
        let request = ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        otlp_text("service.name", "lightning-store-bench"),
                        otlp_text(pb::ROLLOUT_ID_KEY, rollout_id),
                        otlp_text(pb::ATTEMPT_ID_KEY, attempt_id),
                    ],
                    ..Default::default()
                }),
                scope_spans: vec![otlp::ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "lightning-store-bench".to_owned(),
                        ..Default::default()
                    }),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        let template = Template::new(&request, &markers, 1)?;
        Some(Self { template, batch })
    }

    /// Returns the encoded request with fresh span ids.
    pub fn request(&self, ids: &mut SpanIds) -> Bytes {
        let first = ids.reserve(self.batch as u32);
        self.template.render(|index, slot| {
            slot.copy_from_slice(&(first + index as u64).to_be_bytes());
        })
    }
}

/// Writes `value` as 16 lowercase hex digits into `out` (16 bytes).
fn write_hex(value: u64, out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = DIGITS[((value >> (60 - 4 * i)) & 0xf) as usize];
    }
}

/// Returns ASCII text of `len` bytes.
fn filler(len: usize) -> String {
    const WORDS: &str =
        "the agent asked the model to plan the next step of the task and checked the answer ";
    WORDS.chars().cycle().take(len).collect()
}

/// Returns a start and end time one second apart, in Unix nanoseconds.
fn times() -> (u64, u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    (now.saturating_sub(1_000_000_000), now)
}

fn timestamp(unix_nanos: u64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: (unix_nanos / 1_000_000_000) as i64,
        nanos: (unix_nanos % 1_000_000_000) as i32,
    }
}

fn store_value(key: &str, value: pb::attribute_value::Value) -> pb::KeyValue {
    pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue { value: Some(value) }),
    }
}

fn store_text(key: &str, value: &str) -> pb::KeyValue {
    store_value(
        key,
        pb::attribute_value::Value::StringValue(value.to_owned()),
    )
}

fn store_int(key: &str, value: i64) -> pb::KeyValue {
    store_value(key, pb::attribute_value::Value::IntValue(value))
}

fn otlp_value(key: &str, value: any_value::Value) -> OtlpKeyValue {
    OtlpKeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn otlp_text(key: &str, value: &str) -> OtlpKeyValue {
    otlp_value(key, any_value::Value::StringValue(value.to_owned()))
}

fn otlp_int(key: &str, value: i64) -> OtlpKeyValue {
    otlp_value(key, any_value::Value::IntValue(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_have_the_chosen_size_and_unique_ids() {
        let template = StoreSpan::new(1024);
        assert!((1016..=1032).contains(&template.encoded_len()));
        let mut ids = SpanIds::new();
        let spans = template.spans("ro-1", "at-1", 3, &mut ids);
        assert_ne!(spans[0].span_id, spans[1].span_id);
        assert_eq!(spans[2].span_id.len(), 16);
        assert_eq!(spans[2].context.as_ref().unwrap().span_id, spans[2].span_id);

        let batch = StoreBatch::new(&template, "ro-1", "at-1", 4).unwrap();
        let request = pb::AddSpansRequest::decode(batch.request(&mut ids)).unwrap();
        assert_eq!(request.spans.len(), 4);
        assert_eq!(request.spans[3].rollout_id, "ro-1");
        assert_ne!(request.spans[0].span_id, request.spans[3].span_id);
        assert_eq!(
            request.spans[3].context.as_ref().unwrap().span_id,
            request.spans[3].span_id
        );

        let batch = OtlpBatch::new("ro-1", "at-1", 4, 1024).unwrap();
        let first = ExportTraceServiceRequest::decode(batch.request(&mut ids)).unwrap();
        let second = ExportTraceServiceRequest::decode(batch.request(&mut ids)).unwrap();
        let spans = &first.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans.len(), 4);
        assert!((1016..=1032).contains(&spans[0].encoded_len()));
        assert_ne!(spans[0].span_id, spans[3].span_id);
        assert_ne!(
            spans[0].span_id,
            second.resource_spans[0].scope_spans[0].spans[0].span_id
        );
    }
}
