//! The HTTP error answers: the one mapping from store errors to HTTP
//! statuses, FastAPI's `{"detail": ...}` bodies, and the 422 of a request
//! that does not validate.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;

use super::validate::{Invalid, Issue};
use crate::gateway::GatewayError;
use crate::pyjson::PyJson;
use lightning_store_core::error::{MESSAGE_LIMIT, StoreError, bounded};

/// An HTTP error answer.
#[derive(Debug)]
pub enum HttpError {
    /// FastAPI's `HTTPException`: the status and `{"detail": "<message>"}`.
    Detail(StatusCode, String),
    /// The request does not validate: 422 and pydantic's list of issues.
    Invalid(Vec<Issue>),
}

impl HttpError {
    /// Returns a 400 with `message`, as upstream's explicit checks answer.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::Detail(StatusCode::BAD_REQUEST, message.into())
    }

    /// Returns the 413 of a request body over the configured limit.
    pub fn too_large(limit: usize) -> Self {
        Self::Detail(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {limit} bytes"),
        )
    }

    /// Returns the status of the answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Detail(status, _) => *status,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}

impl From<Invalid> for HttpError {
    fn from(Invalid(issues): Invalid) -> Self {
        Self::Invalid(issues)
    }
}

impl From<GatewayError> for HttpError {
    fn from(error: GatewayError) -> Self {
        match error {
            GatewayError::Refused { status, detail } => Self::Detail(status, detail),
            GatewayError::Store(error) => error.into(),
        }
    }
}

/// The one mapping from store errors to HTTP statuses. Upstream answers
/// every store exception with a 500 (which its client retries for ~8 s);
/// a client's mistake gets a 4xx here, so it fails at once.
impl From<StoreError> for HttpError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(message) => Self::Detail(StatusCode::NOT_FOUND, message),
            StoreError::AlreadyExists(message) => Self::Detail(StatusCode::CONFLICT, message),
            StoreError::InvalidArgument(message) => Self::Detail(StatusCode::BAD_REQUEST, message),
            StoreError::FailedPrecondition(message) => Self::Detail(StatusCode::CONFLICT, message),
            StoreError::PermissionDenied(message) => Self::Detail(StatusCode::FORBIDDEN, message),
            StoreError::TooLarge(message) => Self::Detail(StatusCode::PAYLOAD_TOO_LARGE, message),
            StoreError::QuotaExceeded(message) => {
                Self::Detail(StatusCode::TOO_MANY_REQUESTS, message)
            }
            StoreError::Unavailable(message) => {
                Self::Detail(StatusCode::SERVICE_UNAVAILABLE, message)
            }
            StoreError::Internal(message) => {
                tracing::error!(error = message, "internal error");
                Self::Detail(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal server error".to_owned(),
                )
            }
        }
    }
}

#[derive(Serialize)]
struct Detail<'a, T: ?Sized> {
    detail: &'a T,
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            // Cut as gRPC messages are (see `api::status`).
            Self::Detail(_, message) => {
                let detail = bounded(message, MESSAGE_LIMIT);
                PyJson(status, Detail { detail: &detail }).into_response()
            }
            Self::Invalid(issues) => PyJson(status, Detail { detail: issues }).into_response(),
        }
    }
}

/// Result of an HTTP handler.
pub type HttpResult<T> = Result<T, HttpError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_client_or_server_statuses() {
        let status = |e: StoreError| HttpError::from(e).status();
        assert_eq!(status(StoreError::rollout_not_found("x")), 404);
        assert_eq!(status(StoreError::invalid("x")), 400);
        assert_eq!(status(StoreError::FailedPrecondition("x".into())), 409);
        assert_eq!(status(StoreError::TooLarge("x".into())), 413);
        assert_eq!(status(StoreError::QuotaExceeded("x".into())), 429);
        assert_eq!(status(StoreError::PermissionDenied("x".into())), 403);
        assert_eq!(status(StoreError::Unavailable("x".into())), 503);
        assert_eq!(status(StoreError::Internal("x".into())), 500);
    }
}
