//! What only the PostgreSQL backend promises: several servers share one
//! database, each sees what the others commit (waiting dequeues, events,
//! completion watches), and no rollout is claimed twice across them.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{Backend, Cluster, TestOptions, TestServer, postgres_database};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use lightning_store::server::ServerConfig;
use tonic::transport::Channel;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

type Client = LightningStoreServiceClient<Channel>;

/// Starts a server on the shared database at `url`.
async fn server_on(url: &str) -> TestServer {
    TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url.to_owned()),
            ..TestOptions::default()
        },
    )
    .await
}

async fn enqueue(c: &mut Client) -> pb::Rollout {
    c.enqueue_rollout(pb::EnqueueRolloutRequest {
        rollout: Some(pb::RolloutSpec::default()),
    })
    .await
    .unwrap()
    .into_inner()
    .rollout
    .unwrap()
}

async fn dequeue(c: &mut Client, wait: Option<Duration>) -> Option<pb::Rollout> {
    c.dequeue_rollout(pb::DequeueRolloutRequest {
        worker_id: None,
        wait: wait.map(|w| w.try_into().unwrap()),
    })
    .await
    .unwrap()
    .into_inner()
    .rollout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_one_database_see_each_others_commits() {
    let url = postgres_database().await;
    let a = server_on(&url).await;
    let b = server_on(&url).await;
    let mut on_a = a.client().await;
    let mut on_b = b.client().await;

    let mut events = on_b
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .unwrap()
        .into_inner();
    events
        .message()
        .await
        .unwrap()
        .expect("the progress message");
    // A dequeue waiting on B gets what A enqueues (whether it parked
    // before the enqueue or not; the events below prove the wake-up path).
    let mut waiting_client = on_b.clone();
    let waiting =
        tokio::spawn(
            async move { dequeue(&mut waiting_client, Some(Duration::from_secs(20))).await },
        );
    let rollout = enqueue(&mut on_a).await;
    let claimed = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("B's waiting dequeue is woken within 10 s")
        .unwrap()
        .expect("B claims the rollout A enqueued");
    assert_eq!(claimed.rollout_id, rollout.rollout_id);

    // B's subscription carries A's events, in sequence order.
    let first = tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("an event within 10 s")
        .unwrap()
        .unwrap();
    let Some(pb::watch_events_response::Message::Event(event)) = first.message else {
        panic!("expected an event, got {first:?}");
    };
    assert_eq!(event.rollout_id, rollout.rollout_id);

    // A completion on A ends a completion watch on B.
    let mut completions = on_b
        .watch_rollout_completions(pb::WatchRolloutCompletionsRequest {
            rollout_ids: vec![rollout.rollout_id.clone()],
            timeout: Some(Duration::from_secs(20).try_into().unwrap()),
        })
        .await
        .unwrap()
        .into_inner();
    on_a.update_attempt(pb::UpdateAttemptRequest {
        rollout_id: rollout.rollout_id.clone(),
        attempt_id: "latest".to_owned(),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["status".to_owned()],
        }),
        status: pb::AttemptStatus::Succeeded as i32,
        ..Default::default()
    })
    .await
    .unwrap();
    let done = completions
        .message()
        .await
        .unwrap()
        .unwrap()
        .rollout
        .unwrap();
    assert_eq!(done.rollout_id, rollout.rollout_id);
    assert_eq!(done.status, pb::RolloutStatus::Succeeded as i32);

    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_dequeues_on_two_servers_claim_each_rollout_once() {
    const ROLLOUTS: usize = 200;
    let url = postgres_database().await;
    let a = server_on(&url).await;
    let b = server_on(&url).await;
    let mut on_a = a.client().await;
    let mut enqueued = HashSet::new();
    for _ in 0..ROLLOUTS {
        enqueued.insert(enqueue(&mut on_a).await.rollout_id);
    }
    let mut tasks = Vec::new();
    for server in [&a, &b, &a, &b, &a, &b] {
        let mut client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            // Bounded: more rounds than rollouts.
            for _ in 0..ROLLOUTS {
                match dequeue(&mut client, None).await {
                    Some(rollout) => claimed.push(rollout.rollout_id),
                    None => break,
                }
            }
            claimed
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.unwrap());
    }
    let unique: HashSet<_> = claimed.iter().cloned().collect();
    assert_eq!(claimed.len(), ROLLOUTS, "each rollout claimed exactly once");
    assert_eq!(unique, enqueued);
    a.stop().await;
    b.stop().await;
}

/// Runs a blocking cluster operation on a blocking thread.
async fn off_the_runtime(cluster: Cluster, operation: fn(&Cluster)) -> Cluster {
    tokio::task::spawn_blocking(move || {
        operation(&cluster);
        cluster
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_not_serving_while_the_database_is_down() {
    // A cluster of its own: this test stops it.
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let url = cluster.create_database().await;
    let server = TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url),
            config: ServerConfig {
                health_check_interval: Duration::from_millis(50),
                ..ServerConfig::default()
            },
            ..TestOptions::default()
        },
    )
    .await;
    let mut watch = HealthClient::new(server.channel().await)
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), watch.message())
            .await
            .expect("a health update within 30 s")
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(next().await, ServingStatus::Serving as i32);

    let cluster = off_the_runtime(cluster, Cluster::stop_server).await;
    assert_eq!(next().await, ServingStatus::NotServing as i32);
    let error = server
        .client()
        .await
        .enqueue_rollout(pb::EnqueueRolloutRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable, "{error:?}");

    let cluster = off_the_runtime(cluster, Cluster::start_server).await;
    assert_eq!(next().await, ServingStatus::Serving as i32);
    let mut client = server.client().await;
    enqueue(&mut client).await;
    server.stop().await;
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}
