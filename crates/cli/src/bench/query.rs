//! `bench query`: QuerySpans of one rollout holding many spans (1,000 by
//! default), every call returning all of them.

use std::time::Instant;

use serde_json::json;
use tonic::Status;

use super::args::{LoadArgs, SpanArgs};
use super::driver::{TaskContext, run_tasks};
use super::error::{BenchError, BenchResult};
use super::payload::{SpanIds, StoreSpan};
use super::report::{Report, Row, RowSpec};
use super::stats::{Recorder, status_text};
use super::target::{StoreClient, Target, start_rollout};
use super::wire::LeanClient;
use lightning_store_proto as pb;

/// Queries per run when `--count` is not given.
const DEFAULT_COUNT: u64 = 1_000_000;
/// Spans per AddSpans call while preparing the rollout.
const PREPARE_BATCH: usize = 256;

/// Arguments of `bench query`.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    spans: SpanArgs,
    /// Spans in the queried rollout.
    #[arg(long = "spans", default_value_t = 1000)]
    span_count: usize,
}

/// Prepares the rollout, then runs the scenario once per concurrency level
/// (default 1, 4 and 16 clients).
pub async fn run(target: &mut Target, args: QueryArgs, progress: bool) -> BenchResult<Report> {
    if args.span_count == 0 {
        return Err(BenchError::new("--spans must be at least 1"));
    }
    let levels = args.load.levels(&[1, 4, 16])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let span = StoreSpan::new(args.spans.span_bytes);
    let mut report = Report::new(
        "query",
        json!({
            "spans": args.span_count,
            "span_bytes": span.encoded_len(),
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    let rollout_id = prepare(&mut target.pool(1).await?.store(0), &span, args.span_count).await?;
    for clients in levels {
        let pool = target.pool(clients).await?;
        let label = format!("query c={clients}");
        let measured = run_tasks(&label, clients, limits, progress, |ctx| {
            let client = pool.lean(ctx.index);
            query_task(ctx, client, rollout_id.clone(), args.span_count)
        })
        .await?;
        report.rows.push(Row::new(
            RowSpec {
                name: format!("query {} spans", args.span_count),
                clients,
                op_unit: "queries",
                item_unit: Some("spans"),
                latency_of: "one QuerySpans call",
            },
            &measured,
        ));
    }
    Ok(report)
}

/// Creates a rollout holding `count` spans; returns its id.
async fn prepare(client: &mut StoreClient, span: &StoreSpan, count: usize) -> BenchResult<String> {
    let (rollout_id, attempt_id) = start_rollout(client, "bench query").await?;
    let mut ids = SpanIds::new();
    let mut added = 0;
    while added < count {
        let n = PREPARE_BATCH.min(count - added);
        client
            .add_spans(pb::AddSpansRequest {
                owner_epoch: None,
                spans: span.spans(&rollout_id, &attempt_id, n, &mut ids),
                ..Default::default()
            })
            .await?;
        added += n;
    }
    Ok(rollout_id)
}

async fn query_task(
    ctx: TaskContext,
    mut client: LeanClient,
    rollout_id: String,
    expected: usize,
) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    let request = pb::QuerySpansRequest {
        rollout_id,
        ..Default::default()
    };
    while budget.take(1) == 1 {
        let start = Instant::now();
        let result = client
            .query_spans(&request)
            .await
            .map(tonic::Response::into_inner)
            .and_then(|page| {
                if page.spans.len() == expected {
                    Ok(())
                } else {
                    Err(Status::internal(format!(
                        "QuerySpans returned {} spans, expected {expected}",
                        page.spans.len()
                    )))
                }
            });
        match result {
            Ok(()) => recorder.success(start.elapsed(), 1, expected as u64),
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}
