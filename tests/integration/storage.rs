//! The storage contract at the port, below the engine: a differential test
//! that runs the same random transactions (write sets, claims, span inserts,
//! commits and drops, worker session records, remembered request ids)
//! against memory, SQLite and PostgreSQL and compares every read,
//! agent-lightning 1.x's records included, and the rollback of a dropped transaction on every backend.

use crate::common;

use std::sync::Arc;

use common::{Backend, TestOptions};
use lightning_store::core::agl1::{
    Agl1Event, Agl1Fields, Agl1RolloutDetail, IdempotencyKey, ModelServer, Pause, Replica,
};
use lightning_store::core::events::{Change, Event};
use lightning_store::core::idempotency::RememberedRequest;
use lightning_store::core::model::{
    Attempt, AttemptStatus, Counts, Json, Rollout, RolloutConfig, RolloutStatus, RolloutView,
    SessionState, Span, Timestamp, Worker, WorkerSession, WorkerStatus,
};
use lightning_store::core::query::{
    AttemptSelector, FilterLogic, Page, RolloutFilter, SpanFilter, TextMatch,
};
use lightning_store::core::storage::agl1::EventWrite;
use lightning_store::core::storage::{Access, Held, Store, StoreTx, WriteSet};
use lightning_store::core::training::RolloutReward;
use lightning_store::core::training::usage::RolloutUsage;
use proptest::prelude::*;

const BACKENDS: [Backend; 3] = [Backend::Memory, Backend::Sqlite, Backend::Postgres];

/// One step of a transaction.
#[derive(Debug, Clone)]
enum Op {
    PutRollout {
        id: u8,
        status: u8,
        deadline: Option<u8>,
    },
    PutAttempt {
        rollout: u8,
        attempt: u8,
        status: u8,
    },
    PutWorker {
        id: u8,
        status: u8,
    },
    Enqueue {
        rollout: u8,
    },
    Claim {
        limit: u8,
    },
    AddSpans {
        rollout: u8,
        spans: Vec<u8>,
    },
    Event {
        rollout: u8,
    },
    Unqueue {
        rollout: u8,
    },
    PutSession {
        worker: u8,
        epoch: u8,
        server: u8,
        state: u8,
        deadline: Option<u8>,
        attempts: u8,
    },
    ReadSessions {
        due: u8,
        limit: u8,
        server: Option<u8>,
    },
    NextEpochs,
    /// 1.x fields of a rollout (written with it when the set lacks it).
    Agl1Fields {
        rollout: u8,
        version: u8,
    },
    /// A 1.x model request, under an idempotency key unless one is stored.
    Agl1Event {
        rollout: u8,
        attempt: u8,
        key: Option<u8>,
    },
    /// Rewrites the data of an attempt's latest 1.x event.
    RewriteEvent {
        rollout: u8,
    },
    Complete {
        rollout: u8,
    },
    /// Deletes a rollout the set does not write.
    Delete {
        rollout: u8,
    },
    Model {
        model: u8,
        endpoint: u8,
        version: u8,
    },
    ClearModels,
    Pause {
        generation: u8,
    },
    Replica {
        id: u8,
        present: bool,
    },
    /// Remembers a request id (unless the set forgets expired ones: the
    /// engine never does both in one set).
    Remember {
        id: u8,
        expires: u8,
        rollouts: u8,
    },
    /// Forgets the request ids expired by a time (unless the set remembers).
    ForgetRequests {
        by: u8,
    },
}

