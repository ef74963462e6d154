//! `bench read-model`: the console's reads on a large store. Fills the
//! store through the batch RPCs with `--rollouts` rollouts (100,000 by
//! default; modes, `--versions` resources versions, workers, statuses
//! mixed) and `--spans` spans over the claimed ones (1,000,000; the last of
//! each carries a reward), then times, one call at a time, each query of
//! the Rollouts page (every filter, sorts, a deep page), each aggregate
//! read of the Overview and of a waiting rollout, the training summary, the
//! reward filter and sort, and the comparison of the first and last
//! versions (the rollouts' inputs repeat across versions, as a dataset's
//! tasks do).
//! A sample is the server's time on the call, from its `Server-Timing`
//! header (the network's share is left out); the round trip at the client
//! is reported beside it. Against a server that sends no such header (an
//! earlier version, for an A/B), the sample is the round trip, and the
//! report says so.

use std::time::{Duration, Instant};

use serde_json::json;
use tonic::Status;

use super::args::SpanArgs;
use super::driver::{TaskContext, run_tasks};
use super::error::{BenchError, BenchResult};
use super::limits::Limits;
use super::payload::StoreSpan;
use super::report::{Report, Row, RowSpec};
use super::seed;
use super::stats::{Recorder, status_text};
use super::target::{Pool, StoreClient, Target};
use lightning_store_proto as pb;

/// The W3C header in which the server reports its own time for every
/// response (docs/queries.md), which the read-model figures are made of.
const SERVER_TIMING_HEADER: &str = "server-timing";

/// The per-call series that marks samples taken at the client because the
/// server sent no `Server-Timing`.
const NO_SERVER_TIMING: &str = "round trip (no Server-Timing)";

/// Workers the fill claims rollouts as (`bench-worker-NN`).
const WORKERS: usize = 50;
/// Rollouts whose spans go in one AddSpans call.
const SPAN_BATCH_ROLLOUTS: usize = 200;
/// One claimed rollout in this many fails, with an ERROR span.
const FAIL_EVERY: usize = 14;
/// One claimed rollout in this many is left running.
const RUNNING_EVERY: usize = 33;
/// One queued rollout in this many is cancelled.
const CANCEL_EVERY: usize = 50;
/// Consecutive rollouts that run under one version, as a training step's
/// batch.
const BATCH: usize = 7;
/// Batches of tasks (inputs) in the run's dataset: each version's batches
/// go through them in turn, so that every version asks the same tasks, as
/// an RL run's steps sample the one dataset.
const TASK_BATCHES: usize = 20;

/// Arguments of `bench read-model`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadModelArgs {
    /// Rollouts to create; nine in ten are claimed, the rest stay queued.
    #[arg(long, default_value_t = 100_000)]
    rollouts: usize,
    /// Spans to add, spread over the claimed rollouts.
    #[arg(long, default_value_t = 1_000_000)]
    spans: usize,
    /// Resources versions the rollouts use (`rs-bench-NN`), seven
    /// consecutive rollouts to a version, round robin.
    #[arg(long, default_value_t = 20)]
    versions: usize,
    #[command(flatten)]
    span: SpanArgs,
    /// Calls per query (one at a time).
    #[arg(long, default_value_t = 100)]
    calls: u64,
    /// Stops a query's calls after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    duration_secs: f64,
    /// Rollouts per page of the Rollouts page's queries.
    #[arg(long, default_value_t = 50)]
    page_size: i64,
    /// Queries a store filled by an earlier run (`--server` naming a
    /// durable one) instead of filling it.
    #[arg(long)]
    no_fill: bool,
}

/// One read the console makes.
#[derive(Debug, Clone)]
enum Read {
    Rollouts(Box<pb::QueryRolloutsRequest>),
    Statistics,
    Activity,
    Position(String),
    Failures(i64),
    Training,
    /// `GetRewardTimeline` at the resolution the server chooses.
    Timeline,
    /// `CompareVersions` of these two version numbers, train.
    Compare(i64, i64),
}

