//! The one mapping from store errors to gRPC status codes, and the status of
//! a request that does not decode.

use tonic::{Code, Status};

use lightning_store_core::error::{MESSAGE_LIMIT, StoreError, bounded};

/// Returns the status a client sees for `error`. Messages are cut to
/// [`MESSAGE_LIMIT`]: one that quotes input without
/// [`lightning_store_core::error::echo`] still cannot grow with it.
pub fn status_of(error: StoreError) -> Status {
    {
        let status = |code, message: String| Status::new(code, bounded(&message, MESSAGE_LIMIT));
        match error {
            StoreError::NotFound(message) => status(Code::NotFound, message),
            StoreError::AlreadyExists(message) => status(Code::AlreadyExists, message),
            StoreError::InvalidArgument(message) => status(Code::InvalidArgument, message),
            StoreError::FailedPrecondition(message) => status(Code::FailedPrecondition, message),
            StoreError::PermissionDenied(message) => status(Code::PermissionDenied, message),
            // gRPC's code for a message over a size limit (what tonic's own
            // decode limit answers too, see `server`).
            StoreError::TooLarge(message) => status(Code::ResourceExhausted, message),
            StoreError::QuotaExceeded(message) => status(Code::ResourceExhausted, message),
            StoreError::Unavailable(message) => status(Code::Unavailable, message),
            StoreError::Internal(message) => {
                tracing::error!(error = message, "internal error");
                Status::new(Code::Internal, "internal error")
            }
        }
    }
}

/// The start of the message prost gives a request that does not decode.
const UNDECODABLE_PREFIX: &str = "failed to decode Protobuf message";

/// Returns the status a client should see for `status`: tonic answers a
/// request that does not decode with INTERNAL (its codec's choice for both
/// directions), but a malformed request is the client's fault, so it
/// becomes INVALID_ARGUMENT. Any other status is returned unchanged.
pub fn blame_undecodable_request(status: Status) -> Status {
    if status.code() == Code::Internal && status.message().starts_with(UNDECODABLE_PREFIX) {
        Status::invalid_argument(status.message())
    } else {
        status
    }
}

/// Applies [`blame_undecodable_request`] to the status carried in `headers`
/// (the headers of a trailers-only response, or trailers), and returns the
/// status the client will see, if the headers carry one.
pub fn blame_undecodable_in_headers(headers: &mut http::HeaderMap) -> Option<Status> {
    let status = Status::from_header_map(headers)?;
    if status.code() != Code::Internal {
        return Some(status);
    }
    let blamed = blame_undecodable_request(status);
    if blamed.code() != Code::Internal {
        // Writing a status only fails on a message that cannot be encoded
        // as a header, and this one was just decoded from a header.
        let _ = blamed.add_header(headers);
    }
    Some(blamed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blames_undecodable_requests_on_the_client_only() {
        let undecodable = Status::internal("failed to decode Protobuf message: buffer underflow");
        assert_eq!(
            blame_undecodable_request(undecodable).code(),
            Code::InvalidArgument
        );
        let other = Status::internal("internal error");
        assert_eq!(blame_undecodable_request(other).code(), Code::Internal);

        let mut headers = http::HeaderMap::new();
        Status::internal("failed to decode Protobuf message: x")
            .add_header(&mut headers)
            .unwrap();
        let seen = blame_undecodable_in_headers(&mut headers).unwrap();
        assert_eq!(seen.code(), Code::InvalidArgument);
        assert_eq!(
            Status::from_header_map(&headers).unwrap().code(),
            Code::InvalidArgument
        );
        assert!(blame_undecodable_in_headers(&mut http::HeaderMap::new()).is_none());
    }
}
