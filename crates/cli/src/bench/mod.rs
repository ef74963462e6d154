//! `lightning-store bench`: a load generator that drives a running server
//! over gRPC (or one it starts itself) and reports throughput and latency.
//!
//! Every scenario is bounded by an operation count and a duration, whichever
//! ends first; every call carries a deadline. Latencies are measured on the
//! client with a monotonic clock and kept in HDR histograms.
//!
//! Layout: [`target`] reaches the server under test, [`driver`] runs the
//! client tasks, [`stats`] records latencies, [`progress`] draws the live
//! line, [`report`] prints the results, [`payload`] builds spans, [`wire`]
//! keeps the client's own encoding cost low, [`http`] speaks HTTP for the
//! agent-lightning 1.x scenarios ([`agl1`]), and each scenario has its own file.

mod agl1;
mod bulk;
mod console;
mod dispatch;
mod driver;
mod fanout;
mod http;
mod ingest;
mod lifecycle;
mod noop;
mod otlp_http;
mod payload;
mod progress;
mod query;
mod read_model;
pub mod report;
mod session;
mod stats;
mod target;
mod wire;

use std::io::Write as _;
use std::time::Duration;

pub use report::Report;

/// Arguments of `bench`: where the server is, how to print, and the scenario.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The scenario to run.
    #[command(subcommand)]
    pub scenario: Scenario,
    /// Where the server under test is.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Prints the results as JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Options that choose the server under test.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Server options")]
pub struct TargetArgs {
    /// A running lightning-store server: `host:port` or an `http://` URL
    /// (ignored with --server-cmd).
    #[arg(
        long,
        global = true,
        env = "LIGHTNING_STORE_SERVER",
        default_value = "127.0.0.1:4747"
    )]
    pub server: String,
    /// Starts the server under test with this shell command, where `{addr}`
    /// is replaced by a free loopback address (`{port}` by its port), and
    /// stops it with SIGTERM at the end; for example
    /// `target/release/lightning-store serve --store memory --listen {addr}`.
    #[arg(long, global = true, value_name = "COMMAND")]
    pub server_cmd: Option<String>,
    /// Seconds to wait for a started server to report SERVING.
    #[arg(long, global = true, default_value_t = 30.0)]
    pub startup_timeout_secs: f64,
    /// Client tasks sharing one gRPC channel (HTTP/2 connection).
    #[arg(long, global = true, default_value_t = 4)]
    pub tasks_per_channel: usize,
    /// TLS and token of the gRPC and OTLP/HTTP scenarios.
    #[command(flatten)]
    pub connect: crate::connection::ConnectArgs,
}

/// Bounds and concurrency shared by every scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Concurrent clients; a comma-separated list runs once per value
    /// (default: depends on the scenario).
    #[arg(long, short = 'c', value_delimiter = ',')]
    pub concurrency: Vec<usize>,
    /// Stops each run after this many seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Stops each run after this many operations (default: depends on the scenario).
    #[arg(long)]
    pub count: Option<u64>,
}

/// Payload shape of the spans a scenario writes.
#[derive(Debug, Clone, clap::Args)]
pub struct SpanArgs {
    /// Approximate encoded size of one span in bytes.
    #[arg(long, default_value_t = 1024)]
    pub span_bytes: usize,
}

/// The benchmark scenarios.
#[derive(Debug, clap::Subcommand)]
pub enum Scenario {
    /// Full rollout lifecycles: EnqueueRollout, DequeueRollout, AddSpans
    /// (10 spans in one call), UpdateAttempt(succeeded); with --batch N the
    /// batch RPCs, UpdateAttempts included.
    Lifecycle(lifecycle::LifecycleArgs),
    /// Span ingest through AddSpans, OTLP/gRPC TraceService/Export and
    /// OTLP/HTTP `POST /v1/traces`, N spans per request, into running attempts.
    Ingest(ingest::IngestArgs),
    /// Enqueue-to-claim latency for idle workers parked in a waiting
    /// DequeueRollout or holding a worker session.
    Dispatch(dispatch::DispatchArgs),
    /// Completion delivery latency to subscribers parked in WaitForRollouts.
    Fanout(fanout::FanoutArgs),
    /// QuerySpans of one rollout holding many spans.
    Query(query::QueryArgs),
    /// The console's reads on a large store: fills it (100,000 rollouts,
    /// 1,000,000 spans by default), then times each query of the Rollouts
    /// page and each aggregate read, as the server's time per call.
    ReadModel(read_model::ReadModelArgs),
    /// grpc.health.v1 Health/Check: the transport's ceiling.
    Noop(noop::NoopArgs),
    /// One large EnqueueRollouts while other clients enqueue and dequeue:
    /// the batch's duration and the others' latency meanwhile.
    Bulk(bulk::BulkArgs),
    /// What open console pages cost the store's calls (lifecycles without
    /// and with live pages, alternated) and how soon a change reaches an
    /// open page.
    Console(console::ConsoleArgs),
    /// agent-lightning 1.x's server API over HTTP (this server or
    /// agentlightning's own): event POSTs, rollout GETs, the gateway.
    Agl1(agl1::Agl1Args),
}

