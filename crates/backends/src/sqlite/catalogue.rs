//! The namespaces of the SQLite backend: the default one is the database
//! file the server was given, each other one a database file of its own in
//! the directory beside it (`<database>.namespaces/<id>.db`), which also
//! holds the catalogue, a small SQLite file (`catalogue.db`).
//!
//! Each namespace's file is a store of its own, with its own writer and
//! group commit: one training's load does not queue behind another's. A
//! store's file is locked while it is open, so the catalogue opens each
//! one once and hands out that store while it lives; the default one is
//! opened with the catalogue (its lock keeps a second server out of the
//! whole directory). An upgrade moves nothing: the default namespace's
//! file is the one of before, and a directory that is missing is created.
//!
//! The catalogue's schema is migrated here, sqlx-free: the migrations
//! (`migrations/sqlite-catalogue/`) are applied in order, in one
//! transaction, and `PRAGMA user_version` counts those applied. The
//! default namespace is its row 0, created with the catalogue. A deletion
//! marks a row; the purge removes the namespace's files, then its row.
//! Every access to the catalogue's file or to a namespace's files runs on a
//! blocking thread.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rusqlite::OptionalExtension as _;

use super::rows::store_error;
use lightning_store_core::clock::{Clock, SystemClock};
use lightning_store_core::error::{StoreError, StoreResult};
use lightning_store_core::model::Timestamp;
use lightning_store_core::namespace::{
    DEFAULT_NAMESPACE, Namespace, NamespaceName, NamespaceSettings, Quotas,
};
use lightning_store_core::retention::RetentionPolicy;
use lightning_store_core::storage::{Catalogue, Store};

/// The catalogue's migrations, in order (`PRAGMA user_version` counts
/// those applied).
const MIGRATIONS: &[&str] = &[include_str!(
    "../../migrations/sqlite-catalogue/0001_namespaces.sql"
)];

/// The catalogue's file, in the namespaces' directory.
const CATALOGUE_FILE: &str = "catalogue.db";

/// The columns of a namespace's row, in the order [`read_namespace`] reads.
const COLUMNS: &str = "id, name, created, max_queued_rollouts, max_spans, max_span_bytes, \
                       has_retention, retention_max_age_ms, retention_max_bytes";

/// Opens (creating it if missing) the store of a namespace's database file.
pub(super) type OpenStore =
    Box<dyn Fn(PathBuf) -> BoxFuture<'static, StoreResult<Arc<dyn Store>>> + Send + Sync>;

/// The namespaces of the SQLite backend.
pub struct SqliteCatalogue {
    /// The database file the server was given: the default namespace's.
    path: PathBuf,
    /// The other namespaces' files and the catalogue's.
    dir: PathBuf,
    /// The default namespace's store.
    default: Arc<dyn Store>,
    /// The connection to the catalogue's file.
    conn: Arc<parking_lot::Mutex<rusqlite::Connection>>,
    /// Opens a namespace's file.
    open_store: OpenStore,
    /// The stores of the other namespaces opened, by id. Held while one
    /// opens, so that a file is opened once.
    stores: tokio::sync::Mutex<HashMap<i64, Arc<dyn Store>>>,
}

/// Returns the directory of the namespaces of the database at `path`.
fn namespaces_dir(path: &Path) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".namespaces");
    PathBuf::from(dir)
}

