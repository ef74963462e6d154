//! The PostgreSQL store: its pool and the settings of its connections,
//! the migrations of its schema, and the transactions it begins (how they
//! lock, commit and carry events between servers: see [`super`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};

use super::conn::PgConn;
use super::dialect::store_error;
use super::durability::Durability;
use super::interrupt::Interrupts;
use super::rollbacks::PendingRollbacks;
use crate::sql::{self, DeadlineFloor, SqlTx};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::storage::{DEFAULT_EVENT_RETENTION, Store, StoreTx};

/// The schema migrations, embedded at build time.
pub(super) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

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

/// The notification channel on which the default namespace's committed
/// events are announced (by the `append_events` function of migration
/// 0013, which names it too); another namespace's is this name followed by
/// `_` and its schema's.
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
    /// The channel on which its events are announced.
    channel: String,
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

/// A database to connect to: how (the settings every connection of this
/// backend shares) and its name without the password, for messages.
#[derive(Debug, Clone)]
pub(super) struct Database {
    pub(super) connect: PgConnectOptions,
    target: String,
}

impl Database {
    /// Parses `url` (`postgres://user:password@host:port/db`, with
    /// `?sslmode=…&sslrootcert=…` for TLS) and sets the connections' limits
    /// from `options`.
    pub(super) fn parse(url: &str, options: &PostgresOptions) -> Result<Self, OpenError> {
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
        Ok(Self { connect, target })
    }

    /// Returns the error of opening this database for `reason`.
    fn fail(&self, reason: impl Into<String>) -> OpenError {
        OpenError {
            target: self.target.clone(),
            reason: reason.into(),
        }
    }
}

/// Returns the channel on which the events of the store in `schema` (the
/// session's own when `None`) are announced (by `append_events`,
/// migration 0013).
fn events_channel(schema: Option<&str>) -> String {
    match schema {
        None => EVENTS_CHANNEL.to_owned(),
        Some(schema) => format!("{EVENTS_CHANNEL}_{schema}"),
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// with `?sslmode=…&sslrootcert=…` for TLS) and brings its schema up to date.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, OpenError> {
        Self::open(&Database::parse(url, &options)?, None, options).await
    }

    /// Connects to `database` with the tables of `schema` (those of the
    /// sessions' own `search_path` when `None`) and brings them up to date.
    pub(super) async fn open(
        database: &Database,
        schema: Option<&str>,
        options: PostgresOptions,
    ) -> Result<Self, OpenError> {
        // Group commit (see the module docs): every commit is asynchronous
        // but the durability wait's, which sets its own level.
        let mut connect = database
            .connect
            .clone()
            .options([("synchronous_commit", "off")]);
        if let Some(schema) = schema {
            connect = connect.options([("search_path", schema)]);
        }
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
            .map_err(|e| database.fail(e.to_string()))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| database.fail(sql::migration_failure(e, &MIGRATOR, |e| e.to_string())))?;
        // Counter shards of closed connections fold into shard 0, so that
        // their number stays that of the live connections.
        sqlx::raw_sql(FOLD_COUNTERS)
            .execute(&pool)
            .await
            .map_err(|e| database.fail(e.to_string()))?;
        tracing::info!(
            database = database.target,
            schema = schema.unwrap_or("(default)"),
            "postgres database opened"
        );
        Ok(Self {
            pool,
            own_backends,
            channel: events_channel(schema),
            floor: Arc::new(DeadlineFloor::new(Some(SHARED_FLOOR_TTL))),
            event_retention: options.event_retention as u64,
            deadline: options.statement_timeout + Duration::from_secs(1),
            max_connections: options.max_connections.max(1),
            interrupts,
            durability: Arc::new(Durability::new()),
            rollbacks: PendingRollbacks::new(),
        })
    }

    /// Returns whether the store was closed ([`Store::close`]).
    pub(super) fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn parallel_reads(&self) -> bool {
        // Reads send no `BEGIN`: each statement is a snapshot of its own.
        true
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
        listener.listen(&self.channel).await.map_err(store_error)?;
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
