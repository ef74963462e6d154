//! The integration tests in one binary (each test binary links the whole
//! library, so one binary links it once): one module per area, filtered by
//! module, e.g. `cargo test --test integration sqlite::` or
//! `cargo test --test integration agl0::`. The conformance suite
//! (`tests/conformance/`, compiled once per backend) and agent-lightning
//! 1.x's API suite (`tests/agl1/`) are their own binaries.

#[path = "../common/mod.rs"]
mod common;

mod agl0;
mod agl1_replicas;
mod agl1_upstream;
mod bench;
mod cli;
mod crash;
mod failover;
mod health;
mod http;
mod logs;
mod metrics;
mod postgres;
mod security;
mod sqlite;
mod storage;
mod transport;
mod upgrade;
