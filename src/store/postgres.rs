//! The PostgreSQL backend: several stateless servers can share one
//! database. The operations are the shared SQL ones ([`super::sql`]); this
//! module owns what is PostgreSQL's: the pool and its timeouts, TLS,
//! migrations, error codes and the notifications that carry events between
//! servers.
//!
//! # Transactions
//! Every store transaction is a PostgreSQL transaction (`READ COMMITTED`)
//! that locks rows, not the store: the aggregate reads the engine writes
//! back are `SELECT … FOR UPDATE`, claims take the queue's head with
//! `FOR UPDATE SKIP LOCKED` (concurrent dequeues on any server claim
//! different rollouts without waiting for each other), and the watchdog
//! passes over rollouts other transactions hold. Updates of different
//! rollouts never wait for each other. Counters are sharded per connection,
//! and event numbers come from one counter row taken last (see
//! [`super::sql`]'s `apply` module for why they stay gapless and in commit
//! order).
//!
//! # Group commit
//! A transaction commits without waiting for the disk
//! (`SET LOCAL synchronous_commit TO OFF`), which releases its row locks
//! and the event counter at once, and then, in the same round trip, waits
//! for durability with a one-statement transaction of the database's own
//! `synchronous_commit` (`COMMIT` below): the call is acknowledged only once
//! its commit is on disk, as before, but the counter is no longer held
//! across an fsync, and the waits of concurrent transactions share flushes.
//! A transaction that read another's writes before they were durable waits
//! for them too (its own wait flushes everything logged before it), so no
//! acknowledged answer depends on a write a crash can lose; read-only
//! transactions, the event followers' included, wait the same way. (A/B
//! against a plain synchronous `COMMIT` in docs/performance.md.)
//!
//! # Several servers
//! A transaction that records events also sends `NOTIFY lightning_store`
//! (delivered at commit). Every server listens on that channel and, for
//! each notification, publishes the events it has not seen yet, read from
//! the events table in sequence order, on its own event bus: waiting
//! dequeues, completion watches, subscriptions and the session dispatcher
//! of every server see what any server committed.
//!
//! # Drain deadline
//! [`Store::interrupt`] cancels this server's running statements from a
//! fresh connection and fails its open transactions ([`interrupt`]).

mod interrupt;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row as _};

use self::interrupt::Interrupts;
use super::sql::{self, Arg, DeadlineFloor, Dialect, SqlTx, Statement};
use crate::core::error::{StoreError, StoreResult};
use crate::core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

/// The schema migrations, embedded at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Opens a transaction whose `COMMIT` does not wait for the disk: it
/// releases the transaction's locks (the event counter above all) at once.
/// Answers the connection's backend process id, which an interrupt cancels.
const BEGIN: &str = "BEGIN; SET LOCAL synchronous_commit TO OFF; SELECT pg_backend_pid()";

/// Commits, then waits until the commit is durable, in one round trip: the
/// second statement is a transaction of its own with the database's
/// `synchronous_commit`, and waiting for its commit record to be flushed
/// waits for everything logged before it. It must write a row: the
/// database commits a transaction that logged nothing but its commit
/// asynchronously. Each connection writes its own row, so the waits never
/// wait for each other's locks, and concurrent waits share flushes (the
/// database's group commit).
const COMMIT: &str = "COMMIT; INSERT INTO commit_barrier (pid, commits) \
     VALUES (pg_backend_pid(), 1) ON CONFLICT (pid) \
     DO UPDATE SET commits = commit_barrier.commits + 1";

/// Statements with at most this many parameters are prepared once per
/// connection and cached.
const PREPARED_PARAMS: usize = 256;

/// Folds the counter shards of backends that no longer run into shard 0, in
/// one statement (the sums never change), and forgets their commit barrier
/// rows.
const FOLD_COUNTERS: &str = "WITH folded AS (DELETE FROM counters WHERE shard <> 0 \
     AND shard NOT IN (SELECT pid FROM pg_stat_activity) RETURNING name, value) \
     INSERT INTO counters (name, shard, value) SELECT name, 0, SUM(value) FROM folded \
     GROUP BY name ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value; \
     DELETE FROM commit_barrier WHERE pid NOT IN (SELECT pid FROM pg_stat_activity)";

