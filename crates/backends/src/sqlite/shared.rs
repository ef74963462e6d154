//! What the writer, its group commit and the readers share: the writer
//! connection with its physical transaction, the sync in flight, and the
//! pool of read-only connections.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Instant;

use tokio::sync::{Mutex, Notify, Semaphore, oneshot};

use super::checkpointer::Checkpointer;
use crate::sql;
use lightning_store_core::error::StoreResult;

/// The state of a store, shared by its transactions and its flusher.
pub(super) struct Shared {
    pub(super) writer: Mutex<Writer>,
    /// Wakes the flusher: logical commits wait for a `COMMIT` that no
    /// committing transaction leads (see the module docs).
    pub(super) flush: Notify,
    /// Logical transactions waiting for the connection ([`Store::begin`]).
    pub(super) queued: AtomicUsize,
    /// The sync in flight, if any, and who waits for the next one.
    pub(super) in_flight: parking_lot::Mutex<InFlight>,
    /// The read-only connections.
    pub(super) readers: Readers,
    /// Copies the log into the database beside the writer.
    pub(super) checkpointer: Checkpointer,
    /// Interrupts the writer's running statement ([`Store::interrupt`]).
    pub(super) interrupt: rusqlite::InterruptHandle,
    /// How many times [`Store::interrupt`] was called: a logical
    /// transaction begun before the latest call fails.
    pub(super) interrupts: AtomicU64,
}

/// The connection and the state of its physical transaction.
pub(super) struct Writer {
    pub(super) conn: rusqlite::Connection,
    /// The write-ahead log, synced by the flusher (opened at the first sync).
    pub(super) wal: Option<Arc<std::fs::File>>,
    /// Where the write-ahead log is.
    pub(super) wal_path: PathBuf,
    /// A physical transaction is open.
    pub(super) open: bool,
    /// When the open physical transaction began.
    pub(super) opened: Instant,
    /// A logical transaction wrote and was dropped without committing: its
    /// savepoint must be rolled back before anyone else uses the connection.
    pub(super) abandoned: bool,
    /// Logical commits waiting for the physical `COMMIT`.
    pub(super) waiters: Vec<Waiter>,
    /// What the connection remembers across transactions.
    pub(super) cache: sql::Cache,
    /// The floor of the watchdog deadlines, forgotten with the cache.
    pub(super) floor: Arc<sql::DeadlineFloor>,
}

/// A logical commit waiting for durability.
pub(super) type Waiter = oneshot::Sender<StoreResult<()>>;

/// The log's sync in flight: groups sync one at a time.
#[derive(Default)]
pub(super) struct InFlight {
    /// The logical commits of the physical transaction whose log is being
    /// synced (`None`: no sync in flight); readers that saw its writes join.
    pub(super) group: Option<Vec<Waiter>>,
    /// Logical commits wait in the open physical transaction for the end of
    /// this sync: whoever ends it wakes the flusher to commit them.
    pub(super) next: bool,
}

/// How many read-only connections a store opens, at most.
pub(super) const READERS: usize = 4;

/// The pool of read-only connections, opened on first use.
pub(super) struct Readers {
    pub(super) path: PathBuf,
    pub(super) idle: parking_lot::Mutex<Vec<rusqlite::Connection>>,
    pub(super) permits: Semaphore,
}

impl Readers {
    /// Returns an empty pool of up to [`READERS`] connections to `path`.
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            idle: parking_lot::Mutex::new(Vec::new()),
            permits: Semaphore::new(READERS),
        }
    }
}
