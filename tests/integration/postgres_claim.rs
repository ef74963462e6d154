//! The claim of the queue's head on a shared database when another
//! transaction holds the head's entry and a new rollout is enqueued after the
//! claim's statement started: the dequeue answers with the new rollout when
//! the holder took the entry, with the freed one when it rolled back, and
//! never with nothing (the queue was never empty). And the lock order of a
//! claim and an update that takes the claimed rollout out of the queue.

use crate::common;

use std::time::Duration;

use crate::conformance::support::mask;
use common::{Backend, TestOptions, TestServer, enqueue, postgres_database, until_lock_waiters};
use lightning_store::proto as pb;
use sqlx::Connection as _;

/// What the transaction holding the head's entry does in the end.
#[derive(Clone, Copy, PartialEq)]
enum Holder {
    /// Commits: the entry was its claim.
    Commits,
    /// Rolls back: the entry is queued again.
    RollsBack,
}

/// Starts a server on a database of its own and enqueues one rollout;
/// returns the database's URL, the server, a client and the rollout's id.
async fn server_with_one_queued_rollout() -> (String, TestServer, common::Client, String) {
    let url = postgres_database().await;
    let server = TestServer::start_opts(
        Backend::Postgres,
        TestOptions {
            postgres_url: Some(url.clone()),
            ..TestOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let rollout_id = enqueue(&mut c, "{}").await.rollout_id;
    (url, server, c, rollout_id)
}

/// Holds the only queued entry in an open transaction (as a claim of
/// another server does), dequeues, enqueues a second rollout while the
/// dequeue is under way, ends the holder as `holder` says, and returns the
/// first and second rollout's ids and the dequeue's answer.
async fn dequeue_while_the_head_is_held(holder: Holder) -> (String, String, Option<String>) {
    let (url, server, mut c, first) = server_with_one_queued_rollout().await;

    let mut holding = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut held = holding.begin().await.unwrap();
    let taken = sqlx::query("DELETE FROM queue WHERE rollout_id = $1")
        .bind(&first)
        .execute(&mut *held)
        .await
        .unwrap();
    assert_eq!(taken.rows_affected(), 1, "the holder holds the entry");

    let dequeue = {
        let mut c = c.clone();
        tokio::spawn(async move {
            c.dequeue_rollout(pb::DequeueRolloutRequest::default())
                .await
                .unwrap()
                .into_inner()
                .rollout
                .map(|rollout| rollout.rollout_id)
        })
    };
    // Until the dequeue waits for the holder (or answers without waiting,
    // which the caller's assertions refuse).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    until_lock_waiters(&mut admin, 1, || dequeue.is_finished()).await;
    // Committed after the claim's statement took its snapshot.
    let second = enqueue(&mut c, "{}").await.rollout_id;
    match holder {
        Holder::Commits => held.commit().await.unwrap(),
        Holder::RollsBack => held.rollback().await.unwrap(),
    }
    let answer = tokio::time::timeout(Duration::from_secs(20), dequeue)
        .await
        .expect("the dequeue answers once the holder is done")
        .unwrap();
    server.stop().await;
    (first, second, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_behind_a_held_entry_takes_the_rollout_enqueued_meanwhile() {
    skip_without!(crate::common::Backend::Postgres);
    let (_, second, answer) = dequeue_while_the_head_is_held(Holder::Commits).await;
    assert_eq!(
        answer.as_deref(),
        Some(second.as_str()),
        "the holder took the head: the dequeue answers with the rollout enqueued meanwhile"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_behind_a_held_entry_takes_it_when_its_holder_rolls_back() {
    skip_without!(crate::common::Backend::Postgres);
    let (first, _, answer) = dequeue_while_the_head_is_held(Holder::RollsBack).await;
    assert_eq!(
        answer.as_deref(),
        Some(first.as_str()),
        "the holder rolled back: the dequeue answers with the head"
    );
}

/// A claim holds the entry of the only queued rollout (its statement's
/// first step locks the queue's head), an update that takes the rollout
/// out of the queue (a cancel, through the server) runs meanwhile, then the
/// claim locks the rollout (its statement's last step), takes the entry and
/// commits: the claim's lock order on a raw connection, the server's own
/// update. The update used to lock the rollout when it read it and wait for
/// the entry when it committed, while the claim waited for the rollout: a
/// deadlock that PostgreSQL broke after `deadlock_timeout` by failing one
/// of them ("deadlock detected", UNAVAILABLE). The update now locks the
/// entry before the rollout, the claim's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_dequeues_a_rollout_waits_for_its_claim_before_locking_it() {
    skip_without!(crate::common::Backend::Postgres);
    let (url, server, c, queued) = server_with_one_queued_rollout().await;

    let mut claiming = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut claim = claiming.begin().await.unwrap();
    let entry = sqlx::query("SELECT pos FROM queue WHERE rollout_id = $1 FOR UPDATE")
        .bind(&queued)
        .fetch_all(&mut *claim)
        .await
        .unwrap();
    assert_eq!(entry.len(), 1, "the claim holds the entry");

    let cancel = {
        let mut c = c.clone();
        let rollout_id = queued.clone();
        tokio::spawn(async move {
            c.update_rollout(pb::UpdateRolloutRequest {
                rollout_id,
                update_mask: mask(&["status"]),
                status: pb::RolloutStatus::Cancelled as i32,
                ..Default::default()
            })
            .await
        })
    };
    // Until the update waits for the claim (or answers without waiting,
    // which the assertions below refuse).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    until_lock_waiters(&mut admin, 1, || cancel.is_finished()).await;
    let rollout = tokio::time::timeout(
        Duration::from_secs(20),
        sqlx::query("SELECT rollout_id FROM rollouts WHERE rollout_id = $1 FOR UPDATE")
            .bind(&queued)
            .fetch_all(&mut *claim),
    )
    .await
    .expect("the claim locks the rollout without waiting for the update")
    .expect("the claim is not failed as a deadlock's victim");
    assert_eq!(rollout.len(), 1);
    let taken = sqlx::query("DELETE FROM queue WHERE rollout_id = $1")
        .bind(&queued)
        .execute(&mut *claim)
        .await
        .unwrap();
    assert_eq!(taken.rows_affected(), 1, "the claim takes the entry");
    claim.commit().await.unwrap();

    let cancelled = tokio::time::timeout(Duration::from_secs(20), cancel)
        .await
        .expect("the update answers once the claim is done")
        .unwrap()
        .expect("the update is not failed as a deadlock's victim")
        .into_inner()
        .rollout
        .unwrap();
    assert_eq!(cancelled.status, pb::RolloutStatus::Cancelled as i32);
    server.stop().await;
}
