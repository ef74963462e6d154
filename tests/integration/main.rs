//! The integration tests in one binary (each test binary links the whole
//! library, so one binary links it once): one module per area, filtered by
//! module, e.g. `cargo test --test integration sqlite::` or
//! `cargo test --test integration agl0::`. The conformance suite
//! (`conformance/`) and agent-lightning 1.x's API suite (`agl1/`) compile
//! their test modules once per backend (`conformance::sqlite::lifecycle::`,
//! `agl1::postgres::gateway::`).

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

mod agl0;
mod agl1;
mod agl1_replicas;
mod agl1_upstream;
mod architecture;
mod bench;
mod cli;
mod conformance;
mod console;
mod console_http;
mod crash;
mod docs;
mod drain;
mod export;
mod failover;
mod health;
mod http;
mod logs;
mod metrics;
mod namespace_load;
mod namespaces;
mod postgres;
mod postgres_claim;
mod postgres_events;
mod postgres_schema;
mod postgres_watchdog;
mod security;
mod sqlite;
mod storage;
mod trajectory;
mod transport;
mod upgrade;
