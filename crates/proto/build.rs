//! Compiles the repository's `proto/` (two levels above this crate) with
//! protox (pure Rust: no `protoc` on the machine) and generates the tonic
//! clients and servers into `OUT_DIR`.

use std::{env, path::PathBuf};

/// The contract's files, relative to the proto root.
const PROTOS: &[&str] = &[
    "lightningstore/v1/types.proto",
    "lightningstore/v1/store.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files: Vec<PathBuf> = PROTOS.iter().map(|file| root.join(file)).collect();
    let descriptors = protox::compile(&files, [&root])?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("lightningstore_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    // tonic-prost-build 0.14 prints no rerun-if-changed lines (grpc/grpc-rust#2511):
    // without these, any change in the package reruns this script.
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-changed=build.rs");
    Ok(())
}
