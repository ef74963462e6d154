//! Cutting this server's PostgreSQL transactions short at the drain
//! deadline ([`lightning_store_core::storage::Store::interrupt`]).
//!
//! Each transaction registers its connection's backend process id while it
//! runs, with the interrupt generation it began in. An interrupt moves the
//! generation on and, from a fresh connection (the pool may be exhausted),
//! cancels the statements those backends are running (`pg_cancel_backend`);
//! a registered transaction then fails at its next statement as the
//! shutdown's, with nothing committed. A transaction leaves the register
//! before its `COMMIT`, under the same lock as the interrupt's snapshot: it
//! either fails before committing or is not cancelled, so a write that
//! committed is answered as committed. Transactions begun after an
//! interrupt wait until its cancels were delivered (within the call
//! deadline), so that a late cancel cannot reach them.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::watch;

/// The transactions of one store that an interrupt may cancel.
pub(super) struct Interrupts {
    /// How many times the store was interrupted.
    generation: AtomicU64,
    /// The backend process ids of the connections inside a transaction.
    running: parking_lot::Mutex<HashSet<u32>>,
    /// The last generation whose cancels were delivered.
    delivered: watch::Sender<u64>,
    /// How the cancelling connection connects.
    connect: PgConnectOptions,
    /// How long delivering the cancels may take.
    deadline: Duration,
}

impl Interrupts {
    /// Returns the register of a store connecting with `connect`, each
    /// database call bounded by `deadline`.
    pub(super) fn new(connect: PgConnectOptions, deadline: Duration) -> Arc<Self> {
        Arc::new(Self {
            generation: AtomicU64::new(0),
            running: parking_lot::Mutex::new(HashSet::new()),
            delivered: watch::Sender::new(0),
            connect,
            deadline,
        })
    }

    /// Returns the generation a transaction begins in, once the cancels of
    /// the last interrupt were delivered (or the deadline passed).
    pub(super) async fn settled(&self) -> u64 {
        let generation = self.generation.load(Ordering::SeqCst);
        if *self.delivered.borrow() < generation {
            let mut delivered = self.delivered.subscribe();
            let reached = delivered.wait_for(|delivered| *delivered >= generation);
            let _ = tokio::time::timeout(self.deadline, reached).await;
        }
        generation
    }

    /// Returns whether no interrupt came since `generation`.
    pub(super) fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::SeqCst) == generation
    }

    /// Registers the transaction of `generation` running on backend `pid`;
    /// returns false (registering nothing) when an interrupt came since.
    pub(super) fn enter(&self, pid: u32, generation: u64) -> bool {
        let mut running = self.running.lock();
        if !self.is_current(generation) {
            return false;
        }
        running.insert(pid);
        true
    }

    /// Unregisters backend `pid`'s transaction; returns whether no interrupt
    /// came since `generation`: only then may it commit, and no cancel is
    /// sent to it any more.
    pub(super) fn leave(&self, pid: u32, generation: u64) -> bool {
        let mut running = self.running.lock();
        running.remove(&pid);
        self.is_current(generation)
    }

    /// Fails every registered transaction: moves the generation on and
    /// cancels their running statements, in the background.
    pub(super) fn interrupt(self: &Arc<Self>) {
        let (generation, pids) = {
            let running = self.running.lock();
            let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            (generation, running.iter().copied().collect::<Vec<_>>())
        };
        let this = self.clone();
        tokio::spawn(async move {
            if !pids.is_empty() {
                match tokio::time::timeout(this.deadline, this.cancel(&pids)).await {
                    Ok(Ok(cancelled)) => {
                        tracing::info!(cancelled, "postgres: running statements cancelled")
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "postgres: cannot cancel the running statements")
                    }
                    Err(_) => {
                        tracing::warn!("postgres: cancelling the running statements timed out")
                    }
                }
            }
            this.delivered
                .send_modify(|delivered| *delivered = (*delivered).max(generation));
        });
    }

    /// Cancels the statements the backends `pids` run; returns how many
    /// were signalled.
    async fn cancel(&self, pids: &[u32]) -> Result<i64, sqlx::Error> {
        let mut conn = PgConnection::connect_with(&self.connect).await?;
        let pids: Vec<i64> = pids.iter().map(|&pid| i64::from(pid)).collect();
        let cancelled = sqlx::query_scalar(
            "SELECT count(*) FILTER (WHERE pg_cancel_backend(CAST(pid AS INT))) \
             FROM unnest(CAST($1 AS BIGINT[])) AS pid",
        )
        .bind(pids)
        .fetch_one(&mut conn)
        .await?;
        let _ = conn.close().await;
        Ok(cancelled)
    }
}
