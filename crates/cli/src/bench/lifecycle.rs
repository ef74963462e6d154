//! `bench lifecycle`: full rollout lifecycles, as a runner and an algorithm
//! drive them: enqueue, dequeue (or a push to a worker session), add spans,
//! complete.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::json;
use tonic::Status;

use super::args::{LoadArgs, SpanArgs};
use super::driver::{Budget, Measured, TaskContext, run_tasks, run_tasks_within, timed};
use super::error::{BenchError, BenchResult};
use super::limits::Limits;
use super::payload::{SpanIds, StoreSpan};
use super::report::{Report, Row, RowSpec};
use super::session::BenchSession;
use super::stats::{Recorder, status_text};
use super::target::{Pool, StoreClient, Target};
use super::wire::LeanClient;
use lightning_store_proto as pb;

/// Lifecycles per run when `--count` is not given (the duration usually ends it first).
const DEFAULT_COUNT: u64 = 10_000_000;
/// How long a session client waits for the push of a rollout before the
/// lifecycle counts as failed.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// How the runner side receives its rollouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LifecycleMode {
    /// DequeueRollout (DequeueRollouts with --batch).
    Unary,
    /// A one-slot WorkerSession per client: the server pushes the rollout,
    /// and the client releases it after completing it.
    Session,
}

/// Arguments of `bench lifecycle`.
#[derive(Debug, Clone, clap::Args)]
pub struct LifecycleArgs {
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    spans: SpanArgs,
    /// Rollouts per iteration. 1: EnqueueRollout, DequeueRollout, AddSpans,
    /// UpdateAttempt. N > 1: EnqueueRollouts(N), DequeueRollouts(limit N),
    /// one AddSpans for all their spans, then one UpdateAttempts for all
    /// their completions.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Spans added per rollout, all in one AddSpans call.
    #[arg(long, default_value_t = 10)]
    spans_per_rollout: usize,
    /// How rollouts reach the runner side (`session` needs --batch 1).
    #[arg(long, value_enum, default_value = "unary")]
    mode: LifecycleMode,
}

/// Runs the scenario once per concurrency level (default 1, 4 and 16 clients).
pub async fn run(target: &mut Target, args: LifecycleArgs, progress: bool) -> BenchResult<Report> {
    if !(1..=10_000).contains(&args.batch) {
        return Err(BenchError::new("--batch must be between 1 and 10000"));
    }
    if args.mode == LifecycleMode::Session && args.batch != 1 {
        return Err(BenchError::new("--mode session takes no --batch"));
    }
    let levels = args.load.levels(&[1, 4, 16])?;
    let limits = args.load.limits(DEFAULT_COUNT)?;
    let span = StoreSpan::new(args.spans.span_bytes);
    let mut report = Report::new(
        "lifecycle",
        json!({
            "batch": args.batch,
            "spans_per_rollout": args.spans_per_rollout,
            "span_bytes": span.encoded_len(),
            "duration_secs": limits.duration.as_secs_f64(),
            "count": limits.count,
            "mode": format!("{:?}", args.mode).to_lowercase(),
        }),
    );
    let (name, latency_of) = if args.mode == LifecycleMode::Session {
        (
            "lifecycle session".to_owned(),
            "one lifecycle (enqueue, push, AddSpans, UpdateAttempt, release)",
        )
    } else if args.batch == 1 {
        (
            "lifecycle".to_owned(),
            "one lifecycle (4 calls in sequence)",
        )
    } else {
        (
            format!("lifecycle batch {}", args.batch),
            "one iteration of N lifecycles (4 batch calls in sequence)",
        )
    };
    for clients in levels {
        let pool = target.pool(clients).await?;
        let label = format!("{name} c={clients}");
        let measured = run_tasks(&label, clients, limits, progress, |ctx| {
            let clients = Clients {
                store: pool.store(ctx.index),
                lean: pool.lean(ctx.index),
            };
            let args = args.clone();
            let span = span.clone();
            async move {
                match args.mode {
                    LifecycleMode::Unary => client_task(ctx, clients, span, args).await,
                    LifecycleMode::Session => session_task(ctx, clients, span, args).await,
                }
            }
        })
        .await?;
        report.rows.push(Row::new(
            RowSpec {
                name: name.clone(),
                clients,
                op_unit: "lifecycles",
                item_unit: Some("spans"),
                latency_of,
            },
            &measured,
        ));
    }
    Ok(report)
}

/// Runs `clients` tasks of unary lifecycles (EnqueueRollout,
/// DequeueRollout, AddSpans of `spans_per_rollout` spans, UpdateAttempt)
/// within `limits`: the load other scenarios measure beside (`bench
/// console`).
pub(super) async fn unary_load(
    pool: &Pool,
    clients: usize,
    limits: Limits,
    span: &StoreSpan,
    spans_per_rollout: usize,
    label: &str,
    progress: bool,
) -> BenchResult<Measured> {
    let budget = Arc::new(Budget::new(limits));
    let load = UnaryLoad {
        clients,
        limits,
        span,
        spans_per_rollout,
    };
    unary_load_within(pool, load, budget, label, progress).await
}

