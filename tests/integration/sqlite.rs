//! What only the SQLite backend promises: everything survives a restart,
//! and a database that cannot be used is a clear error at startup.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::{Backend, TestOptions, TestServer};
use lightning_store::core::clock::{Clock, ManualClock, SystemClock};
use lightning_store::core::events::{Change, Event};
use lightning_store::core::model::{RolloutStatus, Timestamp};
use lightning_store::core::storage::{Store, WriteSet};
use lightning_store::proto as pb;
use lightning_store::store::sqlite::{SqliteOptions, SqliteStore};

type Client =
    pb::lightning_store_service_client::LightningStoreServiceClient<tonic::transport::Channel>;

/// Opens a plain SQLite connection to `path` (created when missing), as
/// another program would.
async fn raw_connection(path: &Path) -> sqlx::SqliteConnection {
    use sqlx::Connection as _;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true);
    sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap()
}

/// Starts a server on the database at `path`; `watchdog` is its timer interval.
async fn server_on(path: &Path, watchdog: Duration) -> TestServer {
    server_on_clock(path, watchdog, Arc::new(SystemClock)).await
}

/// Starts a server on the database at `path` reading the time from `clock`.
async fn server_on_clock(path: &Path, watchdog: Duration, clock: Arc<dyn Clock>) -> TestServer {
    TestServer::start_opts(
        Backend::Sqlite,
        TestOptions {
            database: Some(path.to_owned()),
            watchdog_interval: watchdog,
            clock,
            ..TestOptions::default()
        },
    )
    .await
}

async fn enqueue(c: &mut Client, spec: pb::RolloutSpec) -> String {
    c.enqueue_rollout(pb::EnqueueRolloutRequest {
        request_id: None,
        rollout: Some(spec),
    })
    .await
    .unwrap()
    .into_inner()
    .rollout
    .unwrap()
    .rollout_id
}

async fn dequeue(c: &mut Client) -> Option<pb::Rollout> {
    c.dequeue_rollout(pb::DequeueRolloutRequest {
        worker_id: Some("worker-1".into()),
        wait: None,
    })
    .await
    .unwrap()
    .into_inner()
    .rollout
}

