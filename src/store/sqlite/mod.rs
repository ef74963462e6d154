//! The SQLite backend: the durable, embedded default. The operations are the
//! shared SQL ones ([`super::sql`]); this module owns what is SQLite's: the
//! file, its settings, migrations, error codes and group commit.
//!
//! # Durability
//! The database runs in WAL mode with `synchronous = FULL`: a physical
//! `COMMIT` returns only after the log is fsynced, and no logical commit is
//! acknowledged before the physical `COMMIT` that contains it has returned.
//! The file is opened in exclusive locking mode, so a second server on the
//! same file fails at startup instead of sharing it.
//!
//! # Group commit
//! One connection does all the work; a logical transaction ([`Store::begin`])
//! holds it through a fair async mutex for its whole duration, so logical
//! transactions are serialised. Many of them share one physical transaction:
//! * the first write of a logical transaction opens the physical transaction
//!   (`BEGIN IMMEDIATE`) if none is open, then a `SAVEPOINT`;
//! * a logical commit `RELEASE`s its savepoint, queues itself as waiting for
//!   durability, hands the connection on and wakes the flusher;
//! * the flusher task queues for the connection like everyone else, so it
//!   gets it after every transaction that was already waiting: it issues one
//!   `COMMIT` (one fsync) for all of them and tells each waiter the outcome.
//!
//! Under load, the transactions that arrive while one `COMMIT` is syncing
//! form the next batch, so throughput is bounded by statement execution,
//! not by fsyncs; a lone client waits for one fsync per commit, as without
//! batching. A logical transaction that read state other transactions left
//! uncommitted waits for the same `COMMIT` when it commits (even without
//! writes), so nothing it returns can be lost by a crash.
//!
//! A logical transaction dropped after writing leaves its savepoint to the
//! next user of the connection, which rolls it back first (`Drop` cannot
//! run statements). Any SQLite error while a physical transaction is open
//! aborts that physical transaction: it is rolled back and every logical
//! commit waiting on it fails with that error (disk full and I/O errors are
//! UNAVAILABLE), so an error never silently loses an acknowledged write and
//! a failed statement cannot leave a half-applied transaction behind.
//!
//! # Statements on the calling thread
//! sqlx opens, checks and migrates the file; the store then serves on a
//! rusqlite connection and runs each statement on the calling task's
//! thread: SQLite answers from its page cache in microseconds, where a
//! round trip to a worker thread per statement cost tens of microseconds
//! (mostly thread wake-ups) and bounded throughput. Only the `COMMIT`,
//! which waits for the disk, runs on a blocking thread. Since no other
//! process can write the file, the connection also remembers the last
//! event number and a lower bound of the watchdog deadlines across
//! transactions ([`sql::Cache`]); it forgets both whenever it rolls back.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteLockingMode, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Connection as _};
use tokio::sync::{Mutex, MutexGuard, Notify, oneshot};

use super::sql::{self, Arg, Dialect, SqlTx, Statement};
use crate::core::error::{StoreError, StoreResult};
use crate::core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

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
}

struct Shared {
    writer: Mutex<Writer>,
    /// Wakes the flusher: a logical commit is waiting for durability.
    flush: Notify,
}

/// The connection and the state of its physical transaction.
struct Writer {
    /// Locked only by the holder of the writer (the mutex lets the flusher's
    /// blocking thread run the `COMMIT`).
    conn: Arc<std::sync::Mutex<rusqlite::Connection>>,
    /// A physical transaction is open.
    open: bool,
    /// A logical transaction wrote and was dropped without committing: its
    /// savepoint must be rolled back before anyone else uses the connection.
    abandoned: bool,
    /// Logical commits waiting for the physical `COMMIT`.
    waiters: Vec<oneshot::Sender<StoreResult<()>>>,
    /// What the connection remembers across transactions.
    cache: sql::Cache,
}