/// A load of unary lifecycles: how many clients, within which bounds, with
/// which spans.
pub(super) struct UnaryLoad<'a> {
    /// Concurrent clients.
    pub clients: usize,
    /// The run's bounds.
    pub limits: Limits,
    /// The spans added.
    pub span: &'a StoreSpan,
    /// Spans added per rollout.
    pub spans_per_rollout: usize,
}

/// Runs `load` within `budget` (made of its limits), which the caller may
/// exhaust to end it early (a flood that lasts as long as another run).
pub(super) async fn unary_load_within(
    pool: &Pool,
    load: UnaryLoad<'_>,
    budget: Arc<Budget>,
    label: &str,
    progress: bool,
) -> BenchResult<Measured> {
    let UnaryLoad {
        clients,
        limits,
        span,
        spans_per_rollout,
    } = load;
    let args = LifecycleArgs {
        load: LoadArgs {
            concurrency: vec![clients],
            duration_secs: limits.duration.as_secs_f64(),
            count: Some(limits.count),
        },
        spans: SpanArgs {
            span_bytes: span.encoded_len(),
        },
        batch: 1,
        spans_per_rollout,
        mode: LifecycleMode::Unary,
    };
    run_tasks_within(label, clients, limits, budget, progress, |ctx| {
        let clients = Clients {
            store: pool.store(ctx.index),
            lean: pool.lean(ctx.index),
        };
        let args = args.clone();
        let span = span.clone();
        async move { client_task(ctx, clients, span, args).await }
    })
    .await
}

/// The clients of one task: AddSpans goes through the lean client, which
/// counts the echoed spans instead of building them.
struct Clients {
    store: StoreClient,
    lean: LeanClient,
}

async fn client_task(
    ctx: TaskContext,
    mut client: Clients,
    span: StoreSpan,
    args: LifecycleArgs,
) -> Recorder {
    let TaskContext {
        budget,
        mut recorder,
        ..
    } = ctx;
    let mut ids = SpanIds::new();
    loop {
        let n = budget.take(args.batch as u64);
        if n == 0 {
            break;
        }
        let start = Instant::now();
        let result = if args.batch == 1 {
            single(&mut client, &mut recorder, &span, &args, &mut ids).await
        } else {
            batched(&mut client, &mut recorder, &span, &args, n, &mut ids).await
        };
        match result {
            Ok(done) => {
                recorder.success(start.elapsed(), done, done * args.spans_per_rollout as u64)
            }
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}

/// Lifecycles through a one-slot worker session: each iteration enqueues a
/// rollout and completes the next one pushed to the session (another
/// client's, as often as not). The previous assignment is released only
/// when the next iteration starts, so that a session whose client is done
/// keeps its slot full and receives nothing another client waits for.
async fn session_task(
    ctx: TaskContext,
    mut client: Clients,
    span: StoreSpan,
    args: LifecycleArgs,
) -> Recorder {
    let TaskContext {
        index,
        budget,
        mut recorder,
    } = ctx;
    // A worker id no earlier run used: a session of an earlier run's worker
    // would be adopted, with the assignment it kept.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let worker_id = format!("bench-lifecycle-{}-{index}", &run[..8]);
    let mut session = match BenchSession::open(&mut client.store, &worker_id, 1).await {
        Ok(session) => session,
        Err(status) => {
            recorder.failure(status_text(&status));
            return recorder;
        }
    };
    let mut ids = SpanIds::new();
    let mut held: Option<(String, String)> = None;
    while budget.take(1) == 1 {
        if let Some((rollout_id, attempt_id)) = held.take() {
            session.release(&rollout_id, &attempt_id);
        }
        let start = Instant::now();
        match pushed(
            &mut client,
            &mut session,
            &mut recorder,
            &span,
            &args,
            &mut ids,
        )
        .await
        {
            Ok(attempt) => {
                held = Some(attempt);
                recorder.success(start.elapsed(), 1, args.spans_per_rollout as u64);
            }
            Err(status) => recorder.failure(status_text(&status)),
        }
    }
    recorder
}

/// One lifecycle over a session; returns the attempt it completed.
async fn pushed(
    client: &mut Clients,
    session: &mut BenchSession,
    recorder: &mut Recorder,
    span: &StoreSpan,
    args: &LifecycleArgs,
    ids: &mut SpanIds,
) -> Result<(String, String), Status> {
    timed(
        recorder,
        "EnqueueRollout",
        client.store.enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(spec()),
            request_id: None,
        }),
    )
    .await?;
    let rollout = tokio::time::timeout(PUSH_TIMEOUT, session.assignment())
        .await
        .map_err(|_| Status::deadline_exceeded("no rollout was pushed to the session"))??
        .ok_or_else(|| Status::unavailable("the session ended"))?;
    let attempt_id = attempt_id(&rollout)?;
    if args.spans_per_rollout > 0 {
        let spans = span.spans(
            &rollout.rollout_id,
            &attempt_id,
            args.spans_per_rollout,
            ids,
        );
        add_spans(client, recorder, spans, Some(session.owner_epoch)).await?;
    }
    let mut update = succeeded(rollout.rollout_id.clone(), attempt_id.clone());
    update.owner_epoch = Some(session.owner_epoch);
    timed(
        recorder,
        "UpdateAttempt",
        client.store.update_attempt(update),
    )
    .await?;
    Ok((rollout.rollout_id, attempt_id))
}

