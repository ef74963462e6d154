//! The namespaces of the PostgreSQL backend: the default one is the schema
//! the database held before, each other one a schema `ns_<id>` of its own,
//! and the catalogue a table of the default one (migration 0013).
//!
//! # Schemas
//! A namespace's schema is named after its id, never its name, so that a
//! namespace created again under a deleted one's name never meets the old
//! data. It holds the same tables, functions and procedures as the default
//! one, made by the same migrations run with `search_path` set to it (each
//! schema records its own migrations in its `_sqlx_migrations`), and its
//! store is a [`PostgresStore`] whose connections run with that
//! `search_path`: every statement, the routines' included, resolves its
//! names in the namespace's schema. Its commits announce their events on a
//! channel of its own (`lightning_store_ns_<id>`).
//!
//! # Connections
//! Each namespace opened here has a pool of its own, made when it is first
//! opened; pools connect on demand and close idle connections, so an idle
//! namespace costs nothing, but each open namespace may hold up to
//! [`PostgresOptions::max_connections`] connections. The catalogue's own
//! calls go through a small pool of their own, whose commits are durable
//! when they return (the database's `synchronous_commit`).
//!
//! # Creation, deletion, purge
//! A namespace is created in one transaction: its row, its schema and its
//! migrations, so that a crash leaves either all or nothing of it. A
//! deletion marks the row, which every server sharing the database reads:
//! the name is free at once and [`Catalogue::open`] refuses the namespace.
//! The purge drops the schema (which locks only its objects: the other
//! namespaces' calls never wait for it) and the row, in one transaction. A
//! store whose schema was dropped answers NOT_FOUND (see
//! `postgres/dialect.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection as _, Row as _};

use super::dialect::store_error;
use super::store::{Database, MIGRATOR, OpenError, PostgresOptions, PostgresStore};
use crate::sql;
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::Timestamp;
use lightning_store_core::namespace::{Namespace, NamespaceName, NamespaceSettings, Quotas};
use lightning_store_core::retention::RetentionPolicy;
use lightning_store_core::storage::{Catalogue, Store};

/// Connections of the catalogue's own pool: its calls are few and short
/// (a creation holds one through the new schema's migrations).
const CATALOGUE_CONNECTIONS: u32 = 4;

/// The columns of a namespace's row, in the order [`namespace`] decodes.
const COLUMNS: &str = "id, name, created, max_queued_rollouts, max_spans, max_span_bytes, \
                       own_retention, retention_max_age_ms, retention_max_bytes";

/// The namespaces of the PostgreSQL backend.
pub struct PostgresCatalogue {
    database: Database,
    options: PostgresOptions,
    /// The catalogue's connections, in the default namespace's schema.
    pool: PgPool,
    /// The stores opened here, by namespace id (the default one's is 0).
    stores: tokio::sync::Mutex<HashMap<i64, Arc<PostgresStore>>>,
}

/// Returns the schema of namespace `id` (`None`: the sessions' own, the
/// default namespace's).
fn schema_of(id: i64) -> Option<String> {
    (id != 0).then(|| format!("ns_{id}"))
}

/// Returns a quota or limit as the table stores it.
fn stored(value: Option<u64>, what: &str) -> StoreResult<Option<i64>> {
    value
        .map(|value| {
            i64::try_from(value)
                .map_err(|_| StoreError::invalid(format!("{what} {value} is too large")))
        })
        .transpose()
}

/// Returns a stored quota or limit.
fn unsigned(row: &PgRow, column: &str) -> StoreResult<Option<u64>> {
    let value: Option<i64> = row
        .try_get(column)
        .map_err(|e| sql::codec::corrupt(column, e))?;
    value
        .map(|value| u64::try_from(value).map_err(|e| sql::codec::corrupt(column, e)))
        .transpose()
}

