//! Upgrades from the previous release: databases that lightning-store 0.1.0
//! wrote through its RPCs (`tests/fixtures/v0.1.0/`, SQL text made by that
//! version; its README says how) open with this binary on SQLite and
//! PostgreSQL, migrate, keep every row, and serve every RPC.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::http::{HttpClient, Version};
use common::{Backend, Client, TestOptions, TestServer};
use lightning_store::cli::connection::ShortName as _;
use lightning_store::proto as pb;
use pb::worker_session_request::Message as ToServer;
use pb::worker_session_response::Message as FromServer;
use serde_json::json;
use tokio_stream::wrappers::UnboundedReceiverStream;

const SQLITE_FIXTURE: &str = include_str!("../fixtures/v0.1.0/sqlite.sql");
const POSTGRES_FIXTURE: &str = include_str!("../fixtures/v0.1.0/postgres.sql");

/// Serves a database loaded from a fixture; the watchdog's timer is slow so
/// that only what the test does changes the rows.
async fn serve(backend: Backend, options: TestOptions) -> TestServer {
    TestServer::start_opts(
        backend,
        TestOptions {
            watchdog_interval: Duration::from_secs(3600),
            ..options
        },
    )
    .await
}

#[tokio::test]
async fn a_sqlite_database_of_0_1_0_opens_migrated_with_its_data() {
    use sqlx::{ConnectOptions as _, Connection as _};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(SQLITE_FIXTURE))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let options = TestOptions {
        database: Some(path.clone()),
        ..TestOptions::default()
    };
    let server = serve(Backend::Sqlite, options).await;
    serves_the_fixture(&server).await;
    keeps_the_fixture_in_the_default_namespace(&server).await;
    server.stop().await;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let sql = "SELECT name FROM sqlite_master WHERE type = 'index'";
    let indexes: Vec<String> = sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap();
    has_the_read_model_indexes(&indexes, SQLITE_READ_MODEL_INDEXES);
}

#[tokio::test]
async fn a_postgres_database_of_0_1_0_opens_migrated_with_its_data() {
    skip_without!(crate::common::Backend::Postgres);
    use sqlx::Connection as _;
    let url = common::postgres_database().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(POSTGRES_FIXTURE))
        .execute(&mut conn)
        .await
        .unwrap();
    // pg_dump empties the search path for its own statements; later
    // connections get the default again.
    conn.close().await.unwrap();
    let options = TestOptions {
        postgres_url: Some(url.clone()),
        ..TestOptions::default()
    };
    let server = serve(Backend::Postgres, options).await;
    serves_the_fixture(&server).await;
    keeps_the_fixture_in_the_default_namespace(&server).await;
    server.stop().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let sql = "SELECT indexname::TEXT FROM pg_indexes WHERE schemaname = current_schema()";
    let indexes: Vec<String> = sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap();
    has_the_read_model_indexes(&indexes, POSTGRES_READ_MODEL_INDEXES);
}

/// The indexes of the rollout filters and the aggregate reads on SQLite
/// (migration `0006_console_queries.sql`).
const SQLITE_READ_MODEL_INDEXES: &[&str] = &[
    "rollouts_by_status",
    "rollouts_by_end",
    "rollouts_ended",
    "attempts_by_worker",
];

/// The same on PostgreSQL (migration `0012_console_queries.sql`), which
/// indexes more of the filters.
const POSTGRES_READ_MODEL_INDEXES: &[&str] = &[
    "rollouts_by_status",
    "rollouts_by_mode",
    "rollouts_by_start",
    "rollouts_by_resources",
    "rollouts_by_end",
    "rollouts_ended",
    "attempts_by_worker",
    "attempts_by_id",
];

/// Checks that the upgrade built the indexes of the rollout filters and
/// the aggregate reads.
fn has_the_read_model_indexes(indexes: &[String], expected: &[&str]) {
    for index in expected {
        assert!(indexes.iter().any(|i| i == index), "{index}: {indexes:?}");
    }
}

