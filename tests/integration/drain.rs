//! The drain deadline (`--drain-timeout`) holds while transactions run:
//! under big batches on SQLite and PostgreSQL every batch commits whole or
//! not at all and its answer says which, and on PostgreSQL a statement
//! waiting for a lock another client holds is cancelled at the deadline.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, ServerProcess, TestOptions, TestServer, postgres_database};
use lightning_store::proto as pb;
use lightning_store::server::ServerConfig;
use tonic::transport::Channel;

type Client = pb::lightning_store_service_client::LightningStoreServiceClient<Channel>;

/// The longest any step of a drain test may take.
const TEST_BUDGET: Duration = Duration::from_secs(60);

/// Rollouts per batch in the drain test: a transaction long enough that
/// some is running when the drain deadline passes.
const BATCH: usize = 5_000;
const BATCH_CLIENTS: usize = 3;
/// The drain test's `--drain-timeout-secs`.
const DRAIN_SECS: f64 = 0.2;
/// What the shutdown may take beyond the drain deadline: the answers'
/// grace and the store's close (a bound that catches a hang, not a speed).
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(15);

/// How each batch of the drain test was answered.
#[derive(Default)]
struct Answers {
    acknowledged: Vec<String>,
    refused: Vec<(String, tonic::Status)>,
}

