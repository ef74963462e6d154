//! The wire adapters of lightning-store: each parses its wire format into the
//! core's types, calls the [`lightning_store_core::engine::Engine`] with the
//! caller the access layer decided, and shapes the answer and the core's
//! errors in its own dialect.
//!
//! * [`api`]: the gRPC services (protobuf stops here);
//! * [`http`]: agent-lightning's HTTP APIs (0.x's store, 1.x's server) and
//!   OTLP/HTTP on the same port, with the toolkit both lines share;
//! * [`otlp`]: OTLP ingest written once for OTLP/gRPC and OTLP/HTTP;
//! * [`gateway`]: agent-lightning 1.x's LLM gateway;
//! * [`namespace_layer`] and [`namespaces`]: which namespace a call names,
//!   and the services of each namespace;
//! * [`auth`]: who may call what, decided before any adapter runs;
//! * [`call_log`]: every call's request id, log line and metrics;
//! * [`metrics`]: the Prometheus registry and its exposition;
//! * [`transport`]: connection limits and what a connection tells a call;
//! * [`pyjson`]: JSON written as agent-lightning's Python servers write it.
//!
//! The modules import each other without cycles: a piece two of them share
//! lives below both (tests/integration/architecture.rs checks).

pub mod api;
pub mod auth;
pub mod call_log;
pub mod export;
pub mod gateway;
pub mod http;
pub mod metrics;
pub mod namespace_layer;
pub mod namespaces;
#[cfg(test)]
mod namespaces_tests;
pub mod otlp;
#[cfg(test)]
mod property_tests;
pub mod pyjson;
pub mod transport;
