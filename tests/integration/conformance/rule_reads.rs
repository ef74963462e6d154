//! The reads the rules need ([`RuleReads`](lightning_store::core::storage::RuleReads)),
//! at the storage port: aggregates in the order asked, and the due scans in
//! deadline order.

use lightning_store::core::model::{AttemptStatus, RolloutStatus, Timestamp};
use lightning_store::core::storage::{Access, Held, WriteSet};

use super::port::{self, attempt, rollout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_are_read_in_the_order_asked_once_each_with_their_latest_attempt() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = WriteSet::default();
    for id in ["ro-a", "ro-b", "ro-c"] {
        writes.put_rollout(&rollout(id, RolloutStatus::Running, 1_000), None);
    }
    let first = attempt("ro-b", AttemptStatus::Failed);
    let mut second = attempt("ro-b", AttemptStatus::Running);
    second.attempt_id = "at-2".to_owned();
    second.sequence_id = 2;
    writes.put_attempt(&first);
    writes.put_attempt(&second);
    port.commit(&mut writes).await;

    for access in [Access::Read, Access::Update] {
        let mut tx = port.store.begin().await.unwrap();
        let views = tx
            .rollouts(&["ro-c", "ro-missing", "ro-b", "ro-c"], access)
            .await
            .unwrap();
        let seen: Vec<(&str, Option<&str>)> = views
            .iter()
            .map(|v| {
                let attempt = v.attempt.as_ref().map(|a| a.attempt_id.as_str());
                (v.rollout.rollout_id.as_str(), attempt)
            })
            .collect();
        assert_eq!(seen, [("ro-c", None), ("ro-b", Some("at-2"))]);
        let attempts = tx.attempts("ro-b").await.unwrap();
        assert_eq!(attempts, [first.clone(), second.clone()]);
        assert_eq!(
            tx.attempt("ro-b", "at-1").await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(tx.attempt("ro-b", "at-9").await.unwrap(), None);
        tx.rollback().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_rollouts_come_earliest_deadline_first_up_to_the_limit() {
    let Some(port) = port::open().await else {
        return;
    };
    let mut writes = WriteSet::default();
    for (id, deadline) in [("ro-a", 30), ("ro-b", 10), ("ro-c", 20), ("ro-d", 50)] {
        let r = rollout(id, RolloutStatus::Running, 1_000);
        writes.put_rollout(&r, Some(Timestamp(deadline)));
    }
    writes.put_rollout(&rollout("ro-e", RolloutStatus::Running, 1_000), None);
    port.commit(&mut writes).await;

    for held in [Held::Skip, Held::Wait] {
        let mut tx = port.store.begin().await.unwrap();
        let due = tx.due_rollouts(Timestamp(40), 10, held).await.unwrap();
        let ids: Vec<&str> = due.iter().map(|v| v.rollout.rollout_id.as_str()).collect();
        assert_eq!(ids, ["ro-b", "ro-c", "ro-a"], "{held:?}");
        let due = tx.due_rollouts(Timestamp(40), 2, held).await.unwrap();
        assert_eq!(due.len(), 2, "{held:?}");
        // Before its deadline, not due.
        let due = tx.due_rollouts(Timestamp(10), 10, held).await.unwrap();
        assert!(due.is_empty(), "{held:?}");
        tx.rollback().await;
    }
}
