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
//! timer passes over rollouts other transactions hold, while a call's own
//! scan waits for them (in id order) so that it answers with their
//! verdicts ([`lightning_store_core::storage::Held`]). Updates of different
//! rollouts never wait for each other. Counters are sharded per connection,
//! and event numbers come from one counter row taken last (see
//! [`super::sql`]'s `apply` module for why they stay gapless and in commit
//! order).
//!
//! # Group commit
//! A transaction commits without waiting for the disk (the connections run
//! with `synchronous_commit = off`), which releases its row locks and the
//! event counter at once, and then, in the same round trip, waits for
//! durability with a one-statement transaction that commits with
//! `synchronous_commit = on` (`wait_durable`, migration 0008; `COMMIT` in
//! `postgres/conn.rs`): the call is acknowledged only once
//! its commit is on disk, as before, but the counter is no longer held
//! across an fsync, and the waits of concurrent transactions share flushes.
//! A transaction that read another's writes before they were durable waits
//! for them too (its own wait flushes everything logged before it), so no
//! acknowledged answer depends on a write a crash can lose; read-only
//! transactions, the event followers' included, wait the same way. (A/B
//! against a plain synchronous `COMMIT`:
//! docs/performance.md#row-locks-one-write-set-group-commit.) One wait
//! runs at a time per server and serves every transaction whose `COMMIT`
//! returned before it was sent (see `postgres/durability.rs`).
//!
//! # Statements parsed and planned once per connection
//! The statements of a transaction are prepared and cached per connection
//! (their texts do not depend on the number of rows: arrays and `unnest`),
//! and what travels with the `COMMIT` as a simple query is short calls of
//! routines (migration 0007), whose statements PL/pgSQL plans once per
//! connection.
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
//! fresh connection and fails its open transactions (see `postgres/interrupt.rs`).

mod conn;
mod dialect;
mod durability;
mod interrupt;
mod rollbacks;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};

use self::conn::PgConn;
use self::dialect::store_error;
use self::durability::Durability;
use self::interrupt::Interrupts;
use self::rollbacks::PendingRollbacks;
use super::sql::{self, DeadlineFloor, SqlTx};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

/// The schema migrations, embedded at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

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
/// the `append_events` function of migration 0007, which names it too).
pub const EVENTS_CHANNEL: &str = "lightning_store";

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
    /// The durability wait its transactions share.
    durability: Arc<Durability>,
    /// The rollbacks of dropped transactions, which new ones wait for.
    rollbacks: Arc<PendingRollbacks>,
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
                // Group commit (see the module docs): every commit is
                // asynchronous but the durability wait's, which sets its
                // own level.
                ("synchronous_commit", "off"),
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
            durability: Arc::new(Durability::new()),
            rollbacks: PendingRollbacks::new(),
        })
    }
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
        self.rollbacks.settled(self.deadline).await;
        let mut closed = 0;
        loop {
            let conn = self.pool.acquire().await.map_err(store_error)?;
            let mut conn = PgConn::new(
                conn,
                self.deadline,
                generation,
                self.interrupts.clone(),
                self.durability.clone(),
                self.rollbacks.clone(),
            );
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