/// Decodes a namespace's row ([`COLUMNS`]).
fn namespace(row: &PgRow) -> StoreResult<Namespace> {
    let int = |column: &str| -> StoreResult<i64> {
        row.try_get(column)
            .map_err(|e| sql::codec::corrupt(column, e))
    };
    let name: String = row
        .try_get("name")
        .map_err(|e| sql::codec::corrupt("namespace name", e))?;
    let own_retention: bool = row
        .try_get("own_retention")
        .map_err(|e| sql::codec::corrupt("own_retention", e))?;
    let retention = match own_retention {
        false => None,
        true => Some(RetentionPolicy {
            max_age: unsigned(row, "retention_max_age_ms")?.map(Duration::from_millis),
            max_bytes: unsigned(row, "retention_max_bytes")?,
        }),
    };
    Ok(Namespace {
        id: int("id")?,
        name: NamespaceName::parse(name).map_err(|e| sql::codec::corrupt("namespace name", e))?,
        created: Timestamp(int("created")?),
        settings: NamespaceSettings {
            quotas: Quotas {
                max_queued_rollouts: unsigned(row, "max_queued_rollouts")?,
                max_spans: unsigned(row, "max_spans")?,
                max_span_bytes: unsigned(row, "max_span_bytes")?,
            },
            retention,
        },
    })
}

/// Runs the migrations on `conn`, in its `search_path`, as
/// [`sqlx::migrate::Migrator::run`] does (whose future on a borrowed
/// connection is not `Send` for every lifetime, as `async_trait` requires;
/// sqlx provides this entry for that).
async fn migrate(conn: &mut PgConnection) -> Result<(), MigrateError> {
    MIGRATOR.run_direct(None, conn, false).await
}

impl PostgresCatalogue {
    /// Connects to the database at `url` (as [`PostgresStore::connect`]),
    /// brings the default namespace's schema up to date and opens its
    /// store.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, OpenError> {
        let database = Database::parse(url, &options)?;
        let default = PostgresStore::open(&database, None, options.clone()).await?;
        let pool = PgPoolOptions::new()
            .max_connections(CATALOGUE_CONNECTIONS)
            .acquire_timeout(options.connect_timeout)
            .idle_timeout(options.idle_timeout)
            .connect_lazy_with(database.connect.clone());
        Ok(Self {
            database,
            options,
            pool,
            stores: tokio::sync::Mutex::new(HashMap::from([(0, Arc::new(default))])),
        })
    }

    /// Inserts the row of namespace `name` and makes its schema, in the
    /// transaction `conn` begins, which commits only once all is done.
    async fn create_on(
        conn: &mut PgConnection,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace> {
        let retention = settings.retention;
        let max_age_ms = retention
            .and_then(|r| r.max_age)
            .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        let insert = format!(
            "INSERT INTO namespaces (name, created, max_queued_rollouts, max_spans, \
             max_span_bytes, own_retention, retention_max_age_ms, retention_max_bytes) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
        );
        let quotas = settings.quotas;
        let mut tx = conn.begin().await.map_err(store_error)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(insert))
            .bind(name.as_str())
            .bind(now.0)
            .bind(stored(quotas.max_queued_rollouts, "max_queued_rollouts")?)
            .bind(stored(quotas.max_spans, "max_spans")?)
            .bind(stored(quotas.max_span_bytes, "max_span_bytes")?)
            .bind(retention.is_some())
            .bind(stored(max_age_ms, "retention max_age in milliseconds")?)
            .bind(stored(
                retention.and_then(|r| r.max_bytes),
                "retention max_bytes",
            )?)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| match &e {
                sqlx::Error::Database(db) if db.is_unique_violation() => {
                    Namespace::already_exists(name)
                }
                _ => store_error(e),
            })?;
        let namespace = namespace(&row)?;
        let schema = schema_of(namespace.id)
            .ok_or_else(|| StoreError::Internal("postgres: a namespace got id 0".into()))?;
        let make = format!("CREATE SCHEMA {schema}; SET LOCAL search_path TO {schema}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(make))
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        migrate(&mut tx).await.map_err(|e| {
            StoreError::Internal(format!(
                "postgres: migrating the schema of namespace {name}: {}",
                sql::migration_failure(e, &MIGRATOR, |e| e.to_string())
            ))
        })?;
        tx.commit().await.map_err(store_error)?;
        Ok(namespace)
    }

    /// Runs `statement` (which reads [`COLUMNS`], binding `$1` to `arg`)
    /// and returns the namespaces of its rows.
    async fn namespaces(
        &self,
        statement: String,
        arg: Option<&str>,
    ) -> StoreResult<Vec<Namespace>> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(statement));
        if let Some(arg) = arg {
            query = query.bind(arg);
        }
        let rows = query.fetch_all(&self.pool).await.map_err(store_error)?;
        rows.iter().map(namespace).collect()
    }
}

