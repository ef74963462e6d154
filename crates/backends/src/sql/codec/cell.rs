//! What decoding any cell shares: the error of a stored value that does not
//! decode, and stored times.

use lightning_store_core::error::StoreError;
use lightning_store_core::model::Timestamp;

/// Returns an error for a stored value that does not decode.
pub fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} does not decode: {detail}"))
}

/// Decodes a stored time (`None`: NULL).
pub(super) fn time(value: Option<i64>) -> Option<Timestamp> {
    value.map(Timestamp)
}
