//! Read-only connections beside the writer: the event history (subscribers
//! replaying from an old cursor) and the counts (statistics, the health
//! probe) are read here, so a long read never waits for the writer and a
//! long write (a big batch) never stalls them.
//!
//! # Why what a reader returns is durable
//! A reader is a WAL snapshot: it sees the physical transactions whose
//! `COMMIT` returned before its first statement, never the writer's open
//! one. Such a commit may still be syncing (`synchronous = NORMAL`, see the
//! module docs of [`super`]). The writer publishes each group in
//! `in_flight` *before* its `COMMIT` and clears it only after the sync, and
//! groups sync one at a time; so a reader that, after its reads, finds a
//! group in flight waits for that group's sync (which covers every earlier
//! group), and one that finds none read only synced commits. A crash can
//! then never take back something a reader returned.
//!
//! # On the calling thread
//! A reader runs its statements on the calling thread, as the writer does:
//! the reads served here are point reads and bounded pages that SQLite
//! answers from its page cache, where a hop to a blocking thread per
//! statement cost more CPU than the read itself (agent-lightning 1.x's
//! rollout GET, measured in
//! docs/performance.md#reads-on-the-reader-connections-in-one-statement). A long
//! page holds up only its own worker thread; the runtime's other worker
//! takes over that thread's queued tasks.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{SemaphorePermit, oneshot};

use super::rows::{SQLITE, SqliteRow, control, plan_once, run, store_error};
use super::shared::Shared;
use crate::sql::{self, Dialect, Statement};
use lightning_store_core::error::{StoreError, StoreResult};

/// Opens a read-only connection (`query_only`: a stray write fails).
fn open_reader(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(1))?;
    conn.set_prepared_statement_cache_capacity(64);
    plan_once(&conn)?;
    conn.execute_batch("PRAGMA query_only = ON")?;
    Ok(conn)
}

/// A read-only transaction's connection, back to the pool when dropped.
pub(super) struct ReadConn<'a> {
    /// `None` once a failed `COMMIT` left it unusable (the pool opens another).
    conn: Option<rusqlite::Connection>,
    shared: &'a Shared,
    _permit: SemaphorePermit<'a>,
    /// The read transaction (its snapshot) is open.
    open: bool,
}

impl<'a> ReadConn<'a> {
    /// Takes an idle connection, opening one if none is idle; waits while
    /// all of them are in use.
    pub(super) async fn acquire(shared: &'a Shared) -> StoreResult<Self> {
        let readers = &shared.readers;
        let permit = readers.permits.acquire().await.map_err(|_| closed())?;
        let idle = readers.idle.lock().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(&readers.path).map_err(store_error)?,
        };
        Ok(Self {
            conn: Some(conn),
            shared,
            _permit: permit,
            open: false,
        })
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable("sqlite: the store is closed".into())
}

fn read_only() -> StoreError {
    StoreError::Internal("sqlite: a read-only transaction cannot write".into())
}

impl Drop for ReadConn<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.open && control(&conn, "ROLLBACK").is_err() {
            return;
        }
        self.shared.readers.idle.lock().push(conn);
    }
}

#[async_trait]
impl sql::Connection for ReadConn<'_> {
    type Row = SqliteRow;

    const DIALECT: &'static Dialect = &SQLITE;

    async fn begin_write(&mut self) -> StoreResult<()> {
        Err(read_only())
    }

    async fn execute(&mut self, _statement: Statement<'_>) -> StoreResult<()> {
        Err(read_only())
    }

    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        let conn = self.conn.as_ref().ok_or_else(closed)?;
        if !self.open {
            // The snapshot starts at the first statement after BEGIN.
            control(conn, "BEGIN").map_err(store_error)?;
            self.open = true;
        }
        run(conn, &statement).map_err(store_error)
    }

    fn cache(&mut self) -> Option<&mut sql::Cache> {
        None
    }

    async fn rollback(self) {
        // Dropped: the read transaction ends and the connection goes back.
    }

    async fn commit(mut self, last: Option<String>) -> StoreResult<Vec<SqliteRow>> {
        if last.is_some() {
            return Err(read_only());
        }
        if !self.open {
            return Ok(Vec::new());
        }
        // After the reads: a group committed before the snapshot is either
        // synced or the one in flight (see the module docs).
        let durable = self.shared.in_flight.lock().group.as_mut().map(|syncing| {
            let (done, durable) = oneshot::channel();
            syncing.push(done);
            durable
        });
        self.open = false;
        let ended = self.conn.as_ref().map(|conn| control(conn, "COMMIT"));
        if let Some(Err(error)) = ended {
            // Not back to the pool with its snapshot still open.
            self.conn = None;
            return Err(store_error(error));
        }
        drop(self);
        if let Some(durable) = durable {
            durable.await.unwrap_or_else(|_| {
                Err(StoreError::Unavailable(
                    "sqlite: the store closed before what was read was durable".into(),
                ))
            })?;
        }
        Ok(Vec::new())
    }
}
