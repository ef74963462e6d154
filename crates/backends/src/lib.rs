//! The storage backends behind [`lightning_store_core::storage`]'s port, and
//! [`open`] and [`open_catalogue`], the one place that turns a
//! configuration into a backend (the command line and the tests both use
//! it).

pub mod memory;
pub mod postgres;
mod sql;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;

use lightning_store_core::storage::{Catalogue, Store};

use self::memory::{MemoryCatalogue, MemoryStore};
use self::postgres::{PostgresCatalogue, PostgresOptions, PostgresStore};
use self::sqlite::{SqliteCatalogue, SqliteOptions, SqliteStore};

/// Which backend to open, with its settings.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// Everything in memory, retaining the last `event_retention` events.
    Memory { event_retention: usize },
    /// A SQLite file, created when missing.
    Sqlite {
        path: PathBuf,
        options: SqliteOptions,
    },
    /// A PostgreSQL database that several servers can share.
    Postgres {
        url: String,
        options: PostgresOptions,
    },
}

/// Why a backend could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Sqlite(#[from] sqlite::OpenError),
    #[error(transparent)]
    Postgres(#[from] postgres::OpenError),
}

/// Opens the backend `config` describes (creating or migrating its schema).
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn Store>, OpenError> {
    Ok(match config {
        StoreConfig::Memory { event_retention } => {
            Arc::new(MemoryStore::with_event_retention(*event_retention))
        }
        StoreConfig::Sqlite { path, options } => {
            Arc::new(SqliteStore::open(path, options.clone()).await?)
        }
        StoreConfig::Postgres { url, options } => {
            Arc::new(PostgresStore::connect(url, options.clone()).await?)
        }
    })
}

/// Opens the catalogue of namespaces of the backend `config` describes
/// (creating or migrating its schema): the default namespace holds what
/// [`open`] opens.
pub async fn open_catalogue(config: &StoreConfig) -> Result<Arc<dyn Catalogue>, OpenError> {
    Ok(match config {
        StoreConfig::Memory { event_retention } => Arc::new(MemoryCatalogue::new(*event_retention)),
        StoreConfig::Sqlite { path, options } => {
            Arc::new(SqliteCatalogue::open(path, options.clone()).await?)
        }
        StoreConfig::Postgres { url, options } => {
            Arc::new(PostgresCatalogue::connect(url, options.clone()).await?)
        }
    })
}
