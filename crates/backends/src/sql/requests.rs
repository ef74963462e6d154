//! Remembered client request ids ([`RememberedRequest`]): the read, and the
//! write set's forgetting and remembering, added to the commit's batch.

use super::batch::{Batch, insert_into, upsert};
use super::codec;
use super::connection::Connection;
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::idempotency::RememberedRequest;
use lightning_store_core::model::Timestamp;

/// Decodes a remembered request from `request_id, digest, rollout_ids, expires_at`.
fn remembered(row: &impl Row) -> StoreResult<RememberedRequest> {
    let rollout_ids = serde_json::from_str(&row.text(2)?)
        .map_err(|e| codec::corrupt("request id rollouts", e))?;
    Ok(RememberedRequest {
        request_id: row.text(0)?,
        digest: row.text(1)?,
        rollout_ids,
        expires_at: Timestamp(row.int(3)?),
    })
}

impl<C: Connection> SqlTx<C> {
    pub(super) async fn read_remembered_request(
        &mut self,
        request_id: &str,
    ) -> StoreResult<Option<RememberedRequest>> {
        let sql = "SELECT request_id, digest, rollout_ids, expires_at FROM request_ids \
                   WHERE request_id = $1";
        let row = self.read_one(Statement::new(sql).bind(request_id)).await?;
        row.as_ref().map(remembered).transpose()
    }
}

/// Adds a write set's request ids to `batch`: those expired by `forget`
/// deleted, then `requests` upserted. The engine never does both in one
/// write set (on a shared database they would be clauses of one statement,
/// which cannot change a row twice).
pub(super) fn add<'a>(
    batch: &mut Batch<'a>,
    forget: Option<Timestamp>,
    requests: &'a [&'a RememberedRequest],
) {
    if let Some(by) = forget {
        batch.add(1, |b| {
            let by = b.arg(by);
            b.push(&format!("DELETE FROM request_ids WHERE expires_at <= {by}"));
        });
    }
    upsert(
        batch,
        requests,
        insert_into!("request_ids", "request_id, digest, rollout_ids, expires_at"),
        " ON CONFLICT (request_id) DO UPDATE SET digest = excluded.digest, \
         rollout_ids = excluded.rollout_ids, expires_at = excluded.expires_at",
        |request| {
            [
                request.request_id.as_str().into(),
                request.digest.as_str().into(),
                serde_json::to_string(&request.rollout_ids)
                    .expect("ids serialise")
                    .into(),
                request.expires_at.into(),
            ]
        },
    );
}
