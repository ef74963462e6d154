//! The write set ([`WriteSet`]), at the storage port: applied at the commit,
//! together with the transaction's immediate writes, with its events
//! numbered store-wide, gapless and in commit order; a transaction rolled
//! back applies none of it.

use lightning_store::core::events::{Change, Event};
use lightning_store::core::model::{RolloutStatus, Timestamp};
use lightning_store::core::storage::{Access, StoreTx, WriteSet};

use super::port::{self, rollout, span};

/// A write set that writes a rollout and records one event of it.
fn writes_of(rollout_id: &str) -> WriteSet {
    let mut writes = WriteSet::default();
    writes.put_rollout(&rollout(rollout_id, RolloutStatus::Queuing, 1_000), None);
    writes.events.push(Event {
        seq: 0,
        time: Timestamp(4_000),
        change: Change::RolloutChanged {
            rollout_id: rollout_id.to_owned(),
            status: RolloutStatus::Queuing,
        },
    });
    writes
}

/// Returns the rollout ids of the events after `after`, with the latest
/// event's number.
async fn events(tx: &mut (dyn StoreTx + '_), after: u64) -> (Vec<(u64, String)>, u64) {
    let page = tx.events_after(after, 100).await.unwrap();
    let events = page
        .events
        .iter()
        .map(|e| match &e.change {
            Change::RolloutChanged { rollout_id, .. } => (e.seq, rollout_id.clone()),
            other => panic!("unexpected event {other:?}"),
        })
        .collect();
    (events, page.latest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_applies_the_write_set_and_numbers_its_events_in_commit_order() {
    let Some(port) = port::open().await else {
        return;
    };
    for id in ["ro-a", "ro-b"] {
        let mut writes = writes_of(id);
        let tx = port.store.begin().await.unwrap();
        tx.commit(&mut writes).await.unwrap();
    }
    // The commit numbered the set's events.
    let mut writes = writes_of("ro-c");
    let tx = port.store.begin().await.unwrap();
    tx.commit(&mut writes).await.unwrap();
    assert_eq!(writes.events.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);

    let mut tx = port.store.begin_read().await.unwrap();
    let expected = vec![
        (1, "ro-a".to_owned()),
        (2, "ro-b".to_owned()),
        (3, "ro-c".to_owned()),
    ];
    assert_eq!(events(tx.as_mut(), 0).await, (expected.clone(), 3));
    assert_eq!(events(tx.as_mut(), 2).await, (expected[2..].to_vec(), 3));
    let ids = ["ro-a", "ro-b", "ro-c"];
    assert_eq!(tx.rollouts(&ids, Access::Read).await.unwrap().len(), 3);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_keeps_the_immediate_writes_with_the_write_set_and_a_rollback_neither() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = writes_of("ro-a");
    writes.enqueue("ro-a", Timestamp(1));
    port.commit(&mut writes).await;

    for commit in [false, true] {
        let mut tx = port.store.begin().await.unwrap();
        let claimed = tx.claim_queued(1).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(tx.allocate_sequence_ids("ro-a", 1).await.unwrap(), 1);
        tx.insert_spans(&[span("ro-a", "s1", 1)]).await.unwrap();
        let mut writes = writes_of("ro-a");
        writes.put_rollout(&rollout("ro-a", RolloutStatus::Running, 1_000), None);
        if commit {
            tx.commit(&mut writes).await.unwrap();
        } else {
            // What the transaction buffered never reaches the store.
            tx.rollback().await;
        }
    }

    let mut tx = port.store.begin_read().await.unwrap();
    let expected = vec![(1, "ro-a".to_owned()), (2, "ro-a".to_owned())];
    assert_eq!(events(tx.as_mut(), 0).await, (expected, 2));
    let read = tx.rollouts(&["ro-a"], Access::Read).await.unwrap();
    assert_eq!(read[0].rollout.status, RolloutStatus::Running);
    let counts = tx.counts().await.unwrap();
    assert_eq!((counts.queued, counts.spans), (0, 1));
    assert_eq!(port::span_ids(tx.as_mut(), "ro-a").await, ["s1"]);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}
