//! Group commit: many logical transactions share one physical transaction,
//! and one `COMMIT` and one sync of the log make them all durable.
//!
//! One connection does all the work; a logical transaction
//! ([`Store::begin`](crate::core::storage::Store::begin))
//! holds it through a fair async mutex for its whole duration, so logical
//! transactions are serialised. Many of them share one physical transaction:
//! * the first write of a logical transaction opens the physical transaction
//!   (`BEGIN IMMEDIATE`) if none is open, then a `SAVEPOINT`;
//! * a logical commit `RELEASE`s its savepoint and queues itself as waiting
//!   for durability; then, when a sync may start (fewer than
//!   [`SYNCS_IN_FLIGHT`] are running) and no other transaction is queued
//!   for the connection, it *leads*: it issues the `COMMIT` for every
//!   waiting commit itself, hands the connection on and syncs the log on
//!   its own thread (`block_in_place`), so a lone writer pays one `COMMIT`
//!   and one sync, without a hand-off to another task and back;
//! * a logical commit that finds [`SYNCS_IN_FLIGHT`] syncs running waits in
//!   the open physical transaction: whoever ends one of them wakes the
//!   flusher, which commits the waiting group (unless a leader took it
//!   first) and syncs;
//! * one that finds others queued for the connection wakes the flusher,
//!   which queues for the connection like everyone else, so it gets it
//!   after every transaction that was already waiting and commits them as
//!   one group.
//!
//! # Pipelined syncs
//! A group commits and starts its own sync while the previous group's sync
//! is still running (two at most): the transactions that ran meanwhile do
//! not wait for a whole sync before their `COMMIT`. The rules that keep
//! this durable:
//! * groups are numbered, and each is published in [`InFlight`] *before*
//!   its `COMMIT` (so that whoever sees its writes finds it there);
//! * a sync starts after its group's `COMMIT` returned, so when it returns
//!   that group and every earlier one are on disk: it settles them all
//!   (their logical commits are acknowledged, in group order), even while
//!   an earlier group's own sync is still running;
//! * a logical transaction that read unsynced state waits for a sync that
//!   covers it: one that read the open physical transaction commits with
//!   it; one that read only committed state (a read-only transaction, a
//!   reader of [`super::readers`]) waits for the newest group not yet
//!   synced, which is at least as new as anything it saw;
//! * a failed sync fails every group it would have settled; a failed
//!   `COMMIT` fails its own group.
//!
//! The checkpointer needs nothing more: a checkpoint syncs the log before
//! it copies committed frames into the database ([`super::checkpointer`]).
//!
//! Under load, the transactions that arrive while the syncs run execute
//! their statements meanwhile and form the next group, so throughput is
//! bounded by statement execution, not by syncs. When the flusher gets the
//! connection while other transactions are still queued for it, it lets
//! them run first and join the group (for at most [`GROUP_WAIT`] after the
//! group's `BEGIN`): a `COMMIT` writes every page the group changed to
//! the log once, so a page that several transactions change (a table's
//! last leaf, the counters, an index's inner pages) is written once per
//! group, not once per transaction.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::RuntimeFlavor;
use tokio::sync::{MutexGuard, oneshot};

use super::{Shared, Writer, control};
use crate::core::error::{StoreError, StoreResult};

#[cfg(test)]
pub(super) mod tests;

/// How long after its `BEGIN` a group may wait for the transactions queued
/// for the connection to join it before the flusher commits it anyway.
const GROUP_WAIT: Duration = Duration::from_millis(2);

/// How many syncs of the log run at once, at most: a group commits and
/// starts its sync while the previous group's sync runs; the commits that
/// find both running wait in the open physical transaction.
pub(super) const SYNCS_IN_FLIGHT: usize = 2;

/// A logical commit waiting for durability.
pub(super) type Waiter = oneshot::Sender<StoreResult<()>>;

