//! The immediate writes of the storage port
//! ([`ImmediateWrites`](lightning_store::core::storage::ImmediateWrites)),
//! each against its contract: done at once (seen by the transaction's next
//! reads), gone when the transaction is rolled back or dropped, kept by the
//! commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lightning_store::core::model::{AttemptStatus, RolloutStatus, Timestamp};
use lightning_store::core::retention::{Eviction, RetentionPolicy, span_size};
use lightning_store::core::storage::{StoreTx, WriteSet};

use super::BACKEND;
use super::port::{self, Port, attempt, rollout, span, span_ids};
use crate::common::Backend;

/// Commits rollouts `ids`, queued in that order (entering at 1, 2, …).
async fn queued(port: &Port, ids: &[&str]) {
    let mut writes = WriteSet::default();
    for (at, id) in ids.iter().enumerate() {
        writes.put_rollout(&rollout(id, RolloutStatus::Queuing, 1_000), None);
        writes.enqueue(id, Timestamp(at as i64 + 1));
    }
    port.commit(&mut writes).await;
}

/// Returns the ids of claimed rollouts.
async fn claim(tx: &mut (dyn StoreTx + '_), limit: usize) -> Vec<String> {
    let claimed = tx.claim_queued(limit).await.unwrap();
    claimed.into_iter().map(|v| v.rollout.rollout_id).collect()
}

/// Returns the queued count and the queue's head.
async fn queue(tx: &mut (dyn StoreTx + '_)) -> (u64, Option<String>, Option<Timestamp>) {
    let counts = tx.counts().await.unwrap();
    (
        counts.queued,
        counts.oldest_queued_rollout_id,
        counts.oldest_queued_time,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_entries_at_once_and_a_rollback_puts_them_back_in_order() {
    let Some(port) = port::open().await else {
        return;
    };
    queued(&port, &["ro-a", "ro-b", "ro-c"]).await;

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(claim(tx.as_mut(), 2).await, ["ro-a", "ro-b"]);
    // At once: this transaction no longer sees the entries.
    assert_eq!(
        queue(tx.as_mut()).await,
        (1, Some("ro-c".to_owned()), Some(Timestamp(3)))
    );
    assert_eq!(tx.queue_place("ro-a").await.unwrap(), None);
    tx.rollback().await;

    // Rolled back: the entries are back at the head, in order, with their times.
    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(
        queue(tx.as_mut()).await,
        (3, Some("ro-a".to_owned()), Some(Timestamp(1)))
    );
    assert_eq!(claim(tx.as_mut(), 1).await, ["ro-a"]);
    drop(tx);

    // Dropped: the same.
    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(claim(tx.as_mut(), 5).await, ["ro-a", "ro-b", "ro-c"]);
    tx.commit(&mut WriteSet::default()).await.unwrap();

    // Committed: the claims stay.
    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(queue(tx.as_mut()).await, (0, None, None));
    assert!(claim(tx.as_mut(), 5).await.is_empty());
    tx.rollback().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_ids_advance_at_once_and_a_rollback_restores_the_counter() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 3).await.unwrap(), 1);
    // At once: the next allocation continues after the first.
    assert_eq!(tx.allocate_sequence_ids("ro-a", 2).await.unwrap(), 4);
    assert_eq!(tx.allocate_sequence_ids("ro-b", 1).await.unwrap(), 1);
    tx.rollback().await;

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 1);
    drop(tx);

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 2).await.unwrap(), 1);
    tx.commit(&mut WriteSet::default()).await.unwrap();

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 3);
    assert_eq!(tx.allocate_sequence_ids("ro-b", 1).await.unwrap(), 1);
    tx.rollback().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_a_sequence_id_moves_later_allocations_and_a_rollback_restores_it() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut tx = port.store.begin().await.unwrap();
    tx.raise_sequence_id("ro-a", 10).await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 11);
    // A raise never lowers the counter.
    tx.raise_sequence_id("ro-a", 5).await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 12);
    drop(tx);

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 1);
    tx.raise_sequence_id("ro-a", 7).await.unwrap();
    tx.commit(&mut WriteSet::default()).await.unwrap();

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 8);
    tx.rollback().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_stored_at_once_without_duplicates_and_a_rollback_removes_them() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = WriteSet::default();
    writes.put_rollout(&rollout("ro-a", RolloutStatus::Running, 1_000), None);
    writes.put_attempt(&attempt("ro-a", AttemptStatus::Running));
    port.commit(&mut writes).await;
    let spans = [
        span("ro-a", "s1", 1),
        span("ro-a", "s2", 2),
        span("ro-a", "s1", 3),
    ];
    let bytes = span_size(&spans[0]) + span_size(&spans[1]);

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.insert_spans(&spans).await.unwrap(), [true, true, false]);
    // At once: the transaction's queries and counts see them.
    assert_eq!(span_ids(tx.as_mut(), "ro-a").await, ["s1", "s2"]);
    let counts = tx.counts().await.unwrap();
    assert_eq!((counts.spans, counts.span_bytes), (2, bytes));
    assert_eq!(tx.insert_spans(&spans[..1]).await.unwrap(), [false]);
    tx.rollback().await;

    assert!(port.span_ids("ro-a").await.is_empty());
    let mut tx = port.store.begin().await.unwrap();
    let counts = tx.counts().await.unwrap();
    assert_eq!((counts.spans, counts.span_bytes), (0, 0));
    // Not duplicates any more.
    assert_eq!(tx.insert_spans(&spans[1..2]).await.unwrap(), [true]);
    drop(tx);
    assert!(port.span_ids("ro-a").await.is_empty());

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.insert_spans(&spans).await.unwrap(), [true, true, false]);
    tx.commit(&mut WriteSet::default()).await.unwrap();
    assert_eq!(port.span_ids("ro-a").await, ["s1", "s2"]);

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.insert_spans(&spans[1..]).await.unwrap(), [false, false]);
    let counts = tx.counts().await.unwrap();
    assert_eq!((counts.spans, counts.span_bytes), (2, bytes));
    tx.rollback().await;
}

