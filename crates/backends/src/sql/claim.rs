//! The claim of the queue's head ([`StoreTx::claim_queued`]).
//!
//! On a shared database a claim is one statement when it gets all it asked
//! for. A statement reads the queue on a snapshot taken when it starts and
//! passes over the entries that concurrent claims hold (`SKIP LOCKED`), so
//! it can come back short although the queue was never empty: the entries
//! it saw were being claimed, and the ones committed since it started are
//! invisible to it. A short claim therefore looks again on a fresh snapshot
//! whether the queue holds entries it did not get, and if so claims again:
//! waiting for the entries' holders when it holds no entry itself (a
//! holder that commits took its entries, one that rolls back leaves them to
//! this claim). A claim that holds entries claims once more on a fresh
//! snapshot and stops there: it passes over held entries (two claims that
//! each hold entries and wait for the other's would deadlock), and looking
//! again while they stay held would only spin (up to seven more rounds of
//! two statements for a short batch). It comes back empty only when a look
//! found the queue empty; the rounds are bounded in count and time.
//!
//! A claim locks an entry, then its rollout; an update locks the queue
//! entries of the rollouts it changes before the rollouts, in the same
//! order (`reads.rs`), so that one taking a rollout out of the queue and a
//! claim of its entry cannot deadlock.
//!
//! [`StoreTx::claim_queued`]: lightning_store_core::storage::StoreTx::claim_queued

use std::time::{Duration, Instant};

use super::codec::{attempt_columns, rollout_columns};
use super::connection::Connection;
use super::reads::rollout_view;
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::RolloutView;
use lightning_store_core::storage::Held;

/// A shared database's claim, up to its `LIMIT` (see [`claim_statement`]).
const CLAIM_HEAD: &str =
    // The head is picked once (a materialised CTE): a `DELETE … WHERE pos
    // IN (subquery … LIMIT n)` may run the subquery per row and delete more
    // than n entries.
    "WITH picked AS MATERIALIZED (SELECT pos FROM queue ORDER BY pos LIMIT ";

/// A shared database's claim, after its `LIMIT` and its lock clause.
const CLAIM_TAIL: &str = concat!(
    "), \
     head AS (DELETE FROM queue q USING picked WHERE q.pos = picked.pos \
     RETURNING q.pos, q.rollout_id), \
     counted AS (INSERT INTO counters (name, shard, value) \
     SELECT 'queued', pg_backend_pid(), -COUNT(*) FROM head HAVING COUNT(*) > 0 \
     ON CONFLICT (name, shard) DO UPDATE SET value = counters.value + excluded.value) \
     SELECT ",
    rollout_columns!("r."),
    ", ",
    attempt_columns!("a."),
    " FROM head JOIN rollouts r ON r.rollout_id = head.rollout_id \
     LEFT JOIN attempts a ON a.pos = (SELECT l.pos FROM attempts l \
     WHERE l.rollout_id = r.rollout_id ORDER BY l.sequence_id DESC, l.pos DESC \
     LIMIT 1) ORDER BY head.pos FOR UPDATE OF r"
);

/// Claims up to this many entries with the limit written into the text.
const CLAIM_LITERAL_LIMIT: i64 = 64;

/// A short claim looks and claims again at most this many times.
const CLAIM_ROUNDS: usize = 8;

/// A short claim starts no round after this much time.
const CLAIM_PATIENCE: Duration = Duration::from_secs(1);

/// Returns a shared database's claim of up to `limit` queue entries, which
/// passes over or waits for the entries that other transactions hold. A
/// limit up to [`CLAIM_LITERAL_LIMIT`] is written into the text (one cached
/// statement per limit, with no parameter): with `LIMIT $1` the database
/// planned the claim anew on every call (a generic plan guesses that the
/// limit takes a tenth of the queue, so it kept choosing custom plans).
fn claim_statement(limit: i64, held: Held) -> Statement<'static> {
    let lock = match held {
        Held::Skip => " FOR UPDATE SKIP LOCKED",
        Held::Wait => " FOR UPDATE",
    };
    if limit <= CLAIM_LITERAL_LIMIT {
        return Statement {
            sql: format!("{CLAIM_HEAD}{limit}{lock}{CLAIM_TAIL}").into(),
            args: Vec::new(),
        };
    }
    Statement {
        sql: format!("{CLAIM_HEAD}$1{lock}{CLAIM_TAIL}").into(),
        args: vec![limit.into()],
    }
}

impl<C: Connection> SqlTx<C> {
    /// Removes up to `limit` entries from the queue's head and returns their
    /// rollouts. On a shared database the claimed rollouts are locked and
    /// the queue's length is counted down in the claim's statement (see the
    /// module docs for a claim that comes back short).
    pub(super) async fn claim_head(&mut self, limit: usize) -> StoreResult<Vec<RolloutView>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        if C::DIALECT.shared {
            return self.claim_shared(limit).await;
        }
        let sql = concat!(
            "SELECT q.pos, ",
            rollout_columns!("r."),
            ", ",
            attempt_columns!("a."),
            " FROM queue q LEFT JOIN rollouts r ON r.rollout_id = q.rollout_id \
             LEFT JOIN attempts a ON a.pos = (SELECT l.pos FROM attempts l \
             WHERE l.rollout_id = r.rollout_id ORDER BY l.sequence_id DESC, l.pos DESC LIMIT 1) \
             ORDER BY q.pos LIMIT $1"
        );
        let rows = self.read(Statement::new(sql).bind(limit)).await?;
        let Some(last) = rows.last() else {
            return Ok(Vec::new());
        };
        let last = last.int(0)?;
        self.write(Statement::new("DELETE FROM queue WHERE pos <= $1").bind(last))
            .await?;
        rows.iter()
            .filter_map(|row| match row.opt_text(1) {
                Ok(Some(_)) => Some(rollout_view(row, 1)),
                Ok(None) => None,
                Err(error) => Some(Err(error)),
            })
            .collect()
    }

    /// A shared database's claim (see the module docs).
    async fn claim_shared(&mut self, limit: i64) -> StoreResult<Vec<RolloutView>> {
        let started = Instant::now();
        let mut claimed = Vec::new();
        let mut held = Held::Skip;
        for round in 1.. {
            let want = limit - claimed.len() as i64;
            for row in &self.write_returning(claim_statement(want, held)).await? {
                claimed.push(rollout_view(row, 0)?);
            }
            self.holds_claims |= !claimed.is_empty();
            if claimed.len() as i64 == limit
                || round == CLAIM_ROUNDS
                || (self.holds_claims && round >= 2)
                || started.elapsed() >= CLAIM_PATIENCE
                || !self.queue_has_other_entries().await?
            {
                break;
            }
            held = if self.holds_claims {
                Held::Skip
            } else {
                Held::Wait
            };
        }
        Ok(claimed)
    }

    /// Whether the queue holds entries besides the ones this transaction
    /// claimed, on a fresh snapshot and without locking: entries committed
    /// since the last claim started, or held by other transactions.
    async fn queue_has_other_entries(&mut self) -> StoreResult<bool> {
        let sql = "SELECT COUNT(*) FROM (SELECT 1 FROM queue LIMIT 1) AS entry";
        Ok(self.read_int(Statement::new(sql)).await? > 0)
    }
}
