//! grpc.health.v1 reflects reality: NOT_SERVING while the backend cannot be
//! reached and while the server drains, SERVING again once it recovers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lightning_store::core::engine::{Engine, EngineConfig};
use lightning_store::core::error::{StoreError, StoreResult};
use lightning_store::core::storage::{Store, StoreTx};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::{self, ServerConfig};
use lightning_store::store::memory::MemoryStore;
use tokio::net::TcpListener;
use tonic::transport::Channel;
use tonic_health::pb as pb_health;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

/// An in-memory backend whose connection can be cut: while `down`, every
/// transaction fails as a lost database connection does.
#[derive(Default)]
struct FlakyStore {
    inner: MemoryStore,
    down: AtomicBool,
}

#[async_trait]
impl Store for FlakyStore {
    fn name(&self) -> &'static str {
        "flaky"
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("connection refused".to_owned()));
        }
        self.inner.begin().await
    }
}

struct Served {
    channel: Channel,
    store: Arc<FlakyStore>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), server::ServeError>>,
}

async fn serve(config: ServerConfig) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let store = Arc::new(FlakyStore::default());
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(listener, engine, config, async move {
        let _ = stopped.await;
    }));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Served {
        channel,
        store,
        stop,
        task,
    }
}

/// Returns the next status a health Watch stream reports.
async fn next_status(watch: &mut tonic::Streaming<pb_health::HealthCheckResponse>) -> i32 {
    tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("a health update within 10 s")
        .unwrap()
        .expect("the watch stream stays open")
        .status
}

async fn watch(
    channel: &Channel,
    service: &str,
) -> tonic::Streaming<pb_health::HealthCheckResponse> {
    HealthClient::new(channel.clone())
        .watch(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn health_follows_the_backend() {
    let served = serve(ServerConfig {
        health_check_interval: Duration::from_millis(20),
        drain_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    })
    .await;
    let mut overall = watch(&served.channel, "").await;
    let mut store_service = watch(&served.channel, "lightningstore.v1.LightningStoreService").await;
    assert_eq!(
        next_status(&mut overall).await,
        ServingStatus::Serving as i32
    );
    assert_eq!(
        next_status(&mut store_service).await,
        ServingStatus::Serving as i32
    );

    served.store.down.store(true, Ordering::SeqCst);
    assert_eq!(
        next_status(&mut overall).await,
        ServingStatus::NotServing as i32
    );
    assert_eq!(
        next_status(&mut store_service).await,
        ServingStatus::NotServing as i32
    );
    // Calls fail as retryable meanwhile, and Check agrees with Watch.
    let mut client = LightningStoreServiceClient::new(served.channel.clone());
    let error = client
        .enqueue_rollout(pb::EnqueueRolloutRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable);
    let checked = HealthClient::new(served.channel.clone())
        .check(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(checked, ServingStatus::NotServing as i32);
    // Liveness does not depend on the backend: restarting would not help.
    let alive = HealthClient::new(served.channel.clone())
        .check(HealthCheckRequest {
            service: server::LIVENESS_SERVICE.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(alive, ServingStatus::Serving as i32);

    served.store.down.store(false, Ordering::SeqCst);
    assert_eq!(
        next_status(&mut overall).await,
        ServingStatus::Serving as i32
    );
    client
        .enqueue_rollout(pb::EnqueueRolloutRequest::default())
        .await
        .unwrap();

    let _ = served.stop.send(());
    served.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn health_is_not_serving_while_draining_and_watches_end() {
    let served = serve(ServerConfig {
        drain_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    })
    .await;
    let mut overall = watch(&served.channel, "").await;
    assert_eq!(
        next_status(&mut overall).await,
        ServingStatus::Serving as i32
    );
    let _ = served.stop.send(());
    // Even with a backend that stays reachable, draining wins; the watch
    // then ends (NOT_SERVING may come twice: the change, and the last word).
    let mut statuses = Vec::new();
    while let Some(update) = tokio::time::timeout(Duration::from_secs(10), overall.message())
        .await
        .expect("the watch ends within 10 s")
        .unwrap()
    {
        statuses.push(update.status);
    }
    assert!(!statuses.is_empty());
    assert!(
        statuses
            .iter()
            .all(|&s| s == ServingStatus::NotServing as i32),
        "{statuses:?}"
    );
    // No open stream holds the drain to its 60 s deadline.
    tokio::time::timeout(Duration::from_secs(10), served.task)
        .await
        .expect("the server stops well before the drain deadline")
        .unwrap()
        .unwrap();
}
