//! Timestamps and durations between protobuf and the domain.

use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::Timestamp;
use lightning_store_core::query::TimeRange;

/// Converts a domain timestamp to protobuf.
pub fn timestamp_to_proto(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.0.div_euclid(1_000_000_000),
        nanos: t.0.rem_euclid(1_000_000_000) as i32,
    }
}

pub fn opt_time(t: Option<Timestamp>) -> Option<prost_types::Timestamp> {
    t.map(timestamp_to_proto)
}

/// Converts a protobuf timestamp to the domain, rejecting invalid ones.
pub fn timestamp_from_proto(field: &str, t: &prost_types::Timestamp) -> StoreResult<Timestamp> {
    if !(0..1_000_000_000).contains(&t.nanos) {
        return Err(StoreError::invalid(format!("{field} has invalid nanos")));
    }
    t.seconds
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(i64::from(t.nanos)))
        .map(Timestamp)
        .ok_or_else(|| StoreError::invalid(format!("{field} is out of range")))
}

/// Converts an optional protobuf timestamp to the domain.
pub fn opt_timestamp_from_proto(
    field: &str,
    t: Option<prost_types::Timestamp>,
) -> StoreResult<Option<Timestamp>> {
    t.map(|t| timestamp_from_proto(field, &t)).transpose()
}

/// Converts a window's two protobuf bounds, the fields `{field}_from` and
/// `{field}_until`, to the domain.
pub fn time_range_from_proto(
    field: &str,
    from: Option<prost_types::Timestamp>,
    until: Option<prost_types::Timestamp>,
) -> StoreResult<TimeRange> {
    Ok(TimeRange {
        from: opt_timestamp_from_proto(&format!("{field}_from"), from)?,
        until: opt_timestamp_from_proto(&format!("{field}_until"), until)?,
    })
}

/// Converts a protobuf duration to std, rejecting negative ones and nanos
/// outside the range protobuf defines (±999,999,999).
pub fn duration_from_proto(
    field: &str,
    d: Option<&prost_types::Duration>,
) -> StoreResult<Option<std::time::Duration>> {
    let Some(d) = d else { return Ok(None) };
    if !(-999_999_999..=999_999_999).contains(&d.nanos) {
        return Err(StoreError::invalid(format!("{field} has invalid nanos")));
    }
    std::time::Duration::try_from(*d)
        .map(Some)
        .map_err(|_| StoreError::invalid(format!("{field} must be a non-negative duration")))
}