/// How long this server trusts the floor of the watchdog deadlines it
/// read (see [`DeadlineFloor`]): an operation sees the verdicts of
/// deadlines other servers wrote within this time, like a watchdog timer
/// at the default interval.
const SHARED_FLOOR_TTL: Duration = Duration::from_millis(50);

/// The notification channel on which committed events are announced (by
/// the dialect's `announce`, which names it too).
pub const EVENTS_CHANNEL: &str = "lightning_store";

static POSTGRES: Dialect = Dialect {
    contains: |haystack, needle| format!("strpos({haystack}, {needle}) > 0"),
    binary_text: |expression| format!("({expression}) COLLATE \"C\""),
    max_params: 65_535,
    shared: true,
    announce: "pg_notify('lightning_store', '')",
    // A sequence: no row lock, so opens on several servers never queue.
    next_session_epoch: "SELECT nextval('session_epochs')",
    // Transaction-scoped advisory locks on the names' 64-bit hashes, taken
    // in hash order so that two transactions locking several names cannot
    // deadlock; a collision only serialises more.
    lock_names: Some(
        "SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT DISTINCT \
         hashtextextended(n, 0) AS k FROM unnest(CAST($1 AS TEXT[])) AS n ORDER BY k) AS keys",
    ),
};

/// Settings of a PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Events kept in the history for resuming subscribers (at least).
    pub event_retention: usize,
    /// Connections in the pool.
    pub max_connections: u32,
    /// How long opening a transaction waits for a connection (or for a new
    /// one to connect) before failing with UNAVAILABLE.
    pub connect_timeout: Duration,
    /// How long one statement (or commit) may take, enforced by the client
    /// and by the database.
    pub statement_timeout: Duration,
    /// Idle connections beyond this age are closed.
    pub idle_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            event_retention: DEFAULT_EVENT_RETENTION,
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open database {target}: {reason}")]
pub struct OpenError {
    target: String,
    reason: String,
}

/// Backend process ids of this server's connections, whose announcements
/// are not hints: this server published those events itself. (A process id
/// the database reuses later for another server's connection only costs
/// that connection's hints, which the follower's polling makes up for.)
type OwnBackends = Arc<parking_lot::Mutex<std::collections::HashSet<u32>>>;

/// The PostgreSQL backend.
pub struct PostgresStore {
    pool: PgPool,
    own_backends: OwnBackends,
    /// The floor of the watchdog deadlines this server's transactions share.
    floor: Arc<DeadlineFloor>,
    event_retention: u64,
    /// The client-side deadline of one database call.
    deadline: Duration,
    /// Connections in the pool.
    max_connections: u32,
    /// The transactions an interrupt cancels.
    interrupts: Arc<Interrupts>,
}

