//! `bench bulk`: one large EnqueueRollouts while other clients keep
//! enqueueing and dequeueing one rollout at a time: how long the batch
//! takes, and whether it holds the others up (their latency while it runs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::json;

use super::args::LoadArgs;
use super::driver::{Measured, TaskContext, run_tasks, timed};
use super::error::{BenchError, BenchResult};
use super::report::{Report, Row, RowSpec};
use super::stats::{Counters, Recorder};
use super::target::{StoreClient, Target};
use lightning_store_proto as pb;

/// Probe iterations per run when `--count` is not given (the batch's end
/// usually ends the run first).
const DEFAULT_COUNT: u64 = 10_000_000;

/// Arguments of `bench bulk`.
#[derive(Debug, Clone, clap::Args)]
pub struct BulkArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Rollouts in the one EnqueueRollouts call.
    #[arg(long, default_value_t = 30_000)]
    rollouts: usize,
}

/// Runs the scenario once per concurrency level of probing clients
/// (default 4): the probes start, the batch is sent, and the probes stop
/// when it is answered (or at the run's bounds).
pub async fn run(target: &mut Target, args: BulkArgs, progress: bool) -> BenchResult<Report> {
    if args.rollouts == 0 {
        return Err(BenchError::new("--rollouts must be at least 1"));
    }
    let levels = args.load.levels(&[4])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let mut report = Report::new(
        "bulk",
        json!({
            "rollouts": args.rollouts,
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    for clients in levels {
        // One channel more than the probes: the batch has its own.
        let pool = target.pool(clients + 1).await?;
        let done = Arc::new(AtomicBool::new(false));
        let mut bulk_client = pool.store(clients);
        let specs = vec![pb::RolloutSpec::default(); args.rollouts];
        let batch_done = done.clone();
        let batch = tokio::spawn(async move {
            let mut recorder = Recorder::new(Arc::new(Counters::default()));
            let started = Instant::now();
            let result = timed(
                &mut recorder,
                "EnqueueRollouts",
                bulk_client.enqueue_rollouts(pb::EnqueueRolloutsRequest {
                    rollouts: specs,
                    ..Default::default()
                }),
            )
            .await;
            let elapsed = started.elapsed();
            match &result {
                Ok(response) => recorder.success(elapsed, 1, response.rollouts.len() as u64),
                Err(status) => recorder.failure(super::stats::status_text(status)),
            }
            batch_done.store(true, Ordering::Release);
            Measured { recorder, elapsed }
        });
        let label = format!("bulk c={clients}");
        let probes = run_tasks(&label, clients, limits, progress, |ctx| {
            let client = pool.store(ctx.index);
            probe_task(ctx, client, done.clone())
        })
        .await?;
        let batch = batch
            .await
            .map_err(|e| BenchError::new(format!("the batch task failed: {e}")))?;
        report.rows.push(Row::new(
            RowSpec {
                name: "bulk EnqueueRollouts".to_owned(),
                clients: 1,
                op_unit: "batches",
                item_unit: Some("rollouts"),
                latency_of: "the one EnqueueRollouts call",
            },
            &batch,
        ));
        report.rows.push(Row::new(
            RowSpec {
                name: "probes meanwhile".to_owned(),
                clients,
                op_unit: "probes",
                item_unit: None,
                latency_of: "one EnqueueRollout then DequeueRollout",
            },
            &probes,
        ));
    }
    Ok(report)
}

/// Enqueues and dequeues one rollout at a time until the batch is answered.
async fn probe_task(ctx: TaskContext, mut client: StoreClient, done: Arc<AtomicBool>) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    while !done.load(Ordering::Acquire) && budget.take(1) == 1 {
        let start = Instant::now();
        let enqueued = timed(
            &mut recorder,
            "EnqueueRollout",
            client.enqueue_rollout(pb::EnqueueRolloutRequest {
                rollout: Some(pb::RolloutSpec::default()),
                request_id: None,
            }),
        )
        .await;
        let dequeued = match enqueued {
            Ok(_) => {
                timed(
                    &mut recorder,
                    "DequeueRollout",
                    client.dequeue_rollout(pb::DequeueRolloutRequest::default()),
                )
                .await
            }
            Err(status) => Err(status),
        };
        match dequeued {
            Ok(_) => recorder.success(start.elapsed(), 1, 0),
            Err(status) => recorder.failure(super::stats::status_text(&status)),
        }
    }
    recorder
}