/// Sends batches of [`BATCH`] rollouts, each tagged `<client>-<n>` in its
/// input, until one is refused; tells `first` at the first acknowledgement.
async fn send_batches(
    mut c: Client,
    client: usize,
    answers: Arc<Mutex<Answers>>,
    first: Arc<tokio::sync::Notify>,
) {
    for n in 0.. {
        let tag = format!("{client}-{n}");
        let rollouts = (0..BATCH)
            .map(|_| pb::RolloutSpec {
                input_json: format!(r#"{{"batch": "{tag}"}}"#),
                ..Default::default()
            })
            .collect();
        let request = pb::EnqueueRolloutsRequest {
            rollouts,
            ids_only: true,
            ..Default::default()
        };
        let answer = tokio::time::timeout(TEST_BUDGET, c.enqueue_rollouts(request))
            .await
            .expect("every batch is answered");
        let mut answers = answers.lock().unwrap();
        match answer {
            Ok(_) => {
                answers.acknowledged.push(tag);
                first.notify_one();
            }
            Err(status) => {
                answers.refused.push((tag, status));
                return;
            }
        }
    }
}

/// Runs the drain test's load on a server started with `backend` (its
/// options), stops it while batches are in flight, and returns how each
/// batch was answered.
async fn drain_during_big_batches(backend: &[&str]) -> Answers {
    let drain = format!("{DRAIN_SECS}s");
    let mut args = backend.to_vec();
    args.extend(["--drain-timeout", &drain]);
    let server = ServerProcess::start(&args);
    let answers = Arc::new(Mutex::new(Answers::default()));
    let first = Arc::new(tokio::sync::Notify::new());
    let mut clients = Vec::new();
    for client in 0..BATCH_CLIENTS {
        let c = server.client().await;
        let task = send_batches(c, client, answers.clone(), first.clone());
        clients.push(tokio::spawn(task));
    }
    // Batches are committing, and the others are mid-flight.
    tokio::time::timeout(TEST_BUDGET, first.notified())
        .await
        .expect("a batch is acknowledged");
    let signalled = Instant::now();
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    let took = signalled.elapsed();
    assert!(status.success(), "{status}: {log}");
    assert!(
        took < Duration::from_secs_f64(DRAIN_SECS) + SHUTDOWN_MARGIN,
        "the shutdown took {took:?}: {log}"
    );
    for client in clients {
        client.await.unwrap();
    }
    Arc::try_unwrap(answers)
        .ok()
        .expect("the clients are done")
        .into_inner()
        .unwrap()
}

/// Asserts that each batch committed whole or not at all, and that its
/// answer says which.
async fn assert_answers_follow_commits(
    store: &dyn lightning_store::core::storage::Store,
    answers: &Answers,
) {
    use lightning_store::core::query::{Page, RolloutFilter};

    let mut tx = store.begin().await.unwrap();
    let stored = tx
        .query_rollouts(&RolloutFilter::default(), &Page::default())
        .await
        .unwrap();
    let mut per_batch: HashMap<String, usize> = HashMap::new();
    for view in stored.items {
        let tag = view.rollout.input["batch"].as_str().unwrap().to_owned();
        *per_batch.entry(tag).or_default() += 1;
    }
    for (tag, count) in &per_batch {
        assert_eq!(*count, BATCH, "batch {tag} is partly stored");
    }
    for tag in &answers.acknowledged {
        assert!(per_batch.contains_key(tag), "acknowledged batch {tag} lost");
    }
    assert_eq!(answers.refused.len(), BATCH_CLIENTS, "every client stopped");
    for (tag, status) in &answers.refused {
        assert!(
            !per_batch.contains_key(tag),
            "batch {tag} committed but was answered {status:?}"
        );
    }
    assert_eq!(
        per_batch.len(),
        answers.acknowledged.len(),
        "only acknowledged batches are stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_holds_during_big_batches_and_answers_follow_commits() {
    use lightning_store::store::sqlite::{SqliteOptions, SqliteStore};

    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("store.db");
    let answers = drain_during_big_batches(&["--database", database.to_str().unwrap()]).await;
    let store = SqliteStore::open(&database, SqliteOptions::default())
        .await
        .unwrap();
    assert_answers_follow_commits(&store, &answers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_the_drain_deadline_holds_during_big_batches_and_answers_follow_commits() {
    skip_without!(crate::common::Backend::Postgres);
    use lightning_store::store::postgres::{PostgresOptions, PostgresStore};

    let url = common::postgres_database().await;
    let answers = drain_during_big_batches(&["--store", "postgres", "--database-url", &url]).await;
    let store = PostgresStore::connect(&url, PostgresOptions::default())
        .await
        .unwrap();
    assert_answers_follow_commits(&store, &answers).await;
}

/// The drain deadline holds while a server's statement waits in PostgreSQL
/// (here for a row lock another client holds): at the deadline the
/// statement is cancelled, its call answers UNAVAILABLE with nothing
/// written, and the server stops, while the lock is still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_deadline_cancels_a_statement_in_flight() {
    skip_without!(crate::common::Backend::Postgres);
    use sqlx::Connection as _;
    /// Far below the statement timeout (30 s) that ends the wait otherwise.
    const BOUND: Duration = Duration::from_secs(10);
    let url = postgres_database().await;
    let server = TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url.clone()),
            config: ServerConfig {
                drain_timeout: Duration::from_millis(200),
                ..ServerConfig::default()
            },
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let rollout = common::enqueue(&mut c, "1").await;
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT 1 FROM rollouts WHERE rollout_id = $1 FOR UPDATE")
        .bind(&rollout.rollout_id)
        .execute(&mut holder)
        .await
        .unwrap();
    let update = tokio::spawn({
        let rollout_id = rollout.rollout_id.clone();
        async move {
            c.update_rollout(pb::UpdateRolloutRequest {
                rollout_id,
                update_mask: Some(prost_types::FieldMask {
                    paths: vec!["metadata_json".into()],
                }),
                metadata_json: r#"{"written": true}"#.into(),
                ..Default::default()
            })
            .await
        }
    });
    // The server's statement waits for the lock (another process's state:
    // polled, bounded).
    let waiting = "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = 'lightning-store' AND wait_event_type = 'Lock'";
    let started = std::time::Instant::now();
    while sqlx::query_scalar::<_, i64>(waiting)
        .fetch_one(&mut holder)
        .await
        .unwrap()
        == 0
    {
        assert!(started.elapsed() < BOUND, "the update never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    tokio::time::timeout(BOUND, server.stop())
        .await
        .expect("the server stops while the lock is still held");
    let status = tokio::time::timeout(BOUND, update)
        .await
        .expect("the call is answered")
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    let metadata: String =
        sqlx::query_scalar("SELECT metadata FROM rollouts WHERE rollout_id = $1")
            .bind(&rollout.rollout_id)
            .fetch_one(&mut holder)
            .await
            .unwrap();
    assert!(
        !metadata.contains("written"),
        "nothing of the cancelled call was written"
    );
}