/// Commits finished rollouts `ids` (finishing in that order), each with two
/// spans; returns the bytes of one rollout's spans.
async fn finished_with_spans(port: &Port, ids: &[&str]) -> u64 {
    let mut writes = WriteSet::default();
    for (at, id) in ids.iter().enumerate() {
        let created = 1_000 + at as i64;
        writes.put_rollout(&rollout(id, RolloutStatus::Succeeded, created), None);
        writes.put_attempt(&attempt(id, AttemptStatus::Succeeded));
    }
    let mut tx = port.store.begin().await.unwrap();
    let mut bytes = 0;
    for id in ids {
        let spans = [span(id, "s1", 1), span(id, "s2", 2)];
        bytes = spans.iter().map(|s| span_size(s)).sum();
        assert_eq!(tx.insert_spans(&spans).await.unwrap(), [true, true]);
    }
    tx.commit(&mut writes).await.unwrap();
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_deletes_spans_when_committed_and_nothing_when_rolled_back() {
    let Some(port) = port::open().await else {
        return;
    };
    let bytes = finished_with_spans(&port, &["ro-a", "ro-b"]).await;
    // Everything finished is over the size limit: the first finished goes first.
    let policy = RetentionPolicy {
        max_age: None,
        max_bytes: Some(0),
    };
    let now = Timestamp(10_000);
    let one = Eviction {
        rollouts: 1,
        spans: 2,
        bytes,
        done: false,
    };

    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.evict_spans(&policy, now, 1).await.unwrap(), one);
    tx.rollback().await;
    let mut tx = port.store.begin().await.unwrap();
    assert_eq!(tx.evict_spans(&policy, now, 1).await.unwrap(), one);
    drop(tx);

    // Rolled back and dropped: nothing was deleted or marked.
    assert_eq!(port.span_ids("ro-a").await, ["s1", "s2"]);
    let mut tx = port.store.begin().await.unwrap();
    assert!(!tx.spans_evicted("ro-a").await.unwrap());
    let counts = tx.counts().await.unwrap();
    assert_eq!(
        (counts.spans, counts.span_bytes, counts.evicted_spans),
        (4, 2 * bytes, 0)
    );
    assert_eq!(tx.evict_spans(&policy, now, 1).await.unwrap(), one);
    tx.commit(&mut WriteSet::default()).await.unwrap();

    // Committed: the first rollout's spans are gone, the second's stay.
    assert!(port.span_ids("ro-a").await.is_empty());
    assert_eq!(port.span_ids("ro-b").await, ["s1", "s2"]);
    let mut tx = port.store.begin().await.unwrap();
    assert!(tx.spans_evicted("ro-a").await.unwrap());
    assert!(!tx.spans_evicted("ro-b").await.unwrap());
    let counts = tx.counts().await.unwrap();
    assert_eq!(
        (
            counts.spans,
            counts.span_bytes,
            counts.evicted_rollouts,
            counts.evicted_spans,
            counts.evicted_span_bytes
        ),
        (2, bytes, 1, 2, bytes)
    );
    let rest = Eviction { done: true, ..one };
    assert_eq!(tx.evict_spans(&policy, now, 5).await.unwrap(), rest);
    tx.commit(&mut WriteSet::default()).await.unwrap();
    assert!(port.span_ids("ro-b").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_epochs_grow_and_a_rollback_gives_them_back_or_skips_them() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut tx = port.store.begin().await.unwrap();
    let first = tx.next_session_epoch().await.unwrap();
    let second = tx.next_session_epoch().await.unwrap();
    assert!(first > 0 && second > first, "{first} {second}");
    tx.rollback().await;

    let mut tx = port.store.begin().await.unwrap();
    let again = tx.next_session_epoch().await.unwrap();
    match BACKEND {
        // The counter (SQLite's row, the memory backend's undo log) went back.
        Backend::Memory | Backend::Sqlite => assert_eq!(again, first),
        // A sequence never goes back: the rolled-back epochs are skipped.
        Backend::Postgres => assert!(again > second, "{again} {second}"),
    }
    tx.commit(&mut WriteSet::default()).await.unwrap();

    let mut tx = port.store.begin().await.unwrap();
    let later = tx.next_session_epoch().await.unwrap();
    assert!(later > again, "{later} {again}");
    drop(tx);
}

/// Locks `names` in a new transaction, on a task of its own; returns whether
/// `held` was released when the locks were taken.
fn lock_later(
    port: &Port,
    names: &'static [&'static str],
    held: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<bool> {
    let store = port.store.clone();
    tokio::spawn(async move {
        let mut tx = store.begin().await.unwrap();
        tx.lock_names(names).await.unwrap();
        let released = !held.load(Ordering::SeqCst);
        tx.rollback().await;
        released
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_names_serialise_transactions_until_the_holder_ends() {
    let Some(port) = port::open().await else {
        return;
    };
    for commit in [true, false] {
        let held = Arc::new(AtomicBool::new(true));
        let mut tx = port.store.begin().await.unwrap();
        tx.lock_names(&["name-a", "name-b"]).await.unwrap();
        // Locking nothing, or a name twice, is allowed.
        tx.lock_names(&[]).await.unwrap();
        tx.lock_names(&["name-b"]).await.unwrap();
        let waiter = lock_later(&port, &["name-b", "name-c"], held.clone());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "the second transaction waits");
        held.store(false, Ordering::SeqCst);
        if commit {
            tx.commit(&mut WriteSet::default()).await.unwrap();
        } else {
            tx.rollback().await;
        }
        let released = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the locks are released when the holder ends")
            .unwrap();
        assert!(released, "locked only once the holder ended");
    }
}