/// Fills the store (unless told not to), then times every read.
pub async fn run(target: &mut Target, args: ReadModelArgs, progress: bool) -> BenchResult<Report> {
    if args.calls == 0 || args.page_size <= 0 || args.versions == 0 {
        return Err(BenchError::new(
            "--calls, --page-size and --versions must be at least 1",
        ));
    }
    let duration = Duration::try_from_secs_f64(args.duration_secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| BenchError::new("--duration-secs must be a number > 0"))?;
    let span = StoreSpan::new(args.span.span_bytes);
    let pool = target.pool(seed::SPAN_CALLS_IN_FLIGHT).await?;
    let fill_secs = if args.no_fill {
        None
    } else {
        let started = Instant::now();
        fill(&pool, &args, &span).await?;
        Some(started.elapsed().as_secs_f64())
    };
    let mut client = pool.store(0);
    let statistics = client
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner();
    let mut report = Report::new(
        "read-model",
        json!({
            "rollouts": statistics.total_rollouts,
            "spans": statistics.total_spans,
            "span_bytes": span.encoded_len(),
            "page_size": args.page_size,
            "calls": args.calls,
            "fill_secs": fill_secs,
        }),
    );
    let limits = Limits {
        count: args.calls,
        duration,
    };
    for (name, read) in reads(&mut client, args.page_size).await? {
        let label = format!("read-model {name}");
        let measured = run_tasks(&label, 1, limits, progress, |ctx| {
            read_task(ctx, pool.store(0), read.clone())
        })
        .await?;
        let latency_of = if measured.recorder.calls.contains_key(NO_SERVER_TIMING) {
            "the round trip of one call at the client (the server sent no Server-Timing)"
        } else {
            "the server's time on one call (Server-Timing); `round trip`: the call at the client"
        };
        report.rows.push(Row::new(
            RowSpec {
                name,
                clients: 1,
                op_unit: "calls",
                item_unit: Some("items"),
                latency_of,
            },
            &measured,
        ));
    }
    Ok(report)
}