async fn add_span(c: &mut Client, rollout_id: &str, attempt_id: &str) -> i64 {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    c.add_span(pb::AddSpanRequest {
        span: Some(pb::Span {
            rollout_id: rollout_id.into(),
            attempt_id: attempt_id.into(),
            trace_id: hex.clone(),
            span_id: hex[..16].into(),
            name: "step".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .span
    .unwrap()
    .sequence_id
    .unwrap()
}

async fn get(c: &mut Client, rollout_id: &str) -> pb::Rollout {
    c.get_rollout(pb::GetRolloutRequest {
        rollout_id: rollout_id.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .rollout
    .unwrap()
}

fn timeout_spec(seconds: f64) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: "{}".into(),
        config: Some(pb::RolloutConfig {
            timeout_seconds: Some(seconds),
            max_attempts: Some(2),
            retry_condition: vec![pb::AttemptStatus::Timeout as i32],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_restart_recovers_the_whole_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");

    // Before: resources, a queue of three, one running attempt with a
    // one-second timeout and spans, events.
    let clock = Arc::new(ManualClock::at_system_time());
    let server = server_on_clock(&path, Duration::from_secs(3600), clock.clone()).await;
    let mut c = server.client().await;
    let resources_id = c
        .add_resources(pb::AddResourcesRequest {
            resources_json: r#"{"model": "m1"}"#.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap()
        .resources_id;
    let timed = enqueue(&mut c, timeout_spec(1.0)).await;
    let second = enqueue(&mut c, timeout_spec(3600.0)).await;
    let third = enqueue(&mut c, timeout_spec(3600.0)).await;
    let claimed = dequeue(&mut c).await.unwrap();
    assert_eq!(claimed.rollout_id, timed);
    let attempt_id = claimed.attempt.unwrap().attempt_id;
    for expected in 1..=3 {
        assert_eq!(add_span(&mut c, &timed, &attempt_id).await, expected);
    }
    let stats_before = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    let history = server.engine.events_after(0, usize::MAX).await.unwrap();
    assert!(history.latest > 0);
    server.stop().await;

    // The attempt times out while the server is down.
    clock.advance(Duration::from_millis(1200));

    let server = server_on_clock(&path, Duration::from_millis(20), clock.clone()).await;
    let mut c = server.client().await;
    // The watchdog timer handles the expired attempt on its own: the
    // rollout is requeued behind the two that were waiting.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let history_after = loop {
        let page = server.engine.events_after(0, usize::MAX).await.unwrap();
        let requeued = page.events.iter().any(|e| {
            e.seq > history.latest
                && matches!(&e.change, Change::RolloutChanged { rollout_id, .. } if *rollout_id == timed)
        });
        if requeued {
            break page;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watchdog did not run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let rollout = get(&mut c, &timed).await;
    assert_eq!(rollout.status, pb::RolloutStatus::Requeuing as i32);
    let attempt = rollout.attempt.unwrap();
    assert_eq!(attempt.attempt_id, attempt_id);
    assert_eq!(attempt.status, pb::AttemptStatus::Timeout as i32);

    // Events continue where they stopped, with the old history kept.
    assert_eq!(history_after.oldest, 1);
    assert_eq!(
        &history_after.events[..history.events.len()],
        &history.events[..]
    );
    let seqs: Vec<u64> = history_after.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=history_after.latest).collect::<Vec<_>>());

    // The queue keeps its order, with the requeued rollout at the tail.
    let order: Vec<String> = [
        dequeue(&mut c).await,
        dequeue(&mut c).await,
        dequeue(&mut c).await,
    ]
    .into_iter()
    .map(|r| r.unwrap().rollout_id)
    .collect();
    assert_eq!(order, [second.clone(), third.clone(), timed.clone()]);
    assert!(dequeue(&mut c).await.is_none());

    // Span sequence ids continue: none is handed out twice.
    assert_eq!(add_span(&mut c, &timed, &attempt_id).await, 4);

    // The latest resources are still the latest.
    let latest = c
        .get_latest_resources(pb::GetLatestResourcesRequest {})
        .await
        .unwrap()
        .into_inner()
        .resources
        .unwrap();
    assert_eq!(latest.resources_id, resources_id);
    let fourth = enqueue(&mut c, timeout_spec(3600.0)).await;
    assert_eq!(get(&mut c, &fourth).await.resources_id, Some(resources_id));

    let stats = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.name, "sqlite");
    assert_eq!(stats.total_rollouts, stats_before.total_rollouts + 1);
    assert_eq!(stats.total_attempts, stats_before.total_attempts + 3);
    assert_eq!(stats.total_spans, stats_before.total_spans + 1);
    assert_eq!(stats.total_resources, 1);
    assert_eq!(stats.queued_rollouts, 1);
}

#[tokio::test]
async fn a_second_store_on_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let _first = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let error = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .err()
        .expect("the file is in use");
    assert!(
        error.to_string().contains("in use by another process"),
        "{error}"
    );
}

/// A bound on a store call that must not wait for another transaction: a
/// failure, not a hang, when it does.
const UNBLOCKED: Duration = Duration::from_secs(20);

/// Commits a write set of `count` events and returns the latest event.
async fn commit_events(store: &SqliteStore, count: usize) -> u64 {
    let mut writes = WriteSet {
        events: (0..count)
            .map(|n| Event {
                seq: 0,
                time: Timestamp(1_000),
                change: Change::RolloutChanged {
                    rollout_id: format!("ro-{n}"),
                    status: RolloutStatus::Running,
                },
            })
            .collect(),
        ..WriteSet::default()
    };
    let tx = tokio::time::timeout(UNBLOCKED, store.begin())
        .await
        .expect("a write waits for no reader")
        .unwrap();
    tx.commit(&mut writes).await.unwrap();
    writes.events.last().unwrap().seq
}

/// Concurrent committers on a runtime with several worker threads (a
/// group's sync blocks the worker that commits it): each commit either
/// leads its group (no sync in flight, nobody queued), waits for the sync
/// in flight, or is committed by the flusher; none is left waiting, and
/// every acknowledged event is there after a restart, numbered without
/// gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_are_all_acknowledged_and_survive_a_restart() {
    commit_concurrently_and_reopen().await;
}

/// The same on a runtime with one worker thread, whose syncs move the
/// runtime to another thread (`block_in_place`) instead of blocking it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn concurrent_commits_on_one_worker_thread_are_all_acknowledged_and_survive_a_restart() {
    commit_concurrently_and_reopen().await;
}

async fn commit_concurrently_and_reopen() {
    const TASKS: usize = 16;
    const COMMITS: usize = 25;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = Arc::new(
        SqliteStore::open(&path, SqliteOptions::default())
            .await
            .unwrap(),
    );
    let committers = (0..TASKS).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut seqs = Vec::new();
            for _ in 0..COMMITS {
                seqs.push(commit_events(&store, 1).await);
            }
            seqs
        })
    });
    let all = tokio::time::timeout(UNBLOCKED, futures::future::join_all(committers))
        .await
        .expect("every commit is acknowledged");
    let mut seqs: Vec<u64> = all.into_iter().flat_map(Result::unwrap).collect();
    seqs.sort_unstable();
    let total = (TASKS * COMMITS) as u64;
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>(), "gapless, each once");
    drop(Arc::into_inner(store).expect("no other owner"));
    let reopened = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let mut tx = reopened.begin_read().await.unwrap();
    assert_eq!(tx.events_after(0, 1).await.unwrap().latest, total);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}