/// Whole milliseconds of a duration, as PostgreSQL settings take them.
fn millis(duration: Duration) -> String {
    duration.as_millis().max(1).to_string()
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// with `?sslmode=…&sslrootcert=…` for TLS) and brings its schema up to date.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, OpenError> {
        let connect: PgConnectOptions = url.parse().map_err(|e| OpenError {
            target: "(unparsable URL)".into(),
            reason: format!("invalid database URL: {e}"),
        })?;
        // Name the database without the password.
        let target = format!(
            "{}:{}/{}",
            connect.get_host(),
            connect.get_port(),
            connect.get_database().unwrap_or("")
        );
        let fail = |reason: String| OpenError {
            target: target.clone(),
            reason,
        };
        let statement_timeout = millis(options.statement_timeout);
        let connect = connect
            .application_name("lightning-store")
            .statement_cache_capacity(512)
            .options([
                // Statements that travel without parameters quote texts
                // for this setting (see `sql::query::text_literal`).
                ("standard_conforming_strings", "on"),
                ("statement_timeout", statement_timeout.as_str()),
                (
                    "idle_in_transaction_session_timeout",
                    statement_timeout.as_str(),
                ),
                ("tcp_keepalives_idle", "10"),
                ("tcp_keepalives_interval", "5"),
                ("tcp_keepalives_count", "3"),
            ]);
        let own_backends = OwnBackends::default();
        let registry = own_backends.clone();
        // Connections are not pinged before each use (see `begin`).
        let interrupts = Interrupts::new(
            connect.clone(),
            options.statement_timeout + Duration::from_secs(1),
        );
        let pool = PgPoolOptions::new()
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                let registry = registry.clone();
                Box::pin(async move {
                    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                        .fetch_one(&mut *conn)
                        .await?;
                    registry.lock().insert(pid.unsigned_abs());
                    Ok(())
                })
            })
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.connect_timeout)
            .idle_timeout(options.idle_timeout)
            .connect_with(connect)
            .await
            .map_err(|e| fail(e.to_string()))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| fail(sql::migration_failure(e, &MIGRATOR, |e| e.to_string())))?;
        // Counter shards of closed connections fold into shard 0, so that
        // their number stays that of the live connections.
        sqlx::raw_sql(FOLD_COUNTERS)
            .execute(&pool)
            .await
            .map_err(|e| fail(e.to_string()))?;
        tracing::info!(database = target, "postgres database opened");
        Ok(Self {
            pool,
            own_backends,
            floor: Arc::new(DeadlineFloor::new(Some(SHARED_FLOOR_TTL))),
            event_retention: options.event_retention as u64,
            deadline: options.statement_timeout + Duration::from_secs(1),
            max_connections: options.max_connections.max(1),
            interrupts,
        })
    }
}

/// Maps a failure while serving to a store error.
fn store_error(error: sqlx::Error) -> StoreError {
    let unavailable = |what: String| StoreError::Unavailable(format!("postgres: {what}"));
    let mapped = match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => unavailable(error.to_string()),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // Connection exceptions, insufficient resources, operator
            // intervention (shutdown, statement timeout), serialization
            // failures, deadlocks.
            Some(code)
                if code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57")
                    || code == "40001"
                    || code == "40P01" =>
            {
                unavailable(error.to_string())
            }
            _ => StoreError::Internal(format!("postgres: {error}")),
        },
        _ => StoreError::Internal(format!("postgres: {error}")),
    };
    tracing::error!(error = %mapped, "postgres statement failed");
    mapped
}

/// Returns whether an error says that the database closed the connection
/// (or is shutting down): the connection is gone, nothing ran on it.
fn closed_by_database(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P0")),
        _ => false,
    }
}

/// Returns the sqlx query of a statement, its arguments bound.
fn query(
    statement: Statement<'_>,
) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
    // Generated text with few parameters (one row's write set, a filter)
    // recurs and is worth a cached prepared statement; a large batch's is
    // not.
    let persistent = statement.args.len() <= PREPARED_PARAMS;
    let mut query = match statement.sql {
        Cow::Borrowed(sql) => sqlx::query(sql),
        Cow::Owned(sql) => sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(persistent),
    };
    for arg in statement.args {
        query = match arg {
            Arg::NullInt => query.bind(None::<i64>),
            Arg::NullText => query.bind(None::<String>),
            Arg::Int(value) => query.bind(value),
            Arg::Text(text) => query.bind(text.into_owned()),
            Arg::Ints(values) => query.bind(values),
            Arg::Texts(values) => query.bind(values),
        };
    }
    query
}

