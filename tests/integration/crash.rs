//! Crash safety of the SQLite backend: the real binary serves a mixed load
//! from several clients, is killed with SIGKILL at a random moment, and is
//! restarted on the same file; everything it acknowledged must be there.
//! Several kill points, bounded in rounds and time; loopback only.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::ServerProcess;
use lightning_store::proto as pb;
use tonic::transport::Channel;

type Client = pb::lightning_store_service_client::LightningStoreServiceClient<Channel>;

const ROUNDS: usize = 5;
const SPANS_PER_ROLLOUT: usize = 3;
/// Every rollout's attempt times out after this long, with no retry.
const TIMEOUT_SECS: f64 = 1.0;
const TEST_BUDGET: Duration = Duration::from_secs(60);

/// Starts the binary on `database` with a fast watchdog.
fn start(database: &Path) -> ServerProcess {
    let database = database.to_str().expect("a UTF-8 path");
    ServerProcess::start(&["--watchdog-interval", "50ms", "--database", database])
}

/// Every write the server acknowledged.
#[derive(Default)]
struct Ledger {
    enqueued: HashSet<String>,
    /// Each client's acknowledged enqueues, in order.
    enqueue_order: HashMap<String, Vec<String>>,
    /// Claimed rollouts and the attempt of the claim.
    claimed: HashMap<String, String>,
    /// Stored spans per rollout: (span id, sequence id).
    spans: HashMap<String, Vec<(String, i64)>>,
    /// Rollouts whose completion was sent (acknowledged or not).
    completing: HashSet<String>,
    completed: HashSet<String>,
}

