//! lightning-store: agent-lightning's LightningStore as a gRPC service.
//!
//! This package is the server: [`server`] assembles the gRPC services, the
//! HTTP routes and the console on one port (with [`tls`] at the listener and
//! [`reload`] of tokens and certificates), and [`cli`] is the command line
//! (`serve`, `token`, and the client commands of `lightning-store-cli`). The
//! layers it assembles are crates of this workspace (ARCHITECTURE.md),
//! re-exported here under the names the integration tests and embedders use:
//!
//! * [`proto`] (`lightning-store-proto`): the public contract's generated code;
//! * [`core`] (`lightning-store-core`): the domain, the rules written once, the
//!   engine, and the storage port;
//! * [`store`] (`lightning-store-backends`): the backends behind that port;
//! * [`api`], [`http`], [`otlp`], [`gateway`], [`auth`], [`call_log`],
//!   [`metrics`], [`transport`], [`pyjson`] (`lightning-store-adapters`): the
//!   wire adapters and what every call passes through;
//! * [`console`] (`lightning-store-console`): the web console;
//! * [`formats`] (`lightning-store-formats`): an export's file formats.

pub mod cli;
pub mod reload;
pub mod server;
pub mod tls;

pub use lightning_store_adapters::{
    api, auth, call_log, gateway, http, metrics, otlp, pyjson, transport,
};
pub use lightning_store_backends as store;
pub use lightning_store_console as console;
pub use lightning_store_core as core;
pub use lightning_store_formats as formats;
pub use lightning_store_proto as proto;