/// One lifecycle through the single-rollout RPCs.
async fn single(
    client: &mut Clients,
    recorder: &mut Recorder,
    span: &StoreSpan,
    args: &LifecycleArgs,
    ids: &mut SpanIds,
) -> Result<u64, Status> {
    timed(
        recorder,
        "EnqueueRollout",
        client.store.enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(spec()),
            request_id: None,
        }),
    )
    .await?;
    let claimed = timed(
        recorder,
        "DequeueRollout",
        client
            .store
            .dequeue_rollout(pb::DequeueRolloutRequest::default()),
    )
    .await?
    .rollout
    .ok_or_else(|| Status::internal("the queue was empty after an enqueue"))?;
    let attempt_id = attempt_id(&claimed)?;
    if args.spans_per_rollout > 0 {
        let spans = span.spans(
            &claimed.rollout_id,
            &attempt_id,
            args.spans_per_rollout,
            ids,
        );
        add_spans(client, recorder, spans, None).await?;
    }
    timed(
        recorder,
        "UpdateAttempt",
        client
            .store
            .update_attempt(succeeded(claimed.rollout_id, attempt_id)),
    )
    .await?;
    Ok(1)
}

/// `n` lifecycles through the batch RPCs; returns how many completed.
async fn batched(
    client: &mut Clients,
    recorder: &mut Recorder,
    span: &StoreSpan,
    args: &LifecycleArgs,
    n: u64,
    ids: &mut SpanIds,
) -> Result<u64, Status> {
    timed(
        recorder,
        "EnqueueRollouts",
        client.store.enqueue_rollouts(pb::EnqueueRolloutsRequest {
            rollouts: (0..n).map(|_| spec()).collect(),
            ..Default::default()
        }),
    )
    .await?;
    let claimed = timed(
        recorder,
        "DequeueRollouts",
        client.store.dequeue_rollouts(pb::DequeueRolloutsRequest {
            limit: i64::try_from(n).unwrap_or(i64::MAX),
            ..Default::default()
        }),
    )
    .await?
    .rollouts;
    let mut attempts = Vec::with_capacity(claimed.len());
    let mut spans = Vec::with_capacity(claimed.len() * args.spans_per_rollout);
    for rollout in claimed {
        let attempt_id = attempt_id(&rollout)?;
        spans.extend(span.spans(
            &rollout.rollout_id,
            &attempt_id,
            args.spans_per_rollout,
            ids,
        ));
        attempts.push((rollout.rollout_id, attempt_id));
    }
    if !spans.is_empty() {
        add_spans(client, recorder, spans, None).await?;
    }
    if attempts.is_empty() {
        return Ok(0);
    }
    let updates = attempts
        .into_iter()
        .map(|(rollout_id, attempt_id)| succeeded(rollout_id, attempt_id))
        .collect::<Vec<_>>();
    let expected = updates.len();
    let completed = timed(
        recorder,
        "UpdateAttempts",
        client
            .store
            .update_attempts(pb::UpdateAttemptsRequest { updates }),
    )
    .await?
    .attempts
    .len();
    if completed != expected {
        return Err(Status::internal(format!(
            "UpdateAttempts answered {completed} attempts for {expected} updates"
        )));
    }
    Ok(completed as u64)
}

/// Stores spans with one AddSpans call (presenting `owner_epoch`, if any)
/// and checks that all were stored.
async fn add_spans(
    client: &mut Clients,
    recorder: &mut Recorder,
    spans: Vec<pb::Span>,
    owner_epoch: Option<u64>,
) -> Result<(), Status> {
    let expected = spans.len();
    let request = pb::AddSpansRequest {
        spans,
        owner_epoch,
        ..Default::default()
    }
    .encode_to_vec()
    .into();
    let ack = timed(recorder, "AddSpans", client.lean.add_spans(request)).await?;
    ack.check(expected)
}

fn spec() -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: r#"{"task": "bench"}"#.to_owned(),
        ..Default::default()
    }
}

fn attempt_id(rollout: &pb::Rollout) -> Result<String, Status> {
    rollout
        .attempt
        .as_ref()
        .map(|a| a.attempt_id.clone())
        .ok_or_else(|| Status::internal("a dequeued rollout has no attempt"))
}

/// Returns the request that marks an attempt succeeded.
pub fn succeeded(rollout_id: String, attempt_id: String) -> pb::UpdateAttemptRequest {
    pb::UpdateAttemptRequest {
        rollout_id,
        attempt_id,
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["status".to_owned()],
        }),
        status: pb::AttemptStatus::Succeeded as i32,
        ..Default::default()
    }
}
