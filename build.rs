//! Compiles `proto/` with protox (pure Rust: no `protoc` on the machine) and
//! generates the tonic client and server into `OUT_DIR`.

use std::{env, path::PathBuf};

const PROTOS: &[&str] = &[
    "proto/lightningstore/v1/types.proto",
    "proto/lightningstore/v1/store.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let descriptors = protox::compile(PROTOS, ["proto"])?;
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
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-changed=build.rs");
    // `sqlx::migrate!` embeds the migrations but cannot tell cargo about a
    // new file: without this, adding one does not rebuild the crate.
    println!("cargo:rerun-if-changed=migrations");
    Ok(())
}
