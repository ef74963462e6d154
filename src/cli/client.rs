//! Client subcommands: look inside a running store (readable tables by
//! default, agent-lightning's JSON shapes with `--json`) and drive it from a
//! shell (enqueue, start, dequeue, add a span, complete an attempt).

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use comfy_table::{Table, presets};
use serde_json::{Map, Value, json};

use crate::api::convert::mode_from_proto;
use crate::client::{AuthChannel, error_chain};
use crate::core::model::{AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus};
use crate::proto as pb;
use crate::proto::code_name;
use crate::proto::lightning_store_service_client::LightningStoreServiceClient;
use crate::server::ServeError;

/// Writes a line to stdout like `println!`, returning the write error (a
/// reader that stopped early, as `| head` or `| grep -q` do, ends the command
/// quietly instead of panicking: see [`run`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(ClientError::Output)?
    }};
}

/// How long connecting to the server may take before the command gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Client subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Lists rollouts, each with its latest attempt.
    Rollouts(WithOptions<RolloutsArgs>),
    /// Shows one rollout with all its attempts.
    Rollout(WithOptions<RolloutArgs>),
    /// Lists the attempts of a rollout.
    Attempts(WithOptions<AttemptsArgs>),
    /// Lists the spans of a rollout.
    Spans(WithOptions<SpansArgs>),
    /// Lists resources snapshots, or shows one.
    Resources(WithOptions<ResourcesArgs>),
    /// Lists workers, or shows one.
    Workers(WithOptions<WorkersArgs>),
    /// Shows store statistics.
    Stats(ClientOptions),
    /// Enqueues a rollout and prints it.
    Enqueue(WithOptions<EnqueueArgs>),
    /// Creates a rollout with its first attempt already started, bypassing
    /// the queue (no queued rollout is claimed), and prints it.
    Start(WithOptions<StartArgs>),
    /// Claims the rollout at the head of the queue and prints it with its new attempt.
    Dequeue(WithOptions<DequeueArgs>),
    /// Adds a span to an attempt and prints it with its sequence id.
    AddSpan(WithOptions<AddSpanArgs>),
    /// Marks an attempt succeeded or failed and prints it.
    Complete(WithOptions<CompleteArgs>),
}

/// Options shared by every client subcommand.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Client options")]
pub struct ClientOptions {
    /// The lightning-store server: `host:port` or an `http://` URL.
    #[arg(long, env = "LIGHTNING_STORE_SERVER", default_value = "127.0.0.1:4747")]
    pub server: String,
    /// TLS and token.
    #[command(flatten)]
    pub connect: crate::client::ConnectArgs,
    /// Prints JSON in agent-lightning's shapes instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The arguments of one client subcommand plus the shared options.
#[derive(Debug, clap::Args)]
pub struct WithOptions<A: clap::Args> {
    /// The subcommand's own arguments.
    #[command(flatten)]
    pub args: A,
    /// The shared client options.
    #[command(flatten)]
    pub options: ClientOptions,
}

/// Sorting and pagination of a list.
#[derive(Debug, clap::Args)]
pub struct PageArgs {
    /// Maximum number of items to show (default: all).
    #[arg(long)]
    pub limit: Option<i32>,
    /// Number of matching items to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: i32,
    /// Field to sort by (default: the server's order).
    #[arg(long)]
    pub sort_by: Option<String>,
    /// Sorts in descending order.
    #[arg(long)]
    pub desc: bool,
}

/// Arguments of `rollouts`.
#[derive(Debug, clap::Args)]
pub struct RolloutsArgs {
    /// Keeps rollouts with one of these statuses (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = rollout_status_arg())]
    pub status: Vec<RolloutStatus>,
    /// Keeps rollouts whose id contains this text.
    #[arg(long)]
    pub id_contains: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Arguments of `rollout`.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    /// The rollout id.
    pub rollout_id: String,
}

/// Arguments of `attempts`.
#[derive(Debug, clap::Args)]
pub struct AttemptsArgs {
    /// The rollout id.
    pub rollout_id: String,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Arguments of `spans`.
#[derive(Debug, clap::Args)]
pub struct SpansArgs {
    /// The rollout id.
    pub rollout_id: String,
    /// Keeps the spans of this attempt id, or of the latest attempt with `latest`.
    #[arg(long, value_name = "ATTEMPT_ID|latest")]
    pub attempt: Option<String>,
    /// Keeps spans whose name contains this text.
    #[arg(long)]
    pub name_contains: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Arguments of `resources`.
#[derive(Debug, clap::Args)]
pub struct ResourcesArgs {
    /// Shows this snapshot instead of listing all of them.
    #[arg(conflicts_with = "latest")]
    pub resources_id: Option<String>,
    /// Shows the latest snapshot.
    #[arg(long)]
    pub latest: bool,
}

/// Arguments of `workers`.
#[derive(Debug, clap::Args)]
pub struct WorkersArgs {
    /// Shows this worker instead of listing all of them.
    pub worker_id: Option<String>,
}

/// Arguments of `enqueue`.
#[derive(Debug, clap::Args)]
pub struct EnqueueArgs {
    /// Task input as JSON text.
    #[arg(long)]
    pub input: String,
    /// Split of the rollout.
    #[arg(long, value_parser = mode_arg())]
    pub mode: Option<RolloutMode>,
    /// Metadata as a JSON object.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Maximum number of attempts (default 1).
    #[arg(long)]
    pub max_attempts: Option<i32>,
    /// Attempt statuses that requeue the rollout for another attempt (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = retry_status_arg())]
    pub retry_on: Vec<AttemptStatus>,
    /// Maximum run time of one attempt in seconds.
    #[arg(long)]
    pub timeout_secs: Option<f64>,
    /// Maximum time without a heartbeat in seconds.
    #[arg(long)]
    pub unresponsive_secs: Option<f64>,
    /// Resources snapshot to run with (default: the latest at creation time).
    #[arg(long)]
    pub resources_id: Option<String>,
}

/// Arguments of `start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The rollout to create.
    #[command(flatten)]
    pub rollout: EnqueueArgs,
    /// Worker that runs the attempt.
    #[arg(long)]
    pub worker_id: Option<String>,
}

/// Arguments of `dequeue`.
#[derive(Debug, clap::Args)]
pub struct DequeueArgs {
    /// Worker claiming the rollout.
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Seconds to wait for a rollout while the queue is empty.
    #[arg(long, default_value_t = 0.0)]
    pub wait_secs: f64,
}

/// Arguments of `add-span`.
#[derive(Debug, clap::Args)]
pub struct AddSpanArgs {
    /// The rollout id.
    pub rollout_id: String,
    /// The attempt id, or `latest` for the rollout's latest attempt.
    #[arg(value_name = "ATTEMPT_ID|latest")]
    pub attempt_id: String,
    /// Span name.
    #[arg(long)]
    pub name: String,
    /// Attribute as key=value; the value is read as an integer, a float, a
    /// boolean or else a string (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_attribute)]
    pub attributes: Vec<pb::KeyValue>,
}

/// Arguments of `complete`.
#[derive(Debug, clap::Args)]
pub struct CompleteArgs {
    /// The rollout id.
    pub rollout_id: String,
    /// The attempt to complete (default: the latest one).
    #[arg(long, default_value = "latest")]
    pub attempt_id: String,
    /// Final status of the attempt.
    #[arg(long, default_value = "succeeded", value_parser = final_status_arg())]
    pub status: AttemptStatus,
}

/// Errors of client subcommands.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("{0}")]
    Address(String),
    #[error(
        "cannot connect to {url}: {reason} (is `lightning-store serve` running there? \
         set --server or LIGHTNING_STORE_SERVER)"
    )]
    Connect { url: String, reason: String },
    #[error("{}: {}", code_name(.0.code()), .0.message())]
    Grpc(#[from] tonic::Status),
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    #[error("{0}")]
    Other(String),
}