/// The groups committed and not yet synced, and the syncs running.
#[derive(Default)]
pub(super) struct InFlight {
    /// Published before their `COMMIT`, oldest first, until a sync that
    /// covers them returns (or their `COMMIT` fails).
    groups: VecDeque<Group>,
    /// The number of the newest group published.
    newest: u64,
    /// Syncs running (or about to): at most [`SYNCS_IN_FLIGHT`].
    syncs: usize,
    /// Logical commits wait in the open physical transaction for a sync to
    /// end: whoever ends one wakes the flusher to commit them.
    next: bool,
}

/// A group whose log is not yet synced.
struct Group {
    number: u64,
    /// Its logical commits, and readers that saw its writes (or a later
    /// group's).
    waiters: Vec<Waiter>,
}

/// A group just committed, whose log is to be synced.
struct Committed {
    number: u64,
    wal: Arc<std::fs::File>,
}

impl InFlight {
    /// Returns true when a group that commits now must wait for a sync to
    /// end first.
    fn full(&self) -> bool {
        self.syncs >= SYNCS_IN_FLIGHT
    }

    /// Waits for the newest group not yet synced, if any: whoever saw
    /// committed state (a reader, a read-only transaction) saw no group
    /// newer than it, and the sync that settles it settles every earlier
    /// one. `None`: everything committed is synced.
    pub(super) fn join_newest(&mut self) -> Option<oneshot::Receiver<StoreResult<()>>> {
        let group = self.groups.back_mut()?;
        let (done, durable) = oneshot::channel();
        group.waiters.push(done);
        Some(durable)
    }

    /// Publishes the next group, before its `COMMIT`, and counts its sync.
    fn publish(&mut self, waiters: Vec<Waiter>) -> u64 {
        self.newest += 1;
        self.syncs += 1;
        self.next = false;
        self.groups.push_back(Group {
            number: self.newest,
            waiters,
        });
        self.newest
    }

    /// Ends group `number`'s sync (or its `COMMIT`, which failed) and takes
    /// the logical commits it settles: with `earlier`, every group up to
    /// `number` (a sync that started after a group's `COMMIT` returned
    /// covers it and every group before it); else that group alone.
    fn settle(&mut self, number: u64, earlier: bool) -> Vec<Waiter> {
        self.syncs -= 1;
        let mut settled = Vec::new();
        if earlier {
            while let Some(group) = self.groups.pop_front_if(|group| group.number <= number) {
                settled.extend(group.waiters);
            }
        } else if let Some(at) = self.groups.iter().position(|group| group.number == number) {
            settled.extend(
                self.groups
                    .remove(at)
                    .into_iter()
                    .flat_map(|group| group.waiters),
            );
        }
        settled
    }
}

/// Tells logical commits their outcome.
fn tell(waiters: Vec<Waiter>, outcome: &StoreResult<()>) {
    for waiter in waiters {
        let _ = waiter.send(outcome.clone());
    }
}

impl Writer {
    /// Returns true while the open group should wait for the transactions
    /// queued for the connection (see the module docs).
    fn group_grows(&self, queued: &AtomicUsize) -> bool {
        self.open && queued.load(Ordering::SeqCst) > 0 && self.opened.elapsed() < GROUP_WAIT
    }

    /// Commits the physical transaction: its log is written, not yet
    /// synced. Publishes it with its waiters in `in_flight` and returns it
    /// to sync; `None` when nothing was open or the `COMMIT` failed (its
    /// waiters are then told).
    fn commit_group(&mut self, in_flight: &parking_lot::Mutex<InFlight>) -> Option<Committed> {
        if !self.open {
            return None;
        }
        // Published before the `COMMIT` makes it visible: a reader that
        // sees it then finds it (or a later group) not yet synced (see
        // [`super::readers`]).
        let number = in_flight.lock().publish(std::mem::take(&mut self.waiters));
        let failed = |error: StoreError| {
            let waiters = in_flight.lock().settle(number, false);
            tell(waiters, &Err(error));
            None
        };
        if let Err(error) = control(&self.conn, "COMMIT") {
            let error = self.fail(error);
            return failed(error);
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
                    return failed(error);
                }
            }
        }
        let wal = self.wal.clone()?;
        Some(Committed { number, wal })
    }
}

