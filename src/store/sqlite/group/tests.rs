//! The group commit's pipeline, driven step by step: the test holds the
//! log's syncs where it says (no sleeps), and sees what commits and readers
//! wait for while two groups' syncs overlap.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::SYNCS_IN_FLIGHT;
use crate::core::error::StoreResult;
use crate::core::events::{Change, Event};
use crate::core::model::{RolloutStatus, Timestamp};
use crate::core::storage::{Store, WriteSet};
use crate::store::sqlite::{SqliteOptions, SqliteStore};

/// Holds the syncs of a store's log while closed, except those of the
/// groups released one by one.
#[derive(Default)]
pub(in crate::store::sqlite) struct SyncHold {
    state: Mutex<HoldState>,
    changed: Condvar,
}

#[derive(Default)]
struct HoldState {
    closed: bool,
    /// The groups whose sync reached the hold, in arrival order.
    arrived: Vec<u64>,
    released: Vec<u64>,
}

impl SyncHold {
    /// Called by the sync of group `number` before it syncs: waits while
    /// the hold is closed and the group is not released.
    pub(in crate::store::sqlite) fn pass(&self, number: u64) {
        let mut state = self.state.lock();
        state.arrived.push(number);
        self.changed.notify_all();
        while state.closed && !state.released.contains(&number) {
            self.changed.wait(&mut state);
        }
    }

    fn close(&self) {
        self.state.lock().closed = true;
    }

    fn release(&self, number: u64) {
        self.state.lock().released.push(number);
        self.changed.notify_all();
    }

    fn open(&self) {
        self.state.lock().closed = false;
        self.changed.notify_all();
    }

    /// Waits until `count` syncs reached the hold (failing after
    /// [`BOUND`]); returns their groups.
    fn arrived(&self, count: usize) -> Vec<u64> {
        let deadline = Instant::now() + BOUND;
        tokio::task::block_in_place(|| {
            let mut state = self.state.lock();
            while state.arrived.len() < count {
                let timed_out = self.changed.wait_until(&mut state, deadline).timed_out();
                assert!(!timed_out, "{count} syncs never reached the hold");
            }
            state.arrived.clone()
        })
    }
}

/// How long a step may take before the test fails instead of hanging.
const BOUND: Duration = Duration::from_secs(20);

/// Awaits `future`, failing after [`BOUND`].
async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, future)
        .await
        .expect("a step of the pipeline never ended")
}

fn one_event() -> WriteSet {
    WriteSet {
        events: vec![Event {
            seq: 0,
            time: Timestamp(1_000),
            change: Change::RolloutChanged {
                rollout_id: "ro-1".into(),
                status: RolloutStatus::Running,
            },
        }],
        ..WriteSet::default()
    }
}

/// Commits one event on a task of its own; returns its number.
fn spawn_write(store: &Arc<SqliteStore>) -> tokio::task::JoinHandle<StoreResult<u64>> {
    let store = store.clone();
    tokio::spawn(async move {
        let mut writes = one_event();
        store.begin().await?.commit(&mut writes).await?;
        Ok(writes.events[0].seq)
    })
}

/// Writers A and B lead groups 1 and 2, whose syncs overlap; C finds both
/// syncs running and waits in the open transaction; readers that saw A's
/// or B's event answer only once a sync covering it returned: B's sync
/// settles A's group too, while A's own sync is still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_syncs_while_the_previous_groups_sync_runs_and_readers_wait_for_theirs() {
    assert_eq!(SYNCS_IN_FLIGHT, 2, "the steps below fill a pipeline of two");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = Arc::new(
        SqliteStore::open(&path, SqliteOptions::default())
            .await
            .unwrap(),
    );
    let hold = &store.shared.sync_hold;
    hold.close();

    let a = spawn_write(&store);
    assert_eq!(hold.arrived(1), [1], "A leads group 1 and syncs it");
    let mut first = store.begin_read().await.unwrap();
    assert_eq!(first.events_after(0, 1).await.unwrap().latest, 1);
    let mut nothing = (WriteSet::default(), WriteSet::default());
    let mut first = first.commit(&mut nothing.0);
    assert!(
        futures::poll!(&mut first).is_pending(),
        "group 1 is not synced"
    );

    let b = spawn_write(&store);
    assert_eq!(hold.arrived(2), [1, 2], "B's sync starts beside A's");
    let mut second = store.begin_read().await.unwrap();
    assert_eq!(second.events_after(0, 1).await.unwrap().latest, 2);
    let mut second = second.commit(&mut nothing.1);
    assert!(
        futures::poll!(&mut second).is_pending(),
        "group 2 is not synced"
    );

    let mut c_writes = one_event();
    let c_tx = store.begin().await.unwrap();
    let mut c = c_tx.commit(&mut c_writes);
    assert!(
        futures::poll!(&mut c).is_pending(),
        "C waits for a sync to end"
    );
    assert_eq!(hold.arrived(2).len(), 2, "C's group waits uncommitted");

    hold.release(2);
    assert_eq!(within(b).await.unwrap().unwrap(), 2);
    within(first).await.expect("B's sync covers group 1");
    within(second).await.unwrap();
    assert!(!a.is_finished(), "A still waits for its own sync");
    assert_eq!(
        hold.arrived(3),
        [1, 2, 3],
        "the end of B's sync lets C's group commit"
    );
    assert!(futures::poll!(&mut c).is_pending(), "group 3 is not synced");

    hold.open();
    assert_eq!(within(a).await.unwrap().unwrap(), 1);
    within(c).await.unwrap();
    assert_eq!(c_writes.events[0].seq, 3);
    drop(Arc::into_inner(store).expect("no other owner"));
    let reopened = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    let mut tx = reopened.begin_read().await.unwrap();
    assert_eq!(tx.events_after(0, 1).await.unwrap().latest, 3);
    tx.commit(&mut WriteSet::default()).await.unwrap();
}
