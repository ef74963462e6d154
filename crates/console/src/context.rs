//! What one namespace's console reads from ([`Sources`]: its engine, this
//! server's gateway and worker sessions of it, its sampled queue depth,
//! and where its pages live) and the console's settings
//! ([`ConsoleConfig`]).

use std::sync::Arc;
use std::time::Duration;

use crate::sampler;
use crate::url::Links;
use lightning_store_adapters::auth::Tokens;
use lightning_store_adapters::gateway::Gateway;
use lightning_store_core::dispatcher::Dispatcher;
use lightning_store_core::engine::Engine;

/// What one namespace's console reads from: the namespace's engine, and
/// this server's gateway and worker sessions of it.
pub struct Sources {
    pub engine: Arc<Engine>,
    pub gateway: Arc<Gateway>,
    pub dispatcher: Arc<Dispatcher>,
    /// The namespace's queue depth sampled over the last hour.
    pub queue_depth: Arc<sampler::QueueDepth>,
    /// Where the namespace's pages live.
    pub links: Links,
}

/// Settings of the console.
pub struct ConsoleConfig {
    /// The tokens of the port (`None`: open, as the API is).
    pub tokens: Option<Tokens>,
    /// Whether the port speaks TLS (the cookie is then `Secure`).
    pub tls: bool,
    /// Live pages open at once; more are refused (503) until some close.
    pub max_streams: usize,
    /// How long a live page that reads nothing may hold an update before it
    /// is dropped as too slow.
    pub stream_timeout: Duration,
    /// Where live pages are counted.
    pub metrics: lightning_store_adapters::metrics::Metrics,
}
