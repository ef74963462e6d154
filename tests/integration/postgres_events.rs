//! The PostgreSQL event history (migration 0010): a transaction of more
//! than 64 events stores them as one block, written before the event
//! counter is taken and numbered by one row under it; every server reads
//! blocks and single events as one gapless history, from any number, and
//! the trim removes whole blocks with their rows.

use crate::common;

use common::{Backend, TestOptions, TestServer, postgres_database};
use lightning_store::proto as pb;
use lightning_store::proto::lightning_store_service_client::LightningStoreServiceClient;
use sqlx::Connection as _;
use tonic::transport::Channel;

type Client = LightningStoreServiceClient<Channel>;

async fn server_on(url: &str, event_retention: usize) -> TestServer {
    TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url.to_owned()),
            event_retention,
            ..TestOptions::default()
        },
    )
    .await
}

/// Enqueues `count` rollouts in one call; returns their ids in order.
async fn enqueue_batch(c: &mut Client, count: usize) -> Vec<String> {
    c.enqueue_rollouts(pb::EnqueueRolloutsRequest {
        rollouts: vec![pb::RolloutSpec::default(); count],
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
    .rollouts
    .into_iter()
    .map(|r| r.rollout_id)
    .collect()
}

/// The `(seq, n, block is set)` of every row of `events`, in order.
async fn event_rows(url: &str) -> Vec<(i64, i64, bool)> {
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_as("SELECT seq, n, block IS NOT NULL FROM events ORDER BY seq")
        .fetch_all(&mut db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_transactions_events_are_one_block_read_in_order_from_any_number() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let a = server_on(&url, 100_000).await;
    let b = server_on(&url, 100_000).await;
    let mut c = a.client().await;
    let mut enqueued = enqueue_batch(&mut c, 1).await;
    enqueued.extend(enqueue_batch(&mut c, 300).await);
    enqueued.extend(enqueue_batch(&mut c, 64).await);
    enqueued.extend(enqueue_batch(&mut c, 1).await);
    assert_eq!(enqueued.len(), 366);

    // One row per small transaction's event, one for the block of 300.
    let rows = event_rows(&url).await;
    let blocks: Vec<_> = rows.iter().filter(|row| row.2).collect();
    assert_eq!(blocks, [&(301, 300, true)], "the 300 events are one block");
    assert_eq!(rows.len(), 1 + 1 + 64 + 1, "every other event is a row");

    // The other server reads one gapless history, each event naming the
    // rollout it was made for, in the batch's order.
    let all = b.engine.events_after(0, 1000).await.unwrap();
    assert_eq!((all.oldest, all.latest), (1, 366));
    let seqs: Vec<u64> = all.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=366).collect::<Vec<_>>(), "gapless, in order");
    let ids: Vec<&str> = all
        .events
        .iter()
        .map(|e| e.change.rollout_id().unwrap())
        .collect();
    assert_eq!(ids, enqueued);

    // Pages starting before, inside, at the end of and after the block,
    // shorter and longer than it, hold the same events.
    for after in [0, 1, 2, 150, 299, 300, 301, 330, 365, 366] {
        for limit in [1, 7, 64, 299, 1000] {
            let page = b.engine.events_after(after, limit).await.unwrap();
            let from = usize::try_from(after).unwrap();
            let expected = &all.events[from..(from + limit).min(all.events.len())];
            assert_eq!(page.events, expected, "after {after}, limit {limit}");
        }
    }
    a.stop().await;
    b.stop().await;
}

/// The rows stored in `event_rows`.
async fn stored_rows(url: &str) -> i64 {
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar("SELECT count(*) FROM event_rows")
        .fetch_one(&mut db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trim_removes_whole_blocks_and_a_block_keeps_at_most_the_retention() {
    skip_without!(crate::common::Backend::Postgres);
    let url = postgres_database().await;
    let server = server_on(&url, 400).await;
    let mut c = server.client().await;
    for _ in 0..3 {
        enqueue_batch(&mut c, 300).await;
    }
    // The third batch trims to its own numbers less the retention (500),
    // before it takes the counter: the first block is gone, rows and all;
    // the second, whose last event is newer, is kept whole.
    let page = server.engine.events_after(300, 1000).await.unwrap();
    assert_eq!((page.oldest, page.latest), (301, 900));
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (301..=900).collect::<Vec<_>>());
    assert_eq!(event_rows(&url).await, [(600, 300, true), (900, 300, true)]);
    assert_eq!(
        stored_rows(&url).await,
        600,
        "the trimmed block's rows are deleted"
    );

    // A batch of more events than the retention keeps its last 400.
    let last = enqueue_batch(&mut c, 500).await;
    let page = server.engine.events_after(1000, 1000).await.unwrap();
    assert_eq!((page.oldest, page.latest), (1001, 1400));
    let ids: Vec<&str> = page
        .events
        .iter()
        .map(|e| e.change.rollout_id().unwrap())
        .collect();
    assert_eq!(ids, last[100..], "the batch's last 400 events, in order");
    assert_eq!(event_rows(&url).await, [(1400, 400, true)]);
    assert_eq!(stored_rows(&url).await, 400);
    server.stop().await;
}
