//! `bench dispatch`: how long an enqueued rollout takes to reach an idle
//! worker, from the EnqueueRollout response to the worker receiving the
//! rollout (same process, monotonic clock).
//!
//! A producer enqueues at a steady rate; idle workers wait for rollouts
//! through a [`DispatchMode`]. Both sides report to a [`Board`], which pairs
//! each enqueue with its claim whichever arrives first. A new way of
//! receiving rollouts (for example a worker session stream) is a new
//! `DispatchMode` variant plus a worker function that calls
//! [`Board::claimed`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::args::LoadArgs;
use super::driver::{Budget, Measured};
use super::error::{BenchError, BenchResult};
use super::progress::Progress;
use super::report::{Report, Row, RowSpec};
use super::session::BenchSession;
use super::stats::{Counters, Recorder, status_text};
use super::target::{StoreClient, Target};
use lightning_store_proto as pb;

/// Enqueues per run when `--count` is not given.
const DEFAULT_COUNT: u64 = 1_000_000;
/// Time for the workers to park before the first enqueue.
const SETTLE: Duration = Duration::from_millis(200);
/// How long an enqueued rollout may stay unclaimed after the last enqueue
/// before it counts as an error.
const CLAIM_GRACE: Duration = Duration::from_secs(5);

/// How idle workers wait for rollouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DispatchMode {
    /// Unary DequeueRollout with a wait (event-driven on the server).
    Dequeue,
    /// A WorkerSession stream with one slot: the server pushes the rollout.
    Session,
}

/// Arguments of `bench dispatch`; `--concurrency` is the number of idle workers.
#[derive(Debug, Clone, clap::Args)]
pub struct DispatchArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// How workers wait for rollouts.
    #[arg(long, value_enum, default_value = "dequeue")]
    mode: DispatchMode,
    /// Enqueues per second, from one producer.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Seconds a waiting DequeueRollout asks the server to wait before it is re-issued.
    #[arg(long, default_value_t = 2.0)]
    wait_secs: f64,
}

