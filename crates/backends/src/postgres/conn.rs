//! One store transaction on one pooled PostgreSQL connection: its
//! statements under the call deadline, its commit with the durability wait,
//! and its place in the interrupt register ([`super::interrupt`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row as _};

use super::dialect::{POSTGRES, store_error};
use super::durability::{Durability, Next, Role};
use super::interrupt::Interrupts;
use super::rollbacks::PendingRollbacks;
use crate::sql::{self, Arg, Dialect, Statement};
use lightning_store_core::error::{StoreError, StoreResult};

/// Opens a transaction and answers the connection's backend process id,
/// which an interrupt cancels. Its `COMMIT` does not wait for the disk (the
/// connections' `synchronous_commit` is off for the whole session, see
/// `super::store::PostgresStore::open`): it releases the transaction's locks
/// (the event counter above all) at once.
const BEGIN: &str = "BEGIN; SELECT pg_backend_pid()";

/// Commits, then waits until the commit is durable, in one round trip: the
/// second statement is a transaction of its own that sets
/// `synchronous_commit` back on for its commit (migration 0008), and
/// waiting for its commit record to be flushed waits for everything logged
/// before it. It must write a row: the
/// database commits a transaction that logged nothing but its commit
/// asynchronously. Each connection writes its own row (the `wait_durable`
/// procedure of migration 0007, whose insert is planned once per
/// connection), so the waits never wait for each other's locks. One wait
/// serves the transactions that commit while it runs (see
/// [`super::durability`]): they send only the `COMMIT`.
const COMMIT_AND_WAIT: &str = "COMMIT; CALL wait_durable()";

/// The durability wait alone, sent by a follower (see [`COMMIT_AND_WAIT`]).
const WAIT: &str = "CALL wait_durable()";

/// Statements with at most this many parameters are prepared once per
/// connection and cached.
const PREPARED_PARAMS: usize = 256;

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
            Arg::Text(text) => query.bind(text),
            Arg::Ints(values) => query.bind(values),
            Arg::Texts(values) => query.bind(values),
        };
    }
    query
}

/// A store transaction on one pooled connection. Dropped without
/// committing, it rolls back (on a task, since `Drop` cannot wait, counted
/// in [`PendingRollbacks`]) and the connection returns to the pool; a
/// connection whose call failed or timed out is closed instead, since its
/// state is unknown.
pub(super) struct PgConn {
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
    /// The server's shared durability wait.
    durability: Arc<Durability>,
    /// Where a drop counts its rollback.
    rollbacks: Arc<PendingRollbacks>,
}

impl PgConn {
    /// The transaction about to begin on `conn`, in interrupt `generation`.
    pub(super) fn new(
        conn: PoolConnection<Postgres>,
        deadline: Duration,
        generation: u64,
        interrupts: Arc<Interrupts>,
        durability: Arc<Durability>,
        rollbacks: Arc<PendingRollbacks>,
    ) -> Self {
        Self {
            conn: Some(conn),
            open: false,
            deadline,
            pid: None,
            generation,
            interrupts,
            durability,
            rollbacks,
        }
    }

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
    pub(super) async fn begin(&mut self) -> StoreResult<bool> {
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

    /// Waits, after a `COMMIT` sent without the durability wait, until a
    /// wait sent since has succeeded, sending one when none runs. Out of
    /// the interrupt's reach: the transaction committed.
    async fn follow(&mut self) -> StoreResult<()> {
        let durability = self.durability.clone();
        let next = tokio::time::timeout(self.deadline, durability.follow())
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!(
                    "postgres: not durable within {} ms",
                    self.deadline.as_millis()
                ))
            })?;
        let Next::Lead(lead) = next else {
            return Ok(());
        };
        match self
            .call_raw(async |conn| sqlx::raw_sql(WAIT).execute(&mut **conn).await)
            .await?
        {
            Ok(_) => {
                lead.succeeded();
                Ok(())
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
        let pending = self.rollbacks.start();
        tokio::spawn(async move {
            let rollback = sqlx::raw_sql("ROLLBACK").execute(&mut *conn);
            if !matches!(tokio::time::timeout(deadline, rollback).await, Ok(Ok(_))) {
                conn.close_on_drop();
            }
            drop(pending);
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
        let role = self.durability.commit();
        let end = match role {
            Role::Lead(_) => COMMIT_AND_WAIT,
            Role::Follow => "COMMIT",
        };
        let sql = match last {
            None => Cow::Borrowed(end),
            Some(last) => Cow::Owned(format!("{last}; {end}")),
        };
        let rows = self
            .call(async |conn| {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut **conn)
                    .await
            })
            .await?;
        self.open = false;
        match role {
            Role::Lead(lead) => lead.succeeded(),
            Role::Follow => self.follow().await?,
        }
        Ok(rows)
    }

    async fn rollback(mut self) {
        self.leave();
        if self.open && self.control("ROLLBACK").await.is_ok() {
            self.open = false;
        }
    }
}