/// Error of a benchmark run (setup or a failed call outside the measured loop).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(String);

impl BenchError {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl From<tonic::Status> for BenchError {
    fn from(status: tonic::Status) -> Self {
        Self(stats::status_text(&status))
    }
}

/// Deadline of every call of the benchmark, gRPC or HTTP, on top of any wait
/// the call asks for.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Bounds of one run: whichever is reached first ends it. The driver runs
/// within them and the progress line shows how far along a run is.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Operations to issue in total across all tasks.
    pub count: u64,
    /// Time after which no new operation starts.
    pub duration: Duration,
}

/// Result of a benchmark step.
pub type BenchResult<T> = Result<T, BenchError>;

/// Runs a scenario and returns its report; the server started with
/// `--server-cmd`, if any, is stopped whatever the outcome.
pub async fn execute(args: BenchArgs) -> BenchResult<Report> {
    let show_progress = progress::enabled();
    let probe = match args.scenario {
        Scenario::Agl1(_) => target::Probe::Http,
        _ => target::Probe::Grpc,
    };
    let mut target = target::Target::open(&args.target, probe).await?;
    let result = run_scenario(&mut target, args.scenario, show_progress).await;
    let stopped = target.stop().await;
    let mut report = result?;
    stopped?;
    report.server = target.description();
    Ok(report)
}

/// Runs `bench` and prints its report (a table, or JSON with `--json`).
pub async fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let json = args.json;
    let report = execute(args).await?;
    let text = if json {
        report.to_json()
    } else {
        report.to_table()
    };
    match writeln!(std::io::stdout().lock(), "{text}") {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the report: {e}").into())
        }
        _ => Ok(()),
    }
}

async fn run_scenario(
    target: &mut target::Target,
    scenario: Scenario,
    progress: bool,
) -> BenchResult<Report> {
    match scenario {
        Scenario::Lifecycle(args) => lifecycle::run(target, args, progress).await,
        Scenario::Ingest(args) => ingest::run(target, args, progress).await,
        Scenario::Dispatch(args) => dispatch::run(target, args, progress).await,
        Scenario::Fanout(args) => fanout::run(target, args, progress).await,
        Scenario::Query(args) => query::run(target, args, progress).await,
        Scenario::ReadModel(args) => read_model::run(target, args, progress).await,
        Scenario::Noop(args) => noop::run(target, args, progress).await,
        Scenario::Bulk(args) => bulk::run(target, args, progress).await,
        Scenario::Agl1(args) => agl1::run(target, args, progress).await,
        Scenario::Console(args) => console::run(target, args, progress).await,
    }
}

impl LoadArgs {
    /// Returns the concurrency levels to run, `default` when none was given;
    /// zero is rejected.
    fn levels(&self, default: &[usize]) -> BenchResult<Vec<usize>> {
        let levels = if self.concurrency.is_empty() {
            default.to_vec()
        } else {
            self.concurrency.clone()
        };
        if levels.contains(&0) {
            return Err(BenchError::new("--concurrency must be at least 1"));
        }
        Ok(levels)
    }

    /// Returns the bounds of one run: the count (`default_count` when none
    /// was given) and the duration.
    fn limits(&self, default_count: u64) -> BenchResult<Limits> {
        let duration = Duration::try_from_secs_f64(self.duration_secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| BenchError::new("--duration-secs must be a number > 0"))?;
        Ok(Limits {
            count: self.count.unwrap_or(default_count),
            duration,
        })
    }
}
