//! [`ConsoleContext`]: what every console handler shares (the axum state):
//! the server's namespaces, the settings, and each namespace's console
//! ([`NamespaceConsole`]: its sources and live pages' hub), which a
//! handler takes as an extractor (see [`super::extract`]) for the
//! namespace its request names.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Semaphore;

use super::live::Hub;
use crate::context::{ConsoleConfig, Sources};
use crate::sampler::QueueDepths;
use crate::url::Links;
use lightning_store_adapters::namespaces::{NamespaceServices, Namespaces};
use lightning_store_core::error::StoreResult;

/// What every console handler shares.
#[derive(Clone)]
pub struct ConsoleContext(Arc<Shared>);

struct Shared {
    namespaces: Arc<Namespaces>,
    config: ConsoleConfig,
    /// One place per open live page, whatever its namespace.
    places: Arc<Semaphore>,
    queue_depths: Arc<QueueDepths>,
    /// The consoles of the namespaces viewed so far, by namespace id.
    consoles: Mutex<HashMap<i64, NamespaceConsole>>,
}

/// One namespace's console: what its pages read from and its live pages'
/// hub. As an extractor: the console of the namespace the request names.
#[derive(Clone)]
pub struct NamespaceConsole {
    pub sources: Arc<Sources>,
    pub hub: Arc<Hub>,
}

impl ConsoleContext {
    /// Returns the console over the server's `namespaces`.
    pub fn new(namespaces: Arc<Namespaces>, config: ConsoleConfig) -> Self {
        let places = Arc::new(Semaphore::new(config.max_streams));
        Self(Arc::new(Shared {
            namespaces,
            config,
            places,
            queue_depths: Arc::default(),
            consoles: Mutex::default(),
        }))
    }

    /// Samples each open namespace's queue depth for its Overview until
    /// the server shuts down (one counts read every ten seconds).
    pub fn sample_queue(&self) -> impl Future<Output = ()> + Send + 'static {
        let shared = &self.0;
        shared.queue_depths.clone().run(shared.namespaces.clone())
    }

    /// The server's namespaces.
    pub(crate) fn namespaces(&self) -> &Arc<Namespaces> {
        &self.0.namespaces
    }

    /// The console's settings.
    pub(crate) fn config(&self) -> &ConsoleConfig {
        &self.0.config
    }

    /// Returns the console of the namespace a request with `extensions`
    /// names (the default one when it names none): NOT_FOUND for a
    /// namespace that does not exist, INVALID_ARGUMENT for a name outside
    /// the rule.
    pub(crate) async fn console_of(
        &self,
        extensions: &http::Extensions,
    ) -> StoreResult<NamespaceConsole> {
        let services = self.0.namespaces.for_call(extensions).await?;
        Ok(self.console_over(&services))
    }

    /// Returns the console over a namespace's `services`, made on first
    /// use; one made over the services of a namespace since deleted and
    /// created again is replaced.
    fn console_over(&self, services: &NamespaceServices) -> NamespaceConsole {
        let mut consoles = self.0.consoles.lock();
        if let Some(console) = consoles.get(&services.namespace.id)
            && Arc::ptr_eq(&console.sources.engine, &services.engine)
        {
            return console.clone();
        }
        consoles.retain(|_, console| !*console.sources.engine.closing().borrow());
        let sources = Arc::new(Sources {
            engine: services.engine.clone(),
            gateway: services.gateway.clone(),
            dispatcher: services.dispatcher.clone(),
            queue_depth: self.0.queue_depths.of(services.namespace.id),
            links: Links::of(&services.namespace.name),
        });
        let console = NamespaceConsole {
            hub: Hub::new(sources.clone(), self.0.places.clone()),
            sources,
        };
        consoles.insert(services.namespace.id, console.clone());
        console
    }
}