/// A transaction: its steps, then a commit or a drop.
#[derive(Debug, Clone)]
struct Transaction {
    ops: Vec<Op>,
    commit: bool,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6u8, 0..7u8, proptest::option::of(0..20u8)).prop_map(|(id, status, deadline)| {
            Op::PutRollout {
                id,
                status,
                deadline,
            }
        }),
        (0..6u8, 0..3u8, 0..6u8).prop_map(|(rollout, attempt, status)| Op::PutAttempt {
            rollout,
            attempt,
            status
        }),
        (0..3u8, 0..5u8).prop_map(|(id, status)| Op::PutWorker { id, status }),
        (0..6u8).prop_map(|rollout| Op::Enqueue { rollout }),
        (1..4u8).prop_map(|limit| Op::Claim { limit }),
        (0..6u8, proptest::collection::vec(0..6u8, 1..4))
            .prop_map(|(rollout, spans)| Op::AddSpans { rollout, spans }),
        (0..6u8).prop_map(|rollout| Op::Event { rollout }),
        (0..6u8).prop_map(|rollout| Op::Unqueue { rollout }),
        (
            0..3u8,
            1..50u8,
            0..2u8,
            0..3u8,
            proptest::option::of(0..20u8),
            0..3u8
        )
            .prop_map(|(worker, epoch, server, state, deadline, attempts)| {
                Op::PutSession {
                    worker,
                    epoch,
                    server,
                    state,
                    deadline,
                    attempts,
                }
            }),
        (0..20u8, 1..4u8, proptest::option::of(0..2u8))
            .prop_map(|(due, limit, server)| Op::ReadSessions { due, limit, server }),
        Just(Op::NextEpochs),
        (0..6u8, 0..4u8).prop_map(|(rollout, version)| Op::Agl1Fields { rollout, version }),
        (0..6u8, 0..2u8, proptest::option::of(0..3u8)).prop_map(|(rollout, attempt, key)| {
            Op::Agl1Event {
                rollout,
                attempt,
                key,
            }
        }),
        (0..6u8).prop_map(|rollout| Op::RewriteEvent { rollout }),
        (0..6u8).prop_map(|rollout| Op::Complete { rollout }),
        (0..6u8).prop_map(|rollout| Op::Delete { rollout }),
        (0..2u8, 0..3u8, 0..3u8).prop_map(|(model, endpoint, version)| Op::Model {
            model,
            endpoint,
            version
        }),
        Just(Op::ClearModels),
        (0..9u8).prop_map(|generation| Op::Pause { generation }),
        (0..3u8, any::<bool>()).prop_map(|(id, present)| Op::Replica { id, present }),
        (0..4u8, 0..20u8, 0..3u8).prop_map(|(id, expires, rollouts)| Op::Remember {
            id,
            expires,
            rollouts
        }),
        (0..20u8).prop_map(|by| Op::ForgetRequests { by }),
    ]
}

fn transaction() -> impl Strategy<Value = Transaction> {
    (
        proptest::collection::vec(op(), 1..6),
        proptest::bool::weighted(0.8),
    )
        .prop_map(|(ops, commit)| Transaction { ops, commit })
}

fn rollout(id: u8, status: u8) -> Rollout {
    Rollout {
        rollout_id: rollout_id(id),
        input: Json::from(id),
        start_time: Timestamp(1_000 + i64::from(id)),
        end_time: None,
        mode: None,
        resources_id: None,
        status: RolloutStatus::ALL[usize::from(status) % RolloutStatus::ALL.len()],
        config: RolloutConfig::default(),
        metadata: Json::Null,
    }
}

fn attempt(rollout: u8, attempt: u8, status: u8) -> Attempt {
    Attempt {
        rollout_id: rollout_id(rollout),
        attempt_id: format!("at-{attempt}"),
        sequence_id: u32::from(attempt) + 1,
        start_time: Timestamp(2_000),
        end_time: None,
        status: AttemptStatus::ALL[usize::from(status) % AttemptStatus::ALL.len()],
        worker_id: None,
        last_heartbeat_time: None,
        metadata: Json::Null,
    }
}

fn span(rollout: u8, span: u8) -> Span {
    Span {
        rollout_id: rollout_id(rollout),
        attempt_id: "at-0".to_owned(),
        sequence_id: 0,
        trace_id: "trace".to_owned(),
        span_id: format!("sp-{span}"),
        parent_id: None,
        name: format!("span {span}"),
        status: Default::default(),
        attributes: Vec::new(),
        events: Vec::new(),
        links: Vec::new(),
        start_time: None,
        end_time: None,
        context: None,
        parent: None,
        resource: None,
        kind: Default::default(),
        scope: None,
        extra: Default::default(),
    }
}

