//! The namespaces this server serves: for each, its engine and the parts
//! over it ([`NamespaceServices`]), opened on first use from the backend's
//! catalogue ([`Catalogue`]) and kept while the server runs; and their
//! management (create, list, delete).
//!
//! A call names its namespace (see [`crate::namespace_layer`]); the adapters
//! resolve it here and then work on that namespace's engine alone, so
//! nothing of one namespace is reached from another's calls.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lightning_store_core::dispatcher::Dispatcher;
use lightning_store_core::engine::{Engine, SessionPolicy};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::namespace::{Namespace, NamespaceName, NamespaceSettings};
use lightning_store_core::storage::Catalogue;

use crate::gateway::{Gateway, GatewayConfig};
use crate::metrics::{Metrics, ScrapedStores};
use crate::namespace_layer::NamedNamespace;
use crate::otlp::TraceIngest;

/// Namespaces one server holds open at most, by default.
pub const DEFAULT_MAX_NAMESPACES: usize = 64;

/// What every namespace's services are started with: the server's
/// settings.
#[derive(Clone)]
pub struct ServicesConfig {
    /// How this server holds worker sessions.
    pub sessions: SessionPolicy,
    /// OTLP export requests processed at once, per namespace.
    pub otlp_max_in_flight: usize,
    /// agent-lightning 1.x's gateway.
    pub gateway: GatewayConfig,
    /// Where the gateway reports.
    pub metrics: Metrics,
}