impl ClientError {
    /// The process exit code (see [`super::exit_code`]).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Grpc(status) => super::GRPC_EXIT_BASE + status.code() as u8,
            Self::Connect { .. } => super::GRPC_EXIT_BASE + tonic::Code::Unavailable as u8,
            Self::Address(_) => super::USAGE_EXIT,
            Self::Output(_) | Self::Other(_) => super::FAILURE_EXIT,
        }
    }
}

type ClientResult<T = ()> = Result<T, ClientError>;

type Grpc = LightningStoreServiceClient<AuthChannel>;

/// A connection to the server plus the output format.
struct Session {
    client: Grpc,
    json: bool,
}

impl ClientOptions {
    /// Returns a session connected to the server named by `--server`.
    async fn connect(&self) -> ClientResult<Session> {
        let url = crate::client::server_url(&self.server).map_err(ClientError::Address)?;
        let endpoint = self.connect.endpoint(&url).map_err(ClientError::Address)?;
        let bearer = self.connect.bearer().map_err(ClientError::Address)?;
        let channel = endpoint
            .connect_timeout(CONNECT_TIMEOUT)
            .connect()
            .await
            .map_err(|e| ClientError::Connect {
                url,
                reason: error_chain(&e),
            })?;
        Ok(Session {
            client: LightningStoreServiceClient::with_interceptor(channel, bearer)
                .max_decoding_message_size(usize::MAX),
            json: self.json,
        })
    }
}

