//! `bench ingest`: span ingest through the store API (AddSpans), OTLP/gRPC
//! (TraceService/Export) and OTLP/HTTP (`POST /v1/traces`, protobuf) into
//! running attempts, with the server's memory growth per stored span when
//! the benchmark started the server.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tonic::Status;

use super::args::{LoadArgs, SpanArgs};
use super::driver::{TaskContext, run_tasks};
use super::error::{BenchError, BenchResult};
use super::otlp_http::OtlpHttpClient;
use super::payload::{OtlpBatch, SpanIds, StoreBatch, StoreSpan};
use super::report::{Memory, Report, Row, RowSpec};
use super::stats::{Recorder, status_text};
use super::target::{Pool, Target, start_rollout};
use super::wire::LeanClient;
use lightning_store_proto as pb;

/// Spans per run when `--count` is not given: the default count of
/// requests is this divided by the batch size, which bounds the memory an
/// in-memory server needs for a run.
const DEFAULT_SPANS: u64 = 1_000_000;

/// The ingest paths to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// LightningStoreService/AddSpans.
    Store,
    /// opentelemetry.proto.collector.trace.v1.TraceService/Export.
    Otlp,
    /// OTLP/HTTP: `POST /v1/traces` with a protobuf body.
    Http,
    /// AddSpans and OTLP/gRPC, one after the other.
    Both,
}

/// Arguments of `bench ingest`.
#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    spans: SpanArgs,
    /// Spans per request (1 measures per-span requests).
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Which ingest path to measure.
    #[arg(long, value_enum, default_value = "both")]
    protocol: Protocol,
    /// Running attempts the spans are spread over (client task i writes to attempt i mod N).
    #[arg(long, default_value_t = 16)]
    attempts: usize,
}

/// Runs the scenario once per protocol and concurrency level (default 4 clients).
pub async fn run(target: &mut Target, args: IngestArgs, progress: bool) -> BenchResult<Report> {
    if !(1..=100_000).contains(&args.batch) {
        return Err(BenchError::new("--batch must be between 1 and 100000"));
    }
    if args.attempts == 0 {
        return Err(BenchError::new("--attempts must be at least 1"));
    }
    let levels = args.load.levels(&[4])?;
    let limits = args
        .load
        .limits(DEFAULT_SPANS.div_ceil(args.batch as u64))?;
    let span = StoreSpan::new(args.spans.span_bytes);
    let mut report = Report::new(
        "ingest",
        json!({
            "batch": args.batch,
            "span_bytes": span.encoded_len(),
            "attempts": args.attempts,
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
        }),
    );
    let protocols: &[Protocol] = match args.protocol {
        Protocol::Both => &[Protocol::Store, Protocol::Otlp],
        Protocol::Store => &[Protocol::Store],
        Protocol::Otlp => &[Protocol::Otlp],
        Protocol::Http => &[Protocol::Http],
    };
    for &protocol in protocols {
        for &clients in &levels {
            let pool = target.pool(clients).await?;
            let attempts = running_attempts(&pool, args.attempts, &span).await?;
            let name = match protocol {
                Protocol::Store => "ingest AddSpans",
                Protocol::Http => "ingest OTLP/HTTP",
                Protocol::Otlp | Protocol::Both => "ingest OTLP Export",
            };
            let label = format!("{name} c={clients}");
            let rss_before = target.rss_bytes();
            let spans_before = stored_spans(&pool).await?;
            let mut requests = Vec::with_capacity(attempts.len());
            for (rollout_id, attempt_id) in &attempts {
                let request = match protocol {
                    Protocol::Store => StoreBatch::new(&span, rollout_id, attempt_id, args.batch)
                        .map(Request::Store),
                    Protocol::Otlp | Protocol::Both => {
                        OtlpBatch::new(rollout_id, attempt_id, args.batch, args.spans.span_bytes)
                            .map(Request::Otlp)
                    }
                    Protocol::Http => {
                        OtlpBatch::new(rollout_id, attempt_id, args.batch, args.spans.span_bytes)
                            .map(Request::Http)
                    }
                };
                requests.push(Arc::new(request.ok_or_else(|| {
                    BenchError::new("cannot locate the span ids in the request template")
                })?));
            }
            let authorization = target.authorization()?;
            let measured = run_tasks(&label, clients, limits, progress, |ctx| {
                let request = requests[ctx.index % requests.len()].clone();
                let client = pool.lean(ctx.index);
                let exporter = OtlpHttpClient::new(target.url(), authorization.clone());
                ingest_task(ctx, client, exporter, request, args.batch)
            })
            .await?;
            let mut row = Row::new(
                RowSpec {
                    name: name.to_owned(),
                    clients,
                    op_unit: "requests",
                    item_unit: Some("spans"),
                    latency_of: "one request",
                },
                &measured,
            );
            let spans_stored = stored_spans(&pool).await?.saturating_sub(spans_before);
            row.memory = match (rss_before, target.rss_bytes()) {
                (Some(before), Some(after)) if spans_stored > 0 => Some(Memory {
                    rss_before_bytes: before,
                    rss_after_bytes: after,
                    spans_stored,
                    bytes_per_span: after.saturating_sub(before) as f64 / spans_stored as f64,
                }),
                _ => None,
            };
            report.rows.push(row);
        }
    }
    Ok(report)
}

