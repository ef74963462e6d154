//! Shared test harness: a real server on an ephemeral loopback port.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServerConfig};
use lightning_store::store::Store;
use lightning_store::store::memory::MemoryStore;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// The storage backends the conformance suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Memory,
}

impl Backend {
    /// Returns the name the backend reports in statistics.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
        }
    }

    fn open(self) -> Arc<dyn Store> {
        match self {
            Backend::Memory => Arc::new(MemoryStore::new()),
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
}

impl TestServer {
    /// Starts a server with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, ServerConfig::default()).await
    }

    /// Starts a server with the given settings.
    pub async fn start_with(backend: Backend, config: ServerConfig) -> Self {
        Self::start_full(backend, config, Duration::from_millis(20)).await
    }

    /// Starts a server whose watchdog timer ticks every `interval` (a long
    /// interval leaves only the on-demand scan before reads).
    pub async fn start_with_watchdog(backend: Backend, interval: Duration) -> Self {
        Self::start_full(backend, ServerConfig::default(), interval).await
    }

    async fn start_full(
        backend: Backend,
        config: ServerConfig,
        watchdog_interval: Duration,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let engine = Arc::new(Engine::new(
            backend.open(),
            EngineConfig {
                watchdog_interval,
                ..EngineConfig::default()
            },
        ));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(server::serve(listener, engine.clone(), config, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            url: format!("http://{addr}"),
            engine,
            stop: Some(stop),
            task: Some(task),
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