/// Runs a client subcommand.
pub async fn run(command: ClientCommand) -> Result<(), ServeError> {
    match dispatch(command).await {
        // The reader of our output went away (`| head`): nothing to report.
        Err(ClientError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => result.map_err(ServeError::from),
    }
}

async fn dispatch(command: ClientCommand) -> ClientResult {
    use ClientCommand as C;
    match command {
        C::Rollouts(c) => rollouts(c.options.connect().await?, c.args).await,
        C::Rollout(c) => rollout(c.options.connect().await?, c.args).await,
        C::Attempts(c) => attempts(c.options.connect().await?, c.args).await,
        C::Spans(c) => spans(c.options.connect().await?, c.args).await,
        C::Resources(c) => resources(c.options.connect().await?, c.args).await,
        C::Workers(c) => workers(c.options.connect().await?, c.args).await,
        C::Stats(options) => stats(options.connect().await?).await,
        C::Enqueue(c) => enqueue(c.options.connect().await?, c.args).await,
        C::Start(c) => start(c.options.connect().await?, c.args).await,
        C::Dequeue(c) => dequeue(c.options.connect().await?, c.args).await,
        C::AddSpan(c) => add_span(c.options.connect().await?, c.args).await,
        C::Complete(c) => complete(c.options.connect().await?, c.args).await,
    }
}

async fn rollouts(mut s: Session, args: RolloutsArgs) -> ClientResult {
    let page = s
        .client
        .query_rollouts(pb::QueryRolloutsRequest {
            status_in: args
                .status
                .into_iter()
                .map(|status| pb::RolloutStatus::from(status) as i32)
                .collect(),
            rollout_id_contains: args.id_contains,
            page: Some(page_request(args.page)),
            ..Default::default()
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.items.iter().map(rollout_json).collect();
        return print_json(&page_json(items, page.limit, page.offset, page.total));
    }
    let mut table = list_table(&["ID", "STATUS", "MODE", "ATTEMPT", "START", "END"]);
    for r in &page.items {
        table.add_row(vec![
            r.rollout_id.clone(),
            rollout_status(r.status).to_owned(),
            mode_name(r.mode).unwrap_or("-").to_owned(),
            r.attempt.as_ref().map_or_else(
                || "-".to_owned(),
                |a| format!("#{} {}", a.sequence_id, attempt_status(a.status)),
            ),
            time_cell(r.start_time.as_ref()),
            time_cell(r.end_time.as_ref()),
        ]);
    }
    print_list(table, "rollouts", page.items.len(), page.offset, page.total)?;
    Ok(())
}

async fn rollout(mut s: Session, args: RolloutArgs) -> ClientResult {
    let rollout = s
        .client
        .get_rollout(pb::GetRolloutRequest {
            rollout_id: args.rollout_id.clone(),
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    let attempts = s
        .client
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: args.rollout_id,
            page: None,
        })
        .await?
        .into_inner()
        .items;
    if s.json {
        let mut value = rollout_json(&rollout);
        value["attempts"] = attempts.iter().map(attempt_json).collect();
        return print_json(&value);
    }
    out!("{}", details(rollout_rows(&rollout, false)));
    if attempts.is_empty() {
        out!("\nno attempts");
    } else {
        out!("\nattempts:\n{}", render(attempts_table(&attempts)));
    }
    Ok(())
}

async fn attempts(mut s: Session, args: AttemptsArgs) -> ClientResult {
    let page = s
        .client
        .query_attempts(pb::QueryAttemptsRequest {
            rollout_id: args.rollout_id,
            page: Some(page_request(args.page)),
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.items.iter().map(attempt_json).collect();
        return print_json(&page_json(items, page.limit, page.offset, page.total));
    }
    let table = attempts_table(&page.items);
    print_list(table, "attempts", page.items.len(), page.offset, page.total)?;
    Ok(())
}

async fn spans(mut s: Session, args: SpansArgs) -> ClientResult {
    let page = s
        .client
        .query_spans(pb::QuerySpansRequest {
            rollout_id: args.rollout_id,
            attempt_id: args.attempt,
            name_contains: args.name_contains,
            page: Some(page_request(args.page)),
            ..Default::default()
        })
        .await?
        .into_inner();
    if s.json {
        let items = page.items.iter().map(span_json).collect();
        return print_json(&page_json(items, page.limit, page.offset, page.total));
    }
    let mut table = list_table(&["SEQ", "NAME", "SPAN ID", "PARENT", "ATTEMPT", "DURATION"]);
    for span in &page.items {
        table.add_row(vec![
            span.sequence_id.unwrap_or_default().to_string(),
            span.name.clone(),
            span.span_id.clone(),
            span.parent_id.clone().unwrap_or_else(|| "-".to_owned()),
            span.attempt_id.clone(),
            span_duration(span),
        ]);
    }
    print_list(table, "spans", page.items.len(), page.offset, page.total)?;
    Ok(())
}

async fn resources(mut s: Session, args: ResourcesArgs) -> ClientResult {
    let shown = match (args.resources_id, args.latest) {
        (Some(resources_id), _) => {
            s.client
                .get_resources(pb::GetResourcesRequest { resources_id })
                .await?
                .into_inner()
                .resources
        }
        (None, true) => {
            s.client
                .get_latest_resources(pb::GetLatestResourcesRequest {})
                .await?
                .into_inner()
                .resources
        }
        (None, false) => return list_resources(s).await,
    };
    match shown {
        Some(resources) if s.json => print_json(&resources_json(&resources)),
        Some(resources) => {
            out!(
                "{}",
                details(vec![
                    ("resources", resources.resources_id.clone()),
                    ("version", resources.version.to_string()),
                    ("created", time_cell(resources.create_time.as_ref())),
                    ("updated", time_cell(resources.update_time.as_ref())),
                    ("content", pretty(&json_text(&resources.resources_json))),
                ])
            );
            Ok(())
        }
        None if s.json => print_json(&Value::Null),
        None => {
            out!("no resources");
            Ok(())
        }
    }
}

async fn list_resources(mut s: Session) -> ClientResult {
    let page = s
        .client
        .query_resources(pb::QueryResourcesRequest::default())
        .await?
        .into_inner();
    if s.json {
        let items = page.items.iter().map(resources_json).collect();
        return print_json(&page_json(items, page.limit, page.offset, page.total));
    }
    let mut table = list_table(&["ID", "VERSION", "NAMES", "CREATED", "UPDATED"]);
    for r in &page.items {
        let names = match json_text(&r.resources_json) {
            Value::Object(map) => map.keys().cloned().collect::<Vec<_>>().join(", "),
            _ => "-".to_owned(),
        };
        table.add_row(vec![
            r.resources_id.clone(),
            r.version.to_string(),
            names,
            time_cell(r.create_time.as_ref()),
            time_cell(r.update_time.as_ref()),
        ]);
    }
    print_list(
        table,
        "resources",
        page.items.len(),
        page.offset,
        page.total,
    )?;
    Ok(())
}

async fn workers(mut s: Session, args: WorkersArgs) -> ClientResult {
    if let Some(worker_id) = args.worker_id {
        let worker = s
            .client
            .get_worker(pb::GetWorkerRequest { worker_id })
            .await?
            .into_inner()
            .worker
            .unwrap_or_default();
        if s.json {
            return print_json(&worker_json(&worker));
        }
        out!(
            "{}",
            details(vec![
                ("worker", worker.worker_id.clone()),
                ("status", worker_status(worker.status).to_owned()),
                ("rollout", or_dash(worker.current_rollout_id.as_deref())),
                ("attempt", or_dash(worker.current_attempt_id.as_deref())),
                (
                    "last heartbeat",
                    time_cell(worker.last_heartbeat_time.as_ref())
                ),
                ("last dequeue", time_cell(worker.last_dequeue_time.as_ref())),
                ("last busy", time_cell(worker.last_busy_time.as_ref())),
                ("last idle", time_cell(worker.last_idle_time.as_ref())),
                ("heartbeat stats", worker.heartbeat_stats_json.clone()),
            ])
        );
        return Ok(());
    }
    let page = s
        .client
        .query_workers(pb::QueryWorkersRequest::default())
        .await?
        .into_inner();
    if s.json {
        let items = page.items.iter().map(worker_json).collect();
        return print_json(&page_json(items, page.limit, page.offset, page.total));
    }
    let mut table = list_table(&[
        "ID",
        "STATUS",
        "ROLLOUT",
        "ATTEMPT",
        "LAST HEARTBEAT",
        "LAST DEQUEUE",
    ]);
    for w in &page.items {
        table.add_row(vec![
            w.worker_id.clone(),
            worker_status(w.status).to_owned(),
            or_dash(w.current_rollout_id.as_deref()),
            or_dash(w.current_attempt_id.as_deref()),
            time_cell(w.last_heartbeat_time.as_ref()),
            time_cell(w.last_dequeue_time.as_ref()),
        ]);
    }
    print_list(table, "workers", page.items.len(), page.offset, page.total)?;
    Ok(())
}

async fn stats(mut s: Session) -> ClientResult {
    let stats = s
        .client
        .get_statistics(pb::GetStatisticsRequest {})
        .await?
        .into_inner();
    if s.json {
        return print_json(&json!({
            "name": stats.name,
            "total_rollouts": stats.total_rollouts,
            "queued_rollouts": stats.queued_rollouts,
            "total_attempts": stats.total_attempts,
            "total_spans": stats.total_spans,
            "total_span_bytes": stats.total_span_bytes,
            "evicted_rollouts": stats.evicted_rollouts,
            "evicted_spans": stats.evicted_spans,
            "evicted_span_bytes": stats.evicted_span_bytes,
            "total_resources": stats.total_resources,
            "total_workers": stats.total_workers,
            "uptime_seconds": stats.uptime_seconds,
            "rollouts_by_status": stats.rollouts_by_status,
            "attempts_by_status": stats.attempts_by_status,
            "oldest_queued_time": stats.oldest_queued_time.as_ref().map(|t| rfc3339(t.seconds)),
        }));
    }
    out!(
        "{}",
        details(vec![
            ("backend", stats.name.clone()),
            (
                "rollouts",
                with_statuses(stats.total_rollouts, &stats.rollouts_by_status),
            ),
            (
                "queued",
                format!(
                    "{} (head since {})",
                    stats.queued_rollouts,
                    time_cell(stats.oldest_queued_time.as_ref())
                ),
            ),
            (
                "attempts",
                with_statuses(stats.total_attempts, &stats.attempts_by_status),
            ),
            ("spans", stats.total_spans.to_string()),
            ("span bytes", stats.total_span_bytes.to_string()),
            (
                "evicted",
                format!(
                    "{} spans ({} bytes) of {} rollouts",
                    stats.evicted_spans, stats.evicted_span_bytes, stats.evicted_rollouts
                ),
            ),
            ("resources", stats.total_resources.to_string()),
            ("workers", stats.total_workers.to_string()),
            ("uptime", format!("{:.1}s", stats.uptime_seconds)),
        ])
    );
    Ok(())
}

/// The rollout that `enqueue` and `start` create.
fn rollout_spec(args: EnqueueArgs) -> pb::RolloutSpec {
    pb::RolloutSpec {
        input_json: args.input,
        mode: mode_to_proto(args.mode) as i32,
        resources_id: args.resources_id,
        config: Some(pb::RolloutConfig {
            timeout_seconds: args.timeout_secs,
            unresponsive_seconds: args.unresponsive_secs,
            max_attempts: args.max_attempts,
            retry_condition: args
                .retry_on
                .into_iter()
                .map(|status| pb::AttemptStatus::from(status) as i32)
                .collect(),
        }),
        metadata_json: args.metadata.unwrap_or_default(),
    }
}

async fn enqueue(mut s: Session, args: EnqueueArgs) -> ClientResult {
    let rollout = s
        .client
        .enqueue_rollout(pb::EnqueueRolloutRequest {
            rollout: Some(rollout_spec(args)),
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    print_rollout(&s, &rollout)
}

async fn start(mut s: Session, args: StartArgs) -> ClientResult {
    let rollout = s
        .client
        .start_rollout(pb::StartRolloutRequest {
            rollout: Some(rollout_spec(args.rollout)),
            worker_id: args.worker_id,
        })
        .await?
        .into_inner()
        .rollout
        .unwrap_or_default();
    print_rollout(&s, &rollout)
}

async fn dequeue(mut s: Session, args: DequeueArgs) -> ClientResult {
    let wait = Duration::try_from_secs_f64(args.wait_secs)
        .ok()
        .and_then(|d| prost_types::Duration::try_from(d).ok())
        .ok_or_else(|| ClientError::Other("--wait-secs must be a number >= 0".to_owned()))?;
    let claimed = s
        .client
        .dequeue_rollout(pb::DequeueRolloutRequest {
            worker_id: args.worker_id,
            wait: Some(wait),
        })
        .await?
        .into_inner()
        .rollout;
    match claimed {
        Some(rollout) => print_rollout(&s, &rollout),
        None if s.json => print_json(&Value::Null),
        None => {
            out!("the queue is empty");
            Ok(())
        }
    }
}

async fn add_span(mut s: Session, args: AddSpanArgs) -> ClientResult {
    let attempt_id = if args.attempt_id == "latest" {
        s.client
            .get_latest_attempt(pb::GetLatestAttemptRequest {
                rollout_id: args.rollout_id.clone(),
            })
            .await?
            .into_inner()
            .attempt
            .ok_or_else(|| {
                ClientError::Other(format!("rollout {} has no attempt", args.rollout_id))
            })?
            .attempt_id
    } else {
        args.attempt_id
    };
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let span_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
    let now = prost_types::Timestamp::from(std::time::SystemTime::now());
    let span = pb::Span {
        rollout_id: args.rollout_id,
        attempt_id,
        name: args.name,
        attributes: args.attributes,
        start_time: Some(now),
        end_time: Some(now),
        context: Some(pb::SpanContext {
            trace_id: trace_id.clone(),
            span_id: span_id.clone(),
            ..Default::default()
        }),
        trace_id,
        span_id,
        ..Default::default()
    };
    let stored = s
        .client
        .add_span(pb::AddSpanRequest {
            span: Some(span),
            owner_epoch: None,
        })
        .await?
        .into_inner()
        .span
        .ok_or_else(|| {
            ClientError::Other("the server ignored the span as a duplicate".to_owned())
        })?;
    if s.json {
        return print_json(&span_json(&stored));
    }
    let attributes = stored
        .attributes
        .iter()
        .map(|kv| format!("{}={}", kv.key, attribute_json(kv.value.as_ref())))
        .collect::<Vec<_>>()
        .join("\n");
    out!(
        "{}",
        details(vec![
            (
                "sequence",
                stored.sequence_id.unwrap_or_default().to_string()
            ),
            ("name", stored.name.clone()),
            ("rollout", stored.rollout_id.clone()),
            ("attempt", stored.attempt_id.clone()),
            ("trace", stored.trace_id.clone()),
            ("span", stored.span_id.clone()),
            ("start", time_cell(stored.start_time.as_ref())),
            (
                "attributes",
                or_dash(Some(attributes.as_str()).filter(|a| !a.is_empty()))
            ),
        ])
    );
    Ok(())
}

async fn complete(mut s: Session, args: CompleteArgs) -> ClientResult {
    let attempt = s
        .client
        .update_attempt(pb::UpdateAttemptRequest {
            rollout_id: args.rollout_id,
            attempt_id: args.attempt_id,
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["status".to_owned()],
            }),
            status: pb::AttemptStatus::from(args.status) as i32,
            ..Default::default()
        })
        .await?
        .into_inner()
        .attempt
        .unwrap_or_default();
    if s.json {
        return print_json(&attempt_json(&attempt));
    }
    out!("{}", details(attempt_rows(&attempt)));
    Ok(())
}

// ----- arguments -----

fn choice<T: Clone + Send + Sync + 'static>(
    names: impl IntoIterator<Item = &'static str>,
    parse: fn(&str) -> Option<T>,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(names).try_map(move |text| parse(&text).ok_or("unexpected value"))
}

fn rollout_status_arg() -> impl TypedValueParser<Value = RolloutStatus> {
    choice(
        RolloutStatus::ALL.iter().map(|s| s.as_str()),
        RolloutStatus::parse,
    )
}

fn mode_arg() -> impl TypedValueParser<Value = RolloutMode> {
    choice(
        RolloutMode::ALL.iter().map(|m| m.as_str()),
        RolloutMode::parse,
    )
}

fn retry_status_arg() -> impl TypedValueParser<Value = AttemptStatus> {
    choice(["failed", "timeout", "unresponsive"], AttemptStatus::parse)
}

fn final_status_arg() -> impl TypedValueParser<Value = AttemptStatus> {
    choice(["succeeded", "failed"], AttemptStatus::parse)
}

/// Parses `key=value`; the value becomes an integer, a finite float, a
/// boolean or else a string.
fn parse_attribute(text: &str) -> Result<pb::KeyValue, String> {
    use pb::attribute_value::Value as V;
    let (key, raw) = text
        .split_once('=')
        .filter(|(key, _)| !key.is_empty())
        .ok_or_else(|| format!("expected key=value, got `{text}`"))?;
    let value = if let Ok(i) = raw.parse::<i64>() {
        V::IntValue(i)
    } else if let Some(f) = raw.parse::<f64>().ok().filter(|f| f.is_finite()) {
        V::DoubleValue(f)
    } else if let Ok(b) = raw.parse::<bool>() {
        V::BoolValue(b)
    } else {
        V::StringValue(raw.to_owned())
    };
    Ok(pb::KeyValue {
        key: key.to_owned(),
        value: Some(pb::AttributeValue { value: Some(value) }),
    })
}

fn page_request(page: PageArgs) -> pb::PageRequest {
    pb::PageRequest {
        sort_by: page.sort_by.unwrap_or_default(),
        sort_order: if page.desc {
            pb::SortOrder::Desc
        } else {
            pb::SortOrder::Asc
        } as i32,
        limit: page.limit,
        offset: page.offset,
    }
}

fn mode_to_proto(mode: Option<RolloutMode>) -> pb::RolloutMode {
    match mode {
        None => pb::RolloutMode::Unspecified,
        Some(RolloutMode::Train) => pb::RolloutMode::Train,
        Some(RolloutMode::Val) => pb::RolloutMode::Val,
        Some(RolloutMode::Test) => pb::RolloutMode::Test,
    }
}

// ----- errors -----

// ----- names and values -----

fn rollout_status(value: i32) -> &'static str {
    RolloutStatus::from_proto(value).map_or("unspecified", RolloutStatus::as_str)
}

fn attempt_status(value: i32) -> &'static str {
    AttemptStatus::from_proto(value).map_or("unspecified", AttemptStatus::as_str)
}

