//! The SQLite backend: the durable, embedded default. The operations are the
//! shared SQL ones ([`super::sql`]); this module owns what is SQLite's: the
//! file, its settings, migrations, error codes and group commit.
//!
//! # Durability
//! The database runs in WAL mode. A physical `COMMIT` writes the log
//! (`synchronous = NORMAL`: without syncing it), and whoever issued it (a
//! committing transaction or the flusher, see [`group`]) then syncs the log
//! file (`fdatasync`) without the connection; no logical commit is acknowledged
//! before the sync that covers its physical `COMMIT` has returned. That is
//! what `synchronous = FULL` does inside the `COMMIT`, moved out of it so
//! that the connection is free while the disk syncs. (Checkpoints sync the
//! log before copying it into the database and the database after, so a
//! log that restarts after a checkpoint loses nothing; they run on a thread
//! of their own, [`checkpointer`], not in the writer's `COMMIT`.) The file is opened
//! with an exclusive lock on the file (`flock`, held while the store lives),
//! so a second server on the same file fails at startup instead of sharing
//! it; SQLite itself runs in its normal locking mode, so that read-only
//! connections ([`readers`]) can read beside the writer.
//!
//! # Group commit
//! One connection does all the work, and many logical transactions share
//! one physical transaction, one `COMMIT` and one sync ([`group`]).
//!
//! # Failures
//! A logical transaction dropped after writing leaves its savepoint to the
//! next user of the connection, which rolls it back first (`Drop` cannot
//! run statements). A statement that fails on its own input (a bad
//! argument, a constraint) rolls back only its logical transaction's
//! savepoint: the other logical transactions of the group still commit.
//! Any other SQLite error while a physical transaction is open (i/o, disk
//! full, busy, corruption, or SQLite rolled it back itself) aborts that
//! physical transaction: it is rolled back and every logical commit waiting
//! on it fails with that error (disk full and I/O errors are UNAVAILABLE),
//! so an error never silently loses an acknowledged write and a failed
//! statement cannot leave a half-applied transaction behind.
//!
//! # Statements on the calling thread
//! sqlx opens, checks and migrates the file; the store then serves on a
//! rusqlite connection and runs each statement on the calling task's
//! thread: SQLite answers from its page cache in microseconds, where a
//! round trip to a worker thread per statement cost tens of microseconds
//! (mostly thread wake-ups) and bounded throughput. Only the log's sync,
//! which waits for the disk, runs on a blocking thread. Since no other
//! server writes the file (other programs may read it, e.g. a backup, and
//! must not write it), the connection also remembers the last
//! event number ([`sql::Cache`]) and a lower bound of the watchdog deadlines
//! ([`sql::DeadlineFloor`]) across transactions; it forgets both whenever
//! it rolls back.
//!
//! # Readers
//! What needs no serialisation with the writers ([`Store::begin_read`]: the
//! event history that subscribers replay, the counts behind statistics and
//! the health probe) runs on a small pool of read-only connections
//! ([`readers`]), each read a WAL snapshot that waits for the log's sync
//! of what it saw before it answers.
//!
//! Over 600 lines: the file, its settings, migrations and error codes, and
//! the writer connection's `Store`/`StoreTx` glue, which shares the
//! writer's error handling; the group commit is in [`group`], the
//! read-only connections in [`readers`], the operations in [`super::sql`],
//! the namespaces (a database file each) in [`catalogue`].

/// The namespaces, a database file each.
mod catalogue;
mod checkpointer;
mod group;
mod readers;
mod rows;
mod shared;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteLockingMode, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Connection as _};
use tokio::sync::{Mutex, MutexGuard, Notify};

use self::catalogue::OpenStore;
use self::checkpointer::{Checkpointer, WRITER_CHECKPOINT_PAGES};

use self::readers::ReadConn;
use self::rows::{SQLITE, SqliteRow, control, plan_once, run, store_error};
use self::shared::{InFlight, Readers, Shared, Writer};
use super::sql::{self, Dialect, SqlTx, Statement};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

pub use self::catalogue::SqliteCatalogue;

/// The schema migrations, embedded at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// `PRAGMA application_id` of a lightning-store database ("LSTO").
const APPLICATION_ID: i64 = 0x4C53_544F;

/// Settings of a SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Events kept in the history for resuming subscribers (at least).
    pub event_retention: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            event_retention: DEFAULT_EVENT_RETENTION,
        }
    }
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open database {}: {reason}", path.display())]
pub struct OpenError {
    path: PathBuf,
    reason: String,
}

