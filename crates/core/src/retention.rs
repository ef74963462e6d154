//! Span retention. Spans are the bulk of a store's data; a retention policy
//! deletes the spans of finished rollouts, those that finished first going
//! first. Every backend applies the same policy with the same size measure
//! (through [`crate::storage::ImmediateWrites::evict_spans`]), so they evict the same
//! spans. A rollout whose spans were deleted is marked evicted: querying its
//! spans fails from then on, as upstream's eviction does.

use std::time::Duration;

use super::model::{AttributeValue, ExtraFields, Json, KeyValue, Span, SpanContext, Timestamp};

/// When the spans of finished rollouts are deleted. The default keeps everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    /// Spans of rollouts that finished longer ago than this are deleted.
    pub max_age: Option<Duration>,
    /// While the stored spans take more than this many bytes (as measured by
    /// [`span_size`]), the spans of the rollouts that finished first are deleted.
    pub max_bytes: Option<u64>,
}

impl RetentionPolicy {
    /// Returns true when the policy can delete anything.
    pub fn is_enabled(&self) -> bool {
        self.max_age.is_some() || self.max_bytes.is_some()
    }

    /// Returns whether the spans of a finished rollout that ended at
    /// `end_time` go, while the store holds `stored_bytes` of spans.
    pub fn evicts(&self, end_time: Option<Timestamp>, stored_bytes: u64, now: Timestamp) -> bool {
        let too_old = match (self.max_age, end_time) {
            (Some(age), Some(end)) => end < now.plus_seconds(-age.as_secs_f64()),
            _ => false,
        };
        let too_big = self.max_bytes.is_some_and(|max| stored_bytes > max);
        too_old || too_big
    }
}

/// What one eviction pass deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Eviction {
    /// Rollouts whose spans were deleted.
    pub rollouts: u64,
    /// Spans deleted.
    pub spans: u64,
    /// Bytes of the deleted spans, as measured by [`span_size`].
    pub bytes: u64,
    /// True when the pass stopped because no further rollout was due (false:
    /// it reached its rollout limit and another pass may find more).
    pub done: bool,
}

impl Eviction {
    /// Adds another pass's deletions to this one.
    pub fn add(&mut self, other: Eviction) {
        self.rollouts += other.rollouts;
        self.spans += other.spans;
        self.bytes += other.bytes;
        self.done = other.done;
    }
}

/// Fixed cost accounted per span and per nested item, standing for ids,
/// timestamps and bookkeeping.
const OVERHEAD: u64 = 64;
const ITEM_OVERHEAD: u64 = 16;

/// Returns the size a store accounts for a span: the bytes of its text and
/// binary content plus a fixed overhead per item. It is an estimate that is
/// the same on every backend, not the bytes a backend actually uses.
pub fn span_size(span: &Span) -> u64 {
    let text = [
        &span.rollout_id,
        &span.attempt_id,
        &span.trace_id,
        &span.span_id,
        &span.name,
    ]
    .iter()
    .map(|s| s.len() as u64)
    .sum::<u64>();
    let parent = span.parent_id.as_ref().map_or(0, |p| p.len() as u64);
    let status = span
        .status
        .description
        .as_ref()
        .map_or(0, |d| d.len() as u64)
        + extra_size(&span.status.extra);
    let events: u64 = span
        .events
        .iter()
        .map(|e| {
            ITEM_OVERHEAD
                + e.name.len() as u64
                + attributes_size(&e.attributes)
                + extra_size(&e.extra)
        })
        .sum();
    let links: u64 = span
        .links
        .iter()
        .map(|l| {
            context_size(&l.context)
                + l.attributes.as_deref().map_or(0, attributes_size)
                + extra_size(&l.extra)
        })
        .sum();
    let contexts = [&span.context, &span.parent]
        .into_iter()
        .flatten()
        .map(context_size)
        .sum::<u64>();
    let resource = span.resource.as_ref().map_or(0, |r| {
        ITEM_OVERHEAD + r.schema_url.len() as u64 + attributes_size(&r.attributes)
    });
    let scope = span.scope.as_ref().map_or(0, |s| {
        ITEM_OVERHEAD + (s.name.len() + s.version.len()) as u64 + attributes_size(&s.attributes)
    });
    OVERHEAD
        + text
        + parent
        + status
        + attributes_size(&span.attributes)
        + events
        + links
        + contexts
        + resource
        + scope
        + extra_size(&span.extra)
}

fn context_size(context: &SpanContext) -> u64 {
    let trace_state: usize = context
        .trace_state
        .0
        .iter()
        .map(|(key, value)| key.len() + value.len() + 2)
        .sum();
    ITEM_OVERHEAD
        + (context.trace_id.len() + context.span_id.len() + trace_state) as u64
        + extra_size(&context.extra)
}

/// Extra fields count as the bytes of their JSON text.
fn extra_size(extra: &ExtraFields) -> u64 {
    extra.fields().map_or(0, |fields| {
        ITEM_OVERHEAD + Json::Object(fields.clone()).to_string().len() as u64
    })
}

fn attributes_size(attributes: &[KeyValue]) -> u64 {
    attributes
        .iter()
        .map(|kv| ITEM_OVERHEAD + kv.key.len() as u64 + value_size(&kv.value))
        .sum()
}

fn value_size(value: &AttributeValue) -> u64 {
    match value {
        AttributeValue::Empty | AttributeValue::Bool(_) => 1,
        AttributeValue::Int(_) | AttributeValue::Double(_) => 8,
        AttributeValue::String(s) => s.len() as u64,
        AttributeValue::Bytes(b) => b.len() as u64,
        AttributeValue::Array(items) => items.iter().map(|v| ITEM_OVERHEAD + value_size(v)).sum(),
        AttributeValue::Map(entries) => attributes_size(entries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_and_size_limits_evict_independently() {
        let now = Timestamp(100_000_000_000);
        let policy = RetentionPolicy {
            max_age: Some(Duration::from_secs(10)),
            max_bytes: Some(1_000),
        };
        let old = Some(Timestamp(now.0 - 11_000_000_000));
        let recent = Some(Timestamp(now.0 - 1_000_000_000));
        assert!(policy.evicts(old, 0, now));
        assert!(!policy.evicts(recent, 1_000, now));
        assert!(policy.evicts(recent, 1_001, now));
        assert!(!policy.evicts(None, 0, now));
        assert!(!RetentionPolicy::default().evicts(old, u64::MAX, now));
    }
}