fn worker_status(value: i32) -> &'static str {
    WorkerStatus::from_proto(value).map_or("unspecified", WorkerStatus::as_str)
}

fn mode_name(value: i32) -> Option<&'static str> {
    mode_from_proto(value)
        .ok()
        .flatten()
        .map(RolloutMode::as_str)
}

/// Returns OpenTelemetry's name of a span status code (`UNSET`, `OK`, `ERROR`).
fn span_status_code(value: i32) -> &'static str {
    match pb::SpanStatusCode::try_from(value) {
        Ok(pb::SpanStatusCode::Ok) => "OK",
        Ok(pb::SpanStatusCode::Error) => "ERROR",
        Ok(pb::SpanStatusCode::Unspecified) | Err(_) => "UNSET",
    }
}

/// Parses JSON text from the server; empty text is `null` and text that is
/// not JSON is kept as a string.
fn json_text(text: &str) -> Value {
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn seconds(t: Option<&prost_types::Timestamp>) -> Value {
    t.map_or(Value::Null, |t| {
        json!(t.seconds as f64 + f64::from(t.nanos) / 1e9)
    })
}

// ----- JSON output (agent-lightning's shapes) -----

fn print_json(value: &Value) -> ClientResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ClientError::Other(format!("cannot render json: {e}")))?;
    out!("{text}");
    Ok(())
}