/// The fixture's rollouts by the name in their metadata (`{"fixture": NAME}`).
async fn fixture_rollouts(c: &mut Client) -> HashMap<String, pb::Rollout> {
    let page = c
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner();
    page.rollouts
        .into_iter()
        .filter_map(|rollout| {
            let metadata: serde_json::Value = serde_json::from_str(&rollout.metadata_json).ok()?;
            Some((metadata["fixture"].as_str()?.to_owned(), rollout))
        })
        .collect()
}

/// Parses JSON text (PostgreSQL stores it normalised).
fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

fn status_of(rollout: &pb::Rollout) -> pb::RolloutStatus {
    pb::RolloutStatus::try_from(rollout.status).unwrap()
}

fn metadata_name(rollout: &pb::Rollout) -> String {
    let metadata: serde_json::Value = serde_json::from_str(&rollout.metadata_json).unwrap();
    metadata["fixture"].as_str().unwrap().to_owned()
}

async fn spans_of(c: &mut Client, rollout_id: &str) -> Vec<pb::Span> {
    c.query_spans(pb::QuerySpansRequest {
        rollout_id: rollout_id.into(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .spans
}

/// Returns the rollout's name in the fixture, or its id when it has none
/// (a 1.x rollout).
fn fixture_name(rollout: &pb::Rollout) -> String {
    let metadata: serde_json::Value = serde_json::from_str(&rollout.metadata_json).unwrap();
    match metadata["fixture"].as_str() {
        Some(name) => name.to_owned(),
        None => rollout.rollout_id.clone(),
    }
}

/// The names of the fixture rollouts a query matches, sorted.
async fn matching(c: &mut Client, request: pb::QueryRolloutsRequest) -> Vec<String> {
    let page = c.query_rollouts(request).await.unwrap().into_inner();
    let mut names: Vec<String> = page.rollouts.iter().map(fixture_name).collect();
    names.sort();
    names
}

/// The rollout filters and aggregate reads answer on the old rows, before
/// anything changes them.
async fn reads_the_fixture_through_the_read_model(
    c: &mut Client,
    rollouts: &HashMap<String, pb::Rollout>,
) {
    let worker_b = pb::QueryRolloutsRequest {
        worker_id: Some("worker-b".into()),
        ..Default::default()
    };
    assert_eq!(
        matching(c, worker_b).await,
        ["cancelled", "requeuing", "running"]
    );
    let train = pb::QueryRolloutsRequest {
        mode_in: vec![pb::RolloutMode::Train as i32],
        ..Default::default()
    };
    // The 1.x rollout is a training one too.
    assert_eq!(matching(c, train).await, ["agl1-fixture", "queuing-train"]);
    let version = pb::QueryRolloutsRequest {
        resources_id: rollouts["queuing-train"].resources_id.clone(),
        ..Default::default()
    };
    assert_eq!(matching(c, version).await, ["queuing-train"]);
    let failures = c
        .list_recent_failures(pb::ListRecentFailuresRequest { limit: 0 })
        .await
        .unwrap()
        .into_inner()
        .failures;
    let names: Vec<String> = failures
        .iter()
        .map(|f| fixture_name(f.rollout.as_ref().unwrap()))
        .collect();
    // The old session's rollout fails once this server ends the session the
    // old server left (its grace period long over), at a time of its own:
    // then it is the latest failure.
    let expected: &[&str] = match names.len() {
        2 => &["session", "failed"],
        _ => &["failed"],
    };
    assert_eq!(names, expected);
    let place = c
        .get_queue_position(pb::GetQueuePositionRequest {
            rollout_id: rollouts["queuing-train"].rollout_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(place.queued && place.ahead >= 1, "{place:?}");
    assert_eq!(place.ahead + 1, place.queue_length, "the queue's tail");
}

/// Checks what fill.py wrote, then runs every kind of call on the old rows.
/// Returns the number of rollouts of `namespace`.
async fn rollouts_in(c: &mut Client, namespace: &str) -> i64 {
    let mut request = tonic::Request::new(pb::QueryRolloutsRequest::default());
    request
        .metadata_mut()
        .insert("lightning-store-namespace", namespace.parse().unwrap());
    c.query_rollouts(request).await.unwrap().into_inner().total
}

/// What the release before namespaces stored is the default namespace's,
/// and a namespace created on the upgraded store starts empty.
async fn keeps_the_fixture_in_the_default_namespace(server: &TestServer) {
    let mut c = server.client().await;
    let before = rollouts_in(&mut c, "default").await;
    assert!(before > 0);
    c.create_namespace(pb::CreateNamespaceRequest {
        name: "after-upgrade".into(),
        quotas: None,
        span_retention: None,
    })
    .await
    .unwrap();
    assert_eq!(rollouts_in(&mut c, "after-upgrade").await, 0);
    assert_eq!(rollouts_in(&mut c, "default").await, before);
}

async fn serves_the_fixture(server: &TestServer) {
    use pb::RolloutStatus as R;
    let mut c = server.client().await;

    // Every rollout kept its status, attempts, configuration and metadata.
    let rollouts = fixture_rollouts(&mut c).await;
    reads_the_fixture_through_the_read_model(&mut c, &rollouts).await;
    for (name, status) in [
        ("succeeded", R::Succeeded),
        ("failed", R::Failed),
        ("cancelled", R::Cancelled),
        ("running", R::Running),
        ("preparing", R::Preparing),
        ("requeuing", R::Requeuing),
        ("queuing", R::Queuing),
        ("queuing-train", R::Queuing),
    ] {
        let rollout = &rollouts[name];
        assert_eq!(status_of(rollout), status, "{name}: {rollout:?}");
        assert_eq!(json(&rollout.input_json), json!({"task": name}), "{name}");
    }
    assert!(rollouts.contains_key("session"), "{rollouts:?}");
    let train = &rollouts["queuing-train"];
    assert_eq!(train.mode, pb::RolloutMode::Train as i32);
    let requeuing = &rollouts["requeuing"];
    assert_eq!(requeuing.config.as_ref().unwrap().max_attempts, Some(3));
    let attempts = c
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: requeuing.rollout_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(attempts.total, 1);
    assert_eq!(
        attempts.attempts[0].status,
        pb::AttemptStatus::Failed as i32
    );
    assert_eq!(
        attempts.attempts[0].worker_id.as_deref(),
        Some("worker-b"),
        "{attempts:?}"
    );

    // Resources: both ids, the updated one at version 2, the latest last.
    let latest = c
        .get_latest_resources(pb::GetLatestResourcesRequest {})
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(json(&latest.resources_json), json!({"prompt": "latest"}));
    let trained_on = c
        .get_resources(pb::GetResourcesRequest {
            resources_id: train.resources_id.clone().unwrap(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(
        (trained_on.version, json(&trained_on.resources_json)),
        (2, json!({"prompt": "v2"}))
    );

    // Workers, with the heartbeat statistics they sent.
    let worker = c
        .get_worker(pb::GetWorkerRequest {
            worker_id: "worker-a".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .worker
        .unwrap();
    assert_eq!(json(&worker.heartbeat_stats_json), json!({"gpu": 0.5}));
    let workers = c
        .query_workers(pb::QueryWorkersRequest::default())
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = workers
        .workers
        .iter()
        .map(|w| w.worker_id.as_str())
        .collect();
    for id in ["worker-a", "worker-b", "worker-session"] {
        assert!(ids.contains(&id), "{ids:?}");
    }

    // Spans: the old ones intact, a new one takes the next sequence id.
    let running = &rollouts["running"];
    let old = spans_of(&mut c, &running.rollout_id).await;
    let names: Vec<&str> = old.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "second", "third"]);
    let last = old.iter().filter_map(|s| s.sequence_id).max().unwrap();
    let attempt = running.attempt.as_ref().unwrap();
    let added = c
        .add_span(pb::AddSpanRequest {
            span: Some(pb::Span {
                rollout_id: running.rollout_id.clone(),
                attempt_id: attempt.attempt_id.clone(),
                trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
                span_id: "00f067aa0ba902b7".into(),
                name: "after upgrade".into(),
                ..Default::default()
            }),
            owner_epoch: None,
        })
        .await
        .unwrap()
        .into_inner()
        .span
        .unwrap();
    assert_eq!(added.sequence_id, Some(last + 1));
    assert_eq!(spans_of(&mut c, &running.rollout_id).await.len(), 4);
    assert_eq!(
        spans_of(&mut c, &rollouts["succeeded"].rollout_id)
            .await
            .len(),
        2
    );

    // A lifecycle: the queue's head is still the requeued rollout, its
    // second attempt succeeds.
    let dequeued = c
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: Some("worker-new".into()),
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(metadata_name(&dequeued), "requeuing");
    let attempt = dequeued.attempt.clone().unwrap();
    assert_eq!(attempt.sequence_id, 2);
    c.update_attempt(pb::UpdateAttemptRequest {
        rollout_id: dequeued.rollout_id.clone(),
        attempt_id: attempt.attempt_id.clone(),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["status".into()],
        }),
        status: pb::AttemptStatus::Succeeded as i32,
        ..Default::default()
    })
    .await
    .unwrap();
    let done = c
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: dequeued.rollout_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(status_of(&done), R::Succeeded);
    let fresh = common::enqueue(&mut c, "null").await;
    assert_eq!(status_of(&fresh), R::Queuing);

    // A worker session: its epoch follows the one the old server handed out
    // (the old session's row), and the queue's next old rollout is assigned
    // to it beside whatever it adopts from the old session.
    let (to_server, requests) = tokio::sync::mpsc::unbounded_channel();
    to_server
        .send(pb::WorkerSessionRequest {
            message: Some(ToServer::Open(pb::OpenSession {
                worker_id: "worker-session".into(),
                slots: 4,
            })),
        })
        .unwrap();
    let mut session = c
        .worker_session(UnboundedReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), session.message())
            .await
            .expect("the session answers within 30 s")
            .unwrap()
            .and_then(|response| response.message)
    };
    let Some(FromServer::Opened(opened)) = next().await else {
        panic!("the session did not open");
    };
    assert_eq!(opened.owner_epoch, 2, "{opened:?}");
    let Some(FromServer::Assignment(assignment)) = next().await else {
        panic!("no assignment");
    };
    assert_eq!(
        metadata_name(assignment.rollout.as_ref().unwrap()),
        "queuing"
    );
    drop(to_server);

    // Statistics count the old rows with the new ones.
    let stats = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    let rows = c
        .query_rollouts(pb::QueryRolloutsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.total_rollouts, rows.total);
    let mut by_status: HashMap<String, i64> = HashMap::new();
    for rollout in &rows.rollouts {
        *by_status.entry(rollout.status().short_name()).or_default() += 1;
    }
    for (status, count) in &stats.rollouts_by_status {
        assert_eq!(
            by_status.get(status).copied().unwrap_or(0),
            *count,
            "{status}: {stats:?}"
        );
    }
    assert_eq!(by_status["succeeded"], 2, "{by_status:?}");
    assert_eq!(by_status["cancelled"], 1, "{by_status:?}");
    // The attempts' statuses add up (counted by triggers before the
    // upgrade, by the write sets after it on PostgreSQL).
    assert_eq!(
        stats.attempts_by_status.values().sum::<i64>(),
        stats.total_attempts,
        "{stats:?}"
    );
    assert_eq!(stats.attempts_by_status["succeeded"], 2, "{stats:?}");

    // agent-lightning 1.x's records: the rollout and its event.
    let http = HttpClient::new(server.addr, Version::Http1);
    let rollout = http.get("/api/rollouts/agl1-fixture").await;
    assert_eq!(rollout.status, 200, "{}", rollout.text());
    assert_eq!(rollout.json()["rollout"]["rollout_id"], "agl1-fixture");
    let events = http.get("/api/rollouts/agl1-fixture/events").await;
    assert_eq!(events.status, 200, "{}", events.text());
    assert!(events.text().contains("reward"), "{}", events.text());
}
