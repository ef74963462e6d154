//! Shared test harness: a real server on an ephemeral loopback port.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::core::retention::RetentionPolicy;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServerConfig};
use lightning_store::store::Store;
use lightning_store::store::memory::MemoryStore;
use lightning_store::store::sqlite::{SqliteOptions, SqliteStore};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// The storage backends the conformance suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Sqlite,
}

impl Backend {
    /// Returns the name the backend reports in statistics.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
        }
    }

    /// Opens the store, with the temporary directory of a fresh database.
    async fn open(self, options: &TestOptions) -> (Arc<dyn Store>, Option<tempfile::TempDir>) {
        match self {
            Backend::Memory => (
                Arc::new(MemoryStore::with_event_retention(options.event_retention)),
                None,
            ),
            Backend::Sqlite => {
                let (dir, path) = match &options.database {
                    Some(path) => (None, path.clone()),
                    None => {
                        let dir = tempfile::tempdir().unwrap();
                        let path = dir.path().join("store.db");
                        (Some(dir), path)
                    }
                };
                let sqlite = SqliteOptions {
                    event_retention: options.event_retention,
                };
                let store = SqliteStore::open(&path, sqlite).await.unwrap();
                (Arc::new(store), dir)
            }
        }
    }
}

/// Settings of a test server.
pub struct TestOptions {
    pub config: ServerConfig,
    /// How often the watchdog timer ticks (a long interval leaves only the
    /// on-demand scan before reads).
    pub watchdog_interval: Duration,
    /// How many events the store retains for resuming subscribers.
    pub event_retention: usize,
    /// The SQLite file of [`Backend::Sqlite`] (default: a fresh file in a
    /// temporary directory that lives as long as the server).
    pub database: Option<PathBuf>,
    /// Which spans of finished rollouts the engine deletes.
    pub span_retention: RetentionPolicy,
    /// How often the span retention runs.
    pub retention_interval: Duration,
}

impl Default for TestOptions {
    fn default() -> Self {
        Self {
            config: ServerConfig::default(),
            watchdog_interval: Duration::from_millis(20),
            event_retention: 100_000,
            database: None,
            span_retention: RetentionPolicy::default(),
            retention_interval: Duration::from_secs(10),
        }
    }
}

/// A running server; dropping it without [`TestServer::stop`] aborts it.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub url: String,
    pub engine: Arc<Engine>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), server::ServeError>>>,
    /// Keeps a fresh SQLite database alive while the server runs.
    _database: Option<tempfile::TempDir>,
}

impl TestServer {
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

    /// Starts a server whose watchdog timer ticks every `interval` (a long
    /// interval leaves only the on-demand scan before reads).
    pub async fn start_with_watchdog(backend: Backend, interval: Duration) -> Self {
        Self::start_opts(
            backend,
            TestOptions {
                watchdog_interval: interval,
                ..TestOptions::default()
            },
        )
        .await
    }

    /// Starts a server with every setting given.
    pub async fn start_opts(backend: Backend, options: TestOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (store, database) = backend.open(&options).await;
        let engine = Arc::new(Engine::new(
            store,
            EngineConfig {
                watchdog_interval: options.watchdog_interval,
                span_retention: options.span_retention,
                retention_interval: options.retention_interval,
                ..EngineConfig::default()
            },
        ));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(server::serve(
            listener,
            engine.clone(),
            options.config,
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            url: format!("http://{addr}"),
            engine,
            stop: Some(stop),
            task: Some(task),
            _database: database,
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
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