fn page_json(items: Vec<Value>, limit: i32, offset: i32, total: i64) -> Value {
    json!({ "items": items, "limit": limit, "offset": offset, "total": total })
}

fn rollout_json(r: &pb::Rollout) -> Value {
    let config = r.config.clone().unwrap_or_default();
    let mut value = json!({
        "rollout_id": r.rollout_id,
        "input": json_text(&r.input_json),
        "start_time": seconds(r.start_time.as_ref()),
        "end_time": seconds(r.end_time.as_ref()),
        "mode": mode_name(r.mode),
        "resources_id": r.resources_id,
        "status": rollout_status(r.status),
        "config": {
            "timeout_seconds": config.timeout_seconds,
            "unresponsive_seconds": config.unresponsive_seconds,
            "max_attempts": config.max_attempts,
            "retry_condition": config
                .retry_condition
                .iter()
                .map(|&s| attempt_status(s))
                .collect::<Vec<_>>(),
        },
        "metadata": json_text(&r.metadata_json),
    });
    if let Some(attempt) = &r.attempt {
        value["attempt"] = attempt_json(attempt);
    }
    value
}

fn attempt_json(a: &pb::Attempt) -> Value {
    json!({
        "rollout_id": a.rollout_id,
        "attempt_id": a.attempt_id,
        "sequence_id": a.sequence_id,
        "start_time": seconds(a.start_time.as_ref()),
        "end_time": seconds(a.end_time.as_ref()),
        "status": attempt_status(a.status),
        "worker_id": a.worker_id,
        "last_heartbeat_time": seconds(a.last_heartbeat_time.as_ref()),
        "metadata": json_text(&a.metadata_json),
    })
}