static SQLITE: Dialect = Dialect {
    contains: |haystack, needle| format!("instr({haystack}, {needle}) > 0"),
    binary_text: |expression| expression.to_owned(),
    max_params: 32_766,
    shared: false,
    announce: "",
};

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
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| fail(e.to_string().to_lowercase()))?;
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
        MIGRATOR.run(&mut conn).await.map_err(|e| {
            fail(match e {
                sqlx::migrate::MigrateError::VersionMissing(version) => format!(
                    "it was written by a newer lightning-store (unknown schema migration {version})"
                ),
                sqlx::migrate::MigrateError::Execute(e) => open_reason(&e),
                other => other.to_string(),
            })
        })?;
        // sqlx opened, checked and migrated the file; the store runs on a
        // rusqlite connection, which executes statements on the calling
        // thread instead of a round trip to a worker thread each.
        conn.close().await.map_err(|e| fail(open_reason(&e)))?;
        let conn = open_connection(path).map_err(|e| fail(e.to_string()))?;
        let shared = Arc::new(Shared {
            writer: Mutex::new(Writer {
                conn: Arc::new(std::sync::Mutex::new(conn)),
                open: false,
                abandoned: false,
                waiters: Vec::new(),
                cache: sql::Cache::default(),
            }),
            flush: Notify::new(),
        });
        let flusher = tokio::spawn(flush_loop(shared.clone()));
        tracing::info!(path = %path.display(), "sqlite database opened");
        Ok(Self {
            shared,
            flusher,
            event_retention: options.event_retention as u64,
        })
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.flusher.abort();
    }
}

/// Opens the serving connection: exclusive (held from the first statement
/// on, so a second server on the file fails), WAL, fsync on every commit.
fn open_connection(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(1))?;
    conn.set_prepared_statement_cache_capacity(512);
    conn.execute_batch(
        "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; \
         PRAGMA synchronous = FULL; BEGIN IMMEDIATE; COMMIT;",
    )?;
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

/// Maps a failure while serving to a store error.
fn store_error(error: rusqlite::Error) -> StoreError {
    let unavailable = |what: &str| StoreError::Unavailable(format!("sqlite: {what}"));
    let code = match &error {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.extended_code & 0xff),
        _ => None,
    };
    let mapped = match code {
        Some(13) => unavailable("the disk is full"),
        Some(10) => unavailable(&format!("disk i/o error ({error})")),
        Some(5 | 6) => unavailable("the database is busy"),
        Some(8) => unavailable("the database is read-only"),
        Some(11 | 26) => StoreError::Internal(format!("sqlite: the database is corrupt ({error})")),
        _ => StoreError::Internal(format!("sqlite: {error}")),
    };
    tracing::error!(error = %mapped, "sqlite statement failed");
    mapped
}

/// Rewrites the `$n` parameters of the shared SQL as SQLite's `?n`, whose
/// index is `n` itself: arguments bind by position, without the name lookup
/// SQLite answers with a linear scan (quadratic for a batch insert's
/// thousands of parameters).
fn numbered(sql: &str) -> Cow<'_, str> {
    if sql.contains('$') {
        Cow::Owned(sql.replace('$', "?"))
    } else {
        Cow::Borrowed(sql)
    }
}

/// One result row, its cells copied out of SQLite.
pub struct SqliteRow(Vec<Value>);

impl sql::Row for SqliteRow {
    fn opt_int(&self, index: usize) -> StoreResult<Option<i64>> {
        match self.0.get(index) {
            Some(Value::Null) => Ok(None),
            Some(Value::Integer(value)) => Ok(Some(*value)),
            other => Err(sql::codec::corrupt("integer", format_args!("{other:?}"))),
        }
    }

    fn opt_text(&self, index: usize) -> StoreResult<Option<String>> {
        match self.0.get(index) {
            Some(Value::Null) => Ok(None),
            Some(Value::Text(text)) => Ok(Some(text.clone())),
            other => Err(sql::codec::corrupt("text", format_args!("{other:?}"))),
        }
    }
}

/// Runs one statement on the connection and returns its rows.
fn run(conn: &rusqlite::Connection, statement: &Statement<'_>) -> rusqlite::Result<Vec<SqliteRow>> {
    let mut prepared = conn.prepare_cached(&numbered(&statement.sql))?;
    for (at, arg) in statement.args.iter().enumerate() {
        match arg {
            Arg::NullInt | Arg::NullText => {
                prepared.raw_bind_parameter(at + 1, rusqlite::types::Null)?
            }
            Arg::Int(value) => prepared.raw_bind_parameter(at + 1, value)?,
            Arg::Text(text) => prepared.raw_bind_parameter(at + 1, text.as_ref())?,
        }
    }
    let columns = prepared.column_count();
    let mut rows = prepared.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let cells = (0..columns)
            .map(|at| row.get::<_, Value>(at))
            .collect::<rusqlite::Result<_>>()?;
        out.push(SqliteRow(cells));
    }
    Ok(out)
}