/// What serves one namespace: its engine, worker sessions, OTLP ingest and
/// 1.x gateway, and the tasks that run beside them until the engine
/// closes.
pub struct NamespaceServices {
    /// The namespace served.
    pub namespace: Namespace,
    /// Its engine.
    pub engine: Arc<Engine>,
    /// Its worker sessions.
    pub dispatcher: Arc<Dispatcher>,
    /// Its OTLP ingest.
    pub trace_ingest: TraceIngest,
    /// Its 1.x gateway.
    pub gateway: Arc<Gateway>,
    background: parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl NamespaceServices {
    /// Starts the services of `namespace` over `engine`: sessions this
    /// server held before a restart are dropped (their runners may
    /// reconnect at once), the event follower is set up (a waiter
    /// registered from now on sees every event other servers commit), the
    /// gateway's pause is read, then the background tasks start.
    pub async fn start(namespace: Namespace, engine: Arc<Engine>, config: &ServicesConfig) -> Self {
        let dispatcher = Dispatcher::new(engine.clone(), config.sessions.clone());
        dispatcher.recover().await;
        let trace_ingest = TraceIngest::new(engine.clone(), config.otlp_max_in_flight);
        let follower = engine.clone().start_follower().await;
        let gateway = Gateway::new(
            engine.clone(),
            config.gateway.clone(),
            config.metrics.clone(),
            engine.limits().max_message_bytes,
        );
        // A restarted server honours a pause before its first call.
        if let Err(error) = gateway.load().await {
            tracing::warn!(%error, namespace = %namespace.name, "gateway: cannot read the pause at startup");
        }
        let background = vec![
            tokio::spawn(async move {
                if let Some(follower) = follower {
                    follower.await;
                }
            }),
            tokio::spawn(engine.clone().run_watchdog()),
            tokio::spawn(gateway.clone().run()),
            tokio::spawn(dispatcher.clone().run_dispatcher()),
            tokio::spawn(dispatcher.clone().run_revocations()),
            tokio::spawn(dispatcher.clone().run_leases()),
        ];
        Self {
            namespace,
            engine,
            dispatcher,
            trace_ingest,
            gateway,
            background: parking_lot::Mutex::new(background),
        }
    }

    /// Stops the namespace's services: waits end, the background tasks
    /// stop (aborted after `timeout`), the ends of its worker sessions are
    /// recorded, and its store is closed.
    pub async fn shut_down(&self, timeout: Duration) {
        self.engine.close();
        let background = std::mem::take(&mut *self.background.lock());
        stop_tasks(background, timeout).await;
        if tokio::time::timeout(timeout, self.dispatcher.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(?timeout, namespace = %self.namespace.name, "the ends of worker sessions were not all recorded");
        }
        self.engine.close_store().await;
    }
}

/// Waits for `tasks` to end (they end when their engine closes), aborting
/// those still running after `timeout`.
pub async fn stop_tasks(tasks: Vec<tokio::task::JoinHandle<()>>, timeout: Duration) {
    let aborts: Vec<_> = tasks.iter().map(|task| task.abort_handle()).collect();
    if tokio::time::timeout(timeout, futures::future::join_all(tasks))
        .await
        .is_err()
    {
        tracing::warn!(?timeout, "background tasks did not stop, aborting them");
        aborts.iter().for_each(tokio::task::AbortHandle::abort);
    }
}

/// The namespaces a server serves.
pub struct Namespaces {
    /// `None`: a store without a catalogue, which holds the default
    /// namespace alone.
    catalogue: Option<Arc<dyn Catalogue>>,
    default: Arc<NamespaceServices>,
    /// The other namespaces opened so far, by name: read by every call,
    /// written when one opens or is deleted.
    open: parking_lot::RwLock<HashMap<NamespaceName, Arc<NamespaceServices>>>,
    /// Held while a namespace opens, so that each opens once.
    opening: tokio::sync::Mutex<()>,
    config: ServicesConfig,
    /// Whether a call may name a namespace that does not exist yet, which
    /// then creates it (for development).
    create_on_first_use: bool,
    /// Namespaces that may exist at once, the default one included.
    max_namespaces: usize,
    /// How long a deleted namespace's services get to stop.
    stop_timeout: Duration,
}

/// How the namespaces of a server are managed.
#[derive(Debug, Clone, Copy)]
pub struct NamespacePolicy {
    /// A call naming an unknown namespace creates it (else NOT_FOUND).
    pub create_on_first_use: bool,
    /// Namespaces that may exist at once, the default one included.
    pub max_namespaces: usize,
    /// How long a deleted namespace's services get to stop.
    pub stop_timeout: Duration,
}

impl Default for NamespacePolicy {
    fn default() -> Self {
        Self {
            create_on_first_use: false,
            max_namespaces: DEFAULT_MAX_NAMESPACES,
            stop_timeout: Duration::from_secs(10),
        }
    }
}

impl Namespaces {
    /// Returns the namespaces of `catalogue`, starting the default one's
    /// services over `default_engine` (the others start on first use, with
    /// its settings). Without a catalogue, the default namespace is the
    /// only one.
    pub async fn start(
        catalogue: Option<Arc<dyn Catalogue>>,
        default_engine: Arc<Engine>,
        config: ServicesConfig,
        policy: NamespacePolicy,
    ) -> StoreResult<Self> {
        let default = match &catalogue {
            Some(catalogue) => catalogue.default_namespace().await?,
            None => Namespace {
                id: 0,
                name: NamespaceName::default_namespace(),
                created: default_engine.now(),
                settings: NamespaceSettings::default(),
            },
        };
        let default = Arc::new(NamespaceServices::start(default, default_engine, &config).await);
        let namespaces = Self {
            catalogue,
            default,
            open: parking_lot::RwLock::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
            config,
            create_on_first_use: policy.create_on_first_use,
            max_namespaces: policy.max_namespaces.max(1),
            stop_timeout: policy.stop_timeout,
        };
        namespaces.resume_purges();
        Ok(namespaces)
    }

    /// Returns the catalogue, or the refusal of a change to a store that
    /// has none.
    fn catalogue(&self) -> StoreResult<&Arc<dyn Catalogue>> {
        self.catalogue.as_ref().ok_or_else(|| {
            StoreError::FailedPrecondition("this store holds the default namespace alone".into())
        })
    }

    /// Returns the default namespace's services.
    pub fn default_namespace(&self) -> &Arc<NamespaceServices> {
        &self.default
    }

    /// Returns the services of the namespace a call with `extensions`
    /// names ([`NamedNamespace`]): the default one when it names none.
    pub async fn for_call(
        &self,
        extensions: &http::Extensions,
    ) -> StoreResult<Arc<NamespaceServices>> {
        match extensions.get::<NamedNamespace>() {
            None => Ok(self.default.clone()),
            Some(NamedNamespace(named)) => {
                self.resolve(named.as_ref().map_err(Clone::clone)?).await
            }
        }
    }