fn worker_json(w: &pb::Worker) -> Value {
    json!({
        "worker_id": w.worker_id,
        "status": worker_status(w.status),
        "heartbeat_stats": json_text(&w.heartbeat_stats_json),
        "last_heartbeat_time": seconds(w.last_heartbeat_time.as_ref()),
        "last_dequeue_time": seconds(w.last_dequeue_time.as_ref()),
        "last_busy_time": seconds(w.last_busy_time.as_ref()),
        "last_idle_time": seconds(w.last_idle_time.as_ref()),
        "current_rollout_id": w.current_rollout_id,
        "current_attempt_id": w.current_attempt_id,
    })
}

fn resources_json(r: &pb::ResourcesUpdate) -> Value {
    json!({
        "resources_id": r.resources_id,
        "create_time": seconds(r.create_time.as_ref()),
        "update_time": seconds(r.update_time.as_ref()),
        "version": r.version,
        "resources": json_text(&r.resources_json),
    })
}

fn span_json(s: &pb::Span) -> Value {
    let status = s.status.clone().unwrap_or_default();
    let resource = s.resource.clone().unwrap_or_default();
    json!({
        "rollout_id": s.rollout_id,
        "attempt_id": s.attempt_id,
        "sequence_id": s.sequence_id,
        "trace_id": s.trace_id,
        "span_id": s.span_id,
        "parent_id": s.parent_id,
        "name": s.name,
        "status": {
            "status_code": span_status_code(status.code),
            "description": status.description,
        },
        "attributes": attributes_json(&s.attributes),
        "events": s.events.iter().map(|e| json!({
            "name": e.name,
            "attributes": attributes_json(&e.attributes),
            "timestamp": seconds(e.time.as_ref()),
        })).collect::<Vec<_>>(),
        "links": s.links.iter().map(|l| json!({
            "context": context_json(l.context.as_ref()),
            "attributes": attributes_json(&l.attributes),
        })).collect::<Vec<_>>(),
        "start_time": seconds(s.start_time.as_ref()),
        "end_time": seconds(s.end_time.as_ref()),
        "context": context_json(s.context.as_ref()),
        "parent": context_json(s.parent.as_ref()),
        "resource": {
            "attributes": attributes_json(&resource.attributes),
            "schema_url": resource.schema_url,
        },
    })
}

