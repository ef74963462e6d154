//! Id generation (upstream's formats) and the rule of caller-supplied ids,
//! held by types that can only hold a valid id: [`RolloutId`],
//! [`AttemptId`], [`ResourcesId`] and [`WorkerId`]. The engine's operations
//! take these types, so an adapter cannot hand the store an id it did not
//! check; ids inside a payload (a span's, a spec's resources id, a filter's
//! list) are checked by the engine with the same rule ([`validate_id`]).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

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

/// An id type: text that passed its rule.
pub trait Id: Sized {
    /// Returns `id` when it is valid, else the refusal of `field`'s value.
    fn parse(field: &str, id: impl Into<String>) -> StoreResult<Self>;
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl Id for $name {
            fn parse(field: &str, id: impl Into<String>) -> StoreResult<Self> {
                let id = id.into();
                $check(field, &id)?;
                Ok(Self(id))
            }
        }

        impl $name {
            /// Returns `id` when it is valid, else the refusal of `field`'s value.
            pub fn parse(field: &str, id: impl Into<String>) -> StoreResult<Self> {
                <Self as Id>::parse(field, id)
            }

            /// Returns the id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Returns the id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

id_type! {
    /// A rollout's id, as a caller gives it ([`validate_id`]).
    RolloutId, validate_id
}

id_type! {
    /// An attempt's id (or [`LATEST`] where an operation accepts it), as a
    /// caller gives it ([`validate_id`]).
    AttemptId, validate_id
}

id_type! {
    /// A resources snapshot's id, as a caller gives it ([`validate_id`]).
    ResourcesId, validate_id
}

id_type! {
    /// A worker's id, as a caller gives it ([`validate_worker_id`]: the
    /// empty id included).
    WorkerId, validate_worker_id
}

impl AttemptId {
    /// Returns whether the id is [`LATEST`], the rollout's latest attempt.
    pub fn is_latest(&self) -> bool {
        self.0 == LATEST
    }
}

/// Parses the ids of `ids` (the items of list `field`), refusing the first
/// that breaks the rule.
pub fn parse_all<I: Id>(field: &str, ids: impl IntoIterator<Item = String>) -> StoreResult<Vec<I>> {
    ids.into_iter().map(|id| I::parse(field, id)).collect()
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

    #[test]
    fn typed_ids_hold_only_valid_ids() {
        let rollout = RolloutId::parse("rollout_id", "ro-1").unwrap();
        assert_eq!(rollout.as_str(), "ro-1");
        assert_eq!(&*rollout, "ro-1");
        assert_eq!(
            RolloutId::parse("rollout_id", ""),
            Err(StoreError::invalid("rollout_id must not be empty"))
        );
        assert!(WorkerId::parse("worker_id", "").is_ok());
        assert!(WorkerId::parse("worker_id", "w\n").is_err());
        assert!(AttemptId::parse("attempt_id", LATEST).unwrap().is_latest());
        let ids: StoreResult<Vec<RolloutId>> =
            parse_all("rollout_ids", ["a".to_owned(), String::new()]);
        assert!(ids.is_err());
    }
}