fn session(
    worker: u8,
    epoch: u8,
    server: u8,
    state: u8,
    deadline: Option<u8>,
    attempts: u8,
) -> WorkerSession {
    WorkerSession {
        worker_id: worker_id(worker),
        epoch: u64::from(epoch),
        server_id: server_id(server),
        state: SessionState::ALL[usize::from(state) % SessionState::ALL.len()],
        deadline: deadline.map(|d| Timestamp(i64::from(d))),
        attempts: (0..attempts)
            .map(|n| (rollout_id(n), format!("at-{n}")))
            .collect(),
    }
}

/// Every worker id the transactions use.
fn worker_ids() -> Vec<String> {
    (0..3).map(worker_id).collect()
}

/// Picks the `n`th of `ids` (wrapping).
fn pick(ids: &[&str], n: u8) -> String {
    ids[usize::from(n) % ids.len()].to_owned()
}

/// Rollout `n`'s id. Ids differ in case, accents and digits, so that byte
/// order ("ro-1" < "ro-B" < "ro-Z" < "ro-a" < "ro-z" < "ro-é", every
/// backend's) and a linguistic order ("ro-1" < "ro-a" < "ro-B" < "ro-é" <
/// "ro-z" < "ro-Z", e.g. `en_US.UTF-8`) disagree wherever ids are sorted.
fn rollout_id(n: u8) -> String {
    pick(&["ro-a", "ro-B", "ro-é", "ro-z", "ro-Z", "ro-1"], n)
}

/// Worker `n`'s id (as mixed as the rollouts').
fn worker_id(n: u8) -> String {
    pick(&["wo-b", "wo-B", "wo-a"], n)
}

/// Session server `n`'s id.
fn server_id(n: u8) -> String {
    pick(&["server-b", "server-B"], n)
}

/// 1.x replica `n`'s server id.
fn replica_id(n: u8) -> String {
    pick(&["s-b", "s-A", "s-a"], n)
}

/// Everything observable after a transaction, normalised across backends.
#[derive(Debug, PartialEq)]
struct Observed {
    /// What the transaction's own reads returned.
    results: Vec<String>,
    rollouts: Vec<RolloutView>,
    due: Vec<String>,
    workers: Vec<Worker>,
    sessions: Vec<WorkerSession>,
    spans: Vec<(String, i64)>,
    events: Vec<(u64, Change)>,
    counts: Counts,
    /// The remembered request ids.
    requests: Vec<Option<RememberedRequest>>,
    /// The 1.x records, event positions left out (they only grow).
    agl1: Vec<String>,
}

/// Drops zero per-status counts (memory keeps emptied statuses, SQL all).
fn normalised(mut counts: Counts) -> Counts {
    counts.rollouts_by_status.retain(|_, n| *n > 0);
    counts.attempts_by_status.retain(|_, n| *n > 0);
    counts
}