/// Syncs the log of the group just committed and tells the logical
/// commits it settles, on a thread that may block: the calling worker
/// thread itself (`block_in_place`: the runtime hands the worker's other
/// tasks to another thread) when the runtime has several, else a blocking
/// thread. Either way the sync and the telling cannot be cancelled
/// half-way.
fn sync_group(shared: &Arc<Shared>, committed: Committed) {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(|| sync_and_tell(shared, &committed));
    } else {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || sync_and_tell(&shared, &committed));
    }
}

/// Syncs the log, tells the groups the sync covers the outcome and wakes
/// the flusher if commits wait for a sync to end.
fn sync_and_tell(shared: &Shared, committed: &Committed) {
    #[cfg(test)]
    shared.sync_hold.pass(committed.number);
    let outcome = committed.wal.sync_data().map_err(|error| {
        let error = StoreError::Unavailable(format!("sqlite: cannot sync the log: {error}"));
        tracing::error!(%error, "sqlite commit failed");
        error
    });
    if outcome.is_ok() {
        shared.checkpointer.request();
    }
    let (waiters, wake) = {
        let mut in_flight = shared.in_flight.lock();
        let waiters = in_flight.settle(committed.number, true);
        (waiters, std::mem::take(&mut in_flight.next))
    };
    tell(waiters, &outcome);
    if wake {
        shared.flush.notify_one();
    }
}

/// The flusher: commits the logical commits that waited for a sync to end
/// (or chose to let queued transactions join), in one physical `COMMIT`,
/// then syncs the log without the connection: the next group's statements
/// run meanwhile.
pub(super) async fn flush_loop(shared: Arc<Shared>) {
    loop {
        shared.flush.notified().await;
        let committed = loop {
            let mut writer = shared.writer.lock().await;
            writer.recover();
            {
                let mut in_flight = shared.in_flight.lock();
                if in_flight.full() {
                    // Committing transactions led groups meanwhile: the end
                    // of a sync wakes the flusher again.
                    in_flight.next |= writer.open;
                    break None;
                }
            }
            if !writer.group_grows(&shared.queued) {
                break writer.commit_group(&shared.in_flight);
            }
            // Queues again, behind the transactions waiting now (the mutex
            // is fair): they join this group.
            drop(writer);
        };
        if let Some(committed) = committed {
            sync_group(&shared, committed);
        }
    }
}

/// Waits until a logical commit (its writes, in the open physical
/// transaction, or what it read) is durable; leads its group's `COMMIT`
/// and sync when a sync may start and nobody is queued for the connection.
pub(super) async fn durable(
    shared: &Arc<Shared>,
    mut writer: MutexGuard<'_, Writer>,
) -> StoreResult<()> {
    let (turn, durable) = {
        let mut in_flight = shared.in_flight.lock();
        if writer.open {
            let (done, durable) = oneshot::channel();
            writer.waiters.push(done);
            let turn = if in_flight.full() {
                in_flight.next = true;
                Turn::Wait
            } else if shared.queued.load(Ordering::SeqCst) == 0 {
                Turn::Lead
            } else {
                Turn::Flusher
            };
            (turn, durable)
        } else {
            // Read-only, and what it read is committed: it waits for the
            // sync of what it read, if that has not returned.
            match in_flight.join_newest() {
                Some(durable) => (Turn::Wait, durable),
                None => return Ok(()),
            }
        }
    };
    match turn {
        Turn::Lead => {
            let committed = writer.commit_group(&shared.in_flight);
            drop(writer);
            if let Some(committed) = committed {
                sync_group(shared, committed);
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
    /// The committing transaction itself: a sync may start and no other
    /// transaction is queued for the connection, so it issues the `COMMIT`
    /// and syncs the log on its own thread.
    Lead,
    /// The flusher, which lets the transactions queued for the connection
    /// join the group first.
    Flusher,
    /// Whoever ends a sync in flight (or the flusher it wakes).
    Wait,
}