/// The SQLite backend.
pub struct SqliteStore {
    shared: Arc<Shared>,
    flusher: tokio::task::JoinHandle<()>,
    event_retention: u64,
    /// The writer's floor of the watchdog deadlines, shared with readers.
    floor: Arc<sql::DeadlineFloor>,
    /// The file, locked (`flock`) against other servers while the store lives.
    _lock: std::fs::File,
}

impl SqliteStore {
    /// Opens (creating it if missing) the database at `path` and brings its
    /// schema up to date.
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let fail = |reason: String| OpenError {
            path: path.to_owned(),
            reason,
        };
        // The file system explains a missing directory or a permission
        // problem better than SQLite's "unable to open database file".
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| fail(e.to_string().to_lowercase()))?;
        lock.try_lock().map_err(|error| match error {
            std::fs::TryLockError::WouldBlock => {
                fail("the database is in use by another process".into())
            }
            std::fs::TryLockError::Error(error) => fail(error.to_string().to_lowercase()),
        })?;
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .locking_mode(SqliteLockingMode::Exclusive)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(1))
            .statement_cache_capacity(512)
            .thread_name(|id| format!("sqlite-store-{id}"))
            .disable_statement_logging();
        let mut conn = SqliteConnection::connect_with(&connect)
            .await
            .map_err(|e| fail(open_reason(&e)))?;
        check_identity(&mut conn).await.map_err(fail)?;
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode = WAL")
            .fetch_one(&mut conn)
            .await
            .map_err(|e| fail(open_reason(&e)))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(fail(format!(
                "cannot enable write-ahead logging (journal mode stays {mode})"
            )));
        }
        // `run_direct` is what `run` does once it has the connection; `run`'s
        // `Acquire` bound made this future `Send` for one lifetime only, so
        // it could not be boxed as a `Send` future (the catalogue's stores).
        MIGRATOR
            .run_direct(None, &mut conn, false)
            .await
            .map_err(|e| fail(sql::migration_failure(e, &MIGRATOR, open_reason)))?;
        // sqlx opened, checked and migrated the file; the store runs on a
        // rusqlite connection, which executes statements on the calling
        // thread instead of a round trip to a worker thread each.
        conn.close().await.map_err(|e| fail(open_reason(&e)))?;
        let conn = open_connection(path).map_err(|e| fail(e.to_string()))?;
        let checkpointer = Checkpointer::start(path).map_err(|e| fail(e.to_string()))?;
        let floor = Arc::new(sql::DeadlineFloor::new(None));
        let interrupt = conn.get_interrupt_handle();
        let shared = Arc::new(Shared {
            writer: Mutex::new(Writer {
                conn,
                wal: None,
                wal_path: wal_path(path),
                open: false,
                opened: Instant::now(),
                abandoned: false,
                waiters: Vec::new(),
                cache: sql::Cache::default(),
                floor: floor.clone(),
            }),
            flush: Notify::new(),
            queued: AtomicUsize::new(0),
            in_flight: parking_lot::Mutex::new(InFlight::default()),
            readers: Readers::new(path.to_owned()),
            checkpointer,
            interrupt,
            interrupts: AtomicU64::new(0),
        });
        let flusher = tokio::spawn(group::flush_loop(shared.clone()));
        tracing::info!(path = %path.display(), "sqlite database opened");
        Ok(Self {
            shared,
            flusher,
            event_retention: options.event_retention as u64,
            floor,
            _lock: lock,
        })
    }
}

impl SqliteCatalogue {
    /// Opens the catalogue of the namespaces of the database at `path`
    /// (creating the file, the directory of the other namespaces beside it,
    /// `<path>.namespaces/`, and the catalogue's file in it when missing):
    /// the default namespace's store is that file's, opened now, each other
    /// namespace's a file in the directory, all with `options`.
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let default = Arc::new(SqliteStore::open(path, options.clone()).await?);
        let open_store: OpenStore = Box::new(move |file| {
            let options = options.clone();
            Box::pin(async move {
                let store = SqliteStore::open(file, options)
                    .await
                    .map_err(|error| StoreError::Unavailable(error.to_string()))?;
                Ok(Arc::new(store) as Arc<dyn Store>)
            })
        });
        SqliteCatalogue::start(path, default, open_store)
            .await
            .map_err(|(path, reason)| OpenError { path, reason })
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.flusher.abort();
    }
}