#[async_trait]
impl Store for PostgresStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn begin(&self) -> StoreResult<Box<dyn StoreTx + '_>> {
        // Pooled connections are not tested before use (a round trip per
        // transaction): one that the database closed while it sat in the
        // pool fails its `BEGIN` at once, and the transaction takes another.
        let generation = self.interrupts.settled().await;
        let mut closed = 0;
        loop {
            let conn = self.pool.acquire().await.map_err(store_error)?;
            let mut conn = PgConn {
                conn: Some(conn),
                open: false,
                deadline: self.deadline,
                pid: None,
                generation,
                interrupts: self.interrupts.clone(),
            };
            if conn.begin().await? {
                let floor = self.floor.clone();
                return Ok(Box::new(SqlTx::new(conn, self.event_retention, floor)));
            }
            closed += 1;
            if closed > self.max_connections {
                return Err(StoreError::Unavailable(
                    "postgres: every pooled connection was closed".into(),
                ));
            }
        }
    }

    async fn commit_hints(&self) -> StoreResult<Option<BoxStream<'static, ()>>> {
        let mut listener = PgListener::connect_with(&self.pool)
            .await
            .map_err(store_error)?;
        listener.listen(EVENTS_CHANNEL).await.map_err(store_error)?;
        // A lost connection is re-established on the next receive; what was
        // announced meanwhile is found by the reader's polling.
        let own = self.own_backends.clone();
        let hints = futures::stream::unfold(listener, move |mut listener| {
            let own = own.clone();
            async move {
                loop {
                    match listener.try_recv().await {
                        Ok(Some(notice)) if own.lock().contains(&notice.process_id()) => continue,
                        Ok(Some(_)) => return Some(((), listener)),
                        Ok(None) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "postgres: event notifications interrupted");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        });
        Ok(Some(Box::pin(hints)))
    }

    fn interrupt(&self) {
        self.interrupts.interrupt();
    }

    async fn close(&self) {
        // Bounded: connections in use are closed when their transactions
        // end, and every call has its deadline.
        let _ = tokio::time::timeout(self.deadline, self.pool.close()).await;
    }
}

/// A store transaction on one pooled connection. Dropped without
/// committing, it rolls back (on a task, since `Drop` cannot wait) and the
/// connection returns to the pool; a connection whose call failed or timed
/// out is closed instead, since its state is unknown.
struct PgConn {
    /// `None` once a call failed.
    conn: Option<PoolConnection<Postgres>>,
    /// `BEGIN` was sent and neither `COMMIT` nor `ROLLBACK` yet.
    open: bool,
    deadline: Duration,
    /// The connection's backend process id while the transaction is
    /// registered with [`Interrupts`].
    pid: Option<u32>,
    /// The interrupt generation the transaction began in.
    generation: u64,
    interrupts: Arc<Interrupts>,
}

impl PgConn {
    fn conn(&mut self) -> StoreResult<&mut PoolConnection<Postgres>> {
        self.conn.as_mut().ok_or_else(|| {
            StoreError::Unavailable("postgres: the transaction's connection failed".into())
        })
    }

