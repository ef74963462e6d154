//! Namespaces between protobuf and the domain.

use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::namespace::{Namespace, Quotas};
use lightning_store_core::retention::RetentionPolicy;
use lightning_store_proto as pb;

use super::time::{duration_from_proto, timestamp_to_proto};

/// Converts a namespace to protobuf.
pub fn namespace_to_proto(namespace: &Namespace) -> pb::Namespace {
    pb::Namespace {
        name: namespace.name.to_string(),
        created: Some(timestamp_to_proto(namespace.created)),
        span_retention: namespace
            .settings
            .retention
            .map(|retention| pb::SpanRetention {
                max_age: retention
                    .max_age
                    .and_then(|age| prost_types::Duration::try_from(age).ok()),
                max_bytes: retention
                    .max_bytes
                    .map_or(0, |bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
            }),
        quotas: quotas_to_proto(&namespace.settings.quotas),
    }
}

/// Converts quotas to protobuf (none set: absent).
fn quotas_to_proto(quotas: &Quotas) -> Option<pb::NamespaceQuotas> {
    if *quotas == Quotas::default() {
        return None;
    }
    let limit = |max: Option<u64>| max.map_or(0, |max| i64::try_from(max).unwrap_or(i64::MAX));
    Some(pb::NamespaceQuotas {
        max_queued_rollouts: limit(quotas.max_queued_rollouts),
        max_spans: limit(quotas.max_spans),
        max_span_bytes: limit(quotas.max_span_bytes),
    })
}

/// Converts quotas from protobuf (absent, or 0: no limit); a negative one
/// is refused, naming its field.
pub fn quotas_from_proto(quotas: Option<&pb::NamespaceQuotas>) -> StoreResult<Quotas> {
    let Some(quotas) = quotas else {
        return Ok(Quotas::default());
    };
    let limit = |field: &str, max: i64| match max {
        0 => Ok(None),
        max => u64::try_from(max)
            .map(Some)
            .map_err(|_| StoreError::invalid(format!("quotas.{field} must not be negative"))),
    };
    Ok(Quotas {
        max_queued_rollouts: limit("max_queued_rollouts", quotas.max_queued_rollouts)?,
        max_spans: limit("max_spans", quotas.max_spans)?,
        max_span_bytes: limit("max_span_bytes", quotas.max_span_bytes)?,
    })
}

/// Converts a span retention from protobuf (absent: `None`, the server's).
pub fn retention_from_proto(
    retention: Option<&pb::SpanRetention>,
) -> StoreResult<Option<RetentionPolicy>> {
    let Some(retention) = retention else {
        return Ok(None);
    };
    let max_bytes =
        match retention.max_bytes {
            0 => None,
            bytes => Some(u64::try_from(bytes).map_err(|_| {
                StoreError::invalid("span_retention.max_bytes must not be negative")
            })?),
        };
    Ok(Some(RetentionPolicy {
        max_age: duration_from_proto("span_retention.max_age", retention.max_age.as_ref())?,
        max_bytes,
    }))
}
