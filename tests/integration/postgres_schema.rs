//! The PostgreSQL schema after every migration: which text columns sort by
//! bytes, which indexes the span table keeps (migration 0009), and how
//! span bodies are compressed (migration 0011).

use crate::common;

use common::{Backend, TestOptions};
use sqlx::Connection as _;

/// Text columns that hold user text, only stored or matched: they keep the
/// database's collation. Every other text column is a key and sorts by
/// bytes (`COLLATE "C"`, see crates/backends/migrations/postgres/0009_byte_order_keys.sql);
/// a new table's key columns must too.
const USER_TEXT: &[&str] = &[
    "agl1_events.data",
    "agl1_gateway.reason",
    "agl1_rollouts.config",
    "agl1_rollouts.error_message",
    "agl1_rollouts.k8s_job_name",
    "attempts.metadata",
    "event_rows.change",
    "events.change",
    "request_ids.rollout_ids",
    "resources.resources",
    "rollouts.config",
    "rollouts.input",
    "rollouts.metadata",
    "spans.body",
    "spans.name",
    "worker_sessions.attempts",
    "workers.heartbeat_stats",
];

/// Opens a store on a fresh database (migrating it) and returns a
/// connection to that database.
async fn migrated() -> sqlx::PgConnection {
    let url = common::postgres_database().await;
    let options = TestOptions {
        postgres_url: Some(url.clone()),
        ..TestOptions::default()
    };
    let (store, _) = Backend::Postgres.open(&options).await;
    store.close().await;
    sqlx::PgConnection::connect(&url).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_columns_sort_by_bytes_and_user_text_by_the_database() {
    skip_without!(crate::common::Backend::Postgres);
    let mut db = migrated().await;
    let linguistic: Vec<String> = sqlx::query_scalar(
        "SELECT table_name || '.' || column_name FROM information_schema.columns \
         WHERE table_schema = 'public' AND data_type = 'text' \
         AND table_name <> '_sqlx_migrations' AND collation_name IS DISTINCT FROM 'C' \
         ORDER BY 1",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    assert_eq!(linguistic, USER_TEXT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_keep_two_indexes_the_dedupe_key_and_the_sequence_order() {
    skip_without!(crate::common::Backend::Postgres);
    let mut db = migrated().await;
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'spans' ORDER BY 1",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    let expected = [
        (
            "spans_by_sequence",
            "CREATE INDEX spans_by_sequence ON public.spans \
             USING btree (rollout_id, sequence_id, pos)",
        ),
        (
            "spans_pkey",
            "CREATE UNIQUE INDEX spans_pkey ON public.spans \
             USING btree (rollout_id, attempt_id, span_id)",
        ),
    ]
    .map(|(name, def)| (name.to_owned(), def.to_owned()));
    assert_eq!(indexes, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_span_bodies_are_compressed_with_lz4() {
    skip_without!(crate::common::Backend::Postgres);
    let mut db = migrated().await;
    sqlx::query(
        "INSERT INTO spans (rollout_id, attempt_id, span_id, sequence_id, trace_id, name, \
         size, body) VALUES ('ro-1', 'at-1', 'sp-1', 1, 'tr-1', 'llm', 10000, \
         repeat('{\"prompt\": \"the same words again\"}', 300))",
    )
    .execute(&mut db)
    .await
    .unwrap();
    let method: Option<String> =
        sqlx::query_scalar("SELECT pg_column_compression(body) FROM spans WHERE span_id = 'sp-1'")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(method.as_deref(), Some("lz4"), "migration 0011");
}
