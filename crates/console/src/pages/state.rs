//! [`ConsoleContext`]: what every console handler shares (the axum state):
//! the sources, the settings and the live pages' hub.

use std::sync::Arc;

use super::live::Hub;
use crate::context::{ConsoleConfig, Sources};

/// What every console handler shares.
#[derive(Clone)]
pub struct ConsoleContext(Arc<Shared>);

struct Shared {
    sources: Arc<Sources>,
    config: ConsoleConfig,
    hub: Arc<Hub>,
}

impl ConsoleContext {
    /// Returns the console over `sources`.
    pub fn new(sources: Sources, config: ConsoleConfig) -> Self {
        let sources = Arc::new(sources);
        let hub = Hub::new(sources.clone(), config.max_streams);
        Self(Arc::new(Shared {
            sources,
            config,
            hub,
        }))
    }

    /// Samples the queue's depth for the Overview until the engine closes
    /// (one counts read every ten seconds).
    pub fn sample_queue(&self) -> impl Future<Output = ()> + Send + 'static {
        let sources = &self.0.sources;
        sources.queue_depth.clone().run(sources.engine.clone())
    }

    /// What the console reads from.
    pub(crate) fn sources(&self) -> &Sources {
        &self.0.sources
    }

    /// The console's settings.
    pub(crate) fn config(&self) -> &ConsoleConfig {
        &self.0.config
    }

    /// The live pages' hub.
    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.0.hub
    }
}
