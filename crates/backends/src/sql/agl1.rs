//! The SQL backends' 1.x records, written once for SQLite and PostgreSQL
//! over the tables of the `agl1` migrations: [`Agl1Reads`] and the apply
//! step of [`Agl1Writes`].

use async_trait::async_trait;

use super::batch::{Batch, insert_into, upsert};
use super::codec::{self, rollout_columns};
use super::connection::Connection;
use super::query::{self, Builder};
use super::statement::{Row, Statement};
use super::tx::SqlTx;
use lightning_store_core::agl1::{
    Agl1Event, Agl1Fields, Agl1Rollout, Agl1RolloutDetail, Completion, CompletionPage, JsonText,
    ModelServer, Pause, Replica, StoredEvent,
};
use lightning_store_core::error::StoreResult;
use lightning_store_core::model::{Json, RolloutStatus, Timestamp};
use lightning_store_core::storage::Access;
use lightning_store_core::storage::agl1::{Agl1Reads, Agl1Writes};

/// The 1.x field columns [`agl1_rollout`] reads after a rollout's.
macro_rules! field_columns {
    () => {
        "f.config, f.k8s_job_name, f.last_attempt_id, f.error_message, f.version, \
         f.created_at, f.updated_at"
    };
}

/// The columns [`event`] reads.
macro_rules! event_columns {
    () => {
        "e.pos, e.rollout_id, e.attempt_id, e.event_type, e.time, e.data"
    };
}

/// The tables that hold a rollout's rows, deleted with it (the rollout's
/// own row last).
const ROLLOUT_TABLES: [&str; 11] = [
    "spans",
    "rollout_rewards",
    "rollout_model_versions",
    "rollout_rows_verdicts",
    "rollout_usage",
    "rollout_spans",
    "attempts",
    "queue",
    "agl1_events",
    "agl1_rollouts",
    "rollouts",
];

/// Decodes a 1.x rollout: a rollout's columns at `at`, then [`field_columns`].
fn agl1_rollout(row: &impl Row, at: usize) -> StoreResult<Agl1Rollout> {
    let f = at + codec::ROLLOUT_COLUMNS;
    let config: Json =
        serde_json::from_str(&row.text(f)?).map_err(|error| codec::corrupt("1.x config", error))?;
    Ok(Agl1Rollout {
        rollout: codec::rollout(row, at)?,
        fields: Agl1Fields {
            config,
            k8s_job_name: row.opt_text(f + 1)?,
            last_attempt_id: row.opt_text(f + 2)?,
            error_message: row.opt_text(f + 3)?,
            version: row.int(f + 4)?,
            created_at: Timestamp(row.int(f + 5)?),
            updated_at: Timestamp(row.int(f + 6)?),
        },
    })
}

/// Checks a stored JSON payload, kept as text.
fn json_text(what: &str, text: String) -> StoreResult<JsonText> {
    JsonText::parse(text).map_err(|error| codec::corrupt(what, error))
}

/// Decodes an event from [`event_columns`] at `at`.
fn event(row: &impl Row, at: usize) -> StoreResult<StoredEvent> {
    Ok(StoredEvent {
        pos: row.int(at)?,
        event: Agl1Event {
            rollout_id: row.text(at + 1)?,
            attempt_id: row.text(at + 2)?,
            event_type: row.text(at + 3)?,
            timestamp: Timestamp(row.int(at + 4)?),
            data: row.text(at + 5)?,
        },
    })
}

fn model(row: &impl Row) -> StoreResult<ModelServer> {
    Ok(ModelServer {
        model: row.text(0)?,
        endpoint: row.text(1)?,
        version: row.int(2)?,
    })
}

/// The rows of a write set's 1.x part that its upserts write.
struct Agl1Rows<'w> {
    fields: Vec<(&'w String, &'w Agl1Fields)>,
    models: Vec<&'w ModelServer>,
    present: Vec<&'w Replica>,
    gone: Vec<&'w str>,
}

