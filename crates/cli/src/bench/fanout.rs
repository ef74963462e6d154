//! `bench fanout`: how long a rollout's completion takes to reach M
//! subscribers parked in WaitForRollouts, from the completing UpdateAttempt
//! response to each subscriber's response, over several rounds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::args::LoadArgs;
use super::driver::{Budget, Measured};
use super::error::BenchResult;
use super::lifecycle::succeeded;
use super::progress::Progress;
use super::report::{Report, Row, RowSpec};
use super::stats::{Counters, Recorder, status_text};
use super::target::{StoreClient, Target, start_rollout};
use lightning_store_proto as pb;

/// Rounds per run when `--count` is not given.
const DEFAULT_ROUNDS: u64 = 20;
/// How long a subscriber waits for the completion of a round.
const WAIT: Duration = Duration::from_secs(10);

/// Arguments of `bench fanout`; `--concurrency` is the number of
/// subscribers and `--count` the number of rounds (default 20).
#[derive(Debug, Clone, clap::Args)]
pub struct FanoutArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Milliseconds between publishing a round's rollout to the subscribers
    /// and completing it, so every subscriber is parked first.
    #[arg(long, default_value_t = 100)]
    settle_ms: u64,
}

/// A subscriber's outcome for one round: when its response arrived, or why it failed.
type Outcome = (u64, Result<Instant, String>);

/// Runs the scenario once per number of subscribers (default 100).
pub async fn run(target: &mut Target, args: FanoutArgs, progress: bool) -> BenchResult<Report> {
    let levels = args.load.levels(&[100])?;
    let limits = args.load.limits(DEFAULT_ROUNDS)?;
    let settle = Duration::from_millis(args.settle_ms);
    let mut report = Report::new(
        "fanout",
        json!({
            "settle_ms": args.settle_ms,
            "duration_secs": limits.duration.as_secs_f64(),
            "rounds": limits.count,
        }),
    );
    for subscribers in levels {
        let pool = target.pool(subscribers).await?;
        let mut coordinator = target.pool(1).await?.store(0);
        let counters = Arc::new(Counters::default());
        let mut recorder = Recorder::new(counters.clone());
        let (rounds, round_rx) = watch::channel::<Option<(u64, String)>>(None);
        let (outcome_tx, mut outcomes) = mpsc::unbounded_channel::<Outcome>();
        let mut set = JoinSet::new();
        for index in 0..subscribers {
            set.spawn(subscriber(
                pool.store(index),
                round_rx.clone(),
                outcome_tx.clone(),
                settle + WAIT,
            ));
        }
        drop(outcome_tx);
        let label = format!("fanout c={subscribers}");
        let progress = progress.then(|| Progress::start(&label, counters, limits));
        let budget = Budget::new(limits);
        let started = Instant::now();
        let mut round = 0;
        while budget.take(1) == 1 {
            round += 1;
            let (rollout_id, attempt_id) =
                match start_rollout(&mut coordinator, "bench fanout").await {
                    Ok(ids) => ids,
                    Err(error) => {
                        recorder.failure(error.to_string());
                        continue;
                    }
                };
            let _ = rounds.send(Some((round, rollout_id.clone())));
            tokio::time::sleep(settle).await;
            let start = Instant::now();
            let completed = coordinator
                .update_attempt(succeeded(rollout_id, attempt_id))
                .await;
            let done = Instant::now();
            recorder.call("UpdateAttempt", done - start, &completed);
            if let Err(status) = completed {
                recorder.failure(status_text(&status));
            }
            collect_round(&mut outcomes, &mut recorder, round, subscribers, done).await;
        }
        let elapsed = started.elapsed();
        drop(rounds);
        while set.join_next().await.is_some() {}
        if let Some(progress) = progress {
            progress.finish().await;
        }
        report.rows.push(Row::new(
            RowSpec {
                name: "fanout".to_owned(),
                clients: subscribers,
                op_unit: "deliveries",
                item_unit: None,
                latency_of: "UpdateAttempt(succeeded) response to a subscriber's WaitForRollouts response",
            },
            &Measured { recorder, elapsed },
        ));
    }
    Ok(report)
}

/// Records the outcomes of round `round` from `expected` subscribers,
/// measured from `done`; subscribers that do not answer in time count as errors.
async fn collect_round(
    outcomes: &mut mpsc::UnboundedReceiver<Outcome>,
    recorder: &mut Recorder,
    round: u64,
    expected: usize,
    done: Instant,
) {
    let deadline = tokio::time::Instant::now() + WAIT + Duration::from_secs(5);
    let mut received = 0;
    while received < expected {
        let outcome = tokio::select! {
            outcome = outcomes.recv() => outcome,
            _ = tokio::time::sleep_until(deadline) => None,
        };
        let Some((outcome_round, result)) = outcome else {
            break;
        };
        if outcome_round != round {
            continue;
        }
        received += 1;
        match result {
            Ok(at) => recorder.success(at.saturating_duration_since(done), 1, 0),
            Err(error) => recorder.failure(error),
        }
    }
    for _ in received..expected {
        recorder.failure(format!("a subscriber did not answer round {round} in time"));
    }
}

/// A subscriber: for each published round, waits for its rollout to finish
/// and reports when the response arrived.
async fn subscriber(
    mut client: StoreClient,
    mut rounds: watch::Receiver<Option<(u64, String)>>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    wait: Duration,
) {
    let timeout = prost_types::Duration::try_from(wait).ok();
    while rounds.changed().await.is_ok() {
        let Some((round, rollout_id)) = rounds.borrow_and_update().clone() else {
            continue;
        };
        let result = client
            .wait_for_rollouts(pb::WaitForRolloutsRequest {
                rollout_ids: vec![rollout_id.clone()],
                timeout,
            })
            .await;
        let at = Instant::now();
        let outcome = match result {
            Ok(response) => {
                let finished = response
                    .into_inner()
                    .rollouts
                    .iter()
                    .any(|r| r.rollout_id == rollout_id);
                if finished {
                    Ok(at)
                } else {
                    Err("WaitForRollouts returned before the rollout finished".to_owned())
                }
            }
            Err(status) => Err(status_text(&status)),
        };
        if outcomes.send((round, outcome)).is_err() {
            break;
        }
    }
}