/// Runs one transaction on `store` and observes the store afterwards.
async fn run(store: &dyn Store, t: &Transaction) -> Observed {
    let mut tx = store.begin().await.unwrap();
    let mut writes = WriteSet::default();
    let mut results = Vec::new();
    for op in &t.ops {
        match op {
            Op::PutRollout {
                id,
                status,
                deadline,
            } => writes.put_rollout(
                &rollout(*id, *status),
                deadline.map(|d| Timestamp(i64::from(d))),
            ),
            Op::PutAttempt {
                rollout: r,
                attempt: a,
                status,
            } => {
                // An attempt needs its rollout (the schema joins them).
                if !writes.rollouts.contains_key(&rollout_id(*r)) {
                    writes.put_rollout(&rollout(*r, 0), None);
                }
                writes.put_attempt(&attempt(*r, *a, *status));
            }
            Op::PutWorker { id, status } => {
                let mut worker = Worker::new(&worker_id(*id));
                worker.status = WorkerStatus::ALL[usize::from(*status) % WorkerStatus::ALL.len()];
                writes.put_worker(&worker);
            }
            Op::Enqueue { rollout: r } => {
                // The engine enqueues only rollouts it writes in the same set.
                if !writes.rollouts.contains_key(&rollout_id(*r)) {
                    writes.put_rollout(&rollout(*r, 0), None);
                }
                writes.enqueue(&rollout_id(*r), Timestamp(3_000));
            }
            Op::Claim { limit } => {
                let claimed = tx.claim_queued(usize::from(*limit)).await.unwrap();
                results.push(format!("{claimed:?}"));
            }
            Op::AddSpans { rollout: r, spans } => {
                let id = rollout_id(*r);
                let first = tx
                    .allocate_sequence_ids(&id, spans.len() as u64)
                    .await
                    .unwrap();
                let spans: Vec<Arc<Span>> = spans
                    .iter()
                    .enumerate()
                    .map(|(at, n)| {
                        let mut s = span(*r, *n);
                        s.sequence_id = first + at as i64;
                        Arc::new(s)
                    })
                    .collect();
                let stored = tx.insert_spans(&spans).await.unwrap();
                results.push(format!("{first} {stored:?}"));
            }
            Op::Event { rollout: r } => writes.events.push(Event {
                seq: 0,
                time: Timestamp(4_000),
                change: Change::RolloutChanged {
                    rollout_id: rollout_id(*r),
                    status: RolloutStatus::Running,
                },
            }),
            Op::Unqueue { rollout: r } => writes.unqueue(&rollout_id(*r)),
            Op::PutSession {
                worker,
                epoch,
                server,
                state,
                deadline,
                attempts,
            } => writes.put_session(&session(
                *worker, *epoch, *server, *state, *deadline, *attempts,
            )),
            Op::ReadSessions { due, limit, server } => {
                let ids = worker_ids();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                let all = tx.sessions(&ids, Access::Update).await.unwrap();
                let due = tx
                    .due_sessions(Timestamp(i64::from(*due)), usize::from(*limit))
                    .await
                    .unwrap();
                let server = server.map(server_id);
                let open = tx.open_sessions(server.as_deref()).await.unwrap();
                results.push(format!("{all:?} {due:?} {open:?}"));
            }
            Op::NextEpochs => {
                // Values differ (a PostgreSQL sequence skips rolled-back
                // ones); that they grow does not.
                let first = tx.next_session_epoch().await.unwrap();
                let second = tx.next_session_epoch().await.unwrap();
                results.push(format!("epochs grow: {}", second > first && first > 0));
            }
            Op::Remember {
                id,
                expires,
                rollouts,
            } => {
                if writes.forget_requests.is_none() {
                    writes.remember_request(RememberedRequest {
                        request_id: format!("rq-{id}"),
                        digest: format!("digest-{expires}"),
                        rollout_ids: (0..*rollouts).map(rollout_id).collect(),
                        expires_at: Timestamp(i64::from(*expires)),
                    });
                }
            }
            Op::ForgetRequests { by } => {
                if writes.requests.is_empty() {
                    writes.forget_requests = Some(Timestamp(i64::from(*by)));
                }
            }
            op => agl1_op(tx.as_mut(), &mut writes, op).await,
        }
    }
    if t.commit {
        tx.commit(&mut writes).await.unwrap();
        let seqs: Vec<u64> = writes.events.iter().map(|e| e.seq).collect();
        results.push(format!("events {seqs:?}"));
    } else {
        tx.rollback().await;
    }
    observe(store, results).await
}

async fn observe(store: &dyn Store, results: Vec<String>) -> Observed {
    let mut tx = store.begin().await.unwrap();
    let all = RolloutFilter {
        status_in: None,
        rollout_id_in: None,
        rollout_id_contains: None,
        logic: FilterLogic::And,
        ..RolloutFilter::default()
    };
    let rollouts = tx
        .query_rollouts(&all, &Page::default())
        .await
        .unwrap()
        .items;
    let due = tx
        .due_rollouts(Timestamp(10), 100, Held::Skip)
        .await
        .unwrap()
        .into_iter()
        .map(|view| view.rollout.rollout_id)
        .collect();
    let ids = worker_ids();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let workers = tx.workers(&ids, Access::Read).await.unwrap();
    let sessions = tx.sessions(&ids, Access::Read).await.unwrap();
    let mut spans = Vec::new();
    for n in 0..6 {
        let filter = SpanFilter {
            rollout_id: rollout_id(n),
            attempt: AttemptSelector::All,
            trace_id: TextMatch::default(),
            span_id: TextMatch::default(),
            parent_id: TextMatch::default(),
            name: TextMatch::default(),
            logic: FilterLogic::And,
        };
        for s in tx
            .query_spans(&filter, &Page::default())
            .await
            .unwrap()
            .items
        {
            spans.push((s.span_id.clone(), s.sequence_id));
        }
    }
    let events = tx
        .events_after(0, 1_000)
        .await
        .unwrap()
        .events
        .into_iter()
        .map(|e| (e.seq, e.change))
        .collect();
    let counts = normalised(tx.counts().await.unwrap());
    let mut requests = Vec::new();
    for n in 0..4 {
        requests.push(tx.remembered_request(&format!("rq-{n}")).await.unwrap());
    }
    let agl1 = observe_agl1(tx.as_mut()).await;
    tx.commit(&mut WriteSet::default()).await.unwrap();
    Observed {
        results,
        rollouts,
        due,
        workers,
        sessions,
        spans,
        events,
        counts,
        requests,
        agl1,
    }
}