/// Returns `file` with `suffix` appended (`-wal`, `-shm`).
fn with_suffix(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

impl SqliteCatalogue {
    /// Returns the catalogue of the namespaces of the database at `path`,
    /// whose store (the default namespace's) is `default`, creating its
    /// directory and file when missing; `open_store` opens the other
    /// namespaces' files. A failure names the file and why.
    pub(super) async fn start(
        path: &Path,
        default: Arc<dyn Store>,
        open_store: OpenStore,
    ) -> Result<Self, (PathBuf, String)> {
        let dir = namespaces_dir(path);
        let file = dir.join(CATALOGUE_FILE);
        let opened = {
            let (dir, file) = (dir.clone(), file.clone());
            tokio::task::spawn_blocking(move || open_file(&dir, &file, SystemClock.now())).await
        };
        let conn = match opened {
            Ok(Ok(conn)) => conn,
            Ok(Err(reason)) => return Err((file, reason)),
            Err(error) => return Err((file, error.to_string())),
        };
        Ok(Self {
            path: path.to_owned(),
            dir,
            default,
            conn: Arc::new(parking_lot::Mutex::new(conn)),
            open_store,
            stores: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// Returns the database file of the namespace `id`.
    fn file(&self, id: i64) -> PathBuf {
        if id == 0 {
            self.path.clone()
        } else {
            self.dir.join(format!("{id}.db"))
        }
    }

    /// Runs `work` on the catalogue's connection, on a blocking thread.
    async fn query<T: Send + 'static>(
        &self,
        work: impl FnOnce(&rusqlite::Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let conn = self.conn.clone();
        blocking(move || work(&conn.lock())).await
    }

    /// Returns the namespaces whose rows are marked `deleted` (or not),
    /// the default one first, then by name.
    async fn rows(&self, deleted: bool) -> StoreResult<Vec<Namespace>> {
        self.query(move |conn| {
            let sql = format!(
                "SELECT {COLUMNS} FROM namespaces WHERE deleted = ?1 ORDER BY id <> 0, name, id"
            );
            let mut statement = conn.prepare_cached(&sql).map_err(store_error)?;
            let rows = statement
                .query_map([deleted], read_namespace)
                .map_err(store_error)?;
            rows.collect::<rusqlite::Result<_>>().map_err(store_error)
        })
        .await
    }

    /// Fails unless `namespace` exists (its row, with its id and name, is
    /// not deleted).
    async fn check_exists(&self, namespace: &Namespace) -> StoreResult<()> {
        let (id, name) = (namespace.id, namespace.name.to_string());
        let exists = self
            .query(move |conn| {
                conn.prepare_cached(
                    "SELECT 1 FROM namespaces WHERE id = ?1 AND name = ?2 AND deleted = 0",
                )
                .and_then(|mut statement| statement.exists(rusqlite::params![id, name]))
                .map_err(store_error)
            })
            .await?;
        if exists {
            Ok(())
        } else {
            Err(Namespace::not_found(&namespace.name))
        }
    }
}

/// Runs `work` on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> StoreResult<T> + Send + 'static,
) -> StoreResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| StoreError::Internal(format!("sqlite catalogue: {error}")))?
}

/// Creates `dir` when missing and opens the catalogue's `file` in it,
/// bringing its schema up to date (a new catalogue is created `now`).
fn open_file(dir: &Path, file: &Path, now: Timestamp) -> Result<rusqlite::Connection, String> {
    std::fs::create_dir_all(dir).map_err(|error| {
        format!(
            "cannot create the directory {}: {}",
            dir.display(),
            error.to_string().to_lowercase()
        )
    })?;
    let conn = rusqlite::Connection::open(file).map_err(|error| error.to_string())?;
    migrate(conn, now)
}

/// Applies the migrations the catalogue lacks in one transaction; the
/// first records the default namespace, created `now`.
fn migrate(mut conn: rusqlite::Connection, now: Timestamp) -> Result<rusqlite::Connection, String> {
    let failed = |error: rusqlite::Error| error.to_string();
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(failed)?;
    let applied: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(failed)?;
    let known = MIGRATIONS.len();
    let applied = usize::try_from(applied).unwrap_or(usize::MAX);
    if applied > known {
        return Err(format!(
            "it was written by a newer lightning-store: its schema is at migration {applied}, \
             and this lightning-store {} knows migrations up to {known} (upgrade this binary, \
             or restore a backup taken before the upgrade)",
            env!("CARGO_PKG_VERSION")
        ));
    }
    for sql in &MIGRATIONS[applied..] {
        tx.execute_batch(sql).map_err(failed)?;
    }
    if applied == 0 {
        tx.execute(
            "INSERT INTO namespaces (id, name, created) VALUES (0, ?1, ?2)",
            rusqlite::params![DEFAULT_NAMESPACE, now.0],
        )
        .map_err(failed)?;
    }
    tx.pragma_update(None, "user_version", known as i64)
        .map_err(failed)?;
    tx.commit().map_err(failed)?;
    Ok(conn)
}

/// Reads a namespace from a row of [`COLUMNS`].
fn read_namespace(row: &rusqlite::Row<'_>) -> rusqlite::Result<Namespace> {
    let name = NamespaceName::parse(row.get::<_, String>(1)?).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, error.into())
    })?;
    let retention = if row.get::<_, bool>(6)? {
        Some(RetentionPolicy {
            max_age: unsigned(row, 7)?.map(std::time::Duration::from_millis),
            max_bytes: unsigned(row, 8)?,
        })
    } else {
        None
    };
    Ok(Namespace {
        id: row.get(0)?,
        name,
        created: Timestamp(row.get(2)?),
        settings: NamespaceSettings {
            quotas: Quotas {
                max_queued_rollouts: unsigned(row, 3)?,
                max_spans: unsigned(row, 4)?,
                max_span_bytes: unsigned(row, 5)?,
            },
            retention,
        },
    })
}

/// Reads a limit (a column of non-negative integers, or NULL).
fn unsigned(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<u64>> {
    row.get::<_, Option<i64>>(index)?
        .map(|value| {
            u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(index, value))
        })
        .transpose()
}

/// Returns a limit as the integer of its column, refusing one SQLite cannot
/// hold.
fn limit(value: Option<u64>, what: &str) -> StoreResult<Option<i64>> {
    value
        .map(|value| {
            i64::try_from(value)
                .map_err(|_| StoreError::invalid(format!("the {what} {value} is too large")))
        })
        .transpose()
}

/// Returns the bytes the files of a database take: the file and its log.
fn file_bytes(file: &Path) -> StoreResult<u64> {
    let mut bytes = 0;
    for path in [file.to_owned(), with_suffix(file, "-wal")] {
        match std::fs::metadata(&path) {
            Ok(metadata) => bytes += metadata.len(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(StoreError::Internal(format!(
                    "sqlite: cannot read the size of {}: {error}",
                    path.display()
                )));
            }
        }
    }
    Ok(bytes)
}

