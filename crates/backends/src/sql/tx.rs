//! A transaction over a SQL connection, with the statement helpers its
//! operations share; the operations are in the modules of their concerns.

use std::sync::Arc;

use super::codec;
use super::connection::Connection;
use super::floor::DeadlineFloor;
use super::query::Builder;
use super::statement::{Row, Statement};
use lightning_store_core::error::StoreResult;
use lightning_store_core::query::{Page, Paged};

/// A [`StoreTx`](lightning_store_core::storage::StoreTx) over a SQL [`Connection`].
pub struct SqlTx<C> {
    pub(super) conn: C,
    /// Events retained for resuming subscribers.
    pub(super) event_retention: u64,
    /// The store's floor of the watchdog deadlines.
    pub(super) floor: Arc<DeadlineFloor>,
    /// Whether this transaction claimed queue entries (a claim then no
    /// longer waits for entries that others hold; see [`super::claim`]).
    pub(super) holds_claims: bool,
}

impl<C: Connection> SqlTx<C> {
    /// Returns a transaction over `conn` that keeps at least the last
    /// `event_retention` events and skips due scans below `floor`.
    pub fn new(conn: C, event_retention: u64, floor: Arc<DeadlineFloor>) -> Self {
        Self {
            conn,
            event_retention: event_retention.max(1),
            floor,
            holds_claims: false,
        }
    }

    pub(super) async fn read(&mut self, statement: Statement<'_>) -> StoreResult<Vec<C::Row>> {
        self.conn.fetch(statement).await
    }

    pub(super) async fn read_one(
        &mut self,
        statement: Statement<'_>,
    ) -> StoreResult<Option<C::Row>> {
        Ok(self.read(statement).await?.into_iter().next())
    }

    pub(super) async fn read_int(&mut self, statement: Statement<'_>) -> StoreResult<i64> {
        match self.read_one(statement).await? {
            Some(row) => row.int(0),
            None => Err(codec::corrupt("aggregate", "no row")),
        }
    }

    pub(super) async fn write(&mut self, statement: Statement<'_>) -> StoreResult<()> {
        self.conn.begin_write().await?;
        self.conn.execute(statement).await
    }

    pub(super) async fn write_returning(
        &mut self,
        statement: Statement<'_>,
    ) -> StoreResult<Vec<C::Row>> {
        self.conn.begin_write().await?;
        self.conn.fetch(statement).await
    }

    /// Adds to named counters.
    pub(super) async fn add_counters(&mut self, deltas: &[(&'static str, i64)]) -> StoreResult<()> {
        let mut b = Builder::new(C::DIALECT);
        if C::DIALECT.shared {
            // The schema's `bump_counter` adds to this connection's shard.
            let calls: Vec<String> = deltas
                .iter()
                .map(|&(name, delta)| {
                    format!(
                        "bump_counter({}, CAST({} AS BIGINT))",
                        b.arg(name),
                        b.arg(delta)
                    )
                })
                .collect();
            b.push(&format!("SELECT {}", calls.join(", ")));
            return self.write(b.finish()).await;
        }
        b.push("UPDATE counters SET value = value + CASE name");
        let mut names = Vec::with_capacity(deltas.len());
        for &(name, delta) in deltas {
            let name_arg = b.arg(name);
            let delta_arg = b.arg(delta);
            b.push(&format!(
                " WHEN {name_arg} THEN CAST({delta_arg} AS BIGINT)"
            ));
            names.push(name_arg);
        }
        b.push(&format!(" ELSE 0 END WHERE name IN ({})", names.join(", ")));
        self.write(b.finish()).await
    }

    /// Returns the page of `select` (which ends before its `ORDER BY`) and
    /// the number of rows `count` finds.
    pub(super) async fn paged<T>(
        &mut self,
        select: Statement<'_>,
        count: Statement<'_>,
        page: &Page,
        decode: impl Fn(&C::Row) -> StoreResult<T>,
    ) -> StoreResult<Paged<T>> {
        let items = self
            .read(select)
            .await?
            .iter()
            .map(decode)
            .collect::<StoreResult<Vec<T>>>()?;
        let total = self.read_int(count).await?;
        Ok(Paged {
            items,
            limit: page.limit,
            offset: page.offset,
            total: usize::try_from(total).unwrap_or(usize::MAX),
        })
    }
}