/// Runs the scenario once per number of workers (default 16).
pub async fn run(target: &mut Target, args: DispatchArgs, progress: bool) -> BenchResult<Report> {
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err(BenchError::new("--rate must be a number > 0"));
    }
    let wait = Duration::try_from_secs_f64(args.wait_secs)
        .ok()
        .filter(|w| !w.is_zero())
        .and_then(|w| prost_types::Duration::try_from(w).ok())
        .ok_or_else(|| BenchError::new("--wait-secs must be a number > 0"))?;
    let levels = args.load.levels(&[16])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let mut report = Report::new(
        "dispatch",
        json!({
            "mode": format!("{:?}", args.mode).to_lowercase(),
            "rate": args.rate,
            "wait_secs": args.wait_secs,
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    for workers in levels {
        let pool = target.pool(workers).await?;
        let producer = target.pool(1).await?.store(0);
        let counters = Arc::new(Counters::default());
        let board = Arc::new(Board::new(counters.clone()));
        let (stop, stopped) = watch::channel(false);
        let mut set = JoinSet::new();
        for index in 0..workers {
            match args.mode {
                DispatchMode::Dequeue => set.spawn(dequeue_worker(
                    index,
                    pool.store(index),
                    wait,
                    board.clone(),
                    stopped.clone(),
                )),
                DispatchMode::Session => set.spawn(session_worker(
                    index,
                    pool.store(index),
                    board.clone(),
                    stopped.clone(),
                )),
            };
        }
        tokio::time::sleep(SETTLE).await;
        let label = format!("dispatch c={workers}");
        let progress = progress.then(|| Progress::start(&label, counters, limits));
        let started = Instant::now();
        produce(producer, &Budget::new(limits), args.rate, &board).await;
        board.wait_for_claims(CLAIM_GRACE).await;
        let elapsed = started.elapsed();
        let _ = stop.send(true);
        while set.join_next().await.is_some() {}
        if let Some(progress) = progress {
            progress.finish().await;
        }
        let measured = Measured {
            recorder: board.finish(),
            elapsed,
        };
        report.rows.push(Row::new(
            RowSpec {
                name: format!(
                    "dispatch {}",
                    report.settings["mode"].as_str().unwrap_or("")
                ),
                clients: workers,
                op_unit: "rollouts",
                item_unit: None,
                latency_of: "EnqueueRollout response to the worker receiving the rollout",
            },
            &measured,
        ));
    }
    Ok(report)
}

/// Enqueues rollouts at `rate` per second until the budget is spent.
async fn produce(mut client: StoreClient, budget: &Budget, rate: f64, board: &Board) {
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
    while budget.take(1) == 1 {
        ticker.tick().await;
        let start = Instant::now();
        let result = client
            .enqueue_rollout(pb::EnqueueRolloutRequest {
                rollout: Some(pb::RolloutSpec {
                    input_json: r#"{"task": "bench dispatch"}"#.to_owned(),
                    ..Default::default()
                }),
                request_id: None,
            })
            .await
            .map(tonic::Response::into_inner);
        let acked = Instant::now();
        board.enqueue_call(acked - start, &result);
        match result {
            Ok(response) => match response.rollout {
                Some(rollout) => board.enqueued(rollout.rollout_id, acked),
                None => board.failure("EnqueueRollout returned no rollout".to_owned()),
            },
            Err(status) => board.failure(status_text(&status)),
        }
    }
}

/// A worker that waits for rollouts with DequeueRollout until told to stop.
async fn dequeue_worker(
    index: usize,
    mut client: StoreClient,
    wait: prost_types::Duration,
    board: Arc<Board>,
    mut stop: watch::Receiver<bool>,
) {
    let worker_id = format!("bench-worker-{index}");
    while !*stop.borrow() {
        let request = pb::DequeueRolloutRequest {
            worker_id: Some(worker_id.clone()),
            wait: Some(wait),
        };
        let result = tokio::select! {
            result = client.dequeue_rollout(request) => result,
            _ = stop.changed() => break,
        };
        match result {
            Ok(response) => {
                if let Some(rollout) = response.into_inner().rollout {
                    board.claimed(rollout.rollout_id, Instant::now());
                }
            }
            Err(status) => {
                board.failure(status_text(&status));
                // A failing server must not turn the loop into a busy spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// A worker holding a one-slot session: each pushed assignment is recorded
/// and released at once, so the slot is free for the next rollout.
async fn session_worker(
    index: usize,
    mut client: StoreClient,
    board: Arc<Board>,
    mut stop: watch::Receiver<bool>,
) {
    let worker_id = format!("bench-session-{index}");
    let mut session = match BenchSession::open(&mut client, &worker_id, 1).await {
        Ok(session) => session,
        Err(status) => return board.failure(status_text(&status)),
    };
    loop {
        let assignment = tokio::select! {
            assignment = session.assignment() => assignment,
            _ = stop.changed() => break,
        };
        match assignment {
            Ok(Some(rollout)) => {
                let received = Instant::now();
                let attempt_id = rollout.attempt.map(|a| a.attempt_id).unwrap_or_default();
                session.release(&rollout.rollout_id, &attempt_id);
                board.claimed(rollout.rollout_id, received);
            }
            Ok(None) => break,
            Err(status) => {
                board.failure(status_text(&status));
                break;
            }
        }
    }
}

/// What is known of a rollout in flight: when its enqueue was acknowledged,
/// or when a worker received it (the two race).
enum Mark {
    Enqueued(Instant),
    Claimed(Instant),
}

/// Pairs enqueues with claims and records the latency between them.
pub struct Board {
    marks: Mutex<HashMap<String, Mark>>,
    recorder: Mutex<Recorder>,
}

impl Board {
    fn new(counters: Arc<Counters>) -> Self {
        Self {
            marks: Mutex::new(HashMap::new()),
            recorder: Mutex::new(Recorder::new(counters)),
        }
    }

    /// Notes that the enqueue of `rollout_id` was acknowledged at `at`.
    fn enqueued(&self, rollout_id: String, at: Instant) {
        let mut marks = self.marks.lock();
        match marks.remove(&rollout_id) {
            Some(Mark::Claimed(claimed)) => {
                self.record(claimed.saturating_duration_since(at));
            }
            _ => {
                marks.insert(rollout_id, Mark::Enqueued(at));
            }
        }
    }

    /// Notes that a worker received `rollout_id` at `at`. Rollouts this run
    /// did not enqueue (left in the queue by earlier runs) are ignored.
    pub fn claimed(&self, rollout_id: String, at: Instant) {
        let mut marks = self.marks.lock();
        match marks.remove(&rollout_id) {
            Some(Mark::Enqueued(enqueued)) => {
                self.record(at.saturating_duration_since(enqueued));
            }
            _ => {
                marks.insert(rollout_id, Mark::Claimed(at));
            }
        }
    }

    fn record(&self, latency: Duration) {
        self.recorder.lock().success(latency, 1, 0);
    }

    fn failure(&self, error: String) {
        self.recorder.lock().failure(error);
    }

    fn enqueue_call<T>(&self, latency: Duration, result: &Result<T, tonic::Status>) {
        self.recorder.lock().call("EnqueueRollout", latency, result);
    }

    fn unclaimed(&self) -> usize {
        self.marks
            .lock()
            .values()
            .filter(|mark| matches!(mark, Mark::Enqueued(_)))
            .count()
    }

    /// Waits until every enqueued rollout was claimed, at most `grace`.
    async fn wait_for_claims(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while self.unclaimed() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Counts the rollouts still unclaimed as errors and returns the recorder.
    fn finish(&self) -> Recorder {
        let unclaimed = self.unclaimed();
        let mut recorder = self.recorder.lock();
        for _ in 0..unclaimed {
            recorder.failure(format!(
                "an enqueued rollout was not claimed within {CLAIM_GRACE:?}"
            ));
        }
        recorder.clone()
    }
}
