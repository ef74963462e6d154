//! Client request ids (idempotency keys): a client names a write, and a
//! retry under the same name returns the first call's result instead of
//! writing again. Two kinds share the digest here:
//! * store-wide request ids of enqueues ([`RememberedRequest`]), kept until
//!   they expire (`--request-id-ttl`) and removed by the retention
//!   task;
//! * agent-lightning 1.x's `Idempotency-Key` of an event POST, scoped to
//!   one attempt and kept with its event ([`crate::agl1`]).
//!
//! A request id is compared with a digest of the request it first named:
//! the same id with another request is refused (`FAILED_PRECONDITION`),
//! never answered with the other request's result.

use std::time::Duration;

use super::error::{StoreError, StoreResult, echo};
use super::model::Seconds;
use super::model::{RolloutSpec, Timestamp};

/// Longest request id a client may give, in bytes.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// How long a request id is remembered by default.
pub const DEFAULT_REQUEST_ID_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A client's key for one request, with a digest of that request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub key: String,
    /// A digest of the request: the same key with another request is refused.
    pub digest: String,
}

impl IdempotencyKey {
    /// Returns the key of a request made of `parts` (digested in order,
    /// separated by a zero byte).
    pub fn of(key: impl Into<String>, parts: &[&[u8]]) -> Self {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                hasher.update([0]);
            }
            hasher.update(part);
        }
        Self {
            key: key.into(),
            digest: hex::encode(hasher.finalize()),
        }
    }

    /// Returns the key of an enqueue of `specs`.
    pub fn of_enqueue(key: impl Into<String>, specs: &[RolloutSpec]) -> Self {
        let texts: Vec<String> = specs.iter().map(spec_text).collect();
        let parts: Vec<&[u8]> = texts.iter().map(String::as_bytes).collect();
        Self::of(key, &parts)
    }

    /// Returns the refusal of this key given again with another request.
    pub fn reused(&self) -> StoreError {
        StoreError::FailedPrecondition(format!(
            "request id {} was used for another request",
            echo(&self.key)
        ))
    }
}

/// A rollout spec as canonical text for a digest: every field, in a fixed
/// order (JSON payloads as given, so another key order is another request).
fn spec_text(spec: &RolloutSpec) -> String {
    let config = &spec.config;
    serde_json::json!([
        spec.input,
        spec.mode.map(|mode| mode.as_str()),
        spec.resources_id,
        config.timeout_seconds.map(Seconds::get),
        config.unresponsive_seconds.map(Seconds::get),
        config.max_attempts.get(),
        config
            .retry_condition
            .statuses()
            .iter()
            .map(|status| status.as_str())
            .collect::<Vec<_>>(),
        spec.metadata,
    ])
    .to_string()
}

/// Returns a client's optional request id once [`validate_request_id`]
/// accepts it: the adapters' check before they read a request's items, so
/// that a bad request id answers with its own error whatever the items hold.
pub fn checked_request_id(id: Option<String>) -> StoreResult<Option<String>> {
    if let Some(id) = &id {
        validate_request_id("request_id", id)?;
    }
    Ok(id)
}

/// Checks a client's request id: 1 to [`MAX_REQUEST_ID_LEN`] bytes of
/// visible ASCII (no spaces or control characters), so that it can travel
/// as a header and be logged as it is. `what` names the field.
pub fn validate_request_id(what: &str, id: &str) -> StoreResult<()> {
    if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN {
        return Err(StoreError::invalid(format!(
            "{what} must be 1 to {MAX_REQUEST_ID_LEN} bytes, got {}",
            id.len()
        )));
    }
    if !id.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(StoreError::invalid(format!(
            "{what} {} must be visible ASCII (no spaces or control characters)",
            echo(id)
        )));
    }
    Ok(())
}

/// What a store remembers of an enqueue made under a request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RememberedRequest {
    pub request_id: String,
    /// The digest of the request ([`IdempotencyKey::digest`]).
    pub digest: String,
    /// The rollouts the request created, in request order.
    pub rollout_ids: Vec<String>,
    /// When the id is forgotten: a later request under it is a new request.
    pub expires_at: Timestamp,
}

/// The name [`crate::storage::ImmediateWrites::lock_names`] locks for a
/// request id, so that concurrent first uses of it write once.
pub fn lock_name(request_id: &str) -> String {
    format!("request-id:{request_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_tell_requests_apart() {
        let spec = RolloutSpec::default();
        let other = RolloutSpec {
            input: serde_json::json!({"n": 1}),
            ..RolloutSpec::default()
        };
        let one = IdempotencyKey::of_enqueue("k", std::slice::from_ref(&spec));
        assert_eq!(
            one,
            IdempotencyKey::of_enqueue("k", &[RolloutSpec::default()])
        );
        assert_ne!(one.digest, IdempotencyKey::of_enqueue("k", &[other]).digest);
        assert_ne!(
            one.digest,
            IdempotencyKey::of_enqueue("k", &[spec.clone(), spec]).digest
        );
        // The 1.x event digest is unchanged: type, a zero byte, the data.
        let event = IdempotencyKey::of("k", &[b"t", b"{}"]);
        assert_eq!(event.digest.len(), 64);
        assert_ne!(event.digest, IdempotencyKey::of("k", &[b"t{}"]).digest);
    }

    #[test]
    fn request_ids_are_short_visible_ascii() {
        assert!(validate_request_id("request_id", "0f3c-uuid:retry/1").is_ok());
        for bad in ["", "a b", "line\nbreak", "é", &"x".repeat(129)] {
            assert!(validate_request_id("request_id", bad).is_err(), "{bad:?}");
        }
    }
}
