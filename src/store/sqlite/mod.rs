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
//! # Round trips
//! sqlx runs SQLite on a thread of its own, and each statement is a round
//! trip to it (tens of microseconds, mostly thread wake-ups): the cost that
//! bounds throughput. So a logical transaction defers the writes that return
//! nothing and sends them, with its `BEGIN`/`SAVEPOINT`, in one script with
//! the next statement that returns rows or with its `RELEASE`. Since no
//! other process can write the file, the connection also remembers the last
//! event number and a lower bound of the watchdog deadlines across
//! transactions ([`sql::Cache`]); it forgets both whenever it rolls back.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteLockingMode, SqliteRow, SqliteSynchronous,
};
use sqlx::{ConnectOptions as _, Connection as _, Row as _};
use tokio::sync::{Mutex, MutexGuard, Notify, oneshot};

use super::sql::{self, Arg, Dialect, SqlTx, Statement};
use super::{DEFAULT_EVENT_RETENTION, Store, StoreTx};
use crate::core::error::{StoreError, StoreResult};

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
    conn: SqliteConnection,
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
        let shared = Arc::new(Shared {
            writer: Mutex::new(Writer {
                conn,
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
fn store_error(error: sqlx::Error) -> StoreError {
    let unavailable = |what: &str| StoreError::Unavailable(format!("sqlite: {what}"));
    let mapped = match sqlite_code(&error) {
        Some(13) => unavailable("the disk is full"),
        Some(10) => unavailable(&format!("disk i/o error ({error})")),
        Some(5 | 6) => unavailable("the database is busy"),
        Some(8) => unavailable("the database is read-only"),
        Some(11 | 26) => StoreError::Internal(format!("sqlite: the database is corrupt ({error})")),
        _ => match error {
            sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => {
                unavailable(&format!("connection failed ({error})"))
            }
            other => StoreError::Internal(format!("sqlite: {other}")),
        },
    };
    tracing::error!(error = %mapped, "sqlite statement failed");
    mapped
}

/// Returns the sqlx query of a statement, its arguments bound.
fn query(
    statement: Statement<'_>,
) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    let mut query = match statement.sql {
        Cow::Borrowed(sql) => sqlx::query(sql),
        Cow::Owned(sql) => sqlx::query(sqlx::AssertSqlSafe(sql)),
    };
    for arg in statement.args {
        query = match arg {
            Arg::Null => query.bind(None::<i64>),
            Arg::Int(value) => query.bind(value),
            Arg::Text(text) => query.bind(text),
        };
    }
    query
}

/// Appends `statement` to a script with its `$n` parameters rewritten as
/// anonymous `?` parameters, its arguments reordered (and repeated) to
/// match the text. sqlx looks every named parameter up by name, which SQLite
/// answers with a linear scan: quadratic for the thousands of parameters of
/// a batch insert. Anonymous parameters also number on across the statements
/// of a script.
fn append(script: &mut String, args: &mut Vec<Arg<'static>>, statement: Statement<'_>) {
    let mut given: Vec<Option<Arg<'_>>> = statement.args.into_iter().map(Some).collect();
    // Where each argument went first, for parameters used twice.
    let mut placed: Vec<Option<usize>> = vec![None; given.len()];
    let mut rest = statement.sql.as_ref();
    while let Some(at) = rest.find('$') {
        script.push_str(&rest[..at]);
        script.push('?');
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let index = rest[..digits].parse::<usize>().expect("a parameter number") - 1;
        rest = &rest[digits..];
        let arg = match (given[index].take(), placed[index]) {
            (Some(arg), _) => owned(arg),
            (None, Some(first)) => args[first].clone(),
            (None, None) => unreachable!("an argument is either given or placed"),
        };
        placed[index] = Some(args.len());
        args.push(arg);
    }
    script.push_str(rest);
    script.push_str(";\n");
}

/// Returns an argument that owns its text.
fn owned(arg: Arg<'_>) -> Arg<'static> {
    match arg {
        Arg::Text(text) => Arg::Text(Cow::Owned(text.into_owned())),
        Arg::Null => Arg::Null,
        Arg::Int(value) => Arg::Int(value),
    }
}

impl Writer {
    /// Runs a transaction control statement; a failure aborts the batch.
    async fn control(&mut self, sql: &'static str) -> StoreResult<()> {
        match sqlx::query(sql).execute(&mut self.conn).await {
            Ok(_) => Ok(()),
            Err(error) => Err(self.fail(error).await),
        }
    }

    /// Maps an error and aborts the physical transaction, if one is open.
    async fn fail(&mut self, error: sqlx::Error) -> StoreError {
        let error = store_error(error);
        self.abort(&error).await;
        error
    }

    /// Rolls the physical transaction back and fails every waiting commit.
    async fn abort(&mut self, error: &StoreError) {
        // Harmless when no transaction is open (or SQLite already rolled it
        // back): a failed script may have begun one that `open` does not know.
        let _ = sqlx::query("ROLLBACK").execute(&mut self.conn).await;
        self.open = false;
        self.abandoned = false;
        self.cache.clear();
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(error.clone()));
        }
    }

    /// Rolls back the savepoint of a transaction dropped after writing.
    async fn recover(&mut self) {
        if self.abandoned {
            self.abandoned = false;
            self.cache.clear();
            if self.control("ROLLBACK TO tx").await.is_ok() {
                let _ = self.control("RELEASE tx").await;
            }
        }
    }

    /// Commits the physical transaction and tells every waiter.
    async fn flush(&mut self) {
        if !self.open {
            return;
        }
        if self.control("COMMIT").await.is_ok() {
            self.open = false;
            for waiter in self.waiters.drain(..) {
                let _ = waiter.send(Ok(()));
            }
        }
    }
}

/// The flusher: one physical `COMMIT` for every logical commit waiting.
async fn flush_loop(shared: Arc<Shared>) {
    loop {
        shared.flush.notified().await;
        let mut writer = shared.writer.lock().await;
        writer.recover().await;
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
        writer.recover().await;
        let conn = SqliteConn {
            writer: Some(writer),
            shared: &self.shared,
            writing: false,
            savepoint: false,
            deferred: Vec::new(),
        };
        Ok(Box::new(SqlTx::new(conn, self.event_retention)))
    }
}

/// A logical transaction's hold on the connection. Writes that return
/// nothing are deferred and sent with the next statement that returns rows,
/// or with the commit, as one script: one round trip to SQLite's thread
/// instead of one per statement.
struct SqliteConn<'a> {
    /// Held until the transaction commits or is dropped.
    writer: Option<MutexGuard<'a, Writer>>,
    shared: &'a Shared,
    /// The transaction writes: the next script opens its savepoint.
    writing: bool,
    /// The transaction's savepoint is open in SQLite.
    savepoint: bool,
    /// Writes not sent yet.
    deferred: Vec<Statement<'static>>,
}

impl SqliteConn<'_> {
    fn writer(&mut self) -> &mut Writer {
        self.writer.as_mut().expect("held until commit")
    }

    /// Sends the deferred writes and `last` as one script (opening the
    /// physical transaction and the savepoint first when the transaction
    /// writes) and returns the rows of `last`, the only statement of the
    /// script that returns rows.
    async fn run(&mut self, last: Option<Statement<'_>>) -> StoreResult<Vec<SqliteRow>> {
        let open_savepoint = self.writing && !self.savepoint;
        let begin = open_savepoint && !self.writer().open;
        let alone = !open_savepoint && self.deferred.is_empty();
        let result = match last {
            // A fixed statement runs as it is: its text is a cached statement.
            Some(statement) if alone && matches!(statement.sql, Cow::Borrowed(_)) => {
                query(statement).fetch_all(&mut self.writer().conn).await
            }
            None if alone => return Ok(Vec::new()),
            last => {
                let mut script = String::new();
                let mut args = Vec::new();
                if begin {
                    script.push_str("BEGIN IMMEDIATE;\n");
                }
                if open_savepoint {
                    script.push_str("SAVEPOINT tx;\n");
                }
                for statement in std::mem::take(&mut self.deferred) {
                    append(&mut script, &mut args, statement);
                }
                if let Some(statement) = last {
                    append(&mut script, &mut args, statement);
                }
                let statement = Statement {
                    sql: Cow::Owned(script),
                    args,
                };
                query(statement).fetch_all(&mut self.writer().conn).await
            }
        };
        match result {
            Ok(rows) => {
                self.writer().open |= begin;
                self.savepoint |= open_savepoint;
                Ok(rows)
            }
            Err(error) => {
                // The physical transaction is gone, with this savepoint.
                self.savepoint = false;
                self.writing = false;
                self.deferred.clear();
                Err(self.writer().fail(error).await)
            }
        }
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

impl sql::Row for SqliteRow {
    fn opt_int(&self, index: usize) -> StoreResult<Option<i64>> {
        self.try_get(index)
            .map_err(|e| sql::codec::corrupt("integer", e))
    }

    fn opt_text(&self, index: usize) -> StoreResult<Option<String>> {
        self.try_get(index)
            .map_err(|e| sql::codec::corrupt("text", e))
    }
}

#[async_trait]
impl sql::Connection for SqliteConn<'_> {
    type Row = SqliteRow;

    const DIALECT: &'static Dialect = &SQLITE;

    async fn begin_write(&mut self) -> StoreResult<()> {
        self.writing = true;
        Ok(())
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<()> {
        self.deferred.push(Statement {
            sql: statement.sql,
            args: statement.args.into_iter().map(owned).collect(),
        });
        Ok(())
    }

    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<SqliteRow>> {
        self.run(Some(statement)).await
    }

    fn cache(&mut self) -> Option<&mut sql::Cache> {
        Some(&mut self.writer().cache)
    }

    async fn commit(mut self) -> StoreResult<()> {
        if self.writing {
            self.run(Some(Statement::new("RELEASE tx"))).await?;
            self.savepoint = false;
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
