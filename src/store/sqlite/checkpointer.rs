//! Checkpoints beside the writer: copying the write-ahead log into the
//! database file (and syncing both) runs on a thread of its own, on its own
//! connection, instead of inside the writer's `COMMIT`.
//!
//! SQLite checkpoints automatically when a `COMMIT` leaves the log longer
//! than `wal_autocheckpoint` pages, on the committing connection: with the
//! default of 1,000 pages the writer copied pages and synced the database
//! file several times a second under load, holding the connection every
//! transaction waits for. Here a `PASSIVE` checkpoint (it never waits for
//! and never blocks the writer or the readers) runs after the log's
//! syncs, at most once per [`INTERVAL`], and copies what the log holds.
//! The wake-up channel holds one request: while one is pending, the
//! requests made as the thread waits for its interval find it full and
//! cost a failed send, not a wake-up each (one per sync was three context
//! switches per gateway call, docs/performance.md).
//!
//! A log restarts from its beginning only when a writer begins while every
//! frame of it has been copied, which a checkpoint racing a busy writer
//! rarely achieves; so the writer keeps an automatic checkpoint at
//! [`WRITER_CHECKPOINT_PAGES`]: by then this thread has copied almost all
//! of the log, the writer copies the rest and the log restarts. The log's
//! length stays bounded, and the writer's share of the copying is small.
//!
//! Durability is SQLite's: a checkpoint syncs the log before it copies
//! frames (only committed ones) and the database file after, and a crash
//! in between leaves the log to be copied again on recovery.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// The least time between two checkpoints of this thread.
const INTERVAL: Duration = Duration::from_millis(50);

/// The writer's own automatic checkpoint (`wal_autocheckpoint`, in pages):
/// a log this long is copied by the writer's `COMMIT`, which restarts it.
pub(super) const WRITER_CHECKPOINT_PAGES: u32 = 8_192;

/// Asks the checkpoint thread for a checkpoint; dropping it ends the thread.
pub(super) struct Checkpointer {
    /// Holds at most one request: the one pending, if any.
    wake: SyncSender<()>,
}

impl Checkpointer {
    /// Opens a connection to `path` and starts the thread.
    pub(super) fn start(path: &Path) -> rusqlite::Result<Self> {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let (wake, woken) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run(&conn, &woken))
            .map_err(|error| {
                rusqlite::Error::ToSqlConversionFailure(
                    format!("cannot start the checkpoint thread: {error}").into(),
                )
            })?;
        Ok(Self { wake })
    }

    /// Asks for a checkpoint of what the log holds now (one is enough for
    /// any number of requests made before it starts); wakes the thread
    /// only for the first of them (the others find the channel full).
    pub(super) fn request(&self) {
        match self.wake.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }
}

/// The thread: one checkpoint per pending request, at most one per
/// [`INTERVAL`].
fn run(conn: &rusqlite::Connection, woken: &Receiver<()>) {
    let mut last: Option<Instant> = None;
    while woken.recv().is_ok() {
        if let Some(rest) =
            last.and_then(|at| (at + INTERVAL).checked_duration_since(Instant::now()))
        {
            // Requests made meanwhile find the channel full, or fill it
            // once: this checkpoint covers them.
            std::thread::sleep(rest);
        }
        // Taken before the checkpoint starts: a request made during it
        // asks for the next one.
        while woken.try_recv().is_ok() {}
        last = Some(Instant::now());
        // `PASSIVE`: copies what no reader still needs, waits for nobody.
        if let Err(error) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            // The writer's own checkpoint still bounds the log.
            tracing::warn!(%error, "sqlite checkpoint failed");
        }
    }
}
