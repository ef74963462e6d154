//! The store's domain: types, the lifecycle state machine, the query
//! language, the storage port ([`storage`]) and the engine that runs every
//! operation over a backend. Nothing in here knows about gRPC, protobuf or
//! SQL: the crate depends on no wire, web or database crate, and the backends
//! (`lightning-store-backends`) depend on it, never the reverse.

pub mod access;
pub mod agl1;
pub mod clock;
pub mod comparison;
pub mod dispatcher;
pub mod distribution;
pub mod engine;
pub mod error;
pub mod events;
pub mod export;
pub mod idempotency;
pub mod ids;
pub mod lifecycle;
pub mod limits;
pub mod model;
pub mod namespace;
pub mod overview;
pub mod ownership;
pub mod pages;
pub mod query;
pub mod retention;
pub mod reward;
pub mod storage;
pub mod subscription;
pub mod telemetry;
pub mod training;
pub mod trajectory;
pub mod waiting;
