//! Deleting a namespace under load, on every backend, through a real
//! server: namespace B runs a bounded lifecycle load (enqueue, dequeue,
//! spans, complete) while namespace A, holding data, is deleted through
//! the admin RPC; every call of B succeeds and B's data is whole, A answers
//! NOT_FOUND and its data (a SQLite file, a PostgreSQL schema) is purged.
//! A purge broken off between the delete and its end (the catalogue's
//! delete done, its purge not) is finished by the next server's start.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tonic::Code;

use crate::common::{Backend, NamespacedClient, TestOptions, TestServer, postgres_database};
use lightning_store::core::namespace::NamespaceName;
use lightning_store::proto as pb;

/// B's load: this many clients, each running at most [`ROUNDS`] lifecycles
/// and stopping at [`LOAD_TIME`] at the latest.
const CLIENTS: usize = 4;
const ROUNDS: usize = 40;
const LOAD_TIME: Duration = Duration::from_secs(30);
/// Spans each lifecycle adds.
const SPANS: usize = 2;
/// How long a purge may take to show.
const PURGE_TIME: Duration = Duration::from_secs(30);

/// Where a backend keeps a namespace's data, to see it gone.
enum Data {
    /// Nothing outlives the namespace's store.
    Memory,
    /// The directory of the namespaces' files (`<database>.namespaces`).
    Sqlite(std::path::PathBuf),
    /// The database holding the namespaces' schemas.
    Postgres(String),
}