#[tokio::test]
async fn writes_commit_while_a_long_history_read_holds_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db"), SqliteOptions::default())
        .await
        .unwrap();
    let before = commit_events(&store, 5_000).await;
    // A replay's read, still open: its snapshot is the history so far.
    let mut replay = store.begin_read().await.unwrap();
    let page = replay.events_after(0, 1_000).await.unwrap();
    assert_eq!((page.events.len(), page.latest), (1_000, before));
    let mut latest = before;
    for _ in 0..50 {
        latest = commit_events(&store, 10).await;
    }
    assert_eq!(latest, before + 500);
    // The long read is still running, on its snapshot...
    let page = replay.events_after(1_000, 1_000).await.unwrap();
    assert_eq!(page.events.first().map(|e| e.seq), Some(1_001));
    assert_eq!(page.latest, before, "the snapshot holds");
    // ...while another reader sees every committed write.
    let mut fresh = store.begin_read().await.unwrap();
    assert_eq!(fresh.events_after(before, 1).await.unwrap().latest, latest);
    fresh.commit(&mut WriteSet::default()).await.unwrap();
    replay.commit(&mut WriteSet::default()).await.unwrap();
}

#[tokio::test]
async fn the_log_is_copied_into_the_database_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let size = || std::fs::metadata(&path).unwrap().len();
    // Three bursts, each after the previous one was copied: a request
    // made after a checkpoint started asks for the next one.
    for burst in 1..=3 {
        let before = size();
        // About 100 pages of log: far below the writer's own automatic
        // checkpoint, so only the checkpoint thread copies them.
        commit_events(&store, 5_000).await;
        let copied = async {
            while size() < before + 200_000 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(UNBLOCKED, copied)
            .await
            .unwrap_or_else(|_| panic!("burst {burst}: the database stayed at {} bytes", size()));
    }
    // What was copied is what was committed.
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.events_after(0, 1).await.unwrap().latest, 15_000);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}

