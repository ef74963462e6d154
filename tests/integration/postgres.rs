//! What only the PostgreSQL backend promises: several servers share one
//! database, each sees what the others commit (waiting dequeues, events,
//! completion watches), and no rollout is claimed twice across them.

use crate::common;

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
        request_id: None,
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
    skip_without!(crate::common::Backend::Postgres);
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
    skip_without!(crate::common::Backend::Postgres);
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
    skip_without!(crate::common::Backend::Postgres);
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

/// Enqueues `count` rollouts in batches of 1,000; returns their ids.
async fn enqueue_many(c: &mut Client, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        let batch = (count - ids.len()).min(1000);
        let response = c
            .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                rollouts: vec![pb::RolloutSpec::default(); batch],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.extend(response.rollouts.into_iter().map(|r| r.rollout_id));
    }
    ids
}

/// Reads a server's event stream from the start until event `latest`;
/// returns (seq, kind, rollout id, attempt id) per event.
async fn events_until(server: &TestServer, latest: u64) -> Vec<(u64, i32, String, String)> {
    use pb::watch_events_response::Message;
    let mut stream = server
        .client()
        .await
        .watch_events(pb::WatchEventsRequest {
            after_seq: Some(0),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut events: Vec<(u64, i32, String, String)> = Vec::new();
    while events.last().is_none_or(|&(seq, ..)| seq < latest) {
        let message = tokio::time::timeout(Duration::from_secs(30), stream.message())
            .await
            .expect("events within 30 s")
            .unwrap()
            .expect("the stream stays open");
        if let Some(Message::Event(e)) = message.message {
            events.push((e.seq, e.kind, e.rollout_id, e.attempt_id));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_claimers_on_two_servers_dispatch_ten_thousand_rollouts_once() {
    skip_without!(crate::common::Backend::Postgres);
    const ROLLOUTS: usize = 10_000;
    const CLAIMERS: usize = 64;
    let url = postgres_database().await;
    let a = server_on(&url).await;
    let b = server_on(&url).await;
    let enqueued: HashSet<String> = enqueue_many(&mut a.client().await, ROLLOUTS)
        .await
        .into_iter()
        .collect();
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for n in 0..CLAIMERS {
        let mut client = if n % 2 == 0 { &a } else { &b }.client().await;
        tasks.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            // Bounded in count and time: more rounds than rollouts, 5 minutes.
            for _ in 0..ROLLOUTS {
                if started.elapsed() > Duration::from_secs(300) {
                    break;
                }
                match client
                    .dequeue_rollouts(pb::DequeueRolloutsRequest {
                        limit: 4,
                        worker_id: Some(format!("claimer-{n}")),
                        wait: None,
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .rollouts
                {
                    rollouts if rollouts.is_empty() => break,
                    rollouts => claimed.extend(rollouts.into_iter().map(|r| r.rollout_id)),
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
    assert_eq!(
        claimed.len(),
        ROLLOUTS,
        "each rollout dispatched exactly once"
    );
    assert_eq!(unique, enqueued);

    // Both servers deliver the same gapless history, in sequence order.
    let latest = a.engine.events_after(0, 0).await.unwrap().latest;
    let (on_a, on_b) = tokio::join!(events_until(&a, latest), events_until(&b, latest));
    let seqs: Vec<u64> = on_a.iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=latest).collect::<Vec<_>>(), "gapless, in order");
    assert_eq!(on_a, on_b, "identical streams on both servers");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_notification_still_reaches_a_waiting_dequeue_by_polling() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let a = server_on(&url).await;
    let b = server_on(&url).await;
    // Cut every listening connection: the notification of the enqueue below
    // is lost for B (its listener reconnects later), and only the
    // follower's polling can tell B's waiting dequeue.
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!cut.is_empty(), "the servers listen for notifications");
    let mut waiting_client = b.client().await;
    let waiting =
        tokio::spawn(
            async move { dequeue(&mut waiting_client, Some(Duration::from_secs(20))).await },
        );
    // Let B's dequeue find the queue empty and park.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rollout = enqueue(&mut a.client().await).await;
    let claimed = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting dequeue answers within 10 s")
        .unwrap();
    assert_eq!(claimed.map(|r| r.rollout_id), Some(rollout.rollout_id));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_under_load_loses_no_acknowledged_write() {
    skip_without!(crate::common::Backend::Postgres);
    // A cluster of its own: this test restarts it.
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let url = cluster.create_database().await;
    let server = server_on(&url).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for _ in 0..8 {
        let mut client = server.client().await;
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let (mut acknowledged, mut failed) = (Vec::new(), 0usize);
            // Bounded: 20,000 calls at most, until told to stop.
            for _ in 0..20_000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                match client
                    .enqueue_rollout(pb::EnqueueRolloutRequest {
                        request_id: None,
                        rollout: Some(pb::RolloutSpec::default()),
                    })
                    .await
                {
                    Ok(response) => {
                        acknowledged.push(response.into_inner().rollout.unwrap().rollout_id)
                    }
                    Err(status) => {
                        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                        failed += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            (acknowledged, failed)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cluster = off_the_runtime(cluster, |cluster| {
        cluster.stop_server();
        cluster.start_server();
    })
    .await;
    // Let the writers succeed again after the restart.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut acknowledged, mut failed) = (Vec::new(), 0);
    for writer in writers {
        let (ids, failures) = writer.await.unwrap();
        acknowledged.extend(ids);
        failed += failures;
    }
    assert!(failed > 0, "the restart interrupted some calls");
    let mut client = server.client().await;
    let mut found = HashSet::new();
    for chunk in acknowledged.chunks(500) {
        let page = client
            .query_rollouts(pb::QueryRolloutsRequest {
                rollout_id_in: chunk.to_vec(),
                page: Some(pb::PageRequest {
                    limit: Some(1000),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        found.extend(page.rollouts.into_iter().map(|r| r.rollout_id));
    }
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|id| !found.contains(*id))
        .collect();
    assert!(lost.is_empty(), "{} acknowledged rollouts lost", lost.len());
    server.stop().await;
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}

/// A certificate authority and a server certificate for 127.0.0.1 and
/// localhost it signed, as PEM: (CA certificate, server certificate, server key).
fn certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let server_cert = server.signed_by(&server_key, &issuer).unwrap();
    (ca_cert.pem(), server_cert.pem(), server_key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_postgres_verifies_the_server_certificate() {
    skip_without!(crate::common::Backend::Postgres);
    let (ca, cert, key) = certificates();
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let (_, other_ca, _) = certificates();
    let other_ca_file = ca_dir.path().join("other-ca.pem");
    std::fs::write(&other_ca_file, &other_ca).unwrap();
    let cluster = tokio::task::spawn_blocking(move || {
        Cluster::start_with(|dir| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::write(dir.join("server.crt"), &cert).unwrap();
            std::fs::write(dir.join("server.key"), &key).unwrap();
            std::fs::set_permissions(
                dir.join("server.key"),
                std::fs::Permissions::from_mode(0o600),
            )
            .unwrap();
            format!(
                "-c ssl=on -c ssl_cert_file={0}/server.crt -c ssl_key_file={0}/server.key",
                dir.display()
            )
        })
    })
    .await
    .unwrap();
    let url = cluster.create_database().await;
    let verified = format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        ca_file.display()
    );

    // The store connects over TLS, verifying the certificate and the host.
    let server = server_on(&verified).await;
    enqueue(&mut server.client().await).await;
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let (total, encrypted): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a \
         JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.application_name = 'lightning-store'",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(total > 0, "the store is connected");
    assert_eq!(encrypted, total, "every store connection is encrypted");
    server.stop().await;

    // A certificate from another authority is refused.
    let wrong = format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        other_ca_file.display()
    );
    let refused = lightning_store::store::postgres::PostgresStore::connect(
        &wrong,
        lightning_store::store::postgres::PostgresOptions::default(),
    )
    .await;
    assert!(
        refused.is_err(),
        "a server certificate from an unknown CA is refused"
    );

    // `require` encrypts without verifying.
    let required = lightning_store::store::postgres::PostgresStore::connect(
        &format!("{url}?sslmode=require"),
        lightning_store::store::postgres::PostgresOptions::default(),
    )
    .await;
    assert!(required.is_ok(), "{:?}", required.err());
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .unwrap();
}

/// Runs a train rollout of `resources_id` through `c` to success with
/// reward `reward`.
async fn rewarded_rollout(c: &mut Client, resources_id: &str, reward: f64) {
    use crate::conformance::support::{add_span, set_attempt_status, span};
    c.enqueue_rollout(pb::EnqueueRolloutRequest {
        request_id: None,
        rollout: Some(pb::RolloutSpec {
            mode: pb::RolloutMode::Train as i32,
            resources_id: Some(resources_id.to_owned()),
            ..Default::default()
        }),
    })
    .await
    .unwrap();
    let claimed = dequeue(c, None).await.expect("the rollout just enqueued");
    let attempt_id = claimed.attempt.unwrap().attempt_id;
    let mut reward_span = span(&claimed.rollout_id, &attempt_id, "reward", None);
    reward_span.attributes = vec![common::number("agentlightning.reward.0.value", reward)];
    add_span(c, reward_span).await;
    set_attempt_status(
        c,
        &claimed.rollout_id,
        &attempt_id,
        pb::AttemptStatus::Succeeded,
    )
    .await
    .unwrap();
}

async fn train_summary(c: &mut Client) -> Vec<pb::VersionSummary> {
    c.get_training_summary(pb::GetTrainingSummaryRequest::default())
        .await
        .unwrap()
        .into_inner()
        .versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_training_summarys_shards_fold_into_one_without_changing_it() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    // Only the test folds: the housekeeping's interval is an hour.
    let quiet = || TestOptions {
        postgres_url: Some(url.clone()),
        retention_interval: Duration::from_secs(3600),
        ..TestOptions::default()
    };
    let a = TestServer::start_opts(Backend::Postgres, quiet()).await;
    let b = TestServer::start_opts(Backend::Postgres, quiet()).await;
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let resources_id = common::add_resources(&mut ca, r#"{"prompt": "v1"}"#).await;
    for reward in [1.0, 0.0, 1.0] {
        rewarded_rollout(&mut ca, &resources_id, reward).await;
        rewarded_rollout(&mut cb, &resources_id, reward).await;
    }
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let shards = "SELECT COUNT(DISTINCT shard) FROM training_summary";
    let before: i64 = sqlx::query_scalar(shards)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(
        before >= 2,
        "each server's connections add to shards of their own: {before}"
    );
    let summary = train_summary(&mut ca).await;
    assert_eq!((summary[0].rollouts, summary[0].rewarded), (6, 6));

    // Folds while the other server keeps ending rollouts: neither waits
    // for the other in a cycle, and nothing is lost.
    let folds = async {
        for _ in 0..5 {
            a.engine.fold_training_shards().await.unwrap();
        }
    };
    let writes = async {
        for _ in 0..5 {
            rewarded_rollout(&mut cb, &resources_id, 0.5).await;
        }
    };
    tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(folds, writes),
    )
    .await
    .expect("folds and writes finish");
    a.engine.fold_training_shards().await.unwrap();
    let after: i64 = sqlx::query_scalar(shards)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(after, 1, "every row in shard 0");
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM training_summary")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(rows, 3, "one row per reward bin: 0, 0.5 and 1");
    let summary = train_summary(&mut cb).await;
    assert_eq!(summary.len(), 1);
    let version = &summary[0];
    assert_eq!(
        (version.rollouts, version.succeeded, version.rewarded),
        (11, 11, 11)
    );
    assert_eq!(version.reward_mean, Some(6.5 / 11.0));
    assert_eq!(
        (version.reward_p10, version.reward_p50, version.reward_p90),
        (Some(0.0), Some(0.5), Some(1.0))
    );
    // The timeline's rows fold alike and keep their sums.
    let timeline_shards: i64 =
        sqlx::query_scalar("SELECT COUNT(DISTINCT shard) FROM reward_timeline")
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(timeline_shards, 1, "every timeline row in shard 0");
    for resolution in [pb::TimelineResolution::Minute, pb::TimelineResolution::Hour] {
        let periods = cb
            .get_reward_timeline(pb::GetRewardTimelineRequest {
                resolution: resolution as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .periods;
        let rollouts: i64 = periods.iter().map(|p| p.rollouts).sum();
        let rewards: f64 = periods
            .iter()
            .map(|p| p.reward_mean.unwrap() * p.rewarded as f64)
            .sum();
        assert_eq!(rollouts, 11, "{resolution:?}");
        assert!((rewards - 6.5).abs() < 1e-9, "{resolution:?}: {rewards}");
    }
}