/// The request a client task sends over and over, with fresh span ids.
enum Request {
    Store(StoreBatch),
    Otlp(OtlpBatch),
    /// The OTLP Export request posted over HTTP.
    Http(OtlpBatch),
}

/// Creates `count` attempts and makes them running with one span each;
/// returns their (rollout id, attempt id) pairs.
async fn running_attempts(
    pool: &Pool,
    count: usize,
    span: &StoreSpan,
) -> BenchResult<Vec<(String, String)>> {
    let mut client = pool.store(0);
    let mut ids = SpanIds::new();
    let mut attempts = Vec::with_capacity(count);
    for _ in 0..count {
        let (rollout_id, attempt_id) = start_rollout(&mut client, "bench ingest").await?;
        client
            .add_spans(pb::AddSpansRequest {
                owner_epoch: None,
                spans: span.spans(&rollout_id, &attempt_id, 1, &mut ids),
                ..Default::default()
            })
            .await?;
        attempts.push((rollout_id, attempt_id));
    }
    Ok(attempts)
}

/// Returns the number of spans the server holds.
async fn stored_spans(pool: &Pool) -> BenchResult<u64> {
    let stats = pool
        .store(0)
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner();
    Ok(u64::try_from(stats.total_spans).unwrap_or(0))
}

async fn ingest_task(
    ctx: TaskContext,
    mut client: LeanClient,
    exporter: Result<OtlpHttpClient, String>,
    request: Arc<Request>,
    batch: usize,
) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    let mut ids = SpanIds::new();
    while budget.take(1) == 1 {
        let start = Instant::now();
        let result = match &*request {
            Request::Store(spans) => client
                .add_spans(spans.request(&mut ids))
                .await
                .map(tonic::Response::into_inner)
                .and_then(|ack| ack.check(batch)),
            Request::Otlp(spans) => client
                .export(spans.request(&mut ids))
                .await
                .map(tonic::Response::into_inner)
                .and_then(|response| match response.partial_success {
                    Some(partial) if partial.rejected_spans > 0 => Err(Status::internal(format!(
                        "{} spans rejected: {}",
                        partial.rejected_spans, partial.error_message
                    ))),
                    _ => Ok(()),
                }),
            Request::Http(spans) => match &exporter {
                Ok(exporter) => exporter
                    .export(spans.request(&mut ids))
                    .await
                    .map_err(Status::unavailable),
                Err(error) => Err(Status::invalid_argument(error.clone())),
            },
        };
        match result {
            Ok(()) => recorder.success(start.elapsed(), 1, batch as u64),
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}
