//! The one mapping from store errors to gRPC status codes, and the
//! canonical names of the codes (for logs and metrics).

use tonic::{Code, Status};

use crate::core::error::StoreError;

impl From<StoreError> for Status {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(message) => Status::new(Code::NotFound, message),
            StoreError::InvalidArgument(message) => Status::new(Code::InvalidArgument, message),
            StoreError::FailedPrecondition(message) => {
                Status::new(Code::FailedPrecondition, message)
            }
            StoreError::Unavailable(message) => Status::new(Code::Unavailable, message),
            StoreError::Internal(message) => {
                tracing::error!(error = message, "internal error");
                Status::new(Code::Internal, "internal error")
            }
        }
    }
}

/// Returns the canonical name of a gRPC status code.
pub fn code_name(code: tonic::Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_codes_canonically() {
        assert_eq!(code_name(Code::NotFound), "NOT_FOUND");
        assert_eq!(code_name(Code::from_i32(99)), "UNKNOWN");
    }
}