/// Renders a span context; the W3C trace state becomes an object.
fn context_json(c: Option<&pb::SpanContext>) -> Value {
    let Some(c) = c else { return Value::Null };
    let trace_state: Map<String, Value> = c
        .trace_state
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            (key.to_owned(), Value::from(value))
        })
        .collect();
    json!({
        "trace_id": c.trace_id,
        "span_id": c.span_id,
        "is_remote": c.is_remote,
        "trace_state": trace_state,
    })
}

fn attributes_json(attributes: &[pb::KeyValue]) -> Value {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), attribute_json(kv.value.as_ref())))
        .collect::<Map<_, _>>()
        .into()
}

/// Renders an attribute value as JSON; bytes become a hex string.
fn attribute_json(value: Option<&pb::AttributeValue>) -> Value {
    use pb::attribute_value::Value as V;
    match value.and_then(|v| v.value.as_ref()) {
        None => Value::Null,
        Some(V::StringValue(s)) => Value::from(s.as_str()),
        Some(V::BoolValue(b)) => Value::from(*b),
        Some(V::IntValue(i)) => Value::from(*i),
        Some(V::DoubleValue(d)) => Value::from(*d),
        Some(V::BytesValue(bytes)) => Value::from(hex::encode(bytes)),
        Some(V::ArrayValue(array)) => array.values.iter().map(Some).map(attribute_json).collect(),
        Some(V::KvlistValue(list)) => attributes_json(&list.values),
    }
}

// ----- text output -----

fn list_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_header(header.to_vec());
    table
}

/// Renders labelled values as two aligned columns.
fn details(rows: Vec<(&str, String)>) -> String {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    for (label, value) in rows {
        table.add_row(vec![label.to_owned(), value]);
    }
    render(table)
}

