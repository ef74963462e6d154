//! Code generated from `proto/lightningstore/v1` by `build.rs` (the only
//! place the generated module is named), the canonical names of gRPC
//! status codes, which the server's logs and metrics and the clients' errors
//! share, and the OTLP attribute names that route spans to attempts.

#![allow(missing_docs, clippy::large_enum_variant)]

tonic::include_proto!("lightningstore.v1");

/// Encoded descriptor set of our protos, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("lightningstore_descriptor");

/// OTLP resource or span attribute naming the rollout a span belongs to
/// (the ingest's contract with agent-lightning's tracers and our clients).
pub const ROLLOUT_ID_KEY: &str = "agentlightning.rollout_id";
/// OTLP resource or span attribute naming the attempt.
pub const ATTEMPT_ID_KEY: &str = "agentlightning.attempt_id";
/// OTLP resource or span attribute carrying an explicit sequence id.
pub const SEQUENCE_ID_KEY: &str = "agentlightning.span_sequence_id";

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