/// Returns the path of a database's write-ahead log.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Opens the serving connection: WAL. A `COMMIT` writes the
/// log without syncing it (`synchronous = NORMAL`): it is synced
/// before any commit is acknowledged (see the module docs). The log is
/// checkpointed beside it ([`checkpointer`]); the connection's own
/// automatic checkpoint only restarts a long log.
fn open_connection(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(1))?;
    conn.set_prepared_statement_cache_capacity(512);
    plan_once(&conn)?;
    // `temp_store = MEMORY`: the savepoint journal, which keeps a page's
    // old content for each logical transaction of a group that changes it,
    // stays in memory (it was written to a temporary file once it passed
    // 64 KiB: a write system call per page). A crash needs none of it.
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
         PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES};"
    ))?;
    Ok(conn)
}

/// Refuses a SQLite file that some other program created.
async fn check_identity(conn: &mut SqliteConnection) -> Result<(), String> {
    let application_id: i64 = sqlx::query_scalar("PRAGMA application_id")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_reason(&e))?;
    let objects: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_schema")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| open_reason(&e))?;
    if application_id == APPLICATION_ID || (application_id == 0 && objects == 0) {
        return Ok(());
    }
    Err(format!(
        "it is a SQLite database of another application (application_id {application_id:#x}, \
         {objects} schema objects); refusing to change it"
    ))
}

/// Explains a failure to open or prepare the database.
fn open_reason(error: &sqlx::Error) -> String {
    match sqlite_code(error) {
        Some(26) => "the file is not a SQLite database (or is encrypted or corrupt)".into(),
        Some(11) => "the database file is corrupt".into(),
        Some(5 | 6) => "the database is in use by another process".into(),
        Some(8) => "the database or its directory is read-only".into(),
        Some(14) => "cannot open the file or create its journal next to it \
                     (the directory must be writable)"
            .into(),
        Some(13) => "the disk is full".into(),
        _ => error.to_string(),
    }
}

/// Returns SQLite's primary result code of an error, if it is one.
fn sqlite_code(error: &sqlx::Error) -> Option<i32> {
    match error {
        sqlx::Error::Database(e) => e.code()?.parse::<i32>().ok().map(|code| code & 0xff),
        _ => None,
    }
}

/// Returns true for an error that concerns the connection or the whole
/// database (i/o, disk full, busy, corruption): it aborts the physical
/// transaction even when SQLite kept it open.
fn is_connection_wide(error: &rusqlite::Error) -> bool {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => {
            matches!(
                failure.extended_code & 0xff,
                5 | 6 | 7 | 9 | 10 | 11 | 13 | 26
            )
        }
        _ => false,
    }
}

impl Writer {
    /// Runs a statement of a logical transaction (`savepoint`: it wrote). A
    /// failure that left the physical transaction open (a bad argument, a
    /// constraint) undoes only this logical transaction's savepoint, so the
    /// other transactions of the group still commit; any other failure
    /// aborts the physical transaction.
    fn statement(
        &mut self,
        statement: &Statement<'_>,
        savepoint: bool,
    ) -> StoreResult<Vec<SqliteRow>> {
        let error = match run(&self.conn, statement) {
            Ok(rows) => return Ok(rows),
            Err(error) => error,
        };
        let confined = !self.open || (!self.conn.is_autocommit() && !is_connection_wide(&error));
        if !confined {
            return Err(self.fail(error));
        }
        let error = store_error(error);
        if savepoint {
            self.forget();
            self.control("ROLLBACK TO tx")?;
            self.control("RELEASE tx")?;
        }
        Err(error)
    }

    /// Runs a transaction control statement; a failure aborts the batch.
    fn control(&mut self, sql: &'static str) -> StoreResult<()> {
        let result = control(&self.conn, sql);
        result.map_err(|error| self.fail(error))
    }

    /// Maps an error and aborts the physical transaction, if one is open.
    fn fail(&mut self, error: rusqlite::Error) -> StoreError {
        let error = store_error(error);
        self.abort(&error);
        error
    }

