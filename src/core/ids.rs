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

/// Checks a caller-supplied id: non-empty, at most [`MAX_ID_LEN`] bytes, no
/// whitespace or control characters. `what` names the field in the error.
pub fn validate_id(what: &str, id: &str) -> StoreResult<()> {
    if id.is_empty() {
        return Err(StoreError::invalid(format!("{what} must not be empty")));
    }
    if id.len() > MAX_ID_LEN {
        return Err(StoreError::invalid(format!(
            "{what} is longer than {MAX_ID_LEN} bytes"
        )));
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(StoreError::invalid(format!(
            "{what} {id:?} contains whitespace or control characters"
        )));
    }
    Ok(())
}

/// Checks and normalises a hex id of `digits` digits (trace ids: 32, span ids: 16) to lowercase.
pub fn normalize_hex_id(what: &str, id: &str, digits: usize) -> StoreResult<String> {
    if id.len() != digits || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::invalid(format!(
            "{what} must be {digits} hex digits, got {id:?}"
        )));
    }
    Ok(id.to_ascii_lowercase())
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
    fn id_validation_rejects_malformed_ids() {
        assert!(validate_id("rollout_id", "ro-0123").is_ok());
        assert!(validate_id("rollout_id", "").is_err());
        assert!(validate_id("rollout_id", "ro 1").is_err());
        assert!(validate_id("rollout_id", "ro\n1").is_err());
        assert!(validate_id("rollout_id", &"x".repeat(MAX_ID_LEN + 1)).is_err());
        assert_eq!(
            normalize_hex_id("span_id", "ABCDEF0123456789", 16).unwrap(),
            "abcdef0123456789"
        );
        assert!(normalize_hex_id("span_id", "abc", 16).is_err());
        assert!(normalize_hex_id("span_id", "zzzzzzzzzzzzzzzz", 16).is_err());
    }
}
