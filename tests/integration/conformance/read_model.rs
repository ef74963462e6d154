//! The read model ([`ReadModel`](lightning_store::core::storage::ReadModel)),
//! at the storage port: counts, a rollout's place in the queue, the latest
//! ended rollouts and the searches by id (the console's pages read them
//! through the engine in `overview`).

use lightning_store::core::model::{AttemptStatus, RolloutStatus, Timestamp};
use lightning_store::core::storage::WriteSet;

use super::port::{self, attempt, rollout, span};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_queue_places_and_ended_rollouts_are_read_as_committed() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = WriteSet::default();
    for (at, id) in ["ro-a", "ro-b", "ro-c"].into_iter().enumerate() {
        writes.put_rollout(&rollout(id, RolloutStatus::Queuing, 1_000), None);
        writes.enqueue(id, Timestamp(at as i64 + 1));
    }
    for (id, created) in [("ro-x", 2_000), ("ro-y", 3_000), ("ro-z", 3_000)] {
        writes.put_rollout(&rollout(id, RolloutStatus::Succeeded, created), None);
        writes.put_attempt(&attempt(id, AttemptStatus::Succeeded));
    }
    port.commit(&mut writes).await;

    let mut tx = port.store.begin_read().await.unwrap();
    let counts = tx.counts().await.unwrap();
    assert_eq!((counts.rollouts, counts.attempts, counts.queued), (6, 3, 3));
    assert_eq!(counts.rollouts_by_status[&RolloutStatus::Queuing], 3);
    assert_eq!(counts.rollouts_by_status[&RolloutStatus::Succeeded], 3);
    assert_eq!(counts.oldest_queued_rollout_id.as_deref(), Some("ro-a"));
    assert_eq!(
        tx.queue_place("ro-a").await.unwrap(),
        Some((0, Timestamp(1)))
    );
    assert_eq!(
        tx.queue_place("ro-c").await.unwrap(),
        Some((2, Timestamp(3)))
    );
    assert_eq!(tx.queue_place("ro-x").await.unwrap(), None);
    // The latest end first, ties by rollout id, greatest first.
    let ended = tx.latest_ended(RolloutStatus::Succeeded, 2).await.unwrap();
    let ids: Vec<&str> = ended
        .iter()
        .map(|v| v.rollout.rollout_id.as_str())
        .collect();
    assert_eq!(ids, ["ro-z", "ro-y"]);
    let found = tx.attempts_with_id("at-1", 2).await.unwrap();
    let ids: Vec<&str> = found.iter().map(|a| a.rollout_id.as_str()).collect();
    assert_eq!(ids, ["ro-x", "ro-y"]);
    tx.commit(&mut WriteSet::default()).await.unwrap();

    let mut tx = port.store.begin().await.unwrap();
    let spans = [span("ro-y", "s1", 1), span("ro-x", "s2", 1)];
    tx.insert_spans(&spans).await.unwrap();
    tx.commit(&mut WriteSet::default()).await.unwrap();
    let mut tx = port.store.begin_read().await.unwrap();
    let pairs = tx.attempts_with_trace("trace", 10).await.unwrap();
    let expected = [("ro-x", "at-1"), ("ro-y", "at-1")].map(|(r, a)| (r.to_owned(), a.to_owned()));
    assert_eq!(pairs, expected);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}