/// Removes a database's files, those missing included.
fn remove_files(file: &Path) -> StoreResult<()> {
    for path in [
        file.to_owned(),
        with_suffix(file, "-wal"),
        with_suffix(file, "-shm"),
    ] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(StoreError::Unavailable(format!(
                    "sqlite: cannot remove {}: {error}",
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

#[async_trait]
impl Catalogue for SqliteCatalogue {
    async fn list(&self) -> StoreResult<Vec<Namespace>> {
        self.rows(false).await
    }

    async fn find(&self, name: &NamespaceName) -> StoreResult<Option<Namespace>> {
        let name = name.to_string();
        self.query(move |conn| {
            let sql = format!("SELECT {COLUMNS} FROM namespaces WHERE name = ?1 AND deleted = 0");
            conn.prepare_cached(&sql)
                .and_then(|mut statement| statement.query_row([name], read_namespace).optional())
                .map_err(store_error)
        })
        .await
    }

    async fn create(
        &self,
        name: &NamespaceName,
        settings: NamespaceSettings,
        now: Timestamp,
    ) -> StoreResult<Namespace> {
        let quotas = settings.quotas;
        let retention = settings.retention.unwrap_or_default();
        let max_age = retention
            .max_age
            .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        let args = (
            limit(quotas.max_queued_rollouts, "quota of queued rollouts")?,
            limit(quotas.max_spans, "quota of spans")?,
            limit(quotas.max_span_bytes, "quota of span bytes")?,
            settings.retention.is_some(),
            limit(max_age, "retention age (in milliseconds)")?,
            limit(retention.max_bytes, "retention size")?,
        );
        let text = name.to_string();
        let id = self
            .query(move |conn| {
                let inserted = conn.execute(
                    "INSERT INTO namespaces (name, created, max_queued_rollouts, max_spans, \
                     max_span_bytes, has_retention, retention_max_age_ms, retention_max_bytes) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    rusqlite::params![text, now.0, args.0, args.1, args.2, args.3, args.4, args.5],
                );
                match inserted {
                    Ok(_) => Ok(conn.last_insert_rowid()),
                    Err(rusqlite::Error::SqliteFailure(failure, _))
                        if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                    {
                        Err(Namespace::already_exists(&text))
                    }
                    Err(error) => Err(store_error(error)),
                }
            })
            .await?;
        Ok(Namespace {
            id,
            name: name.clone(),
            created: now,
            settings,
        })
    }

    async fn open(&self, namespace: &Namespace) -> StoreResult<Arc<dyn Store>> {
        if namespace.id == 0 && namespace.name.is_default() {
            return Ok(self.default.clone());
        }
        // Checked with the stores held, so that a purge (which takes its
        // store out first) never races an open of its file.
        let mut stores = self.stores.lock().await;
        self.check_exists(namespace).await?;
        if let Some(store) = stores.get(&namespace.id) {
            return Ok(store.clone());
        }
        let store = (self.open_store)(self.file(namespace.id)).await?;
        stores.insert(namespace.id, store.clone());
        Ok(store)
    }

    async fn stored_bytes(&self, namespace: &Namespace) -> StoreResult<u64> {
        self.check_exists(namespace).await?;
        let file = self.file(namespace.id);
        blocking(move || file_bytes(&file)).await
    }

    async fn delete(&self, name: &NamespaceName) -> StoreResult<Namespace> {
        if name.is_default() {
            return Err(StoreError::FailedPrecondition(
                "the default namespace cannot be deleted".into(),
            ));
        }
        let text = name.to_string();
        let deleted = self
            .query(move |conn| {
                let sql = format!(
                    "UPDATE namespaces SET deleted = 1 WHERE name = ?1 AND deleted = 0 \
                     RETURNING {COLUMNS}"
                );
                conn.prepare_cached(&sql)
                    .and_then(|mut statement| {
                        statement.query_row([text], read_namespace).optional()
                    })
                    .map_err(store_error)
            })
            .await?;
        deleted.ok_or_else(|| Namespace::not_found(name))
    }

    async fn purge(&self, namespace: &Namespace) -> StoreResult<()> {
        let id = namespace.id;
        let live = self
            .query(move |conn| {
                conn.prepare_cached("SELECT 1 FROM namespaces WHERE id = ?1 AND deleted = 0")
                    .and_then(|mut statement| statement.exists([id]))
                    .map_err(store_error)
            })
            .await?;
        if live {
            return Err(StoreError::FailedPrecondition(format!(
                "namespace {:?} is not deleted: only a deleted namespace is purged",
                namespace.name.as_str()
            )));
        }
        let store = self.stores.lock().await.remove(&id);
        if let Some(store) = store {
            store.close().await;
        }
        let file = self.file(id);
        blocking(move || remove_files(&file)).await?;
        self.query(move |conn| {
            conn.execute("DELETE FROM namespaces WHERE id = ?1 AND deleted = 1", [id])
                .map(drop)
                .map_err(store_error)
        })
        .await
    }

    async fn deleted(&self) -> StoreResult<Vec<Namespace>> {
        self.rows(true).await
    }
}