impl<'w> Agl1Rows<'w> {
    fn of(writes: &'w Agl1Writes) -> Self {
        let mut present = Vec::new();
        let mut gone = Vec::new();
        for (server_id, replica) in &writes.replicas {
            match replica {
                Some(replica) => present.push(replica),
                None => gone.push(server_id.as_str()),
            }
        }
        Self {
            fields: writes.fields.iter().collect(),
            models: writes.models.values().collect(),
            present,
            gone,
        }
    }

    /// Adds the 1.x fields, the event appends and rewrites, the models,
    /// the gateway's pause and the replicas to `batch`.
    fn add_to<'a>(&'a self, batch: &mut Batch<'a>, writes: &'a Agl1Writes) {
        add_fields(batch, &self.fields);
        add_events(batch, writes);
        upsert(
            batch,
            &self.models,
            insert_into!("agl1_models", "model, endpoint, version"),
            " ON CONFLICT (model, endpoint) DO UPDATE SET version = excluded.version",
            |server| {
                [
                    server.model.as_str().into(),
                    server.endpoint.as_str().into(),
                    server.version.into(),
                ]
            },
        );
        if let Some(pause) = &writes.pause {
            add_pause(batch, pause);
        }
        add_replicas(batch, &self.present, &self.gone);
    }
}

/// Adds the 1.x fields of rollouts.
fn add_fields<'a>(batch: &mut Batch<'a>, fields: &'a [(&'a String, &'a Agl1Fields)]) {
    upsert(
        batch,
        fields,
        insert_into!(
            "agl1_rollouts",
            "rollout_id, config, k8s_job_name, last_attempt_id, error_message, version, \
             created_at, updated_at"
        ),
        " ON CONFLICT (rollout_id) DO UPDATE SET config = excluded.config, \
         k8s_job_name = excluded.k8s_job_name, last_attempt_id = excluded.last_attempt_id, \
         error_message = excluded.error_message, version = excluded.version, \
         created_at = excluded.created_at, updated_at = excluded.updated_at",
        |&(rollout_id, fields)| {
            [
                rollout_id.as_str().into(),
                codec::json_text(&fields.config).into(),
                fields.k8s_job_name.as_deref().into(),
                fields.last_attempt_id.as_deref().into(),
                fields.error_message.as_deref().into(),
                fields.version.into(),
                fields.created_at.into(),
                fields.updated_at.into(),
            ]
        },
    );
}

/// Adds the rewrites of stored events' data, then the appended events.
fn add_events<'a>(batch: &mut Batch<'a>, writes: &'a Agl1Writes) {
    for ((_, pos), data) in &writes.event_data {
        batch.add(2, |b| {
            let data = b.arg(data.as_str());
            let pos = b.arg(*pos);
            b.push(&format!(
                "UPDATE agl1_events SET data = {data} WHERE pos = {pos}"
            ));
        });
    }
    // A multi-row insert assigns positions in `VALUES` order.
    upsert(
        batch,
        &writes.events,
        insert_into!(
            "agl1_events",
            "rollout_id, attempt_id, event_type, time, data, idempotency_key, digest"
        ),
        "",
        |write| {
            let event = &write.event;
            [
                event.rollout_id.as_str().into(),
                event.attempt_id.as_str().into(),
                event.event_type.as_str().into(),
                event.timestamp.into(),
                event.data.as_str().into(),
                write.key.as_ref().map(|k| k.key.as_str()).into(),
                write.key.as_ref().map(|k| k.digest.as_str()).into(),
            ]
        },
    );
}

/// Adds the gateway's pause.
fn add_pause<'a>(batch: &mut Batch<'a>, pause: &'a Pause) {
    batch.add(4, |b| {
        let paused = b.arg(i64::from(pause.paused));
        let retry = b.arg(pause.retry_after_seconds);
        let reason = b.arg(pause.reason.as_deref());
        let generation = b.arg(pause.generation);
        b.push(&format!(
            "UPDATE agl1_gateway SET paused = {paused}, retry_after_seconds = {retry}, \
             reason = {reason}, generation = {generation} WHERE id = 0"
        ));
    });
}

