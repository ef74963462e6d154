//! Code generated from `proto/lightningstore/v1` by `build.rs`: the only
//! place the generated module is named.

#![allow(missing_docs, clippy::large_enum_variant)]

tonic::include_proto!("lightningstore.v1");

/// Encoded descriptor set of our protos, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("lightningstore_descriptor");