/// Renders a table with two spaces between columns and no padding at the
/// start or end of lines.
fn render(mut table: Table) -> String {
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints a list table, or a line saying the list is empty, with a note
/// when the page shows only part of the matches.
fn print_list(table: Table, noun: &str, shown: usize, offset: i32, total: i64) -> ClientResult {
    if shown == 0 {
        if total == 0 {
            out!("no {noun}");
        } else {
            out!("no {noun} at offset {offset} ({total} in total)");
        }
        return Ok(());
    }
    out!("{}", render(table));
    if shown as i64 != total {
        let first = i64::from(offset) + 1;
        out!(
            "showing {first}-{} of {total} {noun}",
            first + shown as i64 - 1
        );
    }
    Ok(())
}

fn print_rollout(s: &Session, rollout: &pb::Rollout) -> ClientResult {
    if s.json {
        return print_json(&rollout_json(rollout));
    }
    out!("{}", details(rollout_rows(rollout, true)));
    Ok(())
}

fn rollout_rows(r: &pb::Rollout, with_attempt: bool) -> Vec<(&'static str, String)> {
    let config = r.config.clone().unwrap_or_default();
    let retry = config
        .retry_condition
        .iter()
        .map(|&s| attempt_status(s))
        .collect::<Vec<_>>()
        .join(", ");
    let seconds = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| format!("{v}s"));
    let mut rows = vec![
        ("rollout", r.rollout_id.clone()),
        ("status", rollout_status(r.status).to_owned()),
        ("mode", or_dash(mode_name(r.mode))),
        ("resources", or_dash(r.resources_id.as_deref())),
        ("start", time_cell(r.start_time.as_ref())),
        ("end", time_cell(r.end_time.as_ref())),
        ("max attempts", config.max_attempts.unwrap_or(1).to_string()),
        (
            "retry on",
            or_dash(Some(retry.as_str()).filter(|r| !r.is_empty())),
        ),
        ("timeout", seconds(config.timeout_seconds)),
        ("unresponsive", seconds(config.unresponsive_seconds)),
        ("input", r.input_json.clone()),
        ("metadata", r.metadata_json.clone()),
    ];
    if with_attempt && let Some(a) = &r.attempt {
        rows.push(("attempt", a.attempt_id.clone()));
        rows.push((
            "attempt status",
            format!("#{} {}", a.sequence_id, attempt_status(a.status)),
        ));
        rows.push(("worker", or_dash(a.worker_id.as_deref())));
    }
    rows
}

fn attempt_rows(a: &pb::Attempt) -> Vec<(&'static str, String)> {
    vec![
        ("attempt", a.attempt_id.clone()),
        ("rollout", a.rollout_id.clone()),
        ("sequence", a.sequence_id.to_string()),
        ("status", attempt_status(a.status).to_owned()),
        ("worker", or_dash(a.worker_id.as_deref())),
        ("start", time_cell(a.start_time.as_ref())),
        ("end", time_cell(a.end_time.as_ref())),
        ("last heartbeat", time_cell(a.last_heartbeat_time.as_ref())),
        ("metadata", a.metadata_json.clone()),
    ]
}

fn attempts_table(attempts: &[pb::Attempt]) -> Table {
    let mut table = list_table(&["SEQ", "ID", "STATUS", "WORKER", "START", "END"]);
    for a in attempts {
        table.add_row(vec![
            a.sequence_id.to_string(),
            a.attempt_id.clone(),
            attempt_status(a.status).to_owned(),
            or_dash(a.worker_id.as_deref()),
            time_cell(a.start_time.as_ref()),
            time_cell(a.end_time.as_ref()),
        ]);
    }
    table
}

fn span_duration(span: &pb::Span) -> String {
    match (&span.start_time, &span.end_time) {
        (Some(start), Some(end)) => {
            let nanos = (i128::from(end.seconds) - i128::from(start.seconds)) * 1_000_000_000
                + i128::from(end.nanos - start.nanos);
            format!("{:.3}s", nanos as f64 / 1e9)
        }
        _ => "-".to_owned(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Formats a total with its non-zero per-status counts, e.g. `3 (queuing 2, succeeded 1)`.
fn with_statuses(total: i64, by_status: &std::collections::HashMap<String, i64>) -> String {
    let mut parts: Vec<_> = by_status.iter().filter(|(_, n)| **n > 0).collect();
    if parts.is_empty() {
        return total.to_string();
    }
    parts.sort();
    let parts: Vec<String> = parts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    format!("{total} ({})", parts.join(", "))
}

fn or_dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

fn time_cell(t: Option<&prost_types::Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| rfc3339(t.seconds))
}

/// Formats whole seconds since the Unix epoch as RFC 3339 UTC, for example
/// `2023-11-14T22:13:20Z`.
fn rfc3339(unix_seconds: i64) -> String {
    prost_types::Timestamp {
        seconds: unix_seconds,
        nanos: 0,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc_seconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn attributes_parse_as_int_float_bool_or_string() {
        use pb::attribute_value::Value as V;
        let value = |text: &str| parse_attribute(text).unwrap().value.unwrap().value.unwrap();
        assert_eq!(value("n=3"), V::IntValue(3));
        assert_eq!(value("r=1.5"), V::DoubleValue(1.5));
        assert_eq!(value("ok=true"), V::BoolValue(true));
        assert_eq!(value("s=hi=there"), V::StringValue("hi=there".to_owned()));
        assert_eq!(value("s=inf"), V::StringValue("inf".to_owned()));
        assert!(parse_attribute("novalue").is_err());
        assert!(parse_attribute("=1").is_err());
    }
}
