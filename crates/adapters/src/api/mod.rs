//! The gRPC adapter layer: protobuf stops here. Handlers validate and
//! convert, call [`lightning_store_core::engine::Engine`], and convert back.

pub mod convert;
pub mod otlp;
pub mod service;
pub mod size_groups;
pub mod status;
pub mod streams;
pub mod subscribers;
pub mod worker_session;

use lightning_store_core::access::Caller;

/// Returns the caller a call acts for, as the access layer decided it
/// ([`crate::auth`]); anyone when the port has no tokens.
fn caller_of(extensions: &http::Extensions) -> Caller {
    extensions.get::<Caller>().cloned().unwrap_or_default()
}
