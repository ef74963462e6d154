//! What a call through the gateway fails with.

use http::StatusCode;
use lightning_store_core::error::StoreError;

/// A proxied call's refusal or failure, as agent-lightning 1.x's gateway
/// answers it: an HTTP status with its detail, or the store's error (the
/// HTTP adapter writes both as `{"detail": ...}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The gateway's own answer.
    #[error("{detail}")]
    Refused { status: StatusCode, detail: String },
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl GatewayError {
    /// Returns the answer `status` with `detail`.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self::Refused {
            status,
            detail: detail.into(),
        }
    }

    /// Returns a 400 with `detail`.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }
}
