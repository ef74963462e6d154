//! Where the conformance suite's store lives: the default namespace, as the
//! common harness opens it, or a namespace of its own that the suite
//! creates and opens through the backend's catalogue, so that every test
//! also proves a namespace's store is a complete store. Each copy of the
//! suite names its place ([`Placement`]) and gets its server type
//! ([`Server`]) and store ([`open_store`]) from here.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::clock::{Clock, ManualClock, SystemClock};
use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::core::limits::RequestLimits;
use lightning_store::core::namespace::{NamespaceName, NamespaceSettings};
use lightning_store::core::storage::{Catalogue, Store};
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServedCatalogue, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::common::{Backend, TestOptions, TestServer};

/// The namespace the namespaced copies of the suite run in.
pub const CONFORMANCE_NAMESPACE: &str = "conformance";

/// Where one copy of the suite keeps its store.
pub trait Placement {
    /// `None`: the default namespace; else the namespace created (once per
    /// database) and opened through the catalogue.
    const NAMESPACE: Option<&'static str>;
}

/// The store of `namespace` in `catalogue`: created on its first use (a
/// test that restarts on the same database finds it there, and of servers
/// starting together on one database, one creates it and the others find
/// it).
pub async fn namespace_store(catalogue: &Arc<dyn Catalogue>, namespace: &str) -> Arc<dyn Store> {
    let name = NamespaceName::parse(namespace).unwrap();
    let record = match catalogue.find(&name).await.unwrap() {
        Some(record) => record,
        None => match catalogue
            .create(&name, NamespaceSettings::default(), SystemClock.now())
            .await
        {
            Ok(record) => record,
            // Another server created it meanwhile.
            Err(error) => catalogue
                .find(&name)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("cannot create namespace {namespace}: {error}")),
        },
    };
    assert!(!record.name.is_default());
    catalogue.open(&record).await.unwrap()
}

/// Opens a fresh store of `backend` in `P`'s place, with what must
/// outlive it (the temporary directory and the catalogue).
pub async fn open_store<P: Placement>(
    backend: Backend,
    options: &TestOptions,
) -> (
    Arc<dyn Store>,
    Option<tempfile::TempDir>,
    Arc<dyn Catalogue>,
) {
    let (catalogue, dir) = backend.open_catalogue(options).await;
    let store = match P::NAMESPACE {
        None => {
            let default = catalogue.default_namespace().await.unwrap();
            catalogue.open(&default).await.unwrap()
        }
        Some(namespace) => namespace_store(&catalogue, namespace).await,
    };
    (store, dir, catalogue)
}

/// A running server whose calls (naming no namespace) reach the store of
/// `P`'s place: the common harness's server for the default namespace,
/// else one whose default services run over the namespace's store.
pub struct Server<P: Placement> {
    pub addr: std::net::SocketAddr,
    pub url: String,
    pub engine: Arc<Engine>,
    running: Running,
    _place: PhantomData<P>,
}

/// How the server runs, to stop it.
enum Running {
    Common(Option<TestServer>),
    Own {
        stop: Option<oneshot::Sender<()>>,
        task: Option<JoinHandle<Result<(), server::ServeError>>>,
        _database: Option<tempfile::TempDir>,
    },
}

impl<P: Placement> Server<P> {
    /// Starts a server with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, ServerConfig::default()).await
    }

    /// Starts a server with the given server settings.
    pub async fn start_with(backend: Backend, config: ServerConfig) -> Self {
        Self::start_opts(
            backend,
            TestOptions {
                config,
                ..TestOptions::default()
            },
        )
        .await
    }

    /// Starts a server with default settings within `limits`.
    pub async fn start_with_limits(backend: Backend, limits: RequestLimits) -> Self {
        Self::start_opts(
            backend,
            TestOptions {
                limits,
                ..TestOptions::default()
            },
        )
        .await
    }

    /// Starts a server on a manual clock, returned with it.
    pub async fn start_on_manual_clock(
        backend: Backend,
        watchdog_interval: Duration,
    ) -> (Self, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::at_system_time());
        let server = Self::start_opts(
            backend,
            TestOptions {
                watchdog_interval,
                clock: clock.clone(),
                ..TestOptions::default()
            },
        )
        .await;
        (server, clock)
    }

    /// Starts a server with every setting given.
    pub async fn start_opts(backend: Backend, options: TestOptions) -> Self {
        let Some(namespace) = P::NAMESPACE else {
            let server = TestServer::start_opts(backend, options).await;
            return Self {
                addr: server.addr,
                url: server.url.clone(),
                engine: server.engine.clone(),
                running: Running::Common(Some(server)),
                _place: PhantomData,
            };
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (catalogue, database) = backend.open_catalogue(&options).await;
        let store = namespace_store(&catalogue, namespace).await;
        let engine = Arc::new(Engine::new(
            store,
            EngineConfig {
                watchdog_interval: options.watchdog_interval,
                span_retention: options.span_retention,
                retention_interval: options.retention_interval,
                limits: options.limits,
                request_id_ttl: options.request_id_ttl,
                clock: options.clock,
                ..EngineConfig::default()
            },
        ));
        let (stop, stopped) = oneshot::channel();
        let config = ServerConfig {
            catalogue: Some(ServedCatalogue(catalogue)),
            ..options.config
        };
        let task = tokio::spawn(server::serve(listener, engine.clone(), config, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            url: format!("http://{addr}"),
            engine,
            running: Running::Own {
                stop: Some(stop),
                task: Some(task),
                _database: database,
            },
            _place: PhantomData,
        }
    }

    /// Returns a connected channel.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    /// Returns a connected store client.
    pub async fn client(&self) -> LightningStoreServiceClient<Channel> {
        LightningStoreServiceClient::new(self.channel().await).max_decoding_message_size(usize::MAX)
    }

    /// Shuts the server down and waits for it to exit.
    pub async fn stop(mut self) {
        match &mut self.running {
            Running::Common(server) => server.take().unwrap().stop().await,
            Running::Own { stop, task, .. } => {
                let _ = stop.take().unwrap().send(());
                task.take().unwrap().await.unwrap().unwrap();
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Own {
            task: Some(task), ..
        } = self
        {
            task.abort();
        }
    }
}