    /// Returns the services of the namespace `name`, starting them on its
    /// first use; an unknown name is NOT_FOUND (or created, when the
    /// server allows it).
    pub async fn resolve(&self, name: &NamespaceName) -> StoreResult<Arc<NamespaceServices>> {
        if name.is_default() {
            return Ok(self.default.clone());
        }
        if let Some(services) = self.open.read().get(name) {
            return Ok(services.clone());
        }
        let _opening = self.opening.lock().await;
        if let Some(services) = self.open.read().get(name) {
            return Ok(services.clone());
        }
        let found = match &self.catalogue {
            Some(catalogue) => catalogue.find(name).await?,
            None => None,
        };
        let namespace = match found {
            Some(namespace) => namespace,
            None if self.create_on_first_use => {
                self.create(name, NamespaceSettings::default()).await?
            }
            None => return Err(Namespace::not_found(name)),
        };
        let services = Arc::new(self.start_services(namespace).await?);
        self.open.write().insert(name.clone(), services.clone());
        Ok(services)
    }

    /// Starts the services of `namespace`, with the default engine's
    /// settings and the namespace's own retention.
    async fn start_services(&self, namespace: Namespace) -> StoreResult<NamespaceServices> {
        let store = self.catalogue()?.open(&namespace).await?;
        let observer = Arc::new(self.config.metrics.in_namespace(&namespace.name));
        let engine = Arc::new(self.default.engine.for_namespace(
            store,
            &namespace.settings,
            observer,
        ));
        Ok(NamespaceServices::start(namespace, engine, &self.config).await)
    }

    /// Creates the namespace `name` with `settings`, within the number of
    /// namespaces the server allows.
    pub async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
    ) -> StoreResult<Namespace> {
        let catalogue = self.catalogue()?;
        let existing = catalogue.list().await?.len();
        if existing >= self.max_namespaces {
            return Err(StoreError::FailedPrecondition(format!(
                "this deployment holds at most {} namespaces (--max-namespaces); delete one first",
                self.max_namespaces
            )));
        }
        let now = self.default.engine.now();
        catalogue.create(name, settings, now).await
    }

    /// Returns the namespaces that exist, the default one first, then by
    /// name.
    pub async fn list(&self) -> StoreResult<Vec<Namespace>> {
        match &self.catalogue {
            Some(catalogue) => catalogue.list().await,
            None => Ok(vec![self.default.namespace.clone()]),
        }
    }

    /// Returns the bytes `namespace`'s data takes in the backend.
    pub async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64> {
        self.catalogue()?.stored_bytes(namespace).await
    }

    /// Deletes the namespace `name`: from now on it answers NOT_FOUND; its
    /// services stop, then its data is purged in the background.
    pub async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace> {
        let (deleted, services) = {
            // Not while it opens: its services would start after the
            // deletion.
            let _opening = self.opening.lock().await;
            let deleted = self.catalogue()?.delete(name).await?;
            (deleted, self.open.write().remove(name))
        };
        if let Some(services) = services {
            services.shut_down(self.stop_timeout).await;
        }
        self.purge_in_background(deleted.clone());
        Ok(deleted)
    }

    /// Purges `namespace`'s data on a task of its own.
    fn purge_in_background(&self, namespace: Namespace) {
        let Some(catalogue) = self.catalogue.clone() else {
            return;
        };
        tokio::spawn(async move {
            match catalogue.purge(&namespace).await {
                Ok(()) => tracing::info!(namespace = %namespace.name, "namespace purged"),
                Err(error) => {
                    tracing::warn!(%error, namespace = %namespace.name, "namespace purge failed; it resumes at the next start");
                }
            }
        });
    }

    /// Finishes the purges a crash or a failure left.
    fn resume_purges(&self) {
        let Some(catalogue) = self.catalogue.clone() else {
            return;
        };
        tokio::spawn(async move {
            match catalogue.deleted().await {
                Ok(deleted) => {
                    for namespace in deleted {
                        if let Err(error) = catalogue.purge(&namespace).await {
                            tracing::warn!(%error, namespace = %namespace.name, "namespace purge failed");
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot list the namespaces left to purge"),
            }
        });
    }

    /// Returns the services of every namespace open now, the default one
    /// first.
    pub async fn open_now(&self) -> Vec<Arc<NamespaceServices>> {
        let open = self.open.read();
        std::iter::once(self.default.clone())
            .chain(open.values().cloned())
            .collect()
    }
}

/// A scrape reads the statistics of every namespace open now.
impl ScrapedStores for Namespaces {
    fn open_stores(&self) -> futures::future::BoxFuture<'_, Vec<(String, Arc<Engine>)>> {
        Box::pin(async move {
            self.open_now()
                .await
                .into_iter()
                .map(|services| (services.namespace.name.to_string(), services.engine.clone()))
                .collect()
        })
    }
}