/// Buffers one 1.x step the way the engine does (reads first where the
/// engine reads).
async fn agl1_op(tx: &mut dyn StoreTx, writes: &mut WriteSet, op: &Op) {
    match *op {
        Op::Agl1Fields {
            rollout: r,
            version,
        } => {
            let id = rollout_id(r);
            if !writes.rollouts.contains_key(&id) {
                writes.put_rollout(&rollout(r, 0), None);
            }
            let fields = Agl1Fields {
                config: Json::from(version),
                k8s_job_name: None,
                last_attempt_id: (version % 2 == 1).then(|| "at-1".to_owned()),
                error_message: None,
                version: i64::from(version) + 1,
                created_at: Timestamp(5_000),
                updated_at: Timestamp(5_000 + i64::from(version)),
            };
            writes.agl1.fields.insert(id, fields);
        }
        Op::Agl1Event {
            rollout: r,
            attempt: a,
            key,
        } => {
            let (rollout_id, attempt_id) = (rollout_id(r), format!("at-{a}"));
            let data = format!("{{\"n\": {}}}", writes.agl1.events.len());
            let mut key =
                key.map(|k| IdempotencyKey::of(format!("k{k}"), &[b"m", data.as_bytes()]));
            if let Some(k) = &key {
                let buffered = writes.agl1.events.iter().any(|w| {
                    w.event.rollout_id == rollout_id
                        && w.event.attempt_id == attempt_id
                        && w.key.as_ref().is_some_and(|b| b.key == k.key)
                });
                let stored = tx
                    .keyed_event(&rollout_id, &attempt_id, &k.key)
                    .await
                    .unwrap();
                if buffered || stored.is_some() {
                    key = None;
                }
            }
            let event = Agl1Event {
                event_type: "m".to_owned(),
                rollout_id,
                attempt_id,
                timestamp: Timestamp(6_000),
                data,
            };
            writes.agl1.events.push(EventWrite { event, key });
        }
        Op::RewriteEvent { rollout: r } => {
            let rollout_id = rollout_id(r);
            if let Some(latest) = tx
                .latest_agl1_event(&rollout_id, "at-0", "m")
                .await
                .unwrap()
            {
                let data = format!("{{\"rewritten\": {}}}", latest.event.data);
                writes
                    .agl1
                    .event_data
                    .insert((rollout_id, latest.pos), data);
            }
        }
        Op::Complete { rollout: r } => writes.agl1.completions.push(rollout_id(r)),
        Op::Delete { rollout: r } => {
            let id = rollout_id(r);
            if !writes.rollouts.contains_key(&id) && !writes.agl1.fields.contains_key(&id) {
                writes.agl1.deleted.insert(id);
            }
        }
        Op::Model {
            model,
            endpoint,
            version,
        } => writes.agl1.put_model(&ModelServer {
            model: ["m", "n"][usize::from(model % 2)].to_owned(),
            endpoint: format!("http://e{endpoint}"),
            version: i64::from(version),
        }),
        Op::ClearModels => writes.agl1.clear_models(),
        Op::Pause { generation } => {
            writes.agl1.pause = Some(Pause {
                paused: generation % 2 == 1,
                retry_after_seconds: i64::from(generation),
                reason: (generation % 3 == 0).then(|| format!("r{generation}")),
                generation: i64::from(generation),
            })
        }
        Op::Replica { id, present } => {
            let replica = present.then(|| Replica {
                server_id: replica_id(id),
                inflight: i64::from(id),
                generation_seen: 1,
                heartbeat: Timestamp(7_000),
            });
            writes.agl1.replicas.insert(replica_id(id), replica);
        }
        _ => unreachable!("not a 1.x step: {op:?}"),
    }
}

