//! Id generation (upstream's formats) and validation of caller-supplied ids.

use super::error::{StoreError, StoreResult};

/// Maximum length of any id accepted from a caller.
pub const MAX_ID_LEN: usize = 256;

/// The pseudo attempt id that selects a rollout's latest attempt.
pub const LATEST: &str = "latest";

fn random_hex(len: usize) -> String {
    let mut hex = uuid::Uuid::new_v4().simple().to_string();
    hex.truncate(len);
    hex
}

/// Returns a new rollout id: `ro-` + 12 hex digits.
pub fn new_rollout_id() -> String {
    format!("ro-{}", random_hex(12))
}

/// Returns a new attempt id: `at-` + 8 hex digits.
pub fn new_attempt_id() -> String {
    format!("at-{}", random_hex(8))
}

/// Returns a new resources id: `rs-` + 12 hex digits.
pub fn new_resources_id() -> String {
    format!("rs-{}", random_hex(12))
}

/// Checks a caller-supplied id as upstream accepts ids: any printable text,
/// spaces included, non-empty and at most [`MAX_ID_LEN`] bytes (control
/// characters are refused: they have no place in an id and corrupt logs).
/// `what` names the field in the error.
pub fn validate_id(what: &str, id: &str) -> StoreResult<()> {
    if id.is_empty() {
        return Err(StoreError::invalid(format!("{what} must not be empty")));
    }
    validate_printable(what, id)
}

/// Checks a worker id: like [`validate_id`], but the empty id is accepted,
/// as upstream stores it on attempts (an empty id never names a worker to
/// keep in step with them).
pub fn validate_worker_id(what: &str, id: &str) -> StoreResult<()> {
    validate_printable(what, id)
}

fn validate_printable(what: &str, id: &str) -> StoreResult<()> {
    if id.len() > MAX_ID_LEN {
        return Err(StoreError::invalid(format!(
            "{what} is longer than {MAX_ID_LEN} bytes"
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(StoreError::invalid(format!(
            "{what} {id:?} contains control characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_have_upstream_formats() {
        let is_hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
        let rollout = new_rollout_id();
        assert!(rollout.starts_with("ro-") && rollout.len() == 15 && is_hex(&rollout[3..]));
        let attempt = new_attempt_id();
        assert!(attempt.starts_with("at-") && attempt.len() == 11 && is_hex(&attempt[3..]));
        let resources = new_resources_id();
        assert!(resources.starts_with("rs-") && resources.len() == 15);
        assert_ne!(new_rollout_id(), rollout);
    }

    #[test]
    fn ids_are_printable_text_as_upstream_accepts_them() {
        assert!(validate_id("rollout_id", "ro-0123").is_ok());
        assert!(validate_id("rollout_id", "my rollout #1 (é)").is_ok());
        assert!(validate_id("rollout_id", "").is_err());
        assert!(validate_id("rollout_id", "ro\n1").is_err());
        assert!(validate_id("rollout_id", &"x".repeat(MAX_ID_LEN + 1)).is_err());
        assert!(validate_worker_id("worker_id", "").is_ok());
        assert!(validate_worker_id("worker_id", "Worker 0").is_ok());
        assert!(validate_worker_id("worker_id", "w\t0").is_err());
    }
}