/// Adds the replicas that report, then deletes those that left.
fn add_replicas<'a>(batch: &mut Batch<'a>, present: &'a [&'a Replica], gone: &'a [&'a str]) {
    upsert(
        batch,
        present,
        insert_into!(
            "agl1_replicas",
            "server_id, inflight, generation_seen, heartbeat"
        ),
        " ON CONFLICT (server_id) DO UPDATE SET inflight = excluded.inflight, \
         generation_seen = excluded.generation_seen, heartbeat = excluded.heartbeat",
        |replica| {
            [
                replica.server_id.as_str().into(),
                replica.inflight.into(),
                replica.generation_seen.into(),
                replica.heartbeat.into(),
            ]
        },
    );
    if !gone.is_empty() {
        batch.add(gone.len(), |b| {
            let condition = b.one_of("server_id", gone.iter().copied());
            b.push(&format!("DELETE FROM agl1_replicas WHERE {condition}"));
        });
    }
}

impl<C: Connection> SqlTx<C> {
    /// Applies the 1.x part of a write set: deletions, then one batch of
    /// upserts and appends, then the completion log.
    pub(super) async fn apply_agl1(&mut self, writes: &mut Agl1Writes) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        if !writes.deleted.is_empty() {
            let deleted: Vec<&str> = writes.deleted.iter().map(String::as_str).collect();
            self.delete_rollouts(&deleted).await?;
        }
        // On its own: the clauses of one statement do not see each other's
        // changes, and models may be registered again in the same set.
        if writes.clear_models {
            self.write(Statement::new("DELETE FROM agl1_models"))
                .await?;
        }
        let rows = Agl1Rows::of(writes);
        let mut batch = Batch::new(C::DIALECT);
        rows.add_to(&mut batch, writes);
        for statement in batch.finish() {
            self.write(statement).await?;
        }
        if C::DIALECT.shared {
            // Appended by the statement that travels with the COMMIT
            // ([`completions_appended`]).
            return Ok(());
        }
        self.append_completions(&writes.completions).await
    }

    /// Deletes rollouts with every row that hangs off them (their
    /// completion log entries stay); the triggers, the span totals and the
    /// queue entries counted here keep the counts exact.
    async fn delete_rollouts(&mut self, rollout_ids: &[&str]) -> StoreResult<()> {
        let mut b = Builder::new(C::DIALECT);
        let condition = b.one_of("rollout_id", rollout_ids.iter().copied());
        b.push(&format!(
            "SELECT CAST(COALESCE(SUM(spans), 0) AS BIGINT), \
             CAST(COALESCE(SUM(span_bytes), 0) AS BIGINT) FROM rollout_spans WHERE {condition}"
        ));
        if let Some(row) = self.read_one(b.finish()).await? {
            let (count, bytes) = (row.int(0)?, row.int(1)?);
            if count != 0 || bytes != 0 {
                self.add_counters(&[("spans", -count), ("span_bytes", -bytes)])
                    .await?;
            }
        }
        for table in ROLLOUT_TABLES {
            let mut b = Builder::new(C::DIALECT);
            let condition = b.one_of("rollout_id", rollout_ids.iter().copied());
            b.push(&format!("DELETE FROM {table} WHERE {condition}"));
            // On a shared database the queue's length is counted by the
            // statements that change it, not by a trigger.
            if table == "queue" && C::DIALECT.shared {
                b.push(" RETURNING rollout_id");
                let left = self.write_returning(b.finish()).await?.len();
                if left > 0 {
                    self.add_counters(&[("queued", -(left as i64))]).await?;
                }
                continue;
            }
            self.write(b.finish()).await?;
        }
        Ok(())
    }

    /// Appends to the completion log at the positions the counter row hands
    /// out (see the migration: the row's lock orders the appends); a single
    /// writer's (a shared database's: [`completions_appended`]).
    async fn append_completions(&mut self, rollout_ids: &[String]) -> StoreResult<()> {
        if rollout_ids.is_empty() {
            return Ok(());
        }
        let count = rollout_ids.len() as i64;
        let sql = "UPDATE completion_counter SET total = total + $1 WHERE id = 0 RETURNING total";
        let rows = self
            .write_returning(Statement::new(sql).bind(count))
            .await?;
        let total = rows
            .first()
            .ok_or_else(|| codec::corrupt("completion counter", "no row"))?
            .int(0)?;
        let first = total - count;
        let chunk = (C::DIALECT.max_params / 2).max(1);
        for (index, part) in rollout_ids.chunks(chunk).enumerate() {
            let mut b = Builder::new(C::DIALECT);
            b.push("INSERT INTO completions (seq, rollout_id) VALUES ");
            for (offset, rollout_id) in part.iter().enumerate() {
                let seq = b.arg(first + (index * chunk + offset) as i64);
                let rollout_id = b.arg(rollout_id.as_str());
                if offset > 0 {
                    b.push(", ");
                }
                b.push(&format!("(CAST({seq} AS BIGINT), {rollout_id})"));
            }
            self.write(b.finish()).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<C: Connection> Agl1Reads for SqlTx<C> {
    async fn agl1_rollouts(
        &mut self,
        rollout_ids: &[&str],
        access: Access,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        if rollout_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            rollout_columns!("r."),
            ", ",
            field_columns!(),
            " FROM agl1_rollouts f JOIN rollouts r ON r.rollout_id = f.rollout_id WHERE "
        ));
        let condition = b.one_of("f.rollout_id", rollout_ids.iter().copied());
        b.push(&condition);
        if access == Access::Update && C::DIALECT.shared {
            b.push(" FOR UPDATE OF r");
        }
        let found = self
            .read(b.finish())
            .await?
            .iter()
            .map(|row| agl1_rollout(row, 0))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut out: Vec<Agl1Rollout> = Vec::with_capacity(found.len());
        for rollout_id in rollout_ids {
            if let Some(agl1) = found
                .iter()
                .find(|agl1| agl1.rollout.rollout_id == *rollout_id)
                && !out.iter().any(|o| o.rollout.rollout_id == *rollout_id)
            {
                out.push(agl1.clone());
            }
        }
        Ok(out)
    }

    async fn has_agl1_rollout(&mut self, rollout_id: &str, access: Access) -> StoreResult<bool> {
        let sql = match access {
            Access::Update if C::DIALECT.shared => {
                "SELECT 1 FROM agl1_rollouts f JOIN rollouts r ON r.rollout_id = f.rollout_id \
                 WHERE f.rollout_id = $1 FOR UPDATE OF r"
            }
            _ => {
                "SELECT 1 FROM agl1_rollouts f JOIN rollouts r ON r.rollout_id = f.rollout_id \
                 WHERE f.rollout_id = $1"
            }
        };
        let found = self.read_one(Statement::new(sql).bind(rollout_id)).await?;
        Ok(found.is_some())
    }

    async fn list_agl1_rollouts(
        &mut self,
        statuses: &[RolloutStatus],
        limit: Option<usize>,
    ) -> StoreResult<Vec<Agl1Rollout>> {
        let mut b = Builder::new(C::DIALECT);
        b.push(concat!(
            "SELECT ",
            rollout_columns!("r."),
            ", ",
            field_columns!(),
            " FROM agl1_rollouts f JOIN rollouts r ON r.rollout_id = f.rollout_id WHERE "
        ));
        let condition = b.one_of("r.status", statuses.iter().map(|s| s.as_str()));
        b.push(&condition);
        b.push(" ORDER BY f.pos");
        if let Some(limit) = limit {
            let limit = b.arg(limit as i64);
            b.push(&format!(" LIMIT {limit}"));
        }
        self.read(b.finish())
            .await?
            .iter()
            .map(|row| agl1_rollout(row, 0))
            .collect()
    }

    async fn completions(&mut self, after: i64, limit: usize) -> StoreResult<CompletionPage> {
        let sql = concat!(
            "SELECT c.seq, c.rollout_id, ",
            rollout_columns!("r."),
            ", ",
            field_columns!(),
            " FROM completions c LEFT JOIN agl1_rollouts f ON f.rollout_id = c.rollout_id \
             LEFT JOIN rollouts r ON r.rollout_id = f.rollout_id \
             WHERE c.seq >= $1 ORDER BY c.seq LIMIT $2"
        );
        let rows = self
            .read(
                Statement::new(sql)
                    .bind(after)
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            let rollout = match row.opt_text(2)? {
                Some(_) => Some(agl1_rollout(row, 2)?),
                None => None,
            };
            entries.push(Completion {
                position: row.int(0)?,
                rollout_id: row.text(1)?,
                rollout,
            });
        }
        let total = self
            .read_int(Statement::new(
                "SELECT total FROM completion_counter WHERE id = 0",
            ))
            .await?;
        Ok(CompletionPage { entries, total })
    }

    async fn agl1_events(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: Option<&str>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let sql = match event_type {
            None => concat!(
                "SELECT ",
                event_columns!(),
                " FROM agl1_events e WHERE e.rollout_id = $1 AND e.attempt_id = $2 ORDER BY e.pos"
            ),
            Some(_) => concat!(
                "SELECT ",
                event_columns!(),
                " FROM agl1_events e WHERE e.rollout_id = $1 AND e.attempt_id = $2 \
                 AND e.event_type = $3 ORDER BY e.pos"
            ),
        };
        let mut statement = Statement::new(sql).bind(rollout_id).bind(attempt_id);
        if let Some(event_type) = event_type {
            statement = statement.bind(event_type);
        }
        self.read(statement)
            .await?
            .iter()
            .map(|row| event(row, 0))
            .collect()
    }

    async fn latest_agl1_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        event_type: &str,
    ) -> StoreResult<Option<StoredEvent>> {
        let sql = concat!(
            "SELECT ",
            event_columns!(),
            " FROM agl1_events e WHERE e.rollout_id = $1 AND e.attempt_id = $2 \
             AND e.event_type = $3 ORDER BY e.pos DESC LIMIT 1"
        );
        let statement = Statement::new(sql)
            .bind(rollout_id)
            .bind(attempt_id)
            .bind(event_type);
        self.read_one(statement)
            .await?
            .map(|row| event(&row, 0))
            .transpose()
    }

    async fn agl1_rollout_detail(
        &mut self,
        rollout_id: &str,
    ) -> StoreResult<Option<Agl1RolloutDetail>> {
        // One statement: the columns the GET shows on every row, one row per
        // attempt with events with its first position (one row with a null
        // attempt when none has). Grouped by the tables' keys, so that the
        // rollout's columns may be selected (PostgreSQL); no subquery to
        // materialise and nothing to sort in SQL: the attempts are ordered
        // here. The payloads stay JSON text.
        let sql = "SELECT r.rollout_id, r.input, r.mode, r.status, r.metadata, f.config, \
                   f.k8s_job_name, f.last_attempt_id, f.error_message, f.version, \
                   f.created_at, f.updated_at, r.watchdog_deadline, e.attempt_id, MIN(e.pos) \
                   FROM agl1_rollouts f \
                   JOIN rollouts r ON r.rollout_id = f.rollout_id \
                   LEFT JOIN agl1_events e ON e.rollout_id = f.rollout_id \
                   WHERE f.rollout_id = $1 GROUP BY r.pos, f.pos, e.attempt_id";
        let rows = self.read(Statement::new(sql).bind(rollout_id)).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let mut firsts = Vec::with_capacity(rows.len());
        for each in &rows {
            if let Some(attempt_id) = each.opt_text(13)? {
                firsts.push((each.int(14)?, attempt_id));
            }
        }
        firsts.sort_unstable();
        let attempts = firsts
            .into_iter()
            .map(|(_, attempt_id)| attempt_id)
            .collect();
        Ok(Some(Agl1RolloutDetail {
            rollout_id: row.text(0)?,
            input: json_text("rollout input", row.text(1)?)?,
            mode: codec::rollout_mode(row.opt_text(2)?)?,
            status: codec::rollout_status(&row.text(3)?)?,
            metadata: json_text("rollout metadata", row.text(4)?)?,
            config: json_text("1.x config", row.text(5)?)?,
            k8s_job_name: row.opt_text(6)?,
            last_attempt_id: row.opt_text(7)?,
            error_message: row.opt_text(8)?,
            version: row.int(9)?,
            created_at: Timestamp(row.int(10)?),
            updated_at: Timestamp(row.int(11)?),
            deadline: row.opt_int(12)?.map(Timestamp),
            attempts,
        }))
    }

    async fn keyed_event(
        &mut self,
        rollout_id: &str,
        attempt_id: &str,
        key: &str,
    ) -> StoreResult<Option<(String, StoredEvent)>> {
        let sql = concat!(
            "SELECT e.digest, ",
            event_columns!(),
            " FROM agl1_events e \
             WHERE e.rollout_id = $1 AND e.attempt_id = $2 AND e.idempotency_key = $3"
        );
        let statement = Statement::new(sql)
            .bind(rollout_id)
            .bind(attempt_id)
            .bind(key);
        match self.read_one(statement).await? {
            Some(row) => Ok(Some((row.text(0)?, event(&row, 1)?))),
            None => Ok(None),
        }
    }

    async fn models(&mut self, model_name: Option<&str>) -> StoreResult<Vec<ModelServer>> {
        let statement = match model_name {
            Some(model_name) => Statement::new(
                "SELECT model, endpoint, version FROM agl1_models WHERE model = $1 ORDER BY pos",
            )
            .bind(model_name),
            None => Statement::new("SELECT model, endpoint, version FROM agl1_models ORDER BY pos"),
        };
        self.read(statement).await?.iter().map(model).collect()
    }

    async fn pause(&mut self, access: Access) -> StoreResult<Pause> {
        let sql = match access {
            Access::Update if C::DIALECT.shared => {
                "SELECT paused, retry_after_seconds, reason, generation FROM agl1_gateway \
                 WHERE id = 0 FOR UPDATE"
            }
            _ => {
                "SELECT paused, retry_after_seconds, reason, generation FROM agl1_gateway \
                 WHERE id = 0"
            }
        };
        let row = self
            .read_one(Statement::new(sql))
            .await?
            .ok_or_else(|| codec::corrupt("gateway pause", "no row"))?;
        Ok(Pause {
            paused: row.int(0)? != 0,
            retry_after_seconds: row.int(1)?,
            reason: row.opt_text(2)?,
            generation: row.int(3)?,
        })
    }

    async fn replicas(&mut self) -> StoreResult<Vec<Replica>> {
        let sql = "SELECT server_id, inflight, generation_seen, heartbeat FROM agl1_replicas \
                   ORDER BY server_id";
        self.read(Statement::new(sql))
            .await?
            .iter()
            .map(|row| {
                Ok(Replica {
                    server_id: row.text(0)?,
                    inflight: row.int(1)?,
                    generation_seen: row.int(2)?,
                    heartbeat: Timestamp(row.int(3)?),
                })
            })
            .collect()
    }
}

/// On a shared database: the call that appends `rollout_ids` to the
/// completion log at the positions the counter row hands out (the
/// `append_completions` procedure of migration 0007), which runs with the
/// `COMMIT` (one simple query, so its values are literals). The counter
/// row's lock orders the appends (see the migrations), so it is taken in the
/// transaction's last round trip, like the event counter's (see the `apply`
/// module): held across round trips to this server, it queued every
/// completing transaction of every server behind the one holding it
/// (docs/performance.md#counts-in-the-write-set-completions-with-the-commit).
/// Returns no rows.
pub(super) fn completions_appended(rollout_ids: &[String]) -> String {
    let ids: Vec<String> = rollout_ids
        .iter()
        .map(|rollout_id| query::text_literal(rollout_id))
        .collect();
    format!("CALL append_completions(ARRAY[{}])", ids.join(", "))
}
