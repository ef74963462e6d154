//! Code generated from `proto/lightningstore/v1` by `build.rs` (the only
//! place the generated module is named), and the canonical names of gRPC
//! status codes, which the server's logs and metrics and the clients' errors
//! share.

#![allow(missing_docs, clippy::large_enum_variant)]

tonic::include_proto!("lightningstore.v1");

/// Encoded descriptor set of our protos, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("lightningstore_descriptor");

/// Returns the canonical name of a gRPC status code, for example `NOT_FOUND`.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_codes_canonically() {
        assert_eq!(code_name(tonic::Code::NotFound), "NOT_FOUND");
        assert_eq!(code_name(tonic::Code::from_i32(99)), "UNKNOWN");
    }
}
