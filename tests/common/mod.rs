//! Shared test harness: a real server on an ephemeral loopback port.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServerConfig};
use lightning_store::store::memory::MemoryStore;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A running server; dropping it without [`TestServer::stop`] aborts it.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub url: String,
    pub engine: Arc<Engine>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), server::ServeError>>>,
}

impl TestServer {
    /// Starts a server on the in-memory backend with default settings.
    pub async fn start() -> Self {
        Self::start_with(ServerConfig::default()).await
    }

    /// Starts a server on the in-memory backend.
    pub async fn start_with(config: ServerConfig) -> Self {
        Self::start_full(config, Duration::from_millis(20)).await
    }

    /// Starts a server whose watchdog timer ticks every `interval` (a long
    /// interval leaves only the on-demand scan before reads).
    pub async fn start_with_watchdog(interval: Duration) -> Self {
        Self::start_full(ServerConfig::default(), interval).await
    }

    async fn start_full(config: ServerConfig, watchdog_interval: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let engine = Arc::new(Engine::new(
            Arc::new(MemoryStore::new()),
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
