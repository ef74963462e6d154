//! lightning-store: agent-lightning's LightningStore as a gRPC service.
//!
//! Layers, from the wire inwards:
//! * [`proto`]: code generated from `proto/lightningstore/v1` (the public contract);
//! * [`api`]: thin gRPC adapters: validate, convert, call the engine, convert back;
//! * [`http`]: thin HTTP adapters on the same port (agent-lightning's store
//!   API and OTLP/HTTP), calling the same engine;
//! * [`core`]: domain types, the rollout/attempt state machine, queries and
//!   the [`core::engine::Engine`] that runs every operation once for all
//!   backends, over the storage port [`core::storage`];
//! * [`store`]: the backends behind that port and [`store::open`].
//!
//! [`otlp`] maps and stores OTLP traces for both OTLP receivers (gRPC and HTTP);
//! [`gateway`] is agent-lightning 1.x's LLM gateway; [`pyjson`] writes JSON as
//! agent-lightning's Python servers write it, for the HTTP adapters, the gateway
//! and OTLP; [`auth`] decides who may call what, before any adapter runs.
//!
//! The modules under each parent import each other without cycles: a piece two
//! of them share lives below both (a test checks).
//!
//! [`console`] is the web console (pages on the same port, over the same
//! engine).
//!
//! [`server`] assembles the gRPC services and HTTP routes on one port, within the
//! connection limits of [`transport`]; [`metrics`] serves
//! Prometheus metrics on another; [`cli`] is the command line.

pub mod api;
pub mod auth;
pub mod call_log;
pub mod cli;
pub mod console;
pub mod core;
pub mod gateway;
pub mod http;
#[cfg(test)]
mod import_tests;
pub mod metrics;
pub mod otlp;
#[cfg(test)]
mod property_tests;
pub mod proto;
pub mod pyjson;
pub mod reload;
pub mod server;
pub mod store;
pub mod tls;
pub mod transport;