#[async_trait]
impl Catalogue for PostgresCatalogue {
    async fn list(&self) -> StoreResult<Vec<Namespace>> {
        let statement =
            format!("SELECT {COLUMNS} FROM namespaces WHERE NOT deleted ORDER BY id <> 0, name");
        self.namespaces(statement, None).await
    }

    async fn find(&self, name: &NamespaceName) -> StoreResult<Option<Namespace>> {
        let statement = format!("SELECT {COLUMNS} FROM namespaces WHERE name = $1 AND NOT deleted");
        Ok(self
            .namespaces(statement, Some(name))
            .await?
            .into_iter()
            .next())
    }

    async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace> {
        // A connection of its own, closed after: whatever the migrations
        // leave in its session (locks, settings) goes with it.
        let mut conn = tokio::time::timeout(
            self.options.connect_timeout,
            PgConnection::connect_with(&self.database.connect),
        )
        .await
        .map_err(|_| {
            StoreError::Unavailable(format!(
                "postgres: no connection within {} ms",
                self.options.connect_timeout.as_millis()
            ))
        })?
        .map_err(store_error)?;
        let created = Self::create_on(&mut conn, name, settings, now).await;
        if created.is_ok() {
            let _ = conn.close().await;
        }
        created
    }

    async fn open(&self, namespace: &Namespace) -> StoreResult<Arc<dyn Store>> {
        let exists: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM namespaces WHERE id = $1 AND name = $2 AND NOT deleted",
        )
        .bind(namespace.id)
        .bind(namespace.name.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        let mut stores = self.stores.lock().await;
        if exists.is_none() {
            // Its holders close it; nothing opens it here again.
            stores.remove(&namespace.id);
            return Err(Namespace::not_found(&namespace.name));
        }
        if let Some(store) = stores.get(&namespace.id).filter(|s| !s.is_closed()) {
            return Ok(store.clone());
        }
        let schema = schema_of(namespace.id);
        let store = PostgresStore::open(&self.database, schema.as_deref(), self.options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("postgres: {e}")))?;
        let store = Arc::new(store);
        stores.insert(namespace.id, store.clone());
        Ok(store)
    }

    async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64> {
        let bytes: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS BIGINT) \
             FROM namespaces AS ns \
             LEFT JOIN pg_namespace AS s ON s.nspname = \
                 CASE WHEN ns.id = 0 THEN current_schema() ELSE 'ns_' || ns.id END \
             LEFT JOIN pg_class AS c ON c.relnamespace = s.oid AND c.relkind = 'r' \
             WHERE ns.id = $1 AND NOT ns.deleted GROUP BY ns.id",
        )
        .bind(namespace.id)
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        let bytes = bytes.ok_or_else(|| Namespace::not_found(&namespace.name))?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace> {
        if name.is_default() {
            return Err(StoreError::FailedPrecondition(
                "the default namespace cannot be deleted".into(),
            ));
        }
        let statement = format!(
            "UPDATE namespaces SET deleted = TRUE WHERE name = $1 AND NOT deleted AND id <> 0 \
             RETURNING {COLUMNS}"
        );
        self.namespaces(statement, Some(name))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Namespace::not_found(name))
    }

    async fn purge(&self, namespace: &Namespace) -> StoreResult<()> {
        let Some(schema) = schema_of(namespace.id) else {
            return Err(StoreError::FailedPrecondition(
                "the default namespace cannot be purged".into(),
            ));
        };
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let deleted: Option<bool> =
            sqlx::query_scalar("SELECT deleted FROM namespaces WHERE id = $1 FOR UPDATE")
                .bind(namespace.id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
        if deleted == Some(false) {
            return Err(StoreError::FailedPrecondition(format!(
                "namespace {:?} is not deleted",
                namespace.name.as_str()
            )));
        }
        let store = self.stores.lock().await.remove(&namespace.id);
        if let Some(store) = store {
            store.close().await;
        }
        // `IF EXISTS`: a purge run again drops what is left, if anything.
        let drop = format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; DELETE FROM namespaces WHERE id = {}",
            namespace.id
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        tx.commit().await.map_err(store_error)
    }

    async fn deleted(&self) -> StoreResult<Vec<Namespace>> {
        let statement = format!("SELECT {COLUMNS} FROM namespaces WHERE deleted ORDER BY id");
        self.namespaces(statement, None).await
    }
}