/// Returns the reads to time, named, with the values they filter on taken
/// from the filled store.
async fn reads(client: &mut StoreClient, page_size: i64) -> BenchResult<Vec<(String, Read)>> {
    let page = |sort_by: &str, descending: bool, offset: i64| {
        Some(pb::PageRequest {
            sort_by: sort_by.to_owned(),
            sort_order: if descending {
                pb::SortOrder::Desc
            } else {
                pb::SortOrder::Asc
            } as i32,
            limit: Some(page_size),
            offset,
        })
    };
    let first = |sort_by: &str, descending: bool, status: Option<pb::RolloutStatus>| {
        pb::QueryRolloutsRequest {
            status_in: status.map(|s| vec![s as i32]).unwrap_or_default(),
            page: Some(pb::PageRequest {
                sort_by: sort_by.to_owned(),
                sort_order: if descending {
                    pb::SortOrder::Desc
                } else {
                    pb::SortOrder::Asc
                } as i32,
                limit: Some(1),
                offset: 0,
            }),
            ..Default::default()
        }
    };
    let total = client
        .query_rollouts(pb::QueryRolloutsRequest {
            page: page("", false, 0).map(|p| pb::PageRequest {
                limit: Some(0),
                ..p
            }),
            ..Default::default()
        })
        .await?
        .into_inner()
        .total;
    let versions = client
        .query_resources(pb::QueryResourcesRequest {
            page: Some(pb::PageRequest {
                limit: Some(0),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await?
        .into_inner()
        .total;
    let oldest = one(client, first("start_time", false, None)).await?;
    let newest = one(client, first("start_time", true, None)).await?;
    let last_queued = one(
        client,
        first("start_time", true, Some(pb::RolloutStatus::Queuing)),
    )
    .await?;
    let start = |r: &pb::Rollout| r.start_time.unwrap_or_default();
    let (from, until) = (start(&oldest), start(&newest));
    // The middle tenth of the creation times.
    let nanos = |t: &prost_types::Timestamp| t.seconds as i128 * 1_000_000_000 + t.nanos as i128;
    let at = |share: f64| {
        let t = nanos(&from) + ((nanos(&until) - nanos(&from)) as f64 * share) as i128;
        prost_types::Timestamp {
            seconds: t.div_euclid(1_000_000_000) as i64,
            nanos: t.rem_euclid(1_000_000_000) as i32,
        }
    };
    let fragment = newest
        .rollout_id
        .get(3..9)
        .unwrap_or(&newest.rollout_id)
        .to_owned();
    let query = |f: &dyn Fn(&mut pb::QueryRolloutsRequest)| {
        let mut request = pb::QueryRolloutsRequest {
            page: page("", false, 0),
            ..Default::default()
        };
        f(&mut request);
        Read::Rollouts(Box::new(request))
    };
    use pb::RolloutStatus as S;
    Ok(vec![
        ("first page".into(), query(&|_| {})),
        (
            "status=failed".into(),
            query(&|q| q.status_in = vec![S::Failed as i32]),
        ),
        (
            "status=queuing".into(),
            query(&|q| q.status_in = vec![S::Queuing as i32]),
        ),
        (
            "status=running,preparing".into(),
            query(&|q| q.status_in = vec![S::Running as i32, S::Preparing as i32]),
        ),
        (
            "mode=val".into(),
            query(&|q| q.mode_in = vec![pb::RolloutMode::Val as i32]),
        ),
        (
            "id contains".into(),
            query(&|q| q.rollout_id_contains = Some(fragment.clone())),
        ),
        (
            "start time, middle tenth".into(),
            query(&|q| {
                q.start_time_from = Some(at(0.45));
                q.start_time_until = Some(at(0.55));
            }),
        ),
        ("worker".into(), query(&|q| q.worker_id = Some(worker(7)))),
        (
            "resources version".into(),
            query(&|q| q.resources_id = Some(version(7))),
        ),
        (
            "succeeded+train+version".into(),
            query(&|q| {
                q.status_in = vec![S::Succeeded as i32];
                q.mode_in = vec![pb::RolloutMode::Train as i32];
                q.resources_id = Some(version(3));
            }),
        ),
        (
            "sort start_time desc".into(),
            query(&|q| q.page = page("start_time", true, 0)),
        ),
        (
            "sort status".into(),
            query(&|q| q.page = page("status", false, 0)),
        ),
        (
            "deep page".into(),
            query(&|q| q.page = page("", false, (total - page_size).max(0))),
        ),
        (
            "deep page, sort end_time".into(),
            query(&|q| q.page = page("end_time", true, total / 2)),
        ),
        ("GetStatistics".into(), Read::Statistics),
        ("GetRolloutActivity".into(), Read::Activity),
        (
            "GetQueuePosition (last)".into(),
            Read::Position(last_queued.rollout_id),
        ),
        ("ListRecentFailures 10".into(), Read::Failures(10)),
        (
            "reward 0.25 to 0.5".into(),
            query(&|q| {
                q.reward_min = Some(0.25);
                q.reward_max = Some(0.5);
            }),
        ),
        (
            "sort reward desc".into(),
            query(&|q| q.page = page("reward", true, 0)),
        ),
        ("GetTrainingSummary".into(), Read::Training),
        ("GetRewardTimeline".into(), Read::Timeline),
        (
            "CompareVersions first, last".into(),
            Read::Compare(1, versions),
        ),
    ])
}

/// Returns the one rollout a query answers.
async fn one(
    client: &mut StoreClient,
    request: pb::QueryRolloutsRequest,
) -> BenchResult<pb::Rollout> {
    client
        .query_rollouts(request)
        .await?
        .into_inner()
        .rollouts
        .into_iter()
        .next()
        .ok_or_else(|| BenchError::new("the store holds no rollout to query: fill it first"))
}

fn worker(k: usize) -> String {
    format!("bench-worker-{k:02}")
}

fn version(k: usize) -> String {
    format!("rs-bench-{k:02}")
}

async fn read_task(ctx: TaskContext, mut client: StoreClient, read: Read) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    while budget.take(1) == 1 {
        let start = Instant::now();
        let result = call(&mut client, &read).await;
        let round_trip = start.elapsed();
        match result {
            Ok((Some(server), items)) => {
                recorder.call("round trip", round_trip, &Ok::<(), Status>(()));
                recorder.success(server, 1, items);
            }
            Ok((None, items)) => {
                recorder.call(NO_SERVER_TIMING, round_trip, &Ok::<(), Status>(()));
                recorder.success(round_trip, 1, items);
            }
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}

/// Makes one read; returns the server's time on it (if the server said)
/// and the items it answered.
async fn call(client: &mut StoreClient, read: &Read) -> Result<(Option<Duration>, u64), Status> {
    fn answered<T>(
        response: tonic::Response<T>,
        items: impl Fn(&T) -> usize,
    ) -> Result<(Option<Duration>, u64), Status> {
        let server = server_time(response.metadata());
        Ok((server, items(response.get_ref()) as u64))
    }
    match read {
        Read::Rollouts(request) => {
            answered(client.query_rollouts((**request).clone()).await?, |r| {
                r.rollouts.len()
            })
        }
        Read::Statistics => answered(
            client.get_statistics(pb::GetStatisticsRequest {}).await?,
            |r| r.rollouts_by_status.len(),
        ),
        Read::Activity => answered(
            client
                .get_rollout_activity(pb::GetRolloutActivityRequest {})
                .await?,
            |r| r.minutes.len(),
        ),
        Read::Position(rollout_id) => answered(
            client
                .get_queue_position(pb::GetQueuePositionRequest {
                    rollout_id: rollout_id.clone(),
                })
                .await?,
            |r| usize::from(r.queued),
        ),
        Read::Failures(limit) => answered(
            client
                .list_recent_failures(pb::ListRecentFailuresRequest { limit: *limit })
                .await?,
            |r| r.failures.len(),
        ),
        Read::Training => answered(
            client
                .get_training_summary(pb::GetTrainingSummaryRequest::default())
                .await?,
            |r| r.versions.len(),
        ),
        Read::Timeline => answered(
            client
                .get_reward_timeline(pb::GetRewardTimelineRequest::default())
                .await?,
            |r| r.periods.len(),
        ),
        Read::Compare(before, after) => answered(
            client
                .compare_versions(pb::CompareVersionsRequest {
                    mode: pb::RolloutMode::Train as i32,
                    version_before: *before,
                    version_after: *after,
                    ..Default::default()
                })
                .await?,
            |r| r.tasks.len(),
        ),
    }
}

/// Reads the server's time on a call from its `Server-Timing` header.
fn server_time(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    metadata
        .get(SERVER_TIMING_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("app;dur="))
        .and_then(|millis| millis.parse::<f64>().ok())
        .and_then(|millis| Duration::try_from_secs_f64(millis / 1e3).ok())
}

/// The reward of the `i`th claimed rollout, as `emit_reward` records it:
/// spread over [0, 1) in thousandths (a hundred bins of the summary).
fn reward_attributes(i: usize) -> [pb::KeyValue; 2] {
    let value = (i.wrapping_mul(2_654_435_761) % 1_000) as f64 / 1_000.0;
    let attribute = |key: &str, value: pb::attribute_value::Value| pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue { value: Some(value) }),
    };
    [
        attribute(
            "agentlightning.reward.0.name",
            pb::attribute_value::Value::StringValue("primary".into()),
        ),
        attribute(
            "agentlightning.reward.0.value",
            pb::attribute_value::Value::DoubleValue(value),
        ),
    ]
}

/// Fills the store: resources versions, rollouts (batches), claims by the
/// workers, spans (batches, a few in flight; a rollout the fill will fail
/// gets an ERROR span last), completions, cancellations.
async fn fill(pool: &Pool, args: &ReadModelArgs, span: &StoreSpan) -> BenchResult<()> {
    let mut client = pool.store(0);
    for k in 0..args.versions {
        client
            .update_resources(pb::UpdateResourcesRequest {
                resources_id: version(k),
                resources_json: json!({ "prompt": format!("version {k}") }).to_string(),
            })
            .await?;
    }
    // Modes: 14 in 20 train, 3 val, 2 test, 1 none.
    let mode = |i: usize| match i % 20 {
        0..14 => pb::RolloutMode::Train,
        14..17 => pb::RolloutMode::Val,
        17..19 => pb::RolloutMode::Test,
        _ => pb::RolloutMode::Unspecified,
    };
    seed::enqueue(&mut client, args.rollouts, |i| pb::RolloutSpec {
        input_json:
            json!({ "task": i % BATCH + BATCH * (i / BATCH / args.versions % TASK_BATCHES) })
                .to_string(),
        mode: mode(i) as i32,
        resources_id: Some(version((i / BATCH) % args.versions)),
        metadata_json: json!({ "bench": "read-model", "i": i }).to_string(),
        ..Default::default()
    })
    .await?;
    let to_claim = args.rollouts - args.rollouts / 10;
    let claimed = seed::claim(&mut client, to_claim, |k| worker(k % WORKERS)).await?;
    if !claimed.is_empty() {
        let (each, extra) = (args.spans / claimed.len(), args.spans % claimed.len());
        seed::add_spans(pool, &claimed, SPAN_BATCH_ROLLOUTS, |i, c, ids| {
            let count = each + usize::from(i < extra);
            let mut spans = span.spans(&c.rollout_id, &c.attempt_id, count, ids);
            if let Some(last) = spans.last_mut() {
                last.attributes.extend(reward_attributes(i));
            }
            if i.is_multiple_of(FAIL_EVERY)
                && let Some(last) = spans.last_mut()
            {
                last.status = Some(pb::SpanStatus {
                    code: pb::SpanStatusCode::Error as i32,
                    description: Some("tool call failed".into()),
                    ..Default::default()
                });
            }
            spans
        })
        .await?;
    }
    seed::complete(&mut client, &claimed, |i| {
        (i % RUNNING_EVERY != 1).then(|| seed::failing_one_in(FAIL_EVERY, i))
    })
    .await?;
    let queued = client
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: vec![pb::RolloutStatus::Queuing as i32],
            ..Default::default()
        })
        .await?
        .into_inner()
        .rollouts;
    for rollout in queued.iter().step_by(CANCEL_EVERY) {
        client
            .update_rollout(pb::UpdateRolloutRequest {
                rollout_id: rollout.rollout_id.clone(),
                update_mask: Some(prost_types::FieldMask {
                    paths: vec!["status".into()],
                }),
                status: pb::RolloutStatus::Cancelled as i32,
                ..Default::default()
            })
            .await?;
    }
    Ok(())
}