#[tokio::test]
async fn statistics_and_history_answer_while_a_transaction_holds_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db"), SqliteOptions::default())
        .await
        .unwrap();
    let latest = commit_events(&store, 3).await;
    // A long transaction (a big batch) holds the writer.
    let mut writer = store.begin().await.unwrap();
    writer.raise_sequence_id("ro-0", 7).await.unwrap();
    let read = async {
        let mut tx = store.begin_read().await.unwrap();
        let counts = tx.counts().await.unwrap();
        let page = tx.events_after(0, 10).await.unwrap();
        tx.commit(&mut WriteSet::default()).await.unwrap();
        (counts, page)
    };
    let (_counts, page) = tokio::time::timeout(UNBLOCKED, read)
        .await
        .expect("a read waits for no writer");
    assert_eq!((page.events.len() as u64, page.latest), (latest, latest));
    writer.commit(&mut WriteSet::default()).await.unwrap();
}

/// Large writes (40 MB of 1.x events, more than the writer's own automatic
/// checkpoint lets the log hold) reach the database file while the store
/// serves, and every event reads back, also after a restart.
#[tokio::test]
async fn the_checkpointer_copies_the_log_into_the_database() {
    use lightning_store::core::agl1::Agl1Event;
    use lightning_store::core::storage::agl1::EventWrite;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let data = format!("{{\"text\": \"{}\"}}", "x".repeat(64 * 1024));
    let (commits, per_commit) = (64_i64, 10_i64);
    let written = (commits * per_commit) as u64 * data.len() as u64;
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    for commit in 0..commits {
        let mut writes = WriteSet::default();
        for n in 0..per_commit {
            let event = Agl1Event {
                event_type: "big".into(),
                rollout_id: "ro".into(),
                attempt_id: "0".into(),
                timestamp: Timestamp(commit * per_commit + n),
                data: data.clone(),
            };
            writes.agl1.events.push(EventWrite { event, key: None });
        }
        store
            .begin()
            .await
            .unwrap()
            .commit(&mut writes)
            .await
            .unwrap();
    }
    // The checkpointer runs on its own thread: wait (bounded) for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let database_size = || std::fs::metadata(&path).unwrap().len();
    while database_size() < written / 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        database_size() >= written / 2,
        "the database holds {} bytes of the {written} written",
        database_size()
    );
    let mut tx = store.begin_read().await.unwrap();
    let events = tx.agl1_events("ro", "0", None).await.unwrap();
    tx.commit(&mut WriteSet::default()).await.unwrap();
    assert_eq!(events.len() as i64, commits * per_commit);
    assert!(events.iter().all(|e| e.event.data == data));
    drop(store);
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let events = tx.agl1_events("ro", "0", None).await.unwrap();
    assert_eq!(events.len() as i64, commits * per_commit);
}

/// Runs `serve` on `database` and returns its exit status and stderr; a
/// server that starts is killed, which fails the caller's assertions.
fn serve(database: &Path) -> (std::process::ExitStatus, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lightning-store"))
        .args(["serve", "--listen", &addr.to_string(), "--database"])
        .arg(database)
        .env_remove("LIGHTNING_STORE_BACKEND")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stderr)
}

/// Asserts that `serve` refused `database` with one clear error line.
#[track_caller]
fn assert_refused(database: &Path, reason: &str) {
    let (status, stderr) = serve(database);
    assert!(!status.success(), "the server started: {stderr}");
    assert_eq!(status.code(), Some(1), "{stderr}");
    let error: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(error.len(), 1, "{stderr}");
    assert!(
        error[0].starts_with(&format!(
            "error: cannot open database {}",
            database.display()
        )),
        "{stderr}"
    );
    assert!(error[0].contains(reason), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_corrupt_file_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    assert_refused(&path, "not a SQLite database");
}

#[tokio::test]
async fn a_database_of_another_application_is_refused_untouched() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let mut conn = raw_connection(&path).await;
    sqlx::query("CREATE TABLE notes (body TEXT)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let before = std::fs::read(&path).unwrap();
    assert_refused(&path, "another application");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file was changed"
    );
}

