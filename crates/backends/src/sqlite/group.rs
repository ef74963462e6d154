//! Group commit: many logical transactions share one physical transaction,
//! and one `COMMIT` and one sync of the log make them all durable.
//!
//! One connection does all the work; a logical transaction
//! ([`Store::begin`](lightning_store_core::storage::Store::begin))
//! holds it through a fair async mutex for its whole duration, so logical
//! transactions are serialised. Many of them share one physical transaction:
//! * the first write of a logical transaction opens the physical transaction
//!   (`BEGIN IMMEDIATE`) if none is open, then a `SAVEPOINT`;
//! * a logical commit `RELEASE`s its savepoint and queues itself as waiting
//!   for durability; then, when no sync is in flight and no other
//!   transaction is queued for the connection, it *leads*: it issues the
//!   `COMMIT` for every waiting commit itself, hands the connection on and
//!   syncs the log on its own thread (`block_in_place`), so a lone writer
//!   pays one `COMMIT` and one sync, without a hand-off to another task
//!   and back;
//! * a logical commit that finds a sync in flight waits in the open
//!   physical transaction: whoever ends that sync wakes the flusher, which
//!   commits the waiting group (unless a leader took it first) and syncs;
//! * one that finds others queued for the connection wakes the flusher,
//!   which queues for the connection like everyone else, so it gets it
//!   after every transaction that was already waiting and commits them as
//!   one group.
//!
//! Groups sync one at a time (a group commits only when no sync is in
//! flight), which the readers rely on ([`super::readers`]). (Letting the
//! next group commit and sync while the previous group's sync runs was
//! measured and not kept: no gain, docs/performance.md#pipelined-syncs.) Under load, the
//! transactions that arrive while one group's log syncs run their
//! statements meanwhile and form the next group, so throughput is bounded
//! by statement execution, not by syncs. When the flusher gets the
//! connection while other transactions are still queued for it, it lets
//! them run first and join the group (for at most [`GROUP_WAIT`] after the
//! group's `BEGIN`): a `COMMIT` writes every page the group changed to
//! the log once, so a page that several transactions change (a table's
//! last leaf, the counters, an index's inner pages) is written once per
//! group, not once per transaction. A logical transaction
//! that read state other transactions left uncommitted, or committed but
//! not yet synced, waits for the same sync when it commits (even without
//! writes), so nothing it returns can be lost by a crash.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::RuntimeFlavor;
use tokio::sync::{MutexGuard, oneshot};

use super::rows::control;
use super::shared::{InFlight, Shared, Writer};
use lightning_store_core::error::{StoreError, StoreResult};

/// How long after its `BEGIN` a group may wait for the transactions queued
/// for the connection to join it before the flusher commits it anyway.
const GROUP_WAIT: Duration = Duration::from_millis(2);

impl Writer {
    /// Returns true while the open group should wait for the transactions
    /// queued for the connection (see the module docs).
    fn group_grows(&self, queued: &AtomicUsize) -> bool {
        self.open && queued.load(Ordering::SeqCst) > 0 && self.opened.elapsed() < GROUP_WAIT
    }

    /// Commits the physical transaction: its log is written, not yet
    /// synced. Hands its waiters to `in_flight` and returns the log to
    /// sync; `None` when nothing was open or the `COMMIT` failed (its
    /// waiters are then told).
    fn commit_group(
        &mut self,
        in_flight: &parking_lot::Mutex<InFlight>,
    ) -> Option<Arc<std::fs::File>> {
        if !self.open {
            return None;
        }
        // In flight before the `COMMIT` makes it visible: a reader that
        // sees it then finds it in flight (see [`readers`]).
        {
            let mut syncing = in_flight.lock();
            syncing.group = Some(std::mem::take(&mut self.waiters));
            syncing.next = false;
        }
        if let Err(error) = control(&self.conn, "COMMIT") {
            let error = self.fail(error);
            tell(in_flight, Err(error));
            return None;
        }
        self.open = false;
        if self.wal.is_none() {
            match std::fs::File::open(&self.wal_path) {
                Ok(file) => self.wal = Some(Arc::new(file)),
                Err(error) => {
                    let error = StoreError::Unavailable(format!(
                        "sqlite: cannot open the write-ahead log: {error}"
                    ));
                    tracing::error!(%error, "sqlite commit failed");
                    tell(in_flight, Err(error));
                    return None;
                }
            }
        }
        self.wal.clone()
    }
}

