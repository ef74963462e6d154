//! The gRPC adapter layer: protobuf stops here. Handlers validate and
//! convert, call [`lightning_store_core::engine::Engine`], and convert back.

mod caller;
pub mod convert;
pub mod otlp;
pub mod service;
pub mod size_groups;
pub mod status;
pub mod streams;
pub mod subscribers;
pub mod worker_session;