    /// Runs a database call under the deadline; a failure closes the
    /// connection. A transaction that an interrupt cut short fails as the
    /// shutdown's, before its next call or when its call was cancelled.
    async fn call<T>(
        &mut self,
        call: impl AsyncFnOnce(&mut PoolConnection<Postgres>) -> Result<T, sqlx::Error>,
    ) -> StoreResult<T> {
        if !self.interrupts.is_current(self.generation) {
            return Err(StoreError::shutting_down());
        }
        let error = match self.call_raw(call).await? {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        self.discard();
        if !self.interrupts.is_current(self.generation) {
            return Err(StoreError::shutting_down());
        }
        Err(store_error(error))
    }

    /// Unregisters the transaction from [`Interrupts`]; returns false when
    /// an interrupt came since it began.
    fn leave(&mut self) -> bool {
        match self.pid.take() {
            Some(pid) => self.interrupts.leave(pid, self.generation),
            None => self.interrupts.is_current(self.generation),
        }
    }

    /// Runs a database call under the deadline and returns the database's
    /// error as it is; no answer in time closes the connection.
    async fn call_raw<T>(
        &mut self,
        call: impl AsyncFnOnce(&mut PoolConnection<Postgres>) -> Result<T, sqlx::Error>,
    ) -> StoreResult<Result<T, sqlx::Error>> {
        let deadline = self.deadline;
        let conn = self.conn()?;
        match tokio::time::timeout(deadline, call(conn)).await {
            Ok(result) => Ok(result),
            Err(_) => {
                self.discard();
                let error = StoreError::Unavailable(format!(
                    "postgres: no answer within {} ms",
                    deadline.as_millis()
                ));
                tracing::error!(%error, "postgres statement failed");
                Err(error)
            }
        }
    }

    /// Closes the connection instead of returning it to the pool: its state
    /// is unknown.
    fn discard(&mut self) {
        self.leave();
        if let Some(mut conn) = self.conn.take() {
            conn.close_on_drop();
        }
        self.open = false;
    }

    /// Opens the transaction and registers it with [`Interrupts`]; returns
    /// `false` (and discards the connection) when the database had closed
    /// the connection while it sat in the pool.
    async fn begin(&mut self) -> StoreResult<bool> {
        let result = self
            .call_raw(async |conn| sqlx::raw_sql(BEGIN).fetch_all(&mut **conn).await)
            .await?;
        match result {
            Ok(rows) => {
                self.open = true;
                let pid: i32 = rows
                    .last()
                    .ok_or_else(|| StoreError::Internal("postgres: no backend pid".into()))?
                    .try_get(0)
                    .map_err(|e| sql::codec::corrupt("backend pid", e))?;
                let pid = pid.unsigned_abs();
                if !self.interrupts.enter(pid, self.generation) {
                    return Err(StoreError::shutting_down());
                }
                self.pid = Some(pid);
                Ok(true)
            }
            Err(error) if closed_by_database(&error) => {
                tracing::debug!(%error, "postgres: a pooled connection was closed, taking another");
                self.discard();
                Ok(false)
            }
            Err(error) => {
                self.discard();
                Err(store_error(error))
            }
        }
    }

    /// Runs a transaction control statement.
    async fn control(&mut self, sql: &'static str) -> StoreResult<()> {
        self.call(async |conn| sqlx::raw_sql(sql).execute(&mut **conn).await.map(drop))
            .await
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        self.leave();
        if !self.open {
            return;
        }
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let deadline = self.deadline;
        tokio::spawn(async move {
            let rollback = sqlx::raw_sql("ROLLBACK").execute(&mut *conn);
            if !matches!(tokio::time::timeout(deadline, rollback).await, Ok(Ok(_))) {
                conn.close_on_drop();
            }
        });
    }
}

impl sql::Row for PgRow {
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
impl sql::Connection for PgConn {
    type Row = PgRow;

    const DIALECT: &'static Dialect = &POSTGRES;

    async fn begin_write(&mut self) -> StoreResult<()> {
        Ok(())
    }

    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<()> {
        let query = query(statement);
        self.call(async |conn| query.execute(&mut **conn).await.map(drop))
            .await
    }

    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<PgRow>> {
        let query = query(statement);
        self.call(async |conn| query.fetch_all(&mut **conn).await)
            .await
    }

    fn cache(&mut self) -> Option<&mut sql::Cache> {
        // Other servers write the same database: nothing can be remembered.
        None
    }

    async fn commit(mut self, last: Option<String>) -> StoreResult<Vec<PgRow>> {
        // Out of the interrupt's reach before the commit is sent: an
        // interrupt either came first (nothing commits) or cancels nothing
        // of it (its answer follows the commit).
        if !self.leave() {
            return Err(StoreError::shutting_down());
        }
        let rows = match last {
            None => {
                self.control(COMMIT).await?;
                Vec::new()
            }
            Some(last) => {
                let sql = sqlx::AssertSqlSafe(format!("{last}; {COMMIT}"));
                self.call(async |conn| sqlx::raw_sql(sql).fetch_all(&mut **conn).await)
                    .await?
            }
        };
        self.open = false;
        Ok(rows)
    }

    async fn rollback(mut self) {
        self.leave();
        if self.open && self.control("ROLLBACK").await.is_ok() {
            self.open = false;
        }
    }
}
