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
//! syncs, at most once per interval, and copies what the log holds.
//! The wake-up channel holds one request: while one is pending, the
//! requests made as the thread waits for its interval find it full and
//! cost a failed send, not a wake-up each (one per sync was three context
//! switches per gateway call,
//! docs/performance.md#syncing-the-log-on-the-worker-instead-of-handing-it-over).
//!
//! The interval follows the write rate ([`next_interval`]): each checkpoint
//! aims to find about [`TARGET_LOG_PAGES`] in the log, between
//! [`MIN_INTERVAL`] under load and [`MAX_INTERVAL`] when writes are few.
//! A log that a checkpoint copied entirely restarts from its beginning at
//! the next write, and SQLite syncs the restarted log's header inside that
//! `COMMIT`: at a fixed 50 ms, a lone client's writes paid that second
//! sync in one commit of three
//! (docs/performance.md#the-checkpoint-interval-follows-the-write-rate).
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
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// The most time between two checkpoints of this thread while writes come:
/// the log it lets grow meanwhile stays below [`WRITER_CHECKPOINT_PAGES`]
/// up to ~32,000 pages (128 MB) written per second.
const MAX_INTERVAL: Duration = Duration::from_millis(250);

/// The log's length, in pages, that a checkpoint aims to find.
const TARGET_LOG_PAGES: u32 = 1_024;

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
/// interval ([`next_interval`]).
fn run(conn: &rusqlite::Connection, woken: &Receiver<()>) {
    let mut last: Option<Instant> = None;
    let mut interval = MIN_INTERVAL;
    while woken.recv().is_ok() {
        if let Some(rest) =
            last.and_then(|at| (at + interval).checked_duration_since(Instant::now()))
        {
            // Requests made meanwhile find the channel full, or fill it
            // once: this checkpoint covers them.
            std::thread::sleep(rest);
        }
        // Taken before the checkpoint starts: a request made during it
        // asks for the next one.
        while woken.try_recv().is_ok() {}
        let now = Instant::now();
        let since_last = last.map(|at| now - at);
        last = Some(now);
        // `PASSIVE`: copies what no reader still needs, waits for nobody.
        // Its second column is the log's length in pages.
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(1)
        }) {
            Ok(log_pages) => {
                if let Some(since_last) = since_last {
                    interval = next_interval(since_last, log_pages);
                }
            }
            // The writer's own checkpoint still bounds the log.
            Err(error) => tracing::warn!(%error, "sqlite checkpoint failed"),
        }
    }
}

/// Returns the time to wait before the next checkpoint, given the time
/// since the previous one and the pages this one found in the log: at the
/// same write rate the next finds about [`TARGET_LOG_PAGES`], within
/// [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
fn next_interval(since_last: Duration, log_pages: i64) -> Duration {
    let pages = log_pages.max(1) as f64;
    since_last
        .mul_f64(f64::from(TARGET_LOG_PAGES) / pages)
        .clamp(MIN_INTERVAL, MAX_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_follows_the_write_rate_within_its_bounds() {
        let ms = Duration::from_millis;
        // 512 pages in 100 ms: 1,024 take 200 ms.
        assert_eq!(next_interval(ms(100), 512), ms(200));
        // A busy log: as often as allowed.
        assert_eq!(next_interval(ms(100), 4_096), MIN_INTERVAL);
        // Few writes, or none (an empty log reads 0, an error -1).
        assert_eq!(next_interval(ms(50), 10), MAX_INTERVAL);
        assert_eq!(next_interval(Duration::from_secs(60), 0), MAX_INTERVAL);
        assert_eq!(next_interval(ms(50), -1), MAX_INTERVAL);
    }
}
