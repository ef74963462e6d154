//! Checkpoints off the writer's path. SQLite's automatic checkpoint runs
//! inside the `COMMIT` that takes the log past 1,000 pages, on the
//! connection and thread that commit: here the flusher's, on a runtime
//! thread, holding the writer. Every transaction queued for the writer (and
//! the group whose acknowledgement waits for that `COMMIT`) then waits while
//! ~4 MB are copied into the database and both files are synced: a stall of
//! milliseconds several times a second under a stream of large appends
//! (agent-lightning 1.x's `model_request` events are ~17 KB each).
//!
//! The writer's automatic checkpoint is replaced ([`watch_log`]) by a
//! report of the log's length after each `COMMIT`; once the log has grown
//! by [`CHECKPOINT_PAGES`] since the last request, the flusher wakes the
//! checkpointer, a thread with a connection of its own, which runs a
//! `PASSIVE` checkpoint beside the writer and the readers: it never waits
//! for them and copies only frames no reader's snapshot still needs (a
//! later request copies the rest). Durability is unchanged: a checkpoint
//! syncs the log before it copies frames into the database and the
//! database after, and copies only committed frames, so a crash at any
//! point loses nothing that was acknowledged.

use std::cell::Cell;
use std::ffi::c_int;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// Log pages (frames) the log grows by between two checkpoints: SQLite's
/// automatic checkpoint threshold.
pub(super) const CHECKPOINT_PAGES: i32 = 1_000;

thread_local! {
    /// The log's length after the last `COMMIT` run on this thread, as
    /// SQLite's WAL hook reports it (-1: the hook was not called).
    static LOG_PAGES: Cell<i32> = const { Cell::new(-1) };
}

/// Replaces the connection's automatic checkpoint by a report of the log's
/// length, read back with [`take_log_pages`] after a `COMMIT`.
pub(super) fn watch_log(conn: &rusqlite::Connection) {
    conn.wal_hook(Some(record_log_pages));
}

fn record_log_pages(_: &rusqlite::hooks::Wal, pages: c_int) -> rusqlite::Result<()> {
    LOG_PAGES.set(pages);
    Ok(())
}

/// Returns the log's length reported by the last `COMMIT` on this thread
/// since the previous call, if any.
pub(super) fn take_log_pages() -> Option<i32> {
    let pages = LOG_PAGES.replace(-1);
    (pages >= 0).then_some(pages)
}

/// Decides when the log has grown enough for a checkpoint; kept by the
/// writer, fed with each `COMMIT`'s log length.
#[derive(Debug, Default)]
pub(super) struct LogGrowth {
    /// The log's length at the last checkpoint request.
    requested_at: i32,
}

impl LogGrowth {
    /// Returns whether a checkpoint is due now that the log holds `pages`.
    pub(super) fn due(&mut self, pages: i32) -> bool {
        if pages < self.requested_at {
            // The log started over after a complete checkpoint.
            self.requested_at = 0;
        }
        if pages - self.requested_at < CHECKPOINT_PAGES {
            return false;
        }
        self.requested_at = pages;
        true
    }
}

/// The handle of the checkpointer thread; the thread ends when it is
/// dropped.
pub(super) struct Checkpointer {
    wake: mpsc::SyncSender<()>,
}

impl Checkpointer {
    /// Starts the checkpointer of the database at `path`.
    pub(super) fn start(path: &Path) -> std::io::Result<Self> {
        // One pending request is enough: a checkpoint copies the whole log.
        let (wake, requests) = mpsc::sync_channel(1);
        let path = path.to_owned();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || run(&path, &requests))?;
        Ok(Self { wake })
    }

    /// Asks for a checkpoint (a request already pending covers this one).
    pub(super) fn request(&self) {
        let _ = self.wake.try_send(());
    }
}

fn run(path: &Path, requests: &mpsc::Receiver<()>) {
    let mut conn = None;
    while requests.recv().is_ok() {
        if conn.is_none() {
            conn = open(path)
                .inspect_err(|error| tracing::warn!(%error, "sqlite checkpointer cannot open"))
                .ok();
        }
        let Some(open) = &conn else { continue };
        let result = open.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        match result {
            Ok((log, copied)) => tracing::debug!(log, copied, "sqlite checkpoint"),
            Err(error) => {
                tracing::warn!(%error, "sqlite checkpoint failed");
                conn = None;
            }
        }
    }
}

fn open(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(1))?;
    // Syncs the log before copying and the database after.
    conn.execute_batch("PRAGMA synchronous = NORMAL")?;
    // Its own commits (none) must not checkpoint on their own.
    conn.wal_hook(None);
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_due_every_checkpoint_pages_and_after_the_log_starts_over() {
        let mut growth = LogGrowth::default();
        assert!(!growth.due(10));
        assert!(!growth.due(CHECKPOINT_PAGES - 1));
        assert!(growth.due(CHECKPOINT_PAGES));
        assert!(!growth.due(CHECKPOINT_PAGES + 10));
        assert!(growth.due(2 * CHECKPOINT_PAGES + 5));
        // The log started over: counted from zero again.
        assert!(!growth.due(20));
        assert!(growth.due(CHECKPOINT_PAGES + 1));
    }
}