/// Reads every 1.x record through the port.
async fn observe_agl1(tx: &mut dyn StoreTx) -> Vec<String> {
    let mut seen = Vec::new();
    let listed = tx
        .list_agl1_rollouts(RolloutStatus::ALL, None)
        .await
        .unwrap();
    seen.push(format!("{listed:?}"));
    let ids: Vec<String> = (0..6).map(rollout_id).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let read = tx.agl1_rollouts(&ids, Access::Read).await.unwrap();
    seen.push(format!("{read:?}"));
    let page = tx.completions(0, 100).await.unwrap();
    seen.push(format!("{page:?}"));
    for rollout_id in ids {
        let exists = tx.has_agl1_rollout(rollout_id, Access::Read).await.unwrap();
        assert_eq!(
            exists,
            read.iter()
                .any(|agl1| agl1.rollout.rollout_id == rollout_id),
            "has_agl1_rollout agrees with agl1_rollouts"
        );
        seen.push(format!("{exists}"));
        let detail = tx.agl1_rollout_detail(rollout_id).await.unwrap();
        let whole = read
            .iter()
            .find(|agl1| agl1.rollout.rollout_id == rollout_id);
        assert_eq!(
            detail.clone(),
            whole.zip(detail.as_ref()).map(|(agl1, detail)| {
                let attempts = detail.attempts.clone();
                Agl1RolloutDetail::of(&agl1.rollout, &agl1.fields, detail.deadline, attempts)
            }),
            "agl1_rollout_detail reads the rollout as agl1_rollouts does"
        );
        seen.push(format!("{:?}", detail.as_ref().map(|d| d.deadline)));
        seen.push(format!("{:?}", detail.map(|d| d.attempts)));
        for attempt_id in ["at-0", "at-1"] {
            let events = tx.agl1_events(rollout_id, attempt_id, None).await.unwrap();
            let events: Vec<_> = events.into_iter().map(|e| e.event).collect();
            seen.push(format!("{events:?}"));
            for key in ["k0", "k1", "k2"] {
                let keyed = tx.keyed_event(rollout_id, attempt_id, key).await.unwrap();
                let keyed = keyed.map(|(digest, e)| (digest, e.event));
                seen.push(format!("{keyed:?}"));
            }
        }
    }
    for model in [Some("m"), Some("n"), None] {
        seen.push(format!("{:?}", tx.models(model).await.unwrap()));
    }
    seen.push(format!("{:?}", tx.pause(Access::Read).await.unwrap()));
    seen.push(format!("{:?}", tx.replicas().await.unwrap()));
    seen
}

/// Opens a fresh store of every backend that runs here.
async fn stores() -> Vec<(Backend, Arc<dyn Store>, Option<tempfile::TempDir>)> {
    let mut stores = Vec::new();
    for backend in crate::common::available_backends(&BACKENDS) {
        let (store, dir) = backend.open(&TestOptions::default()).await;
        stores.push((backend, store, dir));
    }
    stores
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_three_backends_agree_on_random_transactions(
        transactions in proptest::collection::vec(transaction(), 1..8)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let stores = stores().await;
            for (step, t) in transactions.iter().enumerate() {
                let mut observed = Vec::new();
                for (backend, store, _) in &stores {
                    observed.push((backend, run(store.as_ref(), t).await));
                }
                let (reference, expected) = &observed[0];
                for (backend, seen) in &observed[1..] {
                    assert_eq!(
                        seen, expected,
                        "step {step} ({t:?}): {backend:?} differs from {reference:?}"
                    );
                }
            }
        });
    }
}

