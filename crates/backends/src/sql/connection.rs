//! What a backend supplies: one transaction's use of a database
//! connection, and what a single-writer backend remembers across
//! transactions.

use async_trait::async_trait;

use super::dialect::Dialect;
use super::statement::{Row, Statement};
use lightning_store_core::error::StoreResult;

/// Values a single-writer backend remembers across transactions (nothing
/// else writes its database), saving a query on most transactions. `None`
/// means unknown; a backend forgets everything whenever it rolls back.
#[derive(Debug, Default)]
pub struct Cache {
    /// The sequence number of the last event.
    pub latest_event: Option<u64>,
}

impl Cache {
    /// Forgets every value.
    pub fn clear(&mut self) {
        *self = Cache::default();
    }
}

/// One transaction's use of a database connection.
#[async_trait]
pub trait Connection: Send {
    type Row: Row + Send + Sync;

    /// The dialect of the database.
    const DIALECT: &'static Dialect;

    /// Readies the transaction for its first write; called before every
    /// write (the later calls are cheap).
    async fn begin_write(&mut self) -> StoreResult<()>;
    /// Runs a statement that returns nothing. The connection may defer it
    /// to its next [`Connection::fetch`] or commit, which then report its
    /// failure.
    async fn execute(&mut self, statement: Statement<'_>) -> StoreResult<()>;
    /// Runs every deferred statement, then this one, and returns its rows.
    async fn fetch(&mut self, statement: Statement<'_>) -> StoreResult<Vec<Self::Row>>;
    /// Returns the cache of a single-writer backend (`None` for a database
    /// that others may write).
    fn cache(&mut self) -> Option<&mut Cache>;
    /// Runs `last` (a statement without parameters), if given, and
    /// commits the transaction (see [`StoreTx::commit`](lightning_store_core::storage::StoreTx::commit)), in one round trip
    /// on a database across the network: the locks `last` takes are held
    /// for no round trip. Returns the rows of `last`.
    async fn commit(self, last: Option<String>) -> StoreResult<Vec<Self::Row>>;
    /// Rolls the transaction back (see [`StoreTx::rollback`](lightning_store_core::storage::StoreTx::rollback)).
    async fn rollback(self);
}