/// Locks the connection. Only the holder of the writer (or its flusher's
/// `COMMIT`) uses it, so the lock is never contended; a panic while it was
/// held leaves SQLite's own state consistent.
fn lock(
    conn: &std::sync::Mutex<rusqlite::Connection>,
) -> std::sync::MutexGuard<'_, rusqlite::Connection> {
    conn.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Writer {
    fn conn(&self) -> std::sync::MutexGuard<'_, rusqlite::Connection> {
        lock(&self.conn)
    }

    /// Runs a statement; a failure aborts the physical transaction.
    fn statement(&mut self, statement: &Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        let result = run(&self.conn(), statement);
        result.map_err(|error| self.fail(error))
    }

    /// Runs a transaction control statement; a failure aborts the batch.
    fn control(&mut self, sql: &'static str) -> StoreResult<()> {
        let result = self.conn().execute_batch(sql);
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
        let _ = self.conn().execute_batch("ROLLBACK");
        self.open = false;
        self.abandoned = false;
        self.cache.clear();
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(error.clone()));
        }
    }

    /// Rolls back the savepoint of a transaction dropped after writing.
    fn recover(&mut self) {
        if self.abandoned {
            self.abandoned = false;
            self.cache.clear();
            if self.control("ROLLBACK TO tx").is_ok() {
                let _ = self.control("RELEASE tx");
            }
        }
    }

    /// Commits the physical transaction and tells every waiter. The
    /// `COMMIT` waits for an fsync, so it runs on a blocking thread.
    async fn flush(&mut self) {
        if !self.open {
            return;
        }
        let conn = self.conn.clone();
        let committed =
            tokio::task::spawn_blocking(move || lock(&conn).execute_batch("COMMIT")).await;
        match committed {
            Ok(Ok(())) => {
                self.open = false;
                for waiter in self.waiters.drain(..) {
                    let _ = waiter.send(Ok(()));
                }
            }
            Ok(Err(error)) => {
                self.fail(error);
            }
            Err(panicked) => {
                let error = StoreError::Internal(format!("sqlite: commit panicked: {panicked}"));
                self.abort(&error);
            }
        }
    }
}

/// The flusher: one physical `COMMIT` for every logical commit waiting.
async fn flush_loop(shared: Arc<Shared>) {
    loop {
        shared.flush.notified().await;
        let mut writer = shared.writer.lock().await;
        writer.recover();
        writer.flush().await;
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        let mut writer = self.shared.writer.lock().await;
        writer.recover();
        let conn = SqliteConn {
            writer: Some(writer),
            shared: &self.shared,
            savepoint: false,
        };
        Ok(Box::new(SqlTx::new(conn, self.event_retention)))
    }
}

/// A logical transaction's hold on the connection. Statements run at once,
/// on the calling thread: SQLite answers them from its page cache in
/// microseconds, and only the `COMMIT` waits for the disk.
struct SqliteConn<'a> {
    /// Held until the transaction commits or is dropped.
    writer: Option<MutexGuard<'a, Writer>>,
    shared: &'a Shared,
    /// The transaction's savepoint is open: it wrote.
    savepoint: bool,
}

impl SqliteConn<'_> {
    fn writer(&mut self) -> &mut Writer {
        self.writer.as_mut().expect("held until commit")
    }

    /// Runs a statement; a failure ends the transaction's savepoint with
    /// the physical transaction.
    fn run(&mut self, statement: &Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        let result = self.writer().statement(statement);
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

    async fn commit(mut self) -> StoreResult<()> {
        if self.savepoint {
            // Whatever happens, the savepoint is gone: released, or rolled
            // back with the physical transaction.
            self.savepoint = false;
            self.writer().control("RELEASE tx")?;
        }
        let mut writer = self.writer.take().expect("held until commit");
        if !writer.open {
            // Everything this transaction read was already durable.
            return Ok(());
        }
        let (done, durable) = oneshot::channel();
        writer.waiters.push(done);
        drop(writer);
        self.shared.flush.notify_one();
        durable.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "sqlite: the store closed before the commit was durable".into(),
            ))
        })
    }
}