/// What the store holds of ending rollouts is read for more of them than
/// one statement may bind (SQLite: 32,766 parameters, and the read binds
/// the ids once per table it reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facts_of_more_rollouts_than_a_statement_binds_are_read_on_every_backend() {
    for (backend, store, _dir) in stores().await {
        let held = rollout(1, 3);
        let mut writes = WriteSet::default();
        writes.put_rollout(&held, None);
        let reward = RolloutReward::new(7, 0.5).unwrap();
        writes.rewards.insert(held.rollout_id.clone(), reward);
        let usage = RolloutUsage {
            calls: 2,
            latency_ms: 300,
            reported: 2,
            prompt_tokens: 40,
            response_tokens: 9,
        };
        writes.usage.insert(held.rollout_id.clone(), usage);
        store
            .begin()
            .await
            .unwrap()
            .commit(&mut writes)
            .await
            .unwrap();

        let mut ids: Vec<String> = (0..9_000).map(|n| format!("unknown-{n}")).collect();
        ids.push(held.rollout_id.clone());
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut tx = store.begin().await.unwrap();
        let facts = tx.facts(&ids).await.unwrap();
        assert_eq!(facts.len(), 1, "{backend:?}");
        let found = facts[&held.rollout_id];
        assert_eq!(found.reward, Some(reward), "{backend:?}");
        assert_eq!(found.usage, usage, "{backend:?}");
        assert_eq!((found.model_version, found.verdict), (None, None));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_transaction_rolls_back_everything_on_every_backend() {
    for (backend, store, _dir) in stores().await {
        let setup = Transaction {
            ops: vec![
                Op::PutRollout {
                    id: 1,
                    status: 0,
                    deadline: Some(5),
                },
                Op::Enqueue { rollout: 1 },
                Op::AddSpans {
                    rollout: 1,
                    spans: vec![0],
                },
                Op::PutWorker { id: 0, status: 0 },
                Op::PutSession {
                    worker: 0,
                    epoch: 1,
                    server: 0,
                    state: 0,
                    deadline: Some(5),
                    attempts: 1,
                },
                Op::Event { rollout: 1 },
                Op::Agl1Fields {
                    rollout: 1,
                    version: 0,
                },
                Op::Agl1Event {
                    rollout: 1,
                    attempt: 0,
                    key: Some(0),
                },
                Op::Complete { rollout: 1 },
                Op::Model {
                    model: 1,
                    endpoint: 0,
                    version: 0,
                },
            ],
            commit: true,
        };
        let before = run(store.as_ref(), &setup).await;
        let dropped = Transaction {
            ops: vec![
                Op::Delete { rollout: 1 },
                Op::Agl1Event {
                    rollout: 1,
                    attempt: 0,
                    key: Some(1),
                },
                Op::RewriteEvent { rollout: 1 },
                Op::Complete { rollout: 2 },
                Op::ClearModels,
                Op::Pause { generation: 3 },
                Op::Replica {
                    id: 0,
                    present: true,
                },
                Op::Claim { limit: 3 },
                Op::AddSpans {
                    rollout: 1,
                    spans: vec![1, 2],
                },
                Op::PutRollout {
                    id: 1,
                    status: 4,
                    deadline: None,
                },
                Op::PutWorker { id: 0, status: 2 },
                Op::PutSession {
                    worker: 0,
                    epoch: 2,
                    server: 1,
                    state: 1,
                    deadline: None,
                    attempts: 0,
                },
                Op::Unqueue { rollout: 1 },
                Op::Event { rollout: 1 },
            ],
            commit: false,
        };
        let after = run(store.as_ref(), &dropped).await;
        assert!(
            after.results[0].contains(&rollout_id(1)),
            "{backend:?}: the claim saw the rollout"
        );
        assert_eq!(
            after.agl1, before.agl1,
            "{backend:?}: a dropped transaction leaves no 1.x record behind"
        );
        assert_eq!(
            (
                after.rollouts,
                after.due,
                after.workers,
                after.sessions,
                after.spans,
                after.events,
                after.counts
            ),
            (
                before.rollouts,
                before.due,
                before.workers,
                before.sessions,
                before.spans,
                before.events,
                before.counts
            ),
            "{backend:?}: a dropped transaction leaves nothing behind"
        );
        // The claim was undone: the rollout is still at the queue's head,
        // and the span sequence counter did not move.
        let again = run(
            store.as_ref(),
            &Transaction {
                ops: vec![
                    Op::Claim { limit: 1 },
                    Op::AddSpans {
                        rollout: 1,
                        spans: vec![3],
                    },
                ],
                commit: true,
            },
        )
        .await;
        assert!(
            again.results[0].contains(&rollout_id(1)),
            "{backend:?}: {:?}",
            again.results
        );
        assert!(
            again.results[1].starts_with("2 "),
            "{backend:?}: {:?}",
            again.results
        );
    }
}

/// Returns whether the database at `url` sorts text linguistically
/// ("a" before "B"), as a user's `en_US.UTF-8` database does.
async fn sorts_linguistically(url: &str) -> bool {
    use sqlx::Connection as _;
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    let linguistic: bool = sqlx::query_scalar("SELECT 'a' < 'B'")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    connection.close().await.unwrap();
    linguistic
}

/// Ids sort by bytes and match exactly on every backend, PostgreSQL in a
/// database whose own collation is linguistic (ICU `en-US`): ties of the
/// watchdog's deadlines, sorted pages, the 1.x replicas, lookups by id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_sort_by_bytes_and_match_exactly_on_every_backend() {
    skip_without!(crate::common::Backend::Postgres);
    let url = common::postgres_database().await;
    assert!(
        sorts_linguistically(&url).await,
        "the test database sorts by bytes: the test would prove nothing"
    );
    for backend in BACKENDS {
        let options = TestOptions {
            postgres_url: Some(url.clone()),
            ..TestOptions::default()
        };
        let (store, _dir) = backend.open(&options).await;
        let tx = store.begin().await.unwrap();
        let mut writes = WriteSet::default();
        for n in 0..6 {
            writes.put_rollout(&rollout(n, 0), Some(Timestamp(5)));
        }
        for n in 0..3 {
            let replica = Replica {
                server_id: replica_id(n),
                inflight: 0,
                generation_seen: 1,
                heartbeat: Timestamp(7_000),
            };
            writes.agl1.replicas.insert(replica_id(n), Some(replica));
        }
        tx.commit(&mut writes).await.unwrap();

        let mut tx = store.begin().await.unwrap();
        let ids = |views: Vec<RolloutView>| -> Vec<String> {
            views.into_iter().map(|v| v.rollout.rollout_id).collect()
        };
        let due = ids(tx.due_rollouts(Timestamp(10), 3, Held::Wait).await.unwrap());
        assert_eq!(
            due,
            ["ro-1", "ro-B", "ro-Z"],
            "{backend:?}: equal deadlines"
        );
        let all = RolloutFilter {
            status_in: None,
            rollout_id_in: None,
            rollout_id_contains: None,
            logic: FilterLogic::And,
            ..RolloutFilter::default()
        };
        let by_id = Page {
            sort_by: Some("rollout_id".to_owned()),
            descending: true,
            limit: Some(3),
            offset: 0,
        };
        let page = ids(tx.query_rollouts(&all, &by_id).await.unwrap().items);
        assert_eq!(page, ["ro-é", "ro-z", "ro-a"], "{backend:?}: sorted by id");
        let replicas: Vec<String> = tx
            .replicas()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.server_id)
            .collect();
        assert_eq!(replicas, ["s-A", "s-a", "s-b"], "{backend:?}: replicas");
        // An accent or a case apart is another id.
        let found = ids(tx
            .rollouts(&["ro-e", "ro-é", "RO-A", "ro-Z"], Access::Read)
            .await
            .unwrap());
        assert_eq!(found, ["ro-é", "ro-Z"], "{backend:?}: lookup by id");
        let some = RolloutFilter {
            rollout_id_in: Some(vec!["ro-b".to_owned(), "ro-z".to_owned()]),
            ..all
        };
        let matched = ids(tx
            .query_rollouts(&some, &Page::default())
            .await
            .unwrap()
            .items);
        assert_eq!(matched, ["ro-z"], "{backend:?}: filter by id");
        tx.commit(&mut WriteSet::default()).await.unwrap();
    }
}
