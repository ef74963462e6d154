//! The one mapping from store errors to gRPC status codes.

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
