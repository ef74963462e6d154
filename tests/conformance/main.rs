//! The conformance suite: the store's whole contract, exercised through the
//! real gRPC server on an ephemeral loopback port with the generated client.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod concurrency;
mod lifecycle;
mod otlp;
mod queries;
mod resources_workers;
mod server;
mod spans;
mod support;
mod watchdog;
