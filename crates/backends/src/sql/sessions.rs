//! Worker session records: the reads (locked on a shared database) and
//! their row mapping. The write set's session upserts are applied with the
//! other entities (see `apply`).

use super::codec::{self, parse_enum};
use super::connection::Connection;
use super::query::Builder;
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{AttemptRef, SessionState, Timestamp, WorkerSession};
use lightning_store_core::storage::Access;

/// Column list of [`session`], in order.
macro_rules! session_columns {
    () => {
        "worker_id, epoch, server_id, state, deadline, attempts"
    };
}
pub(super) use session_columns;

/// Returns the JSON text of a session's attempts.
pub fn attempts_text(attempts: &[AttemptRef]) -> String {
    serde_json::to_string(attempts).expect("attempt refs serialise")
}

/// Decodes a session record from [`session_columns`].
pub fn session(row: &impl Row) -> StoreResult<WorkerSession> {
    let attempts: Vec<AttemptRef> =
        serde_json::from_str(&row.text(5)?).map_err(|e| codec::corrupt("session attempts", e))?;
    Ok(WorkerSession {
        worker_id: row.text(0)?,
        epoch: u64::try_from(row.int(1)?).map_err(|e| codec::corrupt("session epoch", e))?,
        server_id: row.text(2)?,
        state: parse_enum("session state", &row.text(3)?, SessionState::parse)?,
        deadline: row.opt_int(4)?.map(Timestamp),
        attempts,
    })
}

impl<C: Connection> SqlTx<C> {
    /// Runs a select of session records and decodes them.
    async fn select_sessions(
        &mut self,
        statement: Statement<'_>,
    ) -> StoreResult<Vec<WorkerSession>> {
        let rows = self.read(statement).await?;
        rows.iter().map(session).collect()
    }

    pub(super) async fn read_sessions(
        &mut self,
        worker_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<WorkerSession>> {
        if worker_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            session_columns!(),
            " FROM worker_sessions WHERE "
        ));
        let condition = b.one_of("worker_id", worker_ids.iter().copied());
        let order = (C::DIALECT.binary_text)("worker_id");
        b.push(&condition).push(&format!(" ORDER BY {order}"));
        if access == Access::Update && C::DIALECT.shared {
            b.push(" FOR UPDATE");
        }
        self.select_sessions(b.finish()).await
    }

    pub(super) async fn read_due_sessions(
        &mut self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<WorkerSession>> {
        let mut b = Builder::new(C::DIALECT);
        let now = b.arg(now);
        let limit = b.arg(i64::try_from(limit).unwrap_or(i64::MAX));
        let order = (C::DIALECT.binary_text)("worker_id");
        let lock = if C::DIALECT.shared {
            " FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        b.push(&format!(
            concat!(
                "SELECT ",
                session_columns!(),
                " FROM worker_sessions WHERE deadline < {} ORDER BY deadline, {} LIMIT {}{}"
            ),
            now, order, limit, lock
        ));
        self.select_sessions(b.finish()).await
    }

    pub(super) async fn read_open_sessions(
        &mut self,
        server_id: Option<&str>,
    ) -> StoreResult<Vec<WorkerSession>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            session_columns!(),
            " FROM worker_sessions WHERE state = 'open'"
        ));
        if let Some(server_id) = server_id {
            let condition = b.equals("server_id", server_id);
            b.push(" AND ").push(&condition);
        }
        let order = (C::DIALECT.binary_text)("worker_id");
        b.push(&format!(" ORDER BY {order}"));
        if C::DIALECT.shared {
            b.push(" FOR UPDATE");
        }
        self.select_sessions(b.finish()).await
    }

    pub(super) async fn take_session_epoch(&mut self) -> StoreResult<u64> {
        let rows = self
            .write_returning(Statement::new(C::DIALECT.next_session_epoch))
            .await?;
        let epoch = match rows.first() {
            Some(row) => row.int(0)?,
            None => return Err(codec::corrupt("session epoch counter", "no row")),
        };
        u64::try_from(epoch).map_err(|e| codec::corrupt("session epoch", e))
    }
}