/// Ends the sync in flight: tells the logical commits of its group the
/// outcome; returns true when commits wait for the next group.
fn tell(in_flight: &parking_lot::Mutex<InFlight>, outcome: StoreResult<()>) -> bool {
    let (group, next) = {
        let mut syncing = in_flight.lock();
        (syncing.group.take(), std::mem::take(&mut syncing.next))
    };
    for waiter in group.unwrap_or_default() {
        let _ = waiter.send(outcome.clone());
    }
    next
}

/// Syncs the log of the group just committed and tells its logical
/// commits, on a thread that may block: the calling worker thread itself
/// (`block_in_place`: the runtime hands the worker's other tasks to
/// another thread) when the runtime has several, else a blocking thread.
/// Either way the sync and the telling cannot be cancelled half-way.
fn sync_group(shared: &Arc<Shared>, wal: Arc<std::fs::File>) {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(|| sync_and_tell(shared, &wal));
    } else {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || sync_and_tell(&shared, &wal));
    }
}

/// Syncs the log, tells the group in flight the outcome and wakes the
/// flusher if commits wait for the next group.
fn sync_and_tell(shared: &Shared, wal: &std::fs::File) {
    let outcome = wal.sync_data().map_err(|error| {
        let error = StoreError::Unavailable(format!("sqlite: cannot sync the log: {error}"));
        tracing::error!(%error, "sqlite commit failed");
        error
    });
    if outcome.is_ok() {
        shared.checkpointer.request();
    }
    if tell(&shared.in_flight, outcome) {
        shared.flush.notify_one();
    }
}

/// The flusher: commits the logical commits that waited for a sync in
/// flight (or chose to let queued transactions join), in one physical
/// `COMMIT`, then syncs the log without the connection: the next group's
/// statements run meanwhile.
pub(super) async fn flush_loop(shared: Arc<Shared>) {
    loop {
        shared.flush.notified().await;
        let wal = loop {
            let mut writer = shared.writer.lock().await;
            writer.recover();
            if shared.in_flight.lock().group.is_some() {
                // A committing transaction led a group meanwhile (with the
                // waiters): the end of its sync wakes the flusher if needed.
                break None;
            }
            if !writer.group_grows(&shared.queued) {
                break writer.commit_group(&shared.in_flight);
            }
            // Queues again, behind the transactions waiting now (the mutex
            // is fair): they join this group.
            drop(writer);
        };
        if let Some(wal) = wal {
            sync_group(&shared, wal);
        }
    }
}

/// Waits until a logical commit (its writes, in the open physical
/// transaction, or what it read) is durable; leads its group's `COMMIT`
/// and sync when no sync is in flight and nobody is queued for the
/// connection.
pub(super) async fn durable(
    shared: &Arc<Shared>,
    mut writer: MutexGuard<'_, Writer>,
) -> StoreResult<()> {
    let (done, durable) = oneshot::channel();
    let turn = {
        let mut syncing = shared.in_flight.lock();
        match (writer.open, syncing.group.as_mut()) {
            // Nothing to wait for: this transaction was read-only and
            // what it read is synced.
            (false, None) => return Ok(()),
            // What it read was committed and is syncing.
            (false, Some(group)) => {
                group.push(done);
                Turn::Wait
            }
            // The sync in flight ends before the next group commits.
            (true, Some(_)) => {
                writer.waiters.push(done);
                syncing.next = true;
                Turn::Wait
            }
            (true, None) => {
                writer.waiters.push(done);
                if shared.queued.load(Ordering::SeqCst) == 0 {
                    Turn::Lead
                } else {
                    Turn::Flusher
                }
            }
        }
    };
    match turn {
        Turn::Lead => {
            let wal = writer.commit_group(&shared.in_flight);
            drop(writer);
            if let Some(wal) = wal {
                sync_group(shared, wal);
            }
        }
        Turn::Flusher => {
            drop(writer);
            shared.flush.notify_one();
        }
        Turn::Wait => drop(writer),
    }
    durable.await.unwrap_or_else(|_| {
        Err(StoreError::Unavailable(
            "sqlite: the store closed before the commit was durable".into(),
        ))
    })
}

/// Who commits a logical commit's physical transaction.
enum Turn {
    /// The committing transaction itself: no sync is in flight and no other
    /// transaction is queued for the connection, so it issues the `COMMIT`
    /// and syncs the log on its own thread.
    Lead,
    /// The flusher, which lets the transactions queued for the connection
    /// join the group first.
    Flusher,
    /// Whoever ends the sync in flight (or the flusher it wakes).
    Wait,
}