fn spec() -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: r#"{"task": "crash"}"#.into(),
        config: Some(pb::RolloutConfig {
            timeout_seconds: Some(TIMEOUT_SECS),
            max_attempts: Some(1),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn random(below: u64) -> u64 {
    (uuid::Uuid::new_v4().as_u128() % u128::from(below)) as u64
}

/// Runs one client's lifecycles until the server stops answering; it
/// enqueues two rollouts per claim, so the queue grows.
async fn drive(mut c: Client, worker: String, ledger: Arc<Mutex<Ledger>>) {
    loop {
        for _ in 0..2 {
            let Ok(enqueued) = c
                .enqueue_rollout(pb::EnqueueRolloutRequest {
                    request_id: None,
                    rollout: Some(spec()),
                })
                .await
            else {
                return;
            };
            let rollout_id = enqueued.into_inner().rollout.unwrap().rollout_id;
            let mut ledger = ledger.lock().unwrap();
            ledger.enqueued.insert(rollout_id.clone());
            ledger
                .enqueue_order
                .entry(worker.clone())
                .or_default()
                .push(rollout_id);
        }

        let Ok(claimed) = c
            .dequeue_rollout(pb::DequeueRolloutRequest {
                worker_id: Some(worker.clone()),
                wait: None,
            })
            .await
        else {
            return;
        };
        let Some(claimed) = claimed.into_inner().rollout else {
            continue;
        };
        let rollout_id = claimed.rollout_id;
        let attempt_id = claimed.attempt.unwrap().attempt_id;
        ledger
            .lock()
            .unwrap()
            .claimed
            .insert(rollout_id.clone(), attempt_id.clone());

        let spans = (0..SPANS_PER_ROLLOUT)
            .map(|_| {
                let hex = uuid::Uuid::new_v4().simple().to_string();
                pb::Span {
                    rollout_id: rollout_id.clone(),
                    attempt_id: attempt_id.clone(),
                    trace_id: hex.clone(),
                    span_id: hex[..16].to_owned(),
                    name: "step".into(),
                    ..Default::default()
                }
            })
            .collect();
        let Ok(added) = c
            .add_spans(pb::AddSpansRequest {
                spans,
                ..Default::default()
            })
            .await
        else {
            return;
        };
        let stored: Vec<(String, i64)> = added
            .into_inner()
            .spans
            .into_iter()
            .map(|s| (s.span_id, s.sequence_id.unwrap()))
            .collect();
        ledger
            .lock()
            .unwrap()
            .spans
            .entry(rollout_id.clone())
            .or_default()
            .extend(stored);

        // Half the rollouts are left running for the watchdog.
        if random(2) == 0 {
            ledger.lock().unwrap().completing.insert(rollout_id.clone());
            let completed = c
                .update_attempt(pb::UpdateAttemptRequest {
                    rollout_id: rollout_id.clone(),
                    attempt_id,
                    update_mask: Some(prost_types::FieldMask {
                        paths: vec!["status".into()],
                    }),
                    status: pb::AttemptStatus::Succeeded as i32,
                    ..Default::default()
                })
                .await;
            if completed.is_err() {
                return;
            }
            ledger.lock().unwrap().completed.insert(rollout_id);
        }
    }
}

async fn get(c: &mut Client, rollout_id: &str) -> pb::Rollout {
    c.get_rollout(pb::GetRolloutRequest {
        rollout_id: rollout_id.into(),
    })
    .await
    .unwrap_or_else(|e| panic!("acknowledged rollout {rollout_id} is lost: {e}"))
    .into_inner()
    .rollout
    .unwrap()
}

/// Checks the restarted server against the ledger, then claims whatever
/// is still queued (recording it) so that the next round starts empty.
/// Each of the `clients` may have had one enqueue and one claim cut off by
/// the kill.
async fn verify(c: &mut Client, ledger: &mut Ledger, clients: usize) {
    // Every acknowledged enqueue is still queued exactly once, or was claimed
    // (acknowledged, or by a dequeue whose answer the kill cut off).
    let mut drained = Vec::new();
    while let Some(rollout) = c
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: None,
            wait: None,
        })
        .await
        .unwrap()
        .into_inner()
        .rollout
    {
        let attempt_id = rollout.attempt.unwrap().attempt_id;
        drained.push((rollout.rollout_id, attempt_id));
        assert!(
            drained.len() <= ledger.enqueued.len() + clients,
            "the queue never ends"
        );
    }
    let drained_ids: HashSet<&String> = drained.iter().map(|(id, _)| id).collect();
    assert_eq!(
        drained_ids.len(),
        drained.len(),
        "a rollout was queued twice"
    );
    // The queue is FIFO: each client's rollouts leave it in the order it enqueued them.
    let position: HashMap<&String, usize> = drained
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id, i))
        .collect();
    for order in ledger.enqueue_order.values() {
        let positions: Vec<usize> = order
            .iter()
            .filter_map(|id| position.get(id))
            .copied()
            .collect();
        assert!(positions.is_sorted(), "the queue lost its order");
    }
    let unknown = drained_ids
        .iter()
        .filter(|id| !ledger.enqueued.contains(**id))
        .count();
    assert!(
        unknown <= clients,
        "{unknown} queued rollouts were never enqueued"
    );
    let waiting: Vec<String> = ledger
        .enqueued
        .iter()
        .filter(|id| !ledger.claimed.contains_key(*id) && !drained_ids.contains(id))
        .cloned()
        .collect();
    assert!(
        waiting.len() <= clients,
        "{} rollouts left the queue",
        waiting.len()
    );
    for rollout_id in waiting {
        // Claimed by a dequeue whose answer was lost.
        let rollout = get(c, &rollout_id).await;
        let attempt = rollout
            .attempt
            .unwrap_or_else(|| panic!("rollout {rollout_id} was lost from the queue"));
        ledger.claimed.insert(rollout_id, attempt.attempt_id);
    }
    for (rollout_id, attempt_id) in drained {
        ledger.enqueued.insert(rollout_id.clone());
        ledger.claimed.insert(rollout_id, attempt_id);
    }

    // Every acknowledged span is stored with its sequence id, and the next
    // sequence id is above every stored one.
    for (rollout_id, acked) in &ledger.spans {
        let stored: HashMap<String, i64> = c
            .query_spans(pb::QuerySpansRequest {
                rollout_id: rollout_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .spans
            .into_iter()
            .map(|s| (s.span_id, s.sequence_id.unwrap()))
            .collect();
        for (span_id, sequence_id) in acked {
            assert_eq!(
                stored.get(span_id),
                Some(sequence_id),
                "span {span_id} lost"
            );
        }
        let highest = stored.values().copied().max().unwrap_or(0);
        let next = c
            .get_next_span_sequence_id(pb::GetNextSpanSequenceIdRequest {
                rollout_id: rollout_id.clone(),
                attempt_id: ledger.claimed[rollout_id].clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .sequence_id;
        assert!(
            next > highest,
            "sequence id {next} reused (stored up to {highest})"
        );
    }

    for rollout_id in &ledger.completed {
        assert_eq!(
            get(c, rollout_id).await.status,
            pb::RolloutStatus::Succeeded as i32,
            "completion of {rollout_id} lost"
        );
    }

    // Every running attempt times out under the watchdog, as configured.
    let deadline = Instant::now() + Duration::from_secs(10);
    for (rollout_id, _) in ledger.claimed.clone() {
        let rollout = loop {
            let rollout = get(c, &rollout_id).await;
            let finished = [
                pb::RolloutStatus::Failed as i32,
                pb::RolloutStatus::Succeeded as i32,
            ]
            .contains(&rollout.status);
            if finished {
                break rollout;
            }
            assert!(
                Instant::now() < deadline,
                "{rollout_id} never timed out: {rollout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if !ledger.completing.contains(&rollout_id) {
            assert_eq!(rollout.status, pb::RolloutStatus::Failed as i32);
            let attempt = rollout.attempt.unwrap();
            assert_eq!(attempt.status, pb::AttemptStatus::Timeout as i32);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    survive_sigkill(4).await;
}

/// Sixteen clients keep the writer busy enough that most commits wait in
/// a group formed while the previous group's log syncs: what such groups
/// acknowledged survives the kill too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_of_sixteen_clients_survive_sigkill() {
    survive_sigkill(16).await;
}

/// Rounds of `clients` clients driving the server until it is killed at a
/// random moment, each verified after a restart on the same file.
async fn survive_sigkill(clients: usize) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("store.db");
    let mut ledger = Ledger::default();
    let mut server = start(&database);
    for round in 0..ROUNDS {
        let shared = Arc::new(Mutex::new(std::mem::take(&mut ledger)));
        let mut drivers = Vec::new();
        for i in 0..clients {
            let client = server.client().await;
            let worker = format!("worker-{round}-{i}");
            drivers.push(tokio::spawn(drive(client, worker, shared.clone())));
        }
        let kill_after = Duration::from_millis(100 + random(700));
        tokio::time::sleep(kill_after).await;
        let log = server.log.clone();
        server.kill();
        for driver in drivers {
            driver.await.unwrap();
        }
        ledger = Arc::try_unwrap(shared)
            .ok()
            .expect("the clients are done")
            .into_inner()
            .unwrap();
        assert!(
            !ledger.enqueued.is_empty(),
            "round {round}: no write was acknowledged before the kill: {}",
            log.lock().unwrap()
        );

        server = start(&database);
        let mut c = server.client().await;
        verify(&mut c, &mut ledger, clients).await;
        assert!(started.elapsed() < TEST_BUDGET, "the test ran out of time");
    }
    server.kill();
}