#[tokio::test]
async fn a_database_of_a_newer_version_is_refused() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(
        SqliteStore::open(&path, SqliteOptions::default())
            .await
            .unwrap(),
    );
    // The store closes its connection on a background thread.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut conn = raw_connection(&path).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99, 'future', TRUE, X'00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    // Both versions named: the database's migration and what this binary knows.
    let known = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/backends/migrations/sqlite"
    ))
    .unwrap()
    .count();
    assert_refused(
        &path,
        &format!(
            "newer lightning-store: its schema is at migration 99, and this lightning-store {} \
             knows migrations up to {known}",
            env!("CARGO_PKG_VERSION")
        ),
    );
}

#[test]
fn a_database_under_a_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    assert_refused(&file.join("store.db"), "not a directory");
}

#[test]
fn a_database_in_a_missing_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(&dir.path().join("missing").join("store.db"), "no such file");
}

#[test]
fn a_database_in_a_read_only_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let read_only = dir.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root writes anywhere: then there is nothing to refuse.
    let privileged = std::fs::write(read_only.join("probe"), "").is_ok();
    if !privileged {
        assert_refused(&read_only.join("store.db"), "permission denied");
        // An existing database whose directory cannot take its journal.
        std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o755)).unwrap();
        let existing: PathBuf = read_only.join("existing.db");
        std::fs::write(&existing, "").unwrap();
        std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
        assert_refused(&existing, "directory must be writable");
    }
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn an_older_database_gets_exact_status_counts_on_upgrade() {
    use sqlx::Connection as _;
    // A database at the first schema version, with rows written before the
    // per-status counters and queue entry times existed.
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("migrations");
    std::fs::create_dir(&first).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/backends/migrations/sqlite/0001_init.sql"),
        first.join("0001_init.sql"),
    )
    .unwrap();
    let path = dir.path().join("store.db");
    let mut conn = raw_connection(&path).await;
    sqlx::migrate::Migrator::new(first.as_path())
        .await
        .unwrap()
        .run(&mut conn)
        .await
        .unwrap();
    for (rollout_id, status, start) in [
        ("ro-000000000001", "succeeded", 1_000),
        ("ro-000000000002", "queuing", 2_000),
        ("ro-000000000003", "queuing", 3_000),
    ] {
        sqlx::query(
            "INSERT INTO rollouts (rollout_id, input, start_time, status, config, metadata) \
             VALUES ($1, 'null', $2, $3, '{}', '{}')",
        )
        .bind(rollout_id)
        .bind(start as i64)
        .bind(status)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO attempts (rollout_id, attempt_id, sequence_id, start_time, status, metadata) \
         VALUES ('ro-000000000001', 'at-00000001', 1, 1000, 'succeeded', 'null')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("INSERT INTO queue (rollout_id) VALUES ('ro-000000000002'), ('ro-000000000003')")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    let server = server_on(&path, Duration::from_secs(3600)).await;
    let mut c = server.client().await;
    let stats = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.rollouts_by_status["queuing"], 2);
    assert_eq!(stats.rollouts_by_status["succeeded"], 1);
    assert_eq!(stats.rollouts_by_status["running"], 0);
    assert_eq!(stats.attempts_by_status["succeeded"], 1);
    assert_eq!(stats.queued_rollouts, 2);
    // Queued before entry times were recorded: the head counts from its creation.
    let head = stats.oldest_queued_time.unwrap();
    assert_eq!((head.seconds, head.nanos), (0, 2_000));
    // New writes keep the counts moving.
    enqueue(&mut c, pb::RolloutSpec::default()).await;
    let after = c
        .get_statistics(pb::GetStatisticsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.rollouts_by_status["queuing"], 3);
    server.stop().await;
}