    /// Rolls the physical transaction back and fails every waiting commit.
    fn abort(&mut self, error: &StoreError) {
        // Harmless when no transaction is open (or SQLite already rolled it
        // back after the error).
        let _ = self.conn.execute_batch("ROLLBACK");
        self.open = false;
        self.abandoned = false;
        self.forget();
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(error.clone()));
        }
    }

    /// Forgets what the connection remembers: a rollback may have undone it.
    fn forget(&mut self) {
        self.cache.clear();
        self.floor.forget();
    }

    /// Rolls back the savepoint of a transaction dropped after writing.
    fn recover(&mut self) {
        if self.abandoned {
            self.abandoned = false;
            self.forget();
            if self.control("ROLLBACK TO tx").is_ok() {
                let _ = self.control("RELEASE tx");
            }
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn interrupt(&self) {
        self.shared.interrupts.fetch_add(1, Ordering::SeqCst);
        self.shared.interrupt.interrupt();
    }

    async fn begin_read(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        let conn = ReadConn::acquire(&self.shared).await?;
        let tx = SqlTx::new(conn, self.event_retention, self.floor.clone());
        Ok(Box::new(tx))
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        let generation = self.shared.interrupts.load(Ordering::SeqCst);
        let mut writer = {
            let _queued = Queued::enter(&self.shared.queued);
            self.shared.writer.lock().await
        };
        writer.recover();
        let floor = writer.floor.clone();
        let conn = SqliteConn {
            writer: Some(writer),
            shared: &self.shared,
            savepoint: false,
            generation,
        };
        Ok(Box::new(SqlTx::new(conn, self.event_retention, floor)))
    }
}

/// Counts a logical transaction as queued for the connection while it lives
/// (also when the wait is cancelled).
struct Queued<'a>(&'a AtomicUsize);

impl<'a> Queued<'a> {
    fn enter(queued: &'a AtomicUsize) -> Self {
        queued.fetch_add(1, Ordering::SeqCst);
        Self(queued)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A logical transaction's hold on the connection. Statements run at once,
/// on the calling thread: SQLite answers them from its page cache in
/// microseconds, and only the `COMMIT` waits for the disk.
struct SqliteConn<'a> {
    /// Held until the transaction commits or is dropped.
    writer: Option<MutexGuard<'a, Writer>>,
    shared: &'a Arc<Shared>,
    /// The transaction's savepoint is open: it wrote.
    savepoint: bool,
    /// [`Shared::interrupts`] when the transaction began.
    generation: u64,
}

impl SqliteConn<'_> {
    fn writer(&mut self) -> &mut Writer {
        self.writer.as_mut().expect("held until commit")
    }

    /// Fails a transaction that an interrupt cut short, rolling back its
    /// savepoint alone (the other transactions of the group still commit).
    fn check_interrupt(&mut self) -> StoreResult<()> {
        if self.shared.interrupts.load(Ordering::SeqCst) == self.generation {
            return Ok(());
        }
        if std::mem::take(&mut self.savepoint) {
            let writer = self.writer();
            writer.forget();
            writer.control("ROLLBACK TO tx")?;
            writer.control("RELEASE tx")?;
        }
        Err(StoreError::shutting_down())
    }

    /// Runs a statement; a failure ends the transaction's savepoint (rolled
    /// back alone, or with the physical transaction).
    fn run(&mut self, statement: &Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        self.check_interrupt()?;
        let savepoint = self.savepoint;
        let result = self.writer().statement(statement, savepoint);
        if result.is_err() {
            self.savepoint = false;
        }
        result
    }
}

impl Drop for SqliteConn<'_> {
    fn drop(&mut self) {
        if self.savepoint
            && let Some(writer) = &mut self.writer
        {
            writer.abandoned = true;
        }
    }
}

#[async_trait]
impl sql::Connection for SqliteConn<'_> {
    type Row = SqliteRow;

    const DIALECT: &'static Dialect = &SQLITE;

    async fn begin_write(&mut self) -> StoreResult<()> {
        if self.savepoint {
            return Ok(());
        }
        let writer = self.writer();
        if !writer.open {
            writer.control("BEGIN IMMEDIATE")?;
            writer.open = true;
            writer.opened = Instant::now();
        }
        writer.control("SAVEPOINT tx")?;
        self.savepoint = true;
        Ok(())
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<()> {
        self.run(&statement).map(drop)
    }

    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        self.run(&statement)
    }

    fn cache(&mut self) -> Option<&mut sql::Cache> {
        Some(&mut self.writer().cache)
    }

    async fn rollback(self) {
        // Dropped: the next user of the connection rolls the savepoint back.
    }

    async fn commit(mut self, last: Option<String>) -> StoreResult<Vec<SqliteRow>> {
        self.check_interrupt()?;
        let rows = match last {
            Some(sql) => {
                self.begin_write().await?;
                self.run(&Statement {
                    sql: sql.into(),
                    args: Vec::new(),
                })?
            }
            None => Vec::new(),
        };
        if self.savepoint {
            // Whatever happens, the savepoint is gone: released, or rolled
            // back with the physical transaction.
            self.savepoint = false;
            self.writer().control("RELEASE tx")?;
        }
        let writer = self.writer.take().expect("held until commit");
        group::durable(self.shared, writer).await?;
        Ok(rows)
    }
}