impl Data {
    /// Returns the options of a server on a fresh database of `backend`,
    /// with where its namespaces' data lies (and the directory to keep).
    async fn fresh(backend: Backend) -> (TestOptions, Data, Option<tempfile::TempDir>) {
        match backend {
            Backend::Memory => (TestOptions::default(), Data::Memory, None),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let database = dir.path().join("store.db");
                let namespaces = dir.path().join("store.db.namespaces");
                let options = TestOptions {
                    database: Some(database),
                    ..TestOptions::default()
                };
                (options, Data::Sqlite(namespaces), Some(dir))
            }
            Backend::Postgres => {
                let url = postgres_database().await;
                let options = TestOptions {
                    postgres_url: Some(url.clone()),
                    ..TestOptions::default()
                };
                (options, Data::Postgres(url), None)
            }
        }
    }

    /// Returns the names of the namespaces' data there now (files
    /// `<id>.db`, schemas `ns_<id>`), sorted; none on memory.
    async fn units(&self) -> Vec<String> {
        let mut units: Vec<String> = match self {
            Data::Memory => Vec::new(),
            Data::Sqlite(dir) => match std::fs::read_dir(dir) {
                Ok(entries) => entries
                    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| name != "catalogue.db" && name.starts_with(char::is_numeric))
                    .collect(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(error) => panic!("{}: {error}", dir.display()),
            },
            Data::Postgres(url) => {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                let schemas: Vec<String> = sqlx::query_scalar(
                    "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'ns\\_%'",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap();
                conn.close().await.unwrap();
                schemas
            }
        };
        units.sort();
        units
    }

    /// Waits until `unit` is gone (a purge's end: the file and its `-wal`
    /// and `-shm`, or the schema); fails after [`PURGE_TIME`]. Neither
    /// backend announces a purge's end but in its log, so this polls.
    async fn until_gone(&self, unit: &str) {
        let deadline = Instant::now() + PURGE_TIME;
        let prefix = unit.to_owned();
        loop {
            let left: Vec<String> = self
                .units()
                .await
                .into_iter()
                .filter(|u| u == &prefix || u.starts_with(&format!("{prefix}-")))
                .collect();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{left:?} still there {PURGE_TIME:?} after the delete"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Returns the one unit of `after` that `before` lacks: the data of the
/// namespace created in between.
fn new_unit(before: &[String], after: &[String]) -> String {
    let new: Vec<&String> = after
        .iter()
        .filter(|u| !before.contains(u) && !u.ends_with("-wal") && !u.ends_with("-shm"))
        .collect();
    assert_eq!(new.len(), 1, "before {before:?}, after {after:?}");
    new[0].clone()
}

/// Fills `namespace` with `rollouts` rollouts, one span each.
async fn fill(client: &mut NamespacedClient, rollouts: usize) {
    for i in 0..rollouts {
        let rollout = enqueue(client, &format!(r#"{{"a": {i}}}"#)).await.unwrap();
        let attempt_id = client
            .start_attempt(pb::StartAttemptRequest {
                rollout_id: rollout.clone(),
                worker_id: None,
            })
            .await
            .unwrap()
            .into_inner()
            .rollout
            .unwrap()
            .attempt
            .unwrap()
            .attempt_id;
        add_span(client, &rollout, &attempt_id, "a").await.unwrap();
    }
}

async fn enqueue(client: &mut NamespacedClient, input: &str) -> Result<String, tonic::Status> {
    Ok(client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            request_id: None,
            rollout: Some(pb::RolloutSpec {
                input_json: input.to_owned(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .rollout
        .unwrap()
        .rollout_id)
}

async fn add_span(
    client: &mut NamespacedClient,
    rollout_id: &str,
    attempt_id: &str,
    name: &str,
) -> Result<(), tonic::Status> {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    client
        .add_span(pb::AddSpanRequest {
            span: Some(pb::Span {
                rollout_id: rollout_id.to_owned(),
                attempt_id: attempt_id.to_owned(),
                trace_id: hex.clone(),
                span_id: hex[..16].to_owned(),
                name: name.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// One lifecycle of B: enqueue, dequeue (some rollout: the client's own
/// enqueue keeps the queue from being empty), its spans, its success.
async fn lifecycle(
    client: &mut NamespacedClient,
    worker: &str,
    round: usize,
) -> Result<(), tonic::Status> {
    enqueue(client, &format!(r#"{{"b": {round}}}"#)).await?;
    let rollout = client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: Some(worker.to_owned()),
            wait: None,
        })
        .await?
        .into_inner()
        .rollout
        .ok_or_else(|| tonic::Status::internal("dequeue found the queue empty"))?;
    let attempt_id = rollout.attempt.unwrap().attempt_id;
    for span in 0..SPANS {
        add_span(
            client,
            &rollout.rollout_id,
            &attempt_id,
            &format!("b-{span}"),
        )
        .await?;
    }
    client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: rollout.rollout_id,
            attempt_id,
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".into()],
            }),
            status: pb::AttemptStatus::Succeeded as i32,
            ..Default::default()
        })
        .await?;
    Ok(())
}

async fn stats(client: &mut NamespacedClient) -> Result<pb::GetStatisticsResponse, tonic::Status> {
    Ok(client
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner())
}

async fn deleting_a_namespace_under_load_leaves_the_others_whole(backend: Backend) {
    let (options, data, _dir) = Data::fresh(backend).await;
    let server = TestServer::start_opts(backend, options).await;
    let none = data.units().await;
    server.create_namespace("run-a", None).await;
    let mut a = server.client_in("run-a").await;
    fill(&mut a, 20).await;
    let with_a = data.units().await;
    server.create_namespace("run-b", None).await;
    let mut b = server.client_in("run-b").await;
    // B's own data, opened before the load so that it is told from A's.
    assert_eq!(stats(&mut b).await.unwrap().total_rollouts, 0);
    let with_b = data.units().await;
    let (a_unit, b_unit) = match backend {
        Backend::Memory => (None, None),
        _ => (
            Some(new_unit(&none, &with_a)),
            Some(new_unit(&with_a, &with_b)),
        ),
    };
    assert_eq!(stats(&mut a).await.unwrap().total_spans, 20);

    // B's load: CLIENTS clients, bounded in rounds and time; the delete
    // waits for a quarter of the rounds done, so that it lands mid-load.
    let done = Arc::new(AtomicUsize::new(0));
    let quarter = Arc::new(tokio::sync::Notify::new());
    let deadline = Instant::now() + LOAD_TIME;
    let mut load = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let mut client = server.client_in("run-b").await;
        let (done, quarter) = (done.clone(), quarter.clone());
        load.spawn(async move {
            let mut failures = Vec::new();
            let mut rounds = 0;
            while rounds < ROUNDS && Instant::now() < deadline {
                if let Err(status) = lifecycle(&mut client, &format!("worker-{c}"), rounds).await {
                    failures.push(status);
                }
                rounds += 1;
                if done.fetch_add(1, Ordering::SeqCst) + 1 == CLIENTS * ROUNDS / 4 {
                    quarter.notify_one();
                }
            }
            (rounds, failures)
        });
    }
    tokio::time::timeout(LOAD_TIME, quarter.notified())
        .await
        .expect("B's load did a quarter of its rounds");
    let before = done.load(Ordering::SeqCst);
    let deleted = server
        .client()
        .await
        .delete_namespace(pb::DeleteNamespaceRequest {
            name: "run-a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.namespace.unwrap().name, "run-a");
    let mut rounds = 0;
    let mut failures = Vec::new();
    while let Some(joined) = load.join_next().await {
        let (client_rounds, client_failures) = joined.unwrap();
        rounds += client_rounds;
        failures.extend(client_failures);
    }
    assert!(failures.is_empty(), "B's calls failed: {failures:?}");
    // The delete began with B's load under way: its calls ran beside it.
    assert!(
        before < rounds,
        "B's load was over before the delete ({before} of {rounds} rounds)"
    );

    // B is whole: every lifecycle's rollout, attempt and spans, each succeeded.
    let b_stats = stats(&mut b).await.unwrap();
    assert_eq!(b_stats.total_rollouts, rounds as i64);
    assert_eq!(b_stats.total_attempts, rounds as i64);
    assert_eq!(b_stats.total_spans, (rounds * SPANS) as i64);
    assert_eq!(b_stats.queued_rollouts, 0);
    let succeeded = b
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: vec![pb::RolloutStatus::Succeeded as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(succeeded.total, rounds as i64);

    // A is gone, for its calls and in the backend.
    let status = stats(&mut a).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(status.message().contains("run-a"), "{}", status.message());
    let listed = server
        .client()
        .await
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .unwrap()
        .into_inner();
    let names: Vec<String> = listed
        .namespaces
        .into_iter()
        .map(|n| n.namespace.unwrap().name)
        .collect();
    assert_eq!(names, ["default", "run-b"]);
    if let (Some(a_unit), Some(b_unit)) = (&a_unit, &b_unit) {
        data.until_gone(a_unit).await;
        let left = data.units().await;
        assert!(left.contains(b_unit), "B's data is gone: {left:?}");
    }
    server.stop().await;
}

/// A purge broken off after the delete (here: the catalogue's delete done
/// and its purge never run, as when the server is killed between the two)
/// is finished by the next server's start.
async fn an_interrupted_purge_resumes_at_the_next_start(backend: Backend) {
    let (options, data, _dir) = Data::fresh(backend).await;
    let same = |options: &TestOptions| TestOptions {
        database: options.database.clone(),
        postgres_url: options.postgres_url.clone(),
        ..TestOptions::default()
    };
    let server = TestServer::start_opts(backend, same(&options)).await;
    let none = data.units().await;
    server.create_namespace("run-a", None).await;
    let mut a = server.client_in("run-a").await;
    fill(&mut a, 5).await;
    let unit = new_unit(&none, &data.units().await);
    server.stop().await;

    // The delete alone, through the backend's catalogue.
    let (catalogue, _) = backend.open_catalogue(&options).await;
    let deleted = catalogue
        .delete(&NamespaceName::parse("run-a").unwrap())
        .await
        .unwrap();
    assert_eq!(catalogue.deleted().await.unwrap(), [deleted]);
    drop(catalogue);
    assert!(
        data.units().await.contains(&unit),
        "the data is there until the purge"
    );

    let server = TestServer::start_opts(backend, same(&options)).await;
    data.until_gone(&unit).await;
    let status = stats(&mut server.client_in("run-a").await)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    server.stop().await;
    let (catalogue, _) = backend.open_catalogue(&options).await;
    assert!(catalogue.deleted().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_deleting_a_namespace_under_load_leaves_the_others_whole() {
    deleting_a_namespace_under_load_leaves_the_others_whole(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_deleting_a_namespace_under_load_leaves_the_others_whole() {
    deleting_a_namespace_under_load_leaves_the_others_whole(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_deleting_a_namespace_under_load_leaves_the_others_whole() {
    skip_without!(Backend::Postgres);
    deleting_a_namespace_under_load_leaves_the_others_whole(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_interrupted_purge_resumes_at_the_next_start() {
    an_interrupted_purge_resumes_at_the_next_start(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_interrupted_purge_resumes_at_the_next_start() {
    skip_without!(Backend::Postgres);
    an_interrupted_purge_resumes_at_the_next_start(Backend::Postgres).await;
}
