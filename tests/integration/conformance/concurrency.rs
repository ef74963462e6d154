//! No lost or double dequeue under heavy concurrency.

use std::collections::HashSet;
use std::time::Duration;

use lightning_store::proto as pb;

use super::BACKEND;
use super::TestServer;
use crate::conformance::support::*;

/// Rollouts of the claim test: enough for every claimer to claim about 30
/// times while all 64 contend for the head (the contention is the
/// claimers', not the queue's length). The 10,000 rollouts over two
/// servers on one PostgreSQL database run in `tests/integration/postgres.rs`;
/// here, on every backend, 10,000 took most of the 120 s bound on a loaded
/// machine (PostgreSQL, debug build).
const ROLLOUTS: usize = 2_000;
const CLAIMERS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_dequeuers_claim_every_rollout_exactly_once() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let mut c = server.client().await;
    let mut enqueued = HashSet::new();
    for _ in 0..ROLLOUTS / 1000 {
        let batch = c
            .enqueue_rollouts(pb::EnqueueRolloutsRequest {
                rollouts: (0..1000).map(|_| spec("{}")).collect(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .rollouts;
        enqueued.extend(batch.into_iter().map(|r| r.rollout_id));
    }
    assert_eq!(enqueued.len(), ROLLOUTS);

    let channel = server.channel().await;
    let claimers = (0..CLAIMERS).map(|i| {
        let mut client = Client::new(channel.clone());
        tokio::spawn(async move {
            let worker = format!("Worker-{i}");
            let mut claimed = Vec::new();
            // Bounded: the queue holds ROLLOUTS entries, so no claimer loops more than that.
            for _ in 0..=ROLLOUTS {
                match dequeue(&mut client, Some(&worker)).await {
                    Some(rollout) => claimed.push(rollout.rollout_id),
                    None => break,
                }
            }
            claimed
        })
    });
    let results = tokio::time::timeout(
        Duration::from_secs(120),
        futures::future::join_all(claimers),
    )
    .await
    .expect("claimers finish in time");
    let mut seen = HashSet::new();
    let mut total = 0;
    for claimed in results {
        for id in claimed.unwrap() {
            total += 1;
            assert!(seen.insert(id), "a rollout was claimed twice");
        }
    }
    assert_eq!(total, ROLLOUTS);
    assert_eq!(seen, enqueued, "every rollout was claimed");
    let stats = stats(&mut c).await;
    assert_eq!(stats.total_attempts, ROLLOUTS as i64);
    assert_eq!(stats.queued_rollouts, 0);
}

const PAIRING_CLIENTS: usize = 16;
const PAIRS_PER_CLIENT: usize = 25;

/// Each client enqueues one rollout and then dequeues one, so every
/// dequeue finds at least its own client's enqueue in the queue in any
/// order of the calls: none may come back empty (on a shared database a
/// claim's snapshot can predate the enqueues that others committed while it
/// passed over the entries they were claiming).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dequeue_after_an_enqueue_never_finds_the_queue_empty() {
    skip_without!(super::BACKEND);
    let server = TestServer::start(BACKEND).await;
    let channel = server.channel().await;
    let clients = (0..PAIRING_CLIENTS).map(|i| {
        let mut client = Client::new(channel.clone());
        tokio::spawn(async move {
            let worker = format!("Worker-{i}");
            let mut claimed = Vec::new();
            for round in 0..PAIRS_PER_CLIENT {
                enqueue(&mut client, "{}").await;
                let rollout = dequeue(&mut client, Some(&worker)).await;
                let rollout = rollout.unwrap_or_else(|| {
                    panic!("{worker}'s dequeue {round} found the queue empty after its enqueue")
                });
                claimed.push(rollout.rollout_id);
            }
            claimed
        })
    });
    let results =
        tokio::time::timeout(Duration::from_secs(120), futures::future::join_all(clients))
            .await
            .expect("clients finish in time");
    let mut seen = HashSet::new();
    for claimed in results {
        for id in claimed.unwrap() {
            assert!(seen.insert(id), "a rollout was claimed twice");
        }
    }
    assert_eq!(seen.len(), PAIRING_CLIENTS * PAIRS_PER_CLIENT);
}
